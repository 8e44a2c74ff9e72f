"""The pipeline's file layout and config cross-checks, shared by the Snakefile and dvc.yaml tests.

The JSON schema (workflow/schemas/config.schema.yaml) checks keys, types and ranges; this
module checks what a schema cannot (:func:`check_config`): that names refer to entries that
exist, and that every job's entry passes the checks its command would make, before Snakemake
plans a job.  Paths of every result live here so that rules, the DVC view and the tests agree on them.
"""

from __future__ import annotations

import contextlib
import re
import sys

from dplab.errors import DPLabError

RESULTS = "results"


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


def check_config(config: dict) -> None:
    """Raise :class:`DPLabError` naming the dotted key of the first problem any job of the DAG
    would meet, before one is planned (``config`` validated, defaults filled): references to
    entries that do not exist; every training job's run resolved as ``dplab train`` resolves it
    (:func:`dplab.training.config.resolve_run`) and checked against its dataset
    (:func:`dplab.training.preflight.check_run`); every audited method's run; sweeps; figures;
    devices against ``training_resources``.  A grid run's problem is keyed where its key was set
    (the variant, else ``base``) and names the run."""
    from dplab.accounting import names as accountant_names
    from dplab.figures import FIGURE_IDS, figure as figure_module
    from dplab.training.privacy import update_of

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
    from dplab.training.config import resolve_run
    from dplab.training.preflight import check_run

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
    from dplab.audit.membership import THREAT_MODELS, method_config
    from dplab.training.data import expected_info

    where = f"audits.{audit}"
    try:
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
    info = expected_info(dataset_entry(config, entry["dataset"]))
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


def grid_runs(config: dict, grid: str) -> dict[str, dict]:
    """Every run of ``grid``: name -> {"variant": …, "epsilon": …, "seed": …, "run": the run
    entry (keys of base, then of the variant, then target_epsilon and seed)}.

    The name is the run's folder under results/grids/<grid>/:
    ``<dataset>/<model>/<variant>/eps<ε>/seed<s>`` (``sigma<σ>`` when σ is given instead of a
    target ε, ``nonprivate`` for sgd).  Variants are usually named after their method."""
    from dplab.config import load_schema

    defaults = load_schema("run")["properties"]
    spec = config["grids"][grid]
    runs = {}
    for variant, keys in spec["variants"].items():
        for epsilon in spec.get("target_epsilon") or [None]:
            for seed in spec["seeds"]:
                entry = {**spec["base"], **keys, "seed": seed}
                if epsilon is not None:
                    entry.update(target_epsilon=epsilon, noise_multiplier=None)
                    privacy = f"eps{epsilon:g}"
                elif entry.get("noise_multiplier") is not None:
                    privacy = f"sigma{entry['noise_multiplier']:g}"
                else:
                    privacy = "nonprivate"
                dataset = entry.get("dataset", defaults["dataset"]["default"])
                model = entry.get("model", defaults["model"]["default"])
                name = f"{dataset}/{model}/{variant}/{privacy}/seed{seed}"
                entry["name"] = name
                runs[name] = {"variant": variant, "epsilon": epsilon, "seed": seed, "run": entry}
    return runs


def grid_summaries(config: dict, grid: str) -> list[str]:
    """The summary.json of every run of ``grid`` (what figures read)."""
    return [training_files(f"grids/{grid}/{run}")["summary"] for run in grid_runs(config, grid)]


def training_runs(config: dict) -> dict[str, dict]:
    """Every training job of the DAG (rule ``train``): the run's folder under results/ —
    ``runs/<name>`` for an entry of `runs`, ``grids/<grid>/<run>`` for a run of a grid — -> its
    run entry (seed and name filled in) as ``dplab train --run-json`` gets it."""
    runs = {f"runs/{name}": run_entry(config, name) for name in config["runs"]}
    for grid in config.get("grids", {}):
        runs.update({f"grids/{grid}/{name}": item["run"] for name, item in grid_runs(config, grid).items()})
    return runs


def training_files(folder: str) -> dict[str, str]:
    """What a training job writes into results/<folder> (a key of :func:`training_runs`).
    grad_norms.csv holds the recorded norms of a run with ``record_grad_norms: true`` and only
    its header otherwise, so that every training job has the same outputs (one rule)."""
    base = f"{RESULTS}/{folder}"
    return {"metrics": f"{base}/metrics.csv", "summary": f"{base}/summary.json", "model": f"{base}/model.pt",
            "grad_norms": f"{base}/grad_norms.csv", "metrics_json": f"{base}/metrics.json"}


