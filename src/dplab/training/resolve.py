"""Load one training run from a single-run YAML or a JSON string (a pipeline config's runs are
resolved by :func:`dplab.config.check_config`, its jobs made by :func:`dplab.jobs.plan`).

Each goes through :func:`resolve_run`: schema validation (``run.schema.yaml``), then
the method's defaults and the cross-key rules the schema cannot express.  Any violation is a
:class:`~dplab.errors.DPLabError` naming the key; nothing is written before this succeeds.
"""

from __future__ import annotations

from pathlib import Path

from dplab.accounting.eligibility import check_accountants
from dplab.errors import DPLabError
from dplab.schemas import load_schema, load_yaml, validate
from dplab.schemes import Sampling
from dplab.training import model_file, optimizers
from dplab.training.methods import METHODS, get
from dplab.training.settings import RunSettings
from dplab.validate import json_value


def load_runs(path: str | Path | None = None, run_json: str | None = None) -> list[dict]:
    """The resolved runs of ``run_json`` (a run, or a list of runs trained one after another) or
    the run of the single-run YAML file ``path`` (a run of a pipeline config is its job's:
    :func:`dplab.jobs.plan`, ``dplab train --config FILE --run NAME``)."""
    if run_json is not None:
        if path is not None:
            raise DPLabError("--run-json", "give either --config or --run-json, not both")
        value = json_value("--run-json", run_json)
        if value == []:
            raise DPLabError("--run-json", "is an empty list; give a run or a list of runs")
        return [resolve_run(raw) for raw in (value if isinstance(value, list) else [value])]
    if path is None:
        raise DPLabError("--config", "give --config FILE or --run-json JSON")
    data = load_yaml(path)
    if "runs" in data:
        runs = data["runs"]
        if not isinstance(runs, dict) or not runs:
            raise DPLabError("runs", "must be a non-empty mapping of run name -> run")
        raise DPLabError("--run", f"the config holds several runs; choose one of {', '.join(runs)}")
    return [resolve_run(data)]


def _check_risk_target(cfg: dict, method, err) -> None:
    """target_tpr with target_fpr, TPR above FPR, calibrated with pld
    (docs/risk.md); sets the accountant."""
    from dplab.accounting import risk

    try:
        risk.check_target(cfg["target_tpr"], cfg["target_fpr"], None)
    except DPLabError as bad:  # its message names the command line's flags: name the run's keys
        message = bad.message.replace("--tpr", "target_tpr").replace("--fpr", "target_fpr")
        raise err(f"target_{bad.key}", message.replace("exceed fpr", "exceed target_fpr")) from None
    if method.noise != "independent" or cfg["sampling"] not in risk.RISK_SAMPLINGS:
        raise err(
            "target_tpr",
            f"a risk target is calibrated for sampling {' or '.join(risk.RISK_SAMPLINGS)} with "
            f"independent noise (pld); got method {method.name}, sampling {cfg['sampling']}",
        )
    if cfg["accountant"] not in (None, *risk.PLD_ACCOUNTANTS):
        raise err(
            "accountant",
            "a risk target is calibrated with pld (its privacy-loss distribution); got"
            f" {cfg['accountant']!r}",
        )
    cfg["accountant"] = "pld"


#: the Rényi filter's order α where ``individual_budget`` is given without ``individual_order``
FILTER_ORDER = 32


def _check_individual(cfg: dict, method, err) -> None:
    """``individual_epsilon``: a private method with independent Gaussian noise, on a sampling and
    relation :mod:`dplab.accounting.individual` implements."""
    from dplab.accounting import individual

    if method.noise != "independent":
        raise err(
            "individual_epsilon",
            f"needs a private method with independent noise; got method {method.name}",
        )
    try:
        individual.check(cfg["sampling"], cfg["neighbouring"])
    except DPLabError as why:
        raise err("individual_epsilon", why.message) from None
    if cfg["individual_budget"] is not None:
        try:
            individual.filter_budget(
                cfg["individual_budget"], cfg["individual_order"], cfg["delta"]
            )
        except DPLabError as why:
            raise err(why.key, why.message) from None


