"""Where a command's config entry comes from: ``--config FILE`` and the entry's name (by hand, and
the DVC stages of dvc.yaml: :mod:`dplab.dvc_yaml`), or the entry itself as ``--<what>-json`` (the
Snakemake rules).  Both give the command the same entry (the job of :mod:`dplab.jobs`)."""

from __future__ import annotations

from dplab.errors import DPLabError


def add_source(
    parser,
    json_flag: str,
    json_help: str,
    config_help: str,
    name_flag: str | None = None,
    name_help: str | None = None,
    nargs: str | None = None,
) -> None:
    """``--config`` or ``json_flag`` (one of them, required), and the name flag that goes with
    ``--config`` (``nargs``: argparse's, for a command that takes several names)."""
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help=config_help)
    src.add_argument(json_flag, help=f"{json_help} (what the Snakemake rule passes)")
    if name_flag:
        parser.add_argument(name_flag, help=name_help, nargs=nargs)


def named_entry(entries: dict, name: str, flag: str, what: str) -> dict:
    """``entries[name]``, refused naming ``flag`` and every defined name when there is none."""
    if name not in entries:
        raise DPLabError(flag, f"unknown {what} {name!r}; defined: {', '.join(sorted(entries))}")
    return entries[name]
