"""A validated config's entries as their commands get them: dataset, run and audit entries with
the global seed filled in, and the runs of each grid with their names.

Pure functions of the config dict (schema defaults from :mod:`dplab.schemas`, paths from
:mod:`dplab.layout`), below the library so that a figure can name a grid's runs; the cross-checks
live in :mod:`dplab.config`, the jobs made of these entries in :mod:`dplab.jobs`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from itertools import product

from dplab.errors import DPLabError
from dplab.layout import model_folder, model_path, training_files
from dplab.schemas import load_schema, with_defaults


def dataset_entry(config: dict, name: str) -> dict:
    """The dataset entry with the global seed filled in where the entry has none."""
    return {"seed": config["seed"], **config["datasets"][name]}


def run_entry(config: dict, name: str) -> dict:
    """The run entry with the global seed filled in where the entry has none."""
    return {"seed": config["seed"], **config["runs"][name], "name": name}


def audit_entry(config: dict, name: str) -> dict:
    """The audit entry with the global seed filled in."""
    return {"seed": config["seed"], **config["audits"][name], "name": name}


def variant_key(prefix: str, spec: dict, variants: str, base: str, variant: str, key: str) -> str:
    """The config key that sets ``key`` of ``variant`` in ``spec`` (a grid or an audit at
    ``prefix``): ``<prefix>.<variants>.<variant>.<key>`` where the variant sets it, else
    ``<prefix>.<base>.<key>``."""
    own = key in (spec[variants][variant] or {})
    return f"{prefix}.{variants}.{variant}.{key}" if own else f"{prefix}.{base}.{key}"


def grid_runs(config: dict, grid: str) -> dict[str, dict]:
    """Every run of ``grid``: name -> {"variant": …, "epsilon": …, "lr": …, "seed": the grid's seed,
    "run": the run entry (keys of base, then of the variant, then target_epsilon, lr, and the seed
    it trains with, :func:`grid_seed`)}.

    The name is the run's folder under results/grids/<grid>/:
    ``<dataset>/<model>/<variant>/eps<ε>[/lr<η>]/seed<s>`` (``<model>``:
    :func:`dplab.layout.model_folder`; ``sigma<σ>`` when σ is given instead of a target ε,
    ``nonprivate`` for sgd; ``lr<η>`` only in a grid with ``lrs``, the learning rates each variant
    is tried at).  Variants are usually named after their method."""
    defaults = load_schema("run")["properties"]
    spec = config["grids"][grid]
    runs = {}
    for variant, keys in spec["variants"].items():
        axes = (spec.get("target_epsilon") or [None], spec.get("lrs") or [None], spec["seeds"])
        for epsilon, lr, seed in product(*axes):
            entry = {**spec["base"], **keys, **({"lr": lr} if lr is not None else {}), "seed": seed}
            if epsilon is not None:
                entry["target_epsilon"] = epsilon  # a σ of base or variant: the run refuses both
                entry.setdefault("noise_multiplier", None)
                privacy = f"eps{epsilon:g}"
            elif entry.get("noise_multiplier") is not None:
                privacy = f"sigma{_label(entry['noise_multiplier'])}"
            else:
                privacy = "nonprivate"
            dataset = entry.get("dataset", defaults["dataset"]["default"])
            model = entry.get("model", defaults["model"]["default"])
            tried = f"/lr{lr:g}" if lr is not None else ""
            name = f"{dataset}/{model_folder(str(model))}/{variant}/{privacy}{tried}/seed{seed}"
            if name in runs:  # values that print alike at 6 significant digits: one folder
                raise DPLabError(
                    f"grids.{grid}",
                    f"two runs (ε {runs[name]['epsilon']} and {epsilon}, lr {runs[name]['lr']} and"
                    f" {lr}) get the same folder {name}: give target_epsilon and lrs values"
                    " that differ in their first 6 significant digits",
                )
            entry["name"] = name
            entry["seed"] = grid_seed(config["seed"], grid, name)
            runs[name] = {
                "variant": variant,
                "epsilon": epsilon,
                "lr": lr,
                "seed": seed,
                "run": entry,
            }
    return runs


#: a grid run's name (:func:`grid_runs`)
GRID_NAME = re.compile(
    r"^(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?P<variant>[A-Za-z0-9_]+)/"
    r"(?P<privacy>(?:eps|sigma)[^/]*|nonprivate)(?:/lr(?P<lr>[^/]+))?/seed(?P<seed>[0-9]+)$"
)


@dataclass(frozen=True)
class GridName:
    """The parts of a grid run's name (:func:`grid_runs`): its variant, the learning rate it was
    tried at (None in a grid without ``lrs``) and the grid's seed (not the one it trains with,
    :func:`grid_seed`)."""

    variant: str
    lr: str | None
    seed: int

    @classmethod
    def of(cls, name: str, key: str) -> "GridName":
        """The parts of ``name``, or a :class:`DPLabError` at ``key`` where it is no grid run's."""
        found = GRID_NAME.match(name)
        if found is None:
            raise DPLabError(
                key,
                f"{name!r} is not a grid run's name (<dataset>/<model>/<variant>/eps<ε>"
                "[/lr<η>]/seed<s>)",
            )
        return cls(found["variant"], found["lr"], int(found["seed"]))


def grid_seed(base: int, grid: str, name: str) -> int:
    """The seed a grid run trains with: the first 32 bits of SHA-256 of "<base seed>/<grid>/<run
    name>" (the name holds the variant, ε, lr and the grid's seed).  Runs of one seed but another
    lr or variant drew the same batches and noise, so two of them released revealed the
    difference of their clipped sums without noise, while ``grid_epsilon`` and
    ``selection_epsilon`` compose a cell's runs as independent mechanisms; now no two runs of a
    grid share their generators."""
    digest = hashlib.sha256(f"{base}/{grid}/{name}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def grid_run_entries(config: dict, grid: str) -> list[dict]:
    """Every run entry of ``grid`` (:func:`grid_runs`' order) with the run schema's defaults filled,
    what a figure's check reads of a grid's runs (a grid may leave ``steps`` or ``dataset`` to the
    defaults); the runs themselves are resolved once, by :func:`dplab.config.check_config`."""
    return [with_defaults(item["run"], "run") for item in grid_runs(config, grid).values()]


def _label(value) -> str:
    """A value as a grid run's folder name shows it: a number by ``:g``, anything else as text (the
    name is made before the run is checked, which refuses a wrong type with its key)."""
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def grid_summaries(config: dict, grid: str) -> list[str]:
    """The summary.json of every run of ``grid`` (what figures read)."""
    return [training_files(f"grids/{grid}/{run}")["summary"] for run in grid_runs(config, grid)]


def training_runs(config: dict) -> dict[str, dict]:
    """Every training job of the DAG (rule ``train``): the run's folder under results/ —
    ``runs/<name>`` for an entry of `runs`, ``grids/<grid>/<run>`` for a run of a grid — -> its
    run entry (seed and name filled in) as ``dplab train --run-json`` gets it."""
    runs = {f"runs/{name}": run_entry(config, name) for name in config["runs"]}
    for grid in config.get("grids", {}):
        runs.update(
            {f"grids/{grid}/{name}": item["run"] for name, item in grid_runs(config, grid).items()}
        )
    return runs


def model_files(config: dict) -> list[str]:
    """The project's model files that the training runs and audits of ``config`` build
    (:func:`dplab.layout.model_path`)."""
    audits = config.get("audits", {}).values()
    runs = [*training_runs(config).values(), *(entry["run"] for entry in audits)]
    return sorted({path for run in runs if (path := model_path(run.get("model", "")))})
