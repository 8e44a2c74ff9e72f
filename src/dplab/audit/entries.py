"""What an ``audits`` entry declares and may ask, checked before any data are read (by the
config check and by ``dplab audit``): its threat model, its estimators, its size, each variant's
run.  The audit itself is :mod:`dplab.audit.membership`, the estimators'
bounds :mod:`dplab.audit.estimators`; this module imports none of their statistics or training (a
config check, and the figures that name the threat models and estimators, import no torch and no
scipy.stats for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dplab.errors import DPLabError
from dplab.registry import Registry
from dplab.schemes import Neighbouring, Sampling

if TYPE_CHECKING:
    from dplab.training.settings import RunSettings

#: threat model -> (canary kind, observations, default neighbouring relation)
THREAT_MODELS = {
    "white_box": ("gradient", ("trajectory",), Neighbouring.ADD_REMOVE),
    "last_iterate": ("gradient", ("last_iterate",), Neighbouring.REPLACE_ONE),
    "input_canary": ("input", ("last_iterate", "trajectory"), Neighbouring.REPLACE_ONE),
}


#: name -> its bound, in the order the audit lists them, with what it needs (:func:`applies`):
#: ``one_run``, the canaries of a single run (>= 2; its bound takes that run's scores and
#: membership bits; the others take the pooled scores of the members and of the non-members);
#: ``gaussian``, gdp's Gaussian extrapolation conservative (:func:`gdp_applies`);
#: ``independent``, a run's canaries independent (:func:`independent_canaries`); and its
#: ``marker`` in the figures (matplotlib's)
ESTIMATORS = Registry(
    "estimator",
    {
        "clopper_pearson": "dplab.audit.estimators:clopper_pearson_bound",
        "gdp": "dplab.audit.estimators:gdp_bound",
        "one_run": "dplab.audit.estimators:one_run_bound",
        "one_run_gdp": "dplab.audit.estimators:one_run_gdp_bound",
        "one_run_independent": "dplab.audit.estimators:one_run_independent_bound",
    },
    meta={
        "clopper_pearson": {
            "one_run": False,
            "gaussian": False,
            "independent": False,
            "marker": "s",
        },
        "gdp": {"one_run": False, "gaussian": True, "independent": False, "marker": "o"},
        "one_run": {"one_run": True, "gaussian": False, "independent": False, "marker": "^"},
        "one_run_gdp": {"one_run": True, "gaussian": True, "independent": False, "marker": "D"},
        "one_run_independent": {
            "one_run": True,
            "gaussian": True,
            "independent": True,
            "marker": "*",
        },
    },
)
#: the estimators that use the canaries of a single run
ONE_RUN = tuple(name for name in ESTIMATORS if ESTIMATORS.meta[name]["one_run"])


def canary_count(entry: dict) -> int:
    """The canaries of one run of ``entry``: its ``canaries`` (gradient canaries), else 1."""
    return entry["canaries"] if THREAT_MODELS[entry["threat_model"]][0] == "gradient" else 1


def independent_canaries(run: RunSettings) -> bool:
    """Whether the gradient canaries of one run give independent scores: each coordinate then moves
    by its own canary, its own noise and its own sampling draw only (Poisson or full batch, update
    ÷ b, no projection, no l2 term coupling it to the others' clip factors)."""
    return (
        run.sampling in (Sampling.POISSON, Sampling.FULL_BATCH)
        and run.normalize == "expected"
        and run.diameter is None
        and not run.l2
    )


def gdp_applies(run: RunSettings, kind: str, projections: int) -> bool:
    """Whether gdp's Gaussian-shape extrapolation is conservative for the audited pair
    (:mod:`dplab.audit.membership`): gradient canaries under full-batch noise that no projection
    moved, or under Poisson sampling with add/remove neighbours."""
    if kind != "gradient":
        return False
    if run.sampling == Sampling.FULL_BATCH:
        return projections == 0
    return run.sampling == Sampling.POISSON and run.neighbouring == Neighbouring.ADD_REMOVE


def applies(name: str, canaries: int, gaussian: bool, independent: bool) -> bool:
    """Whether estimator ``name`` bounds an audit of ``canaries`` canaries per run, whose pair
    gdp's extrapolation suits (``gaussian``) and whose canaries are ``independent``."""
    needs = ESTIMATORS.meta[name]
    return (
        (canaries >= 2 or not needs["one_run"])
        and (gaussian or not needs["gaussian"])
        and (independent or not needs["independent"])
    )


def check_entry(entry: dict) -> None:
    """Refuse an entry's threat model, its neighbouring relation where the threat model's canary
    cannot have it, and its size (:func:`check_size`), before any run is resolved."""
    threat = entry["threat_model"]
    if threat not in THREAT_MODELS:
        raise DPLabError(
            "threat_model", f"must be one of {', '.join(THREAT_MODELS)}; got {threat!r}"
        )
    if threat == "input_canary" and entry.get("neighbouring") == Neighbouring.ADD_REMOVE:
        raise DPLabError(
            "neighbouring",
            "input_canary trains on the canary or its mirror image in the same slot, a"
            " replace_one pair (the upper bounds would be add_remove's); set replace_one or"
            " leave it unset",
        )
    check_size(entry)


def check_estimators(entry: dict, runs: dict[str, RunSettings]) -> None:
    """Refuse a listed estimator that bounds no audit of some variant (``runs``: variant ->
    its resolved run; gdp as if no projection moved it): its rows would be missing."""
    listed = entry.get("estimators")
    if not listed:
        return
    kind = THREAT_MODELS[entry["threat_model"]][0]
    k = canary_count(entry)
    for variant, run in runs.items():
        gaussian = gdp_applies(run, kind, 0)
        independent = kind == "gradient" and independent_canaries(run)
        able = [name for name in ESTIMATORS if applies(name, k, gaussian, independent)]
        never = [name for name in listed if name not in able]
        if never:
            raise DPLabError(
                "estimators",
                f"{', '.join(never)} cannot apply to variant {variant} ({entry['threat_model']},"
                f" {k} canar{'y' if k == 1 else 'ies'} per run, {run.sampling} sampling,"
                f" {run.neighbouring}); those that can: {', '.join(able)} (unset: all of these)",
            )


#: the most training an audit may ask per variant, in record-steps: runs × largest T × dataset_size
#: (config/paper.yaml's largest: 16384 × 256 × 128 ≈ 5.4e8)
AUDIT_WORK_MAX = 10**10


def check_size(entry: dict) -> None:
    """Refuse an audit whose training per variant exceeds :data:`AUDIT_WORK_MAX` (before any data
    are read: the config check and ``dplab audit`` ask first)."""
    work = entry["runs"] * max(entry["steps"]) * entry["dataset_size"]
    if work > AUDIT_WORK_MAX:
        raise DPLabError(
            "runs",
            f"runs × largest step × dataset_size = {entry['runs']} × {max(entry['steps'])} ×"
            f" {entry['dataset_size']} = {work:.3g} record-steps per variant, above AUDIT_WORK_MAX"
            f" = {AUDIT_WORK_MAX:.0e} (days of training); lower one of them",
        )


def audit_key(entry: dict) -> str:
    """The config key of audit ``entry``, which its errors name: ``audits.<name>``."""
    return f"audits.{entry.get('name', '?')}"


def method_config(entry: dict, variant: str) -> RunSettings:
    """The resolved run of ``variant`` in audit ``entry`` (run schema and defaults); its
    method is the variant's ``method`` key, else the variant's name."""
    keys = {**entry["run"], **(entry["methods"][variant] or {})}
    method = keys.pop("method", variant)
    where = f"{audit_key(entry)}.methods.{variant}"
    from dplab.training.methods import METHODS  # the training stack: imported where used
    from dplab.training.resolve import resolve_run
    from dplab.training.settings import RunSettings

    # the methods the lockstep runner reproduces (i.i.d. Gaussian noise, per-example clipping)
    auditable = [name for name, m in METHODS.items() if m.noise == "independent"]
    if method not in auditable:
        raise DPLabError(
            f"{where}.method",
            f"must be one of {', '.join(auditable)} (the runner's methods); got {method!r}",
        )
    neighbouring = entry.get("neighbouring") or THREAT_MODELS[entry["threat_model"]][2]
    raw = {
        **keys,
        "method": method,
        "steps": max(entry["steps"]),
        "neighbouring": neighbouring,
        "accountants": None,
        "checkpoint_every": 0,
    }
    return RunSettings.of(resolve_run(raw, where=where))
