"""A pipeline config: loaded, validated against the schema, and cross-checked.

The JSON schema (``dplab/schemas/config.schema.yaml``, :mod:`dplab.schemas`) checks keys, types
and ranges; :func:`check_config` checks what a schema cannot: that names refer to entries that
exist, and that every job's entry passes the checks its command would make, before Snakemake
plans a job.  This layer sits above the library (whose checks it runs) and below the commands
and rules (docs/architecture.md).
"""

from __future__ import annotations

import copy
from pathlib import Path

from dplab.accounting import names as accountant_names
from dplab.audit.membership import THREAT_MODELS, check_size, method_config
from dplab.errors import DPLabError
from dplab.figures import FIGURE_IDS, figure as figure_module
from dplab.jobs import dataset_entry, grid_runs, run_entry
from dplab.schemas import load_schema, load_yaml, validate, yaml_problem  # noqa: F401  (the commands' config API)
from dplab.training.config import resolve_run
from dplab.training.data import expected_info
from dplab.training.preflight import check_run
from dplab.training.methods import update_of


def load_config(*paths: str | Path) -> dict:
    """A pipeline config file — or several, each merged over the previous ones as Snakemake
    merges ``--configfile`` files over config/config.yaml (:func:`merge`) — validated, with
    defaults, and cross-checked (:func:`check_config`)."""
    config: dict = {}
    for path in paths:
        merge(config, load_yaml(path))
    config = validate(config)
    check_config(config)
    return config


