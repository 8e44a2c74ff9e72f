"""A pipeline config: loaded, validated against the schema, and cross-checked.

The JSON schema (``dplab/schemas/config.schema.yaml``, :mod:`dplab.schemas`) checks keys, types
and ranges; :func:`check_config` checks what a schema cannot: that names refer to entries that
exist, and that every job's entry passes the checks its command would make, before Snakemake
plans a job.  This layer sits above the library (whose checks it runs) and below the commands
and rules (docs/architecture.md); the jobs made from a checked config are :mod:`dplab.jobs`.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from pathlib import Path

from dplab.accounting import names as accountant_names
from dplab.audit.entries import canary_count, check_entry, check_estimators, method_config
from dplab.errors import DPLabError
from dplab.figures import FIGURES, figure as figure_module
from dplab.entries import dataset_entry, grid_runs, run_entry, variant_key
from dplab.schemas import load_schema, load_yaml, validate, yaml_problem  # noqa: F401  (the commands' config API)
from dplab.training.resolve import phase_runs, resolve_run
from dplab.training.data import expected_info, resolve_dataset
from dplab.training.preflight import check_run
from dplab.training.methods import METHODS, update_of
from dplab.training.settings import RunSettings


def read_config(*paths: str | Path) -> dict:
    """A pipeline config file — or several, each merged over the previous ones as Snakemake
    merges ``--configfile`` files over config/config.yaml (:func:`merge`) — validated, with
    defaults (not yet cross-checked: :func:`load_config`, :func:`dplab.jobs.load`)."""
    config: dict = {}
    for path in paths:
        merge(config, load_yaml(path))
    return validate(config)


def load_config(*paths: str | Path) -> dict:
    """:func:`read_config`, cross-checked (:func:`check_config`)."""
    config = read_config(*paths)
    check_config(config)
    return config


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
_LIST_FLAGS = {
    "--config": "--config",
    "-C": "--config",
    "--configfile": "--configfile",
    "--configfiles": "--configfile",
}


def _flag_values(argv: list[str]) -> dict[str, list[list[str]]]:
    """For ``--config`` and ``--configfile`` in a Snakemake command line: the values of each time
    the flag is given (``--flag A B``, ``--flag=A``, ``-CA``), as argparse reads ``nargs`` lists."""
    found: dict[str, list[list[str]]] = {}
    current = None
    for token in argv[1:]:
        name, _, inline = (
            token.partition("=") if token.startswith("--") else (token[:2], "", token[2:])
        )
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

    from dplab.schemas import DuplicateKeyError, TooLargeError, parse_yaml

    if argv and argv[0].replace("\\", "/").rsplit("/", 1)[-1] in ("snakemake", "__main__.py"):
        for flag, given in _flag_values(argv).items():
            if len(given) > 1:
                dropped = " ".join(given[0]) or "(nothing)"
                raise DPLabError(
                    flag,
                    f"given {len(given)} times: Snakemake keeps only the last one's values,"
                    f" dropping {dropped}; give them all after one {flag}",
                )
        seen: dict[str, str] = {}
        for pair in _flag_values(argv).get("--config", [[]])[0]:
            key, _, value = pair.partition("=")
            if key in seen:
                raise DPLabError(
                    f"--config {key}",
                    f"given twice ({key}={seen[key]} and {key}={value}): the last would "
                    "silently win; give it once",
                )
            seen[key] = value
            if value.lstrip("'\"").startswith("{"):
                try:
                    parse_yaml(value.strip("'\""))
                except DuplicateKeyError as err:
                    raise DPLabError(
                        f"--config {key}", err.problem.split(", at line")[0] + "; keep one"
                    ) from None
                except TooLargeError as err:
                    raise DPLabError(f"--config {key}", err.problem) from None
                except yaml.YAMLError:
                    pass  # Snakemake reads it as text: the schema names the key
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(files.get(key), dict):
            for name, entry in value.items():
                if isinstance(entry, dict) and isinstance(files[key].get(name), dict):
                    raise DPLabError(
                        f"--config {key}.{name}",
                        "is an entry of the config file too: Snakemake would merge "
                        "the two key by key, mixing them; give the whole entry "
                        "in a --configfile, or a new name",
                    )


def merge(config: dict, override: dict) -> None:
    """Merge ``override`` into ``config`` in place: mappings key by key, recursively; any other
    value replaces (Snakemake's ``update_config``)."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            merge(config[key], value)
        else:
            config[key] = copy.deepcopy(value)


def check_config(config: dict) -> dict[str, dict]:
    """Raise :class:`DPLabError` naming the dotted key of the first problem any job of the DAG
    would meet, before one is planned (``config`` validated, defaults filled): every dataset
    entry as ``prepare-data`` resolves it; references to entries that do not exist; every training
    job's run resolved as ``dplab train`` resolves it (:func:`dplab.training.resolve.resolve_run`)
    and checked against its dataset (:func:`dplab.training.preflight.check_run`); every audited
    method's run; sweeps; figures; devices against ``training_resources``.  A grid run's problem is
    keyed where its key was set (the variant, else ``base``) and names the run.

    Returns every training job's resolved run by its folder under results/ (the keys of
    :func:`dplab.entries.training_runs`): the one place a pipeline's runs are resolved, which
    :func:`dplab.jobs.plan` turns into the jobs.  Every dataset comes first: its entry is resolved
    (:func:`dplab.training.data.resolve_dataset`: a split's sizes) and the user's own data (arrays,
    csv, image_folder) are read and checked here (:func:`dplab.training.data.expected_info`)."""
    for name in config["datasets"]:
        expected_info(resolve_dataset(dataset_entry(config, name), name), name)
    resolved = {
        f"runs/{run}": _check_run(config, run_entry(config, run), [], f"runs.{run}")
        for run in config["runs"]
    }
    for grid, spec in config.get("grids", {}).items():
        _check_grid_axes(grid, spec)
        for name, item in grid_runs(config, grid).items():
            where = f"grids.{grid}.variants.{item['variant']}"
            layers = [
                (where, spec["variants"][item["variant"]]),
                (f"grids.{grid}.base", spec["base"]),
                (f"grids.{grid}", {"target_epsilon"} if item["epsilon"] is not None else ()),
            ]
            resolved[f"grids/{grid}/{name}"] = _check_run(
                config, item["run"], layers, where, f" (run {name})"
            )
    known = set(accountant_names())
    for sweep, entry in config.get("sweeps", {}).items():
        if entry["run"] not in config["runs"]:
            raise DPLabError(
                f"sweeps.{sweep}.run",
                f"unknown run {entry['run']!r}; defined: {', '.join(sorted(config['runs']))}",
            )
        for name in entry["accountants"]:
            if name not in known:
                raise DPLabError(
                    f"sweeps.{sweep}.accountants",
                    f"unknown accountant {name!r}; valid: {', '.join(sorted(known))}",
                )
        run = RunSettings.of(resolved[f"runs/{entry['run']}"])
        noise = update_of(run).noise
        if noise != "independent":
            kind = "non-private" if noise == "none" else "correlated-noise"
            raise DPLabError(
                f"sweeps.{sweep}.run",
                f"run {entry['run']!r} is a {kind} run (method "
                f"{run.method}): every accountant of a sweep refuses it",
            )
        if run.phases is not None:
            raise DPLabError(
                f"sweeps.{sweep}.run",
                f"run {entry['run']!r} is a run in phases: a sweep varies T of one setting; "
                "name a run of one phase (`dplab epsilon --phases` accounts phases)",
            )
    for audit, entry in config.get("audits", {}).items():
        _check_audit(config, audit, entry)
    for figure, params in config.get("figures", {}).items():
        if figure not in FIGURES:
            raise DPLabError(f"figures.{figure}", f"unknown figure; valid: {', '.join(FIGURES)}")
        figure_module(figure).check(config, params)
    _check_devices(config)
    return resolved


#: a grid's axis -> the run key each of its values sets (:func:`dplab.entries.grid_runs`)
GRID_AXES = {"lrs": "lr", "target_epsilon": "target_epsilon", "seeds": "seed"}
#: the most runs one grid may plan (variants × ε × lrs × seeds): each is a job's checks and
#: folder; 10,000 plan in about 6 s here, 100,000 took a minute before any job ran
GRID_RUNS_MAX = 10_000


def _check_grid_axes(grid: str, spec: dict) -> None:
    """A grid tries every variant at each value of its ``lrs``, ``target_epsilon`` and ``seeds``:
    the same key in its base or in a variant would never be used, so it is refused (keyed where it
    is set: :func:`dplab.entries.variant_key`) rather than dropped; and it plans at most
    :data:`GRID_RUNS_MAX` runs."""
    runs = len(spec["variants"])
    for axis in GRID_AXES:
        runs *= len(spec.get(axis) or [None])
    if runs > GRID_RUNS_MAX:
        raise DPLabError(
            f"grids.{grid}",
            f"plans {runs} runs (variants × target_epsilon × lrs × seeds); at most"
            f" GRID_RUNS_MAX = {GRID_RUNS_MAX}: split it into several grids or configs",
        )
    for axis, key in GRID_AXES.items():
        if not spec.get(axis):
            continue
        for variant, keys in spec["variants"].items():
            if key in (keys or {}) or key in spec["base"]:
                raise DPLabError(
                    variant_key(f"grids.{grid}", spec, "variants", "base", variant, key),
                    f"the grid trains every variant at each of its {axis} {spec[axis]}, so this"
                    f" {key} would never be used: remove it, or remove {axis} to train at it",
                )


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
        settings = RunSettings.of(cfg)
        _check_dataset(config, settings.dataset)
        dataset = dataset_entry(config, settings.dataset)
        check_run(settings, dataset)
        if settings.phases is not None:
            _check_phases(cfg, settings.phases, dataset)
    except DPLabError as err:
        raise _rekey(err, layers, default, note) from None
    return cfg


def _check_phases(cfg: dict, phases: tuple[dict, ...], dataset: dict) -> None:
    """Each phase of a run in phases (:func:`phase_runs`) as a run of its own on the dataset; an
    error about a key the phase sets (an entry of ``phases``) is keyed ``phases[j].<key>``."""
    for j, (entry, run) in enumerate(zip(phases, phase_runs(cfg))):
        try:
            check_run(RunSettings.of(run), dataset)
        except DPLabError as err:
            top = err.key.split(".")[0]
            key = f"phases[{j}].{err.key}" if top in entry else err.key
            raise DPLabError(key, err.message) from None


def _check_audit(config: dict, audit: str, entry: dict) -> None:
    """The entry's own checks (:func:`check_entry`), every audited method's run resolves (the
    audit's own :func:`method_config`) and every listed estimator applies to it
    (:func:`check_estimators`), and the audit's records and canary label fit its dataset."""
    where = f"audits.{audit}"
    try:
        check_entry(entry)
        _check_dataset(config, entry["dataset"])
    except DPLabError as err:
        raise _rekey(err, [], where) from None
    settings = {}
    for method, keys in entry["methods"].items():
        try:
            settings[method] = method_config({**entry, "name": audit}, method)
        except DPLabError as err:
            err.key = err.key.removeprefix(
                f"{where}.methods.{method}."
            )  # the key itself, then where it was set
            raise _rekey(
                err,
                [(f"{where}.methods.{method}", keys or {}), (f"{where}.run", entry["run"])],
                f"{where}.methods.{method}",
            ) from None
    try:
        check_estimators(entry, settings)
    except DPLabError as err:
        raise _rekey(err, [], where) from None
    dataset = dataset_entry(config, entry["dataset"])
    if (
        dataset["kind"] == "synthetic"
    ):  # the canaries' own check (dplab.audit.canary.dead_features), from the entry
        raise DPLabError(
            f"{where}.dataset",
            f"dataset {entry['dataset']!r} is synthetic: its features are Gaussian, so "
            "none is 0 in every record, and the dead-feature canaries need one; "
            "audit a digits or mnist dataset",
        )
    info = expected_info(dataset)
    slots = canary_count(entry)
    if not slots < entry["dataset_size"] <= info["train_size"] + slots:
        raise DPLabError(
            f"{where}.dataset_size",
            f"must lie in ({slots}, {info['train_size'] + slots}]: the "
            f"{slots} canary slot(s) and 1 to {info['train_size']} training "
            f"records of dataset {entry['dataset']!r}",
        )
    for method, run in settings.items():  # each sampler on the audit's records (as preflight)
        try:
            METHODS[run.method].sampler(run, entry["dataset_size"])
        except DPLabError as err:
            key = variant_key(where, entry, "methods", "run", method, err.key)
            raise DPLabError(key, err.message) from None
    if entry["canary_label"] >= info["classes"]:
        raise DPLabError(
            f"{where}.canary_label",
            f"must be < {info['classes']}, the classes of dataset {entry['dataset']!r}",
        )


def _check_dataset(config: dict, name: str) -> None:
    if name not in config["datasets"]:
        raise DPLabError(
            "dataset", f"unknown dataset {name!r}; defined: {', '.join(sorted(config['datasets']))}"
        )


def _variant_devices(prefix: str, spec: dict, variants: str, base: str) -> dict[str, str]:
    """key -> device of each variant of ``spec[variants]``: its own ``device``, else that of
    ``spec[base]`` (default ``auto``), named by the key that sets it."""
    return {
        variant_key(prefix, spec, variants, base, variant, "device"): (keys or {}).get(
            "device", spec[base].get("device", "auto")
        )
        for variant, keys in spec[variants].items()
    }


def _check_devices(config: dict) -> None:
    """Every training run's ``device`` (an audit's runs' too) must agree with what its job asks
    the scheduler for (training_resources.gpus, the one place that decides; docs/cluster.md)."""
    gpus = config["training_resources"]["gpus"]
    devices = {
        f"runs.{run}.device": entry.get("device", "auto") for run, entry in config["runs"].items()
    }
    for grid, spec in config.get("grids", {}).items():
        devices.update(_variant_devices(f"grids.{grid}", spec, "variants", "base"))
    for audit, spec in config.get("audits", {}).items():
        devices.update(_variant_devices(f"audits.{audit}", spec, "methods", "run"))
    for key, device in devices.items():
        if device == "cuda" and gpus == 0:
            raise DPLabError(
                key,
                "is cuda but training_resources.gpus is 0, so the job would get no GPU on a"
                " cluster; set training_resources.gpus >= 1 (every training job then asks for GPUs)"
                " or device: auto",
            )
        if device == "cpu" and gpus > 0:
            raise DPLabError(
                key,
                f"is cpu but training_resources.gpus is {gpus}, so the job would hold GPUs it never"
                " uses; set device: auto (or cuda), or training_resources.gpus: 0",
            )