def _check_method_keys(cfg: dict, method, err) -> None:
    """No key or accountant that belongs to another method (its ``keys``, its fixed
    ``accountants``), and only the method's own accountants where it names them."""
    if method.accountants and cfg["accountant"] not in method.accountants:
        raise err(
            "accountant",
            f"method {method.name} is accounted by {' or '.join(map(repr, method.accountants))} "
            f"only ({method.noise} noise); got {cfg['accountant']!r}",
        )
    for other in METHODS.values():
        if other is method:
            continue
        for key in other.keys:
            if cfg.get(key) is not None and key not in method.keys:
                raise err(key, f"only applies to method {other.name}")
        if other.accountants and cfg["accountant"] in other.accountants:
            raise err(
                "accountant",
                f"'{cfg['accountant']}' accounts method {other.name} only ({other.noise} noise)",
            )


def _resolve_optimizer(cfg: dict, err) -> None:
    """Fill the chosen optimizer's and schedule's keys with their defaults in ``cfg`` (a run
    that names neither stays as written: plain SGD); refuse a key the choice does not read."""
    choices = (
        ("optimizer", optimizers.OPTIMIZER_KEYS, optimizers.SGD),
        ("lr_schedule", optimizers.SCHEDULE_KEYS, optimizers.CONSTANT),
    )
    for choice_key, table, default in choices:
        choice = cfg.get(choice_key) or default
        reads = table[choice]
        for other in sorted({k for keys in table.values() for k in keys} - set(reads)):
            if cfg.get(other) is not None:
                users = " or ".join(name for name, keys in table.items() if other in keys)
                raise err(other, f"only applies to {choice_key} {users}; got {choice_key} {choice}")
        if cfg.get(choice_key) is None:
            continue
        for key, value in reads.items():
            if cfg.get(key) is None:
                if value is None:
                    raise err(key, f"is required for {choice_key} {choice}")
                cfg[key] = value
    if cfg.get("lr_schedule") == "warmup_cosine" and not 0 < cfg["warmup_steps"] < cfg["steps"]:
        raise err(
            "warmup_steps",
            f"must be in 1..steps − 1 = {cfg['steps'] - 1}; got {cfg['warmup_steps']}",
        )


def _check_model(cfg: dict, err) -> None:
    """A model file imports, defines its class and takes ``model_args``
    (:func:`dplab.training.model_file.arguments`; the data's shape is checked at planning,
    :func:`dplab.training.preflight.check_run`); ``model_args`` only with a model file."""
    if not model_file.names_file(cfg["model"]):
        if cfg.get("model_args") is not None:
            raise err(
                "model_args",
                f"only applies to a model file (model: FILE.py:Class); got model {cfg['model']}",
            )
        return
    try:
        model_file.arguments(cfg["model"], cfg.get("model_args"), None, None)
    except DPLabError as bad:
        raise err(bad.key, bad.message) from None


