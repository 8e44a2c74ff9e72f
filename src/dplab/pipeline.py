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
from dplab.layout import PROVENANCE, RESULTS, audit_file, figure_files, mf_file, sweep_file, training_files


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


def factorizations(config: dict) -> dict[str, dict]:
    """Every factorization the DAG uses (dp_mf runs, grid runs, figures): key -> {strategy, steps, bands}.
    Computed once each by rule ``factorization`` (results/mf/<key>.npz) and loaded by its users."""
    entries = list(config["runs"].values())
    for grid in config.get("grids", {}):
        entries += [item["run"] for item in grid_runs(config, grid).values()]
    from dplab.training.methods import METHODS  # torch: only where the DAG is planned

    specs = dict(spec for e in entries if (spec := METHODS[e["method"]].factorization(e)))
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
