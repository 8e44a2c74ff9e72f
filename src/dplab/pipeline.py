"""What the rules build from a checked config: every factorization, figure input and target.

The DAG-level lists the Snakefile and ``dplab`` commands share (paths from :mod:`dplab.layout`,
jobs from :mod:`dplab.jobs`), and the Snakefile's wildcard constraints and config-error exit.
"""

from __future__ import annotations

import contextlib
import re
import sys

from dplab.errors import DPLabError
from dplab.figures import figure as figure_module
from dplab.jobs import grid_runs, training_runs
from dplab.layout import PROVENANCE, RESULTS, audit_file, figure_files, mf_file, mf_spec, sweep_file, training_files


def name_pattern(entries: dict) -> str:
    """A wildcard constraint matching exactly the names of ``entries`` (never matches if empty)."""
    names = sorted(entries)
    return "|".join(map(re.escape, names)) if names else "(?!x)x"


@contextlib.contextmanager
def refuse_bad_config():
    """In the Snakefile: a :class:`DPLabError` raised in the block ends Snakemake with one line on
    stderr, ``config error: <dotted key>: <problem>``, and exit code 2 (as ``dplab`` does), before
    any job is planned.  Snakemake would print an exception's frame, and for its own
    ``validate()`` the whole schema (hundreds of lines)."""
    try:
        yield
    except DPLabError as err:
        print(f"config error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


#: Snakemake's flags whose values a repeat of the flag would replace (argparse keeps the last list)
_LIST_FLAGS = {"--config": "--config", "-C": "--config", "--configfile": "--configfile", "--configfiles": "--configfile"}


def _flag_values(argv: list[str]) -> dict[str, list[list[str]]]:
    """For ``--config`` and ``--configfile`` in a Snakemake command line: the values of each time
    the flag is given (``--flag A B``, ``--flag=A``, ``-CA``), as argparse reads ``nargs`` lists."""
    found: dict[str, list[list[str]]] = {}
    current = None
    for token in argv[1:]:
        name, _, inline = token.partition("=") if token.startswith("--") else (token[:2], "", token[2:])
        if token.startswith("-") and not _is_number(token):
            current = None
            if name in _LIST_FLAGS:
                current = found.setdefault(_LIST_FLAGS[name], [])
                current.append([inline] if inline else [])
                if inline:
                    current = None
        elif current is not None:
            current[-1].append(token)
    return found


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def check_command_line(argv: list[str], overrides: dict, files: dict) -> None:
    """In the Snakefile: refuse a Snakemake command line whose config is ambiguous, where
    Snakemake would silently keep one of two values (``argv``: ``sys.argv``, checked only when it
    is Snakemake's own command line; ``overrides``: the parsed ``--config`` pairs; ``files``: the
    config files merged, as read by :func:`dplab.config.load_yaml`):

    - ``--config`` or ``--configfile`` given twice: argparse keeps the last list only, dropping
      the first one's pairs or files (``--config seed=1 --config runs=…`` ran without seed=1);
    - a key given twice in ``--config`` (the last wins), or twice inside one of its mapping values;
    - a ``--config`` mapping that reaches an entry the config file also has (``runs.dp_sgd``):
      Snakemake merges the two entries key by key, so the run would mix the file's keys with the
      command line's.  A scalar (``--config seed=3``) or a new entry simply overrides or adds.
    """
    import yaml

    from dplab.schemas import DuplicateKeyError, _UniqueKeyLoader

    if argv and argv[0].replace("\\", "/").rsplit("/", 1)[-1] in ("snakemake", "__main__.py"):
        for flag, given in _flag_values(argv).items():
            if len(given) > 1:
                dropped = " ".join(given[0]) or "(nothing)"
                raise DPLabError(flag, f"given {len(given)} times: Snakemake keeps only the last one's values, dropping "
                                       f"{dropped}; give them all after one {flag}")
        seen: dict[str, str] = {}
        for pair in _flag_values(argv).get("--config", [[]])[0]:
            key, _, value = pair.partition("=")
            if key in seen:
                raise DPLabError(f"--config {key}", f"given twice ({key}={seen[key]} and {key}={value}): the last would "
                                                    "silently win; give it once")
            seen[key] = value
            if value.lstrip("'\"").startswith("{"):
                try:
                    yaml.load(value.strip("'\""), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
                except DuplicateKeyError as err:
                    raise DPLabError(f"--config {key}", err.problem.split(", at line")[0] + "; keep one") from None
                except yaml.YAMLError:
                    pass  # Snakemake reads it as text: the schema names the key
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(files.get(key), dict):
            for name, entry in value.items():
                if isinstance(entry, dict) and isinstance(files[key].get(name), dict):
                    raise DPLabError(f"--config {key}.{name}", "is an entry of the config file too: Snakemake would merge "
                                                               "the two key by key, mixing them; give the whole entry "
                                                               "in a --configfile, or a new name")


def factorizations(config: dict) -> dict[str, dict]:
    """Every factorization the DAG uses (dp_mf runs, grid runs, figures): key -> {strategy, steps, bands}.
    Computed once each by rule ``factorization`` (results/mf/<key>.npz) and loaded by its users."""
    entries = list(config["runs"].values())
    for grid in config.get("grids", {}):
        entries += [item["run"] for item in grid_runs(config, grid).values()]
    specs = dict(mf_spec(e["strategy"], e["steps"], e.get("bands")) for e in entries if e.get("method") == "dp_mf")
    for figure, params in config.get("figures", {}).items():
        specs.update(getattr(figure_module(figure), "factorizations", lambda c, p: {})(config, params))
    return specs


def mf_args(spec: dict) -> str:
    """The `dplab mf` flags of a factorization of :func:`factorizations` (rule ``factorization``)."""
    bands = f" --bands {spec['bands']}" if spec["bands"] is not None else ""
    return f"--strategy {spec['strategy']} --steps {spec['steps']}{bands}"


def figure_inputs(config: dict, figure: str) -> dict[str, str | list[str]]:
    """The result files the table of ``figure`` is computed from, by name (the figure's ``INPUTS``:
    rule figure_table unpacks them and passes them as ``dplab figure-table --inputs NAME=PATH …``)."""
    return figure_module(figure).inputs(config, config["figures"][figure])


def results(config: dict) -> list[str]:
    """Every result the provenance record covers: runs, sweeps, tables and figures."""
    files = []
    for folder in training_runs(config):
        files += list(training_files(folder).values())
    files += [mf_file(key) for key in factorizations(config)]
    files += [sweep_file(sweep) for sweep in config.get("sweeps", {})]
    files += [audit_file(audit) for audit in config.get("audits", {})]
    for figure in config.get("figures", {}):
        files += figure_files(figure)
    return files


def targets(config: dict) -> list[str]:
    """Every final output of the default target: the results, the index and their provenance."""
    return results(config) + [f"{RESULTS}/index.md", PROVENANCE]