def resolve_run(raw: dict, where: str = "") -> dict:
    """Validate ``raw`` against the run schema and fill every default
    (method-dependent ones too)."""
    cfg = validate(raw, load_schema("run"), where)

    def err(key: str, msg: str) -> DPLabError:
        return DPLabError(f"{where}.{key}" if where else key, msg)

    if cfg.get("phases"):  # a run in phases: T is the phases' (dplab.training.phased)
        cfg["steps"] = sum(phase["steps"] for phase in cfg["phases"])
        if cfg["individual_epsilon"]:
            raise err("individual_epsilon", "is per run of one setting; a run in phases has none")

    try:
        method = get(cfg["method"])
    except DPLabError as bad:
        raise err(bad.key, bad.message) from None
    if cfg["sampling"] is None:
        cfg["sampling"] = str(method.samplings[0])  # the config's name, as a run file holds it
    elif cfg["sampling"] not in method.samplings:
        raise err(
            "sampling",
            f"method {method.name} allows {', '.join(method.samplings)}; got {cfg['sampling']!r}",
        )
    if cfg["normalize"] is None:
        cfg["normalize"] = method.normalize
    if cfg["reshuffle"] and cfg["sampling"] != Sampling.SHUFFLE:
        raise err("reshuffle", "only applies to sampling: shuffle")
    if cfg["model"] != "logreg" and cfg["l2"] > 0:
        raise err(
            "l2",
            "the L2 penalty is defined for model logreg only (it makes that loss strongly convex)",
        )
    _check_model(cfg, err)
    _resolve_optimizer(cfg, err)

    if method.projection == "required" and cfg["diameter"] is None:
        raise err(
            "diameter",
            f"is required for method {method.name} (projection onto a ball of diameter D)",
        )
    if method.projection == "none" and cfg["diameter"] is not None:
        raise err("diameter", f"method {method.name} has no projection; remove the key")
    if method.regularized:
        if cfg["regularization"] is None or cfg["regularization"] <= 0:
            raise err("regularization", f"method {method.name} needs λ in (0, 1) (001 eq. 17)")
    elif cfg["regularization"] is not None:
        users = ", ".join(m.name for m in METHODS.values() if m.regularized)
        raise err("regularization", f"only applies to method {users}; got method {method.name}")

    if method.private:
        if cfg["clip"] is None:
            cfg["clip"] = 1.0
        given = [
            k for k in ("noise_multiplier", "target_epsilon", "target_tpr") if cfg[k] is not None
        ]
        if len(given) != 1 and not (cfg.get("phases") and not given):  # phases may give each σ
            raise err(
                "noise_multiplier",
                f"method {method.name} needs exactly one of noise_multiplier, target_epsilon, "
                f"target_tpr (with target_fpr)",
            )
        if cfg["target_tpr"] is not None or cfg["target_fpr"] is not None:
            _check_risk_target(cfg, method, err)
        if cfg["accountant"] is None:
            cfg["accountant"] = method.default_accountant(cfg["sampling"], cfg["neighbouring"])
    else:
        for key in ("noise_multiplier", "target_epsilon", "target_tpr", "target_fpr", "accountant"):
            if cfg[key] is not None:
                raise err(
                    key, f"the non-private method {method.name} takes no noise and no accountant"
                )
    if cfg["individual_budget"] is None and cfg["individual_order"] is not None:
        raise err(
            "individual_order",
            "is the order of the Rényi filter: it applies only with individual_budget "
            "(and individual_epsilon: true)",
        )
    if cfg["individual_budget"] is not None and cfg["individual_order"] is None:
        cfg["individual_order"] = FILTER_ORDER
    if cfg["individual_epsilon"]:
        _check_individual(cfg, method, err)
    elif cfg["individual_budget"] is not None:
        raise err("individual_budget", "the Rényi filter needs individual_epsilon: true")
    check_accountants(cfg, err)
    _check_method_keys(cfg, method, err)
    cfg.update(method.resolve(RunSettings.of(cfg), err))
    if cfg["sampling"] == Sampling.FULL_BATCH:
        cfg["batch_size"] = None  # b = n, set from the data
    return cfg


def phase_runs(cfg: dict, sigmas: list[float] | None = None) -> list[dict]:
    """The resolved run of each phase of a run in phases (``phases``, :mod:`dplab.training.phased`):
    the run's keys with the phase's, seed + i (fresh batches and noise), no ε of its own
    (``accountants: []``), σ from ``sigmas`` where given (a calibration)."""
    runs = []
    for i, entry in enumerate(cfg["phases"]):
        run = {k: v for k, v in cfg.items() if k != "phases"}
        run.update(entry, seed=cfg["seed"] + i, accountants=[], target_epsilon=None)
        if sigmas is not None:
            run["noise_multiplier"] = sigmas[i]
        if run["noise_multiplier"] is None:
            raise DPLabError(
                f"phases[{i}].noise_multiplier",
                "is required (with target_epsilon: the phases' relative σ, scaled by one factor)",
            )
        runs.append(run)
    return runs
