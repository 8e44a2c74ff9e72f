"""Where every output of the pipeline lives: file names only, importing nothing else from dplab.

The rules, the commands, the figures and the tests take each path from here, so that they agree
on it.  Names that depend on a config (the runs of a grid) are built in :mod:`dplab.entries`.
A saved factorization's name comes with the `dplab mf` flags that write it (:func:`mf_args`), so
the rule that writes it and the run that reads it agree on both.
"""

from __future__ import annotations

import re

RESULTS = "results"
PROVENANCE = f"{RESULTS}/provenance.json"
INDEX = f"{RESULTS}/index.md"
#: the saved factorizations (:func:`mf_file`), where ``dplab train --mf-cache`` looks them up
MF_DIR = f"{RESULTS}/mf"


def training_files(folder: str) -> dict[str, str]:
    """What a training job writes into results/<folder> (a key of
    :func:`dplab.entries.training_runs`). grad_norms.csv holds the recorded norms of a run with
    ``record_grad_norms: true`` and only its header otherwise, so that every training job has the
    same outputs (one rule); likewise individual_epsilon.csv with ``individual_epsilon: true``."""
    base = training_dir(folder)
    return {
        "metrics": f"{base}/metrics.csv",
        "summary": f"{base}/summary.json",
        "model": f"{base}/model.pt",
        "grad_norms": f"{base}/grad_norms.csv",
        "individual_epsilon": f"{base}/individual_epsilon.csv",
        "metrics_json": f"{base}/metrics.json",
    }


def training_dir(folder: str) -> str:
    """The folder a training job writes (``dplab train --out``)."""
    return f"{RESULTS}/{folder}"


def run_files(run: str) -> dict[str, str]:
    """The outputs of the entry ``run`` of `runs` (see :func:`training_files`)."""
    return training_files(f"runs/{run}")


#: a run's ``model`` naming a class in a file of the project: ``FILE.py:Class``
MODEL_FILE = re.compile(r"^(?P<path>[^:]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)\Z")


def model_path(model: str) -> str | None:
    """The file of a run's ``model`` (``models/net.py:Net`` -> ``models/net.py``, relative to the
    project folder), None for a built-in model."""
    found = MODEL_FILE.match(model)
    return found["path"] if found else None


def model_folder(model: str) -> str:
    """The folder name of a grid run's ``model``: a built-in model's name, or
    ``<file stem>.<Class>`` for a class in a file (``models/net.py:Net`` -> ``net.Net``)."""
    found = MODEL_FILE.match(model)
    if found is None:
        return model
    return f"{found['path'].rsplit('/', 1)[-1].removesuffix('.py')}.{found['name']}"


def data_dir(dataset: str) -> str:
    return f"{RESULTS}/data/{dataset}"


def data_files(dataset: str) -> dict[str, str]:
    base = data_dir(dataset)
    return {"train": f"{base}/train.npz", "test": f"{base}/test.npz", "info": f"{base}/info.json"}


def audit_file(audit: str) -> str:
    return f"{RESULTS}/audit/{audit}.csv"


def sweep_file(sweep: str) -> str:
    return f"{RESULTS}/accounting/{sweep}.csv"


def table_file(figure: str) -> str:
    return f"{RESULTS}/tables/{figure}.csv"


def drawing_files(figure: str) -> dict[str, str]:
    """A figure's drawings: pdf and png."""
    return {ext: f"{RESULTS}/figures/{figure}.{ext}" for ext in ("pdf", "png")}


def figure_files(figure: str) -> list[str]:
    """A figure's table, pdf and png."""
    return [table_file(figure), *drawing_files(figure).values()]


#: the strategies optimized from a generating function, without a T×T matrix
#: (dplab.mf.toeplitz, dplab.mf.blt): their files also name the objective and, when the
#: optimizer used it, the min-separation s
TOEPLITZ_STRATEGIES = ("banded_toeplitz", "blt")
#: the strategies with a number of bands (run key ``bands``, ``dplab mf --bands``)
BANDED_STRATEGIES = ("banded", "banded_toeplitz")


def cache_key(
    strategy: str,
    steps: int,
    bands: int | None,
    buffers: int | None = None,
    objective: str | None = None,
    min_separation: int | None = None,
) -> str:
    """File stem of a saved factorization (``dplab mf --out``, pipeline rule ``factorization``):
    ``<strategy>_T<steps>[_m<bands>][_k<buffers>][_<objective>][_s<min_separation>]``, the parts of
    :func:`mf_spec` that are not None (bands of banded and banded_toeplitz, buffers of blt,
    objective and s of the two strategies of :data:`TOEPLITZ_STRATEGIES`)."""
    key = f"{strategy}_T{steps}" + (f"_m{bands}" if strategy in BANDED_STRATEGIES else "")
    return key + "".join(
        f"_{part}"
        for part in (
            f"k{buffers}" if buffers is not None else None,
            objective,
            f"s{min_separation}" if min_separation is not None else None,
        )
        if part
    )


def mf_file(key: str) -> str:
    """A saved factorization (``dplab mf --out``); ``key`` from :func:`cache_key`."""
    return f"{MF_DIR}/{key}.npz"


def mf_spec(
    strategy: str,
    steps: int,
    bands: int | None,
    buffers: int | None = None,
    objective: str | None = None,
    min_separation: int | None = None,
) -> tuple[str, dict]:
    """(cache key, {strategy, steps, bands, buffers, objective, min_separation}) of one
    factorization of the prefix-sum workload, each part None where the strategy does not take it:
    bands (banded, banded_toeplitz), buffers (blt), objective (default mean) and the min-separation
    s the optimizer minimizes the error for (k = ⌈T/s⌉ participations; None: single participation,
    k = 1) for :data:`TOEPLITZ_STRATEGIES`."""
    toeplitz = strategy in TOEPLITZ_STRATEGIES
    spec = {
        "strategy": strategy,
        "steps": steps,
        "bands": bands if strategy in BANDED_STRATEGIES else None,
        "buffers": buffers if strategy == "blt" else None,
        "objective": (objective or "mean") if toeplitz else None,
        "min_separation": min_separation
        if toeplitz and min_separation is not None and min_separation < steps
        else None,
    }
    return cache_key(**spec), spec


def mf_args(spec: dict) -> str:
    """The `dplab mf` flags that compute the factorization of ``spec`` (:func:`mf_spec`;
    rule ``factorization``)."""
    flags = {
        "bands": "--bands",
        "buffers": "--buffers",
        "objective": "--objective",
        "min_separation": "--min-separation",
    }
    return f"--strategy {spec['strategy']} --steps {spec['steps']}" + "".join(
        f" {flag} {spec[key]}" for key, flag in flags.items() if spec.get(key) is not None
    )
