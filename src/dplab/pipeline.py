"""The pipeline's file layout and config cross-checks, shared by the Snakefile and dvc.yaml tests.

The JSON schema (workflow/schemas/config.schema.yaml) checks keys, types and ranges; this
module checks what a schema cannot: that names refer to entries that exist.  Paths of every
result live here so that rules, the DVC view and the tests agree on them.
"""

from __future__ import annotations

from dplab.errors import DPLabError

RESULTS = "results"


def name_pattern(entries: dict) -> str:
    """A wildcard constraint matching exactly the names of ``entries`` (never matches if empty)."""
    names = sorted(entries)
    return "|".join(names) if names else "(?!x)x"


def check_config(config: dict) -> None:
    """Raise :class:`DPLabError` naming the key of any dangling reference in ``config``."""
    from dplab.accounting import names as accountant_names
    from dplab.figures import FIGURES

    for run, entry in config["runs"].items():
        if entry["dataset"] not in config["datasets"]:
            raise DPLabError(
                f"runs.{run}.dataset",
                f"unknown dataset {entry['dataset']!r}; defined: {', '.join(sorted(config['datasets']))}",
            )
    known = set(accountant_names())
    for sweep, entry in config.get("sweeps", {}).items():
        if entry["run"] not in config["runs"]:
            raise DPLabError(
                f"sweeps.{sweep}.run", f"unknown run {entry['run']!r}; defined: {', '.join(sorted(config['runs']))}"
            )
        for name in entry["accountants"]:
            if name not in known:
                raise DPLabError(f"sweeps.{sweep}.accountants", f"unknown accountant {name!r}; valid: {', '.join(sorted(known))}")
    for audit, entry in config.get("audits", {}).items():
        if entry["dataset"] not in config["datasets"]:
            raise DPLabError(f"audits.{audit}.dataset", f"unknown dataset {entry['dataset']!r}")
    for figure, params in config.get("figures", {}).items():
        if figure not in FIGURES:
            raise DPLabError(f"figures.{figure}", f"unknown figure; valid: {', '.join(sorted(FIGURES))}")
        FIGURES[figure].check(config, params)


def dataset_entry(config: dict, name: str) -> dict:
    """The dataset entry with the global seed filled in where the entry has none."""
    return {"seed": config["seed"], **config["datasets"][name], "name": name}


def run_entry(config: dict, name: str) -> dict:
    """The run entry with the global seed filled in where the entry has none."""
    return {"seed": config["seed"], **config["runs"][name], "name": name}


def run_gpus(config: dict, name: str) -> int:
    """1 if the run asks for CUDA explicitly, else 0 (`auto` runs anywhere)."""
    return int(config["runs"][name].get("device", "auto") == "cuda")


def data_dir(dataset: str) -> str:
    return f"{RESULTS}/data/{dataset}"


def data_files(dataset: str) -> dict[str, str]:
    base = data_dir(dataset)
    return {"train": f"{base}/train.npz", "test": f"{base}/test.npz", "info": f"{base}/info.json"}


def run_files(run: str) -> dict[str, str]:
    base = f"{RESULTS}/runs/{run}"
    return {"metrics": f"{base}/metrics.csv", "summary": f"{base}/summary.json"}


def audit_entry(config: dict, name: str) -> dict:
    """The audit entry with the global seed filled in."""
    return {"seed": config["seed"], **config["audits"][name], "name": name}


def audit_file(audit: str) -> str:
    return f"{RESULTS}/audit/{audit}.csv"


def sweep_file(sweep: str) -> str:
    return f"{RESULTS}/accounting/{sweep}.csv"


def table_file(figure: str) -> str:
    return f"{RESULTS}/tables/{figure}.csv"


def figure_inputs(config: dict, figure: str) -> list[str]:
    """The result files the table of ``figure`` is computed from."""
    from dplab.figures import FIGURES

    return FIGURES[figure].inputs(config, config["figures"][figure])


def figure_files(config: dict) -> list[str]:
    """Every figure (pdf and png) and its table."""
    files = []
    for figure in config.get("figures", {}):
        files += [table_file(figure), f"{RESULTS}/figures/{figure}.pdf", f"{RESULTS}/figures/{figure}.png"]
    return files


def targets(config: dict) -> list[str]:
    """Every final output of the default target: runs, sweeps, figures, tables and the index."""
    files = []
    for run in config["runs"]:
        files += list(run_files(run).values())
    files += [sweep_file(sweep) for sweep in config.get("sweeps", {})]
    files += [audit_file(audit) for audit in config.get("audits", {})]
    files += figure_files(config)
    files.append(f"{RESULTS}/index.md")
    return files
