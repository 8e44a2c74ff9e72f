"""The ``dplab`` command line: what the Snakemake rules and users call.

Each subcommand lives in a module of :mod:`dplab.commands` that defines
``register(subparsers)`` (adds its parser, with ``set_defaults(func=...)``) and imports
heavy modules (torch, dp_accounting, matplotlib) only inside its ``func``, so that ``dplab``
starts fast.  Bad input of
any kind (a :class:`~dplab.errors.DPLabError`) prints one line on stderr and exits with 2.
Long jobs log their progress on stderr (:mod:`dplab.progress`).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from dplab import __version__
from dplab.errors import DPLabError
from dplab.progress import setup_logging

#: subcommand modules, in the order ``dplab --help`` lists them
COMMAND_MODULES: tuple[str, ...] = (
    "dplab.commands.data",
    "dplab.commands.train",
    "dplab.commands.accounting",
    "dplab.commands.sweep",
    "dplab.commands.figures",
    "dplab.commands.mf",
    "dplab.commands.audit",
    "dplab.commands.provenance",
)


class _Parser(argparse.ArgumentParser):
    """argparse with exit code 2 and one line for usage errors (argparse's own convention)."""

    def error(self, message: str) -> None:  # pragma: no cover - exercised through main()
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dplab",
        description="Privacy analysis of DP-SGD: data, private training, accountants, figures.",
    )
    parser.add_argument("--version", action="version", version=f"dplab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    try:
        result = args.func(args)
    except DPLabError as err:
        print(f"dplab {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