def merge(config: dict, override: dict) -> None:
    """Merge ``override`` into ``config`` in place: mappings key by key, recursively; any other
    value replaces (Snakemake's ``update_config``)."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            merge(config[key], value)
        else:
            config[key] = copy.deepcopy(value)


def check_config(config: dict) -> None:
    """Raise :class:`DPLabError` naming the dotted key of the first problem any job of the DAG
    would meet, before one is planned (``config`` validated, defaults filled): references to
    entries that do not exist; every training job's run resolved as ``dplab train`` resolves it
    (:func:`dplab.training.config.resolve_run`) and checked against its dataset
    (:func:`dplab.training.preflight.check_run`); every audited method's run; sweeps; figures;
    devices against ``training_resources``.  A grid run's problem is keyed where its key was set
    (the variant, else ``base``) and names the run."""
    runs = {run: _check_run(config, run_entry(config, run), [], f"runs.{run}") for run in config["runs"]}
    for grid, spec in config.get("grids", {}).items():
        for name, item in grid_runs(config, grid).items():
            where = f"grids.{grid}.variants.{item['variant']}"
            layers = [(where, spec["variants"][item["variant"]]), (f"grids.{grid}.base", spec["base"]),
                      (f"grids.{grid}", {"target_epsilon"} if item["epsilon"] is not None else ())]
            _check_run(config, item["run"], layers, where, f" (run {name})")
    known = set(accountant_names())
    for sweep, entry in config.get("sweeps", {}).items():
        if entry["run"] not in config["runs"]:
            raise DPLabError(
                f"sweeps.{sweep}.run", f"unknown run {entry['run']!r}; defined: {', '.join(sorted(config['runs']))}"
            )
        for name in entry["accountants"]:
            if name not in known:
                raise DPLabError(f"sweeps.{sweep}.accountants", f"unknown accountant {name!r}; valid: {', '.join(sorted(known))}")
        noise = update_of(runs[entry["run"]]).noise
        if noise != "independent":
            kind = "non-private" if noise == "none" else "correlated-noise"
            raise DPLabError(f"sweeps.{sweep}.run", f"run {entry['run']!r} is a {kind} run (method "
                                                    f"{runs[entry['run']]['method']}): every accountant of a sweep refuses it")
    for audit, entry in config.get("audits", {}).items():
        _check_audit(config, audit, entry)
    for figure, params in config.get("figures", {}).items():
        if figure not in FIGURE_IDS:
            raise DPLabError(f"figures.{figure}", f"unknown figure; valid: {', '.join(FIGURE_IDS)}")
        figure_module(figure).check(config, params)
    _check_devices(config)


def _rekey(err: DPLabError, layers: list, default: str, note: str = "") -> DPLabError:
    """``err``, raised about a run key (``diameter``, ``accountants``…), keyed by the config entry
    that set it: the first of ``layers`` (dotted prefix, the keys given there) holding it, else
    ``default``."""
    top = err.key.split(".")[0]
    where = next((prefix for prefix, keys in layers if top in keys), default)
    return DPLabError(f"{where}.{err.key}", err.message + note)


def _check_run(config: dict, raw: dict, layers: list, default: str, note: str = "") -> dict:
    """The checks of one training job (see :func:`check_config`), errors keyed by :func:`_rekey`;
    the resolved run."""
    try:
        cfg = resolve_run(raw)
        _check_dataset(config, cfg["dataset"])
        check_run(cfg, dataset_entry(config, cfg["dataset"]))
    except DPLabError as err:
        raise _rekey(err, layers, default, note) from None
    return cfg


def _check_audit(config: dict, audit: str, entry: dict) -> None:
    """Every audited method's run resolves (the audit's own :func:`method_config`), and the
    audit's records and canary label fit its dataset."""
    where = f"audits.{audit}"
    try:
        check_size(entry)
        _check_dataset(config, entry["dataset"])
    except DPLabError as err:
        raise _rekey(err, [], where) from None
    for method, keys in entry["methods"].items():
        try:
            method_config({**entry, "name": audit}, method)
        except DPLabError as err:
            err.key = err.key.removeprefix(f"{where}.methods.{method}.")  # the key itself, then where it was set
            raise _rekey(err, [(f"{where}.methods.{method}", keys or {}), (f"{where}.run", entry["run"])],
                         f"{where}.methods.{method}") from None
    dataset = dataset_entry(config, entry["dataset"])
    if dataset["kind"] == "synthetic":  # the canaries' own check (dplab.audit.canary.dead_features), from the entry
        raise DPLabError(f"{where}.dataset", f"dataset {entry['dataset']!r} is synthetic: its features are Gaussian, so "
                                             "none is 0 in every record, and the dead-feature canaries need one; "
                                             "audit a digits or mnist dataset")
    info = expected_info(dataset)
    slots = entry["canaries"] if THREAT_MODELS[entry["threat_model"]][0] == "gradient" else 1
    if not slots < entry["dataset_size"] <= info["train_size"] + slots:
        raise DPLabError(f"{where}.dataset_size", f"must lie in ({slots}, {info['train_size'] + slots}]: the "
                                                   f"{slots} canary slot(s) and 1 to {info['train_size']} training "
                                                   f"records of dataset {entry['dataset']!r}")
    if entry["canary_label"] >= info["classes"]:
        raise DPLabError(f"{where}.canary_label", f"must be < {info['classes']}, the classes of dataset {entry['dataset']!r}")


def _check_dataset(config: dict, name: str) -> None:
    if name not in config["datasets"]:
        raise DPLabError("dataset", f"unknown dataset {name!r}; defined: {', '.join(sorted(config['datasets']))}")


def _check_devices(config: dict) -> None:
    """Every training run's ``device`` must agree with what its job asks the scheduler for
    (training_resources.gpus, the one place that decides; docs/cluster.md)."""
    gpus = config["training_resources"]["gpus"]
    devices = {f"runs.{run}.device": entry.get("device", "auto") for run, entry in config["runs"].items()}
    for grid, spec in config.get("grids", {}).items():
        for variant, keys in spec["variants"].items():
            where = f"grids.{grid}.variants.{variant}" if "device" in keys else f"grids.{grid}.base"
            devices[f"{where}.device"] = keys.get("device", spec["base"].get("device", "auto"))
    for key, device in devices.items():
        if device == "cuda" and gpus == 0:
            raise DPLabError(key, "is cuda but training_resources.gpus is 0, so the job would get no GPU on a cluster; "
                                  "set training_resources.gpus >= 1 (every training job then asks for GPUs) or device: auto")
        if device == "cpu" and gpus > 0:
            raise DPLabError(key, f"is cpu but training_resources.gpus is {gpus}, so the job would hold GPUs it never "
                                  "uses; set device: auto (or cuda), or training_resources.gpus: 0")