def dataset_entry(config: dict, name: str) -> dict:
    """The dataset entry with the global seed filled in where the entry has none."""
    return {"seed": config["seed"], **config["datasets"][name]}


def run_entry(config: dict, name: str) -> dict:
    """The run entry with the global seed filled in where the entry has none."""
    return {"seed": config["seed"], **config["runs"][name], "name": name}


def data_dir(dataset: str) -> str:
    return f"{RESULTS}/data/{dataset}"


def data_files(dataset: str) -> dict[str, str]:
    base = data_dir(dataset)
    return {"train": f"{base}/train.npz", "test": f"{base}/test.npz", "info": f"{base}/info.json"}


def run_files(run: str) -> dict[str, str]:
    """The outputs of the entry ``run`` of `runs` (see :func:`training_files`)."""
    return training_files(f"runs/{run}")


def audit_entry(config: dict, name: str) -> dict:
    """The audit entry with the global seed filled in."""
    return {"seed": config["seed"], **config["audits"][name], "name": name}


def audit_file(audit: str) -> str:
    return f"{RESULTS}/audit/{audit}.csv"


def sweep_file(sweep: str) -> str:
    return f"{RESULTS}/accounting/{sweep}.csv"


def table_file(figure: str) -> str:
    return f"{RESULTS}/tables/{figure}.csv"


def mf_file(key: str) -> str:
    """A saved factorization (``dplab mf --out``); ``key`` from :func:`dplab.training.dp_mf.cache_key`."""
    return f"{RESULTS}/mf/{key}.npz"


def mf_spec(strategy: str, steps: int, bands: int | None) -> tuple[str, dict]:
    """(cache key, {strategy, steps, bands}) of one factorization of the prefix-sum workload."""
    from dplab.training.dp_mf import cache_key

    bands = bands if strategy == "banded" else None
    return cache_key(strategy, steps, bands), {"strategy": strategy, "steps": steps, "bands": bands}


def mf_args(spec: dict) -> str:
    """The `dplab mf` flags of a factorization of :func:`factorizations` (rule ``factorization``)."""
    bands = f" --bands {spec['bands']}" if spec["bands"] is not None else ""
    return f"--strategy {spec['strategy']} --steps {spec['steps']}{bands}"


def run_factorization(entry: dict) -> str | None:
    """The cache key of a dp_mf run entry's factorization (None for other methods)."""
    if entry.get("method") != "dp_mf":
        return None
    return mf_spec(entry["strategy"], entry["steps"], entry.get("bands"))[0]


def factorizations(config: dict) -> dict[str, dict]:
    """Every factorization the DAG uses (dp_mf runs, grid runs, figures): key -> {strategy, steps, bands}.
    Computed once each by rule ``factorization`` (results/mf/<key>.npz) and loaded by its users."""
    from dplab.figures import figure as figure_module

    entries = list(config["runs"].values())
    for grid in config.get("grids", {}):
        entries += [item["run"] for item in grid_runs(config, grid).values()]
    specs = dict(mf_spec(e["strategy"], e["steps"], e.get("bands")) for e in entries if e.get("method") == "dp_mf")
    for figure, params in config.get("figures", {}).items():
        specs.update(getattr(figure_module(figure), "factorizations", lambda c, p: {})(config, params))
    return specs


def figure_inputs(config: dict, figure: str) -> dict[str, str | list[str]]:
    """The result files the table of ``figure`` is computed from, by name (the figure's ``INPUTS``:
    rule figure_table unpacks them and passes them as ``dplab figure-table --inputs NAME=PATH …``)."""
    from dplab.figures import figure as figure_module

    return figure_module(figure).inputs(config, config["figures"][figure])


def figure_files(config: dict) -> list[str]:
    """Every figure (pdf and png) and its table."""
    files = []
    for figure in config.get("figures", {}):
        files += [table_file(figure), f"{RESULTS}/figures/{figure}.pdf", f"{RESULTS}/figures/{figure}.png"]
    return files


PROVENANCE = f"{RESULTS}/provenance.json"


def results(config: dict) -> list[str]:
    """Every result the provenance record covers: runs, sweeps, tables and figures."""
    files = []
    for folder in training_runs(config):
        files += list(training_files(folder).values())
    files += [mf_file(key) for key in factorizations(config)]
    files += [sweep_file(sweep) for sweep in config.get("sweeps", {})]
    files += [audit_file(audit) for audit in config.get("audits", {})]
    files += figure_files(config)
    return files


def targets(config: dict) -> list[str]:
    """Every final output of the default target: the results, the index and their provenance."""
    return results(config) + [f"{RESULTS}/index.md", PROVENANCE]
