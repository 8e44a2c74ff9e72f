"""Which accountants a run may claim: the one place that decides (docs/accountants.md).

An accountant's ε is a guarantee for a run only if

1. the run's :class:`~dplab.accounting.setting.Setting` satisfies the accountant's own
   assumptions (``Accountant.check``: sampling, neighbouring, parameter ranges, loss constants,
   reshuffling), and
2. the accountant's release model describes the update the engine performed — facts the
   Setting cannot express, recorded as the run's :class:`Update` (summary.json ``update``,
   read back with the setting by :func:`from_summary`).

Only an upper bound (``Accountant.bound``) is a claim.  A lower bound (the true ε is at least
this) or a comparison (the claim the run would make under Poisson sampling, which it does not
earn) that passes both tests is a reference value: reported beside the claims under its own key
(:data:`KEYS`: summary.json ``epsilon_lower``/``epsilon_comparison``, metrics.csv
``epsilon_lower_<name>``/``epsilon_comparison_<name>``), never as the run's ε and never used to
calibrate σ (docs/sampling.md).  :func:`exclusion` decides whether a run reports an
accountant's ε at all, :func:`refusal` whether it may claim it.

Training (:func:`dplab.training.privacy.plan`), sweeps (:func:`dplab.accounting.sweep.sweep`)
and the figure tables that compute or read a run's ε all ask these, so a sweep or a
figure made from a summary.json reproduces the run's own exclusions.  A new training-side
condition (a new sampler, a new noise source) is one more rule in :func:`_update_refusal`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

from dplab.accounting.base import BOUND_WORDS, BOUNDS
from dplab.accounting.registry import ACCOUNTANTS, get, names
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError
from dplab.schemes import Sampling

NOISES = ("independent", "correlated", "none")
#: :attr:`Update.optimizer` of plain SGD at a constant learning rate
PLAIN_SGD = "sgd"
NORMALIZES = ("expected", "realized")

#: where a run reports an ε of each bound: its claims (upper bounds) and,
#: beside them, reference values
KEYS = {kind: "epsilon" if kind == "upper" else f"epsilon_{kind}" for kind in BOUNDS}
#: the bounds of reference values, reported beside the claims
REFERENCE_BOUNDS = tuple(kind for kind in BOUNDS if kind != "upper")

NON_PRIVATE = "non-private run: no noise, no privacy claim"
#: why an accountant of each ``Accountant.noise`` does not account a run of the other noise
OTHER_NOISE = {
    "independent": (
        "correlated noise: the DP-SGD accountants assume independent Gaussian noise in every step; "
        "dp_mf is accounted by the matrix-factorization accountant 'mf' (004 §4.3)"
    ),
    "correlated": (
        "the matrix-factorization accountant covers correlated-noise runs (method dp_mf) only"
    ),
}


@dataclass(frozen=True)
class Update:
    """What the engine did in each step that the Setting does not say.  The defaults are the
    canonical mechanism of docs/units.md (what ``dplab epsilon`` assumes): independent
    N(0, σ²C²) on the clipped sum, divided by the fixed b."""

    noise: str = "independent"  # independent per step | correlated (dp_mf) | none (non-private)
    normalize: str = (
        "expected"  # clipped sum ÷ fixed b (expected) or ÷ realized |B| (realized, 001 eq. 12)
    )
    #: what the noisy gradient updates: "sgd" (plain SGD, constant η), else
    #: the optimizer and schedule
    optimizer: str = PLAIN_SGD
    #: whether a Rényi filter (``individual_budget``) dropped records from steps by their history
    filtered: bool = False

    def __post_init__(self) -> None:
        if self.noise not in NOISES:
            raise DPLabError(
                "update.noise", f"must be one of {', '.join(NOISES)}; got {self.noise!r}"
            )
        if self.normalize not in NORMALIZES:
            raise DPLabError(
                "update.normalize",
                f"must be one of {', '.join(NORMALIZES)}; got {self.normalize!r}",
            )

    def as_dict(self) -> dict:
        """The fields, ``optimizer`` only where it is not plain SGD and ``filtered`` only where
        set (summary.json's ``update``)."""
        out = asdict(self)
        if self.optimizer == PLAIN_SGD:
            del out["optimizer"]
        if not self.filtered:
            del out["filtered"]
        return out


def analysed_update(release: str) -> Update:
    """The update that accountants of a ``release`` kind analyse, for a setting with no run
    behind it: composition bounds the noisy sum divided by the fixed b, hidden-state bounds the
    realized mean (001 eq. 12); the two agree unless the sampling is Poisson."""
    return Update(normalize="realized" if release == "last_iterate" else "expected")


def from_summary(summary) -> tuple[Setting | None, Update]:
    """The setting (None if the run records none) and the update recorded in a run's summary.json
    (a :class:`dplab.training.summary.RunSummary`: its ``setting`` and ``update``)."""
    try:
        update = Update(**summary.update)
    except TypeError:
        raise DPLabError(
            "summary.update",
            f"must hold {', '.join(f.name for f in dataclasses.fields(Update))}; "
            f"got {summary.update!r}",
        ) from None
    if not summary.setting:
        return None, update
    return _setting(summary.setting), update


def phases_of(summary) -> list[Setting] | None:
    """Each phase's setting of a run in phases (summary.json's ``phases``), None for another run."""
    phases = summary.details.get("phases")
    return None if phases is None else [_setting(phase) for phase in phases]


def _setting(data: dict) -> Setting:
    fields = {f.name for f in dataclasses.fields(Setting)}
    return Setting(**{k: v for k, v in data.items() if k in fields})


def bound(name: str) -> str:
    """The ``bound`` of accountant ``name`` (:data:`dplab.accounting.base.BOUNDS`)."""
    return get(name).bound


def key(name: str) -> str:
    """The summary.json dict a run reports ``name``'s ε in (:data:`KEYS`)."""
    return KEYS[bound(name)]


def column(name: str) -> str:
    """The metrics.csv column of ``name``'s ε(T): ``epsilon_<name>`` for a claim,
    ``epsilon_lower_<name>`` or ``epsilon_comparison_<name>`` beside it."""
    return f"{key(name)}_{name}"


def labelled(name: str, epsilon: float) -> str:
    """How a reference value is printed: ``shuffle_lower=1.539 is a lower bound on ε``."""
    return f"{name}={epsilon:.4g} is {BOUND_WORDS[bound(name)]}"


def refusal(
    name: str, setting: Setting | None, update: Update = Update(), any_sigma: bool = False
) -> str | None:
    """Why a run with ``setting`` and ``update`` may not claim accountant ``name`` (None: it may):
    :func:`exclusion`, and only an upper bound is a claim.  ``any_sigma``: σ is still to be
    calibrated, so the accountant's range of σ is no objection (the σ search keeps to it)."""
    return _claimable(name, exclusion(name, setting, update, any_sigma))


def phases_refusal(name: str, settings: list[Setting], update: Update = Update()) -> str | None:
    """:func:`refusal` of a run in phases: :func:`phases_exclusion`, and only an upper bound is a
    claim."""
    return _claimable(name, phases_exclusion(name, settings, update))


def _claimable(name: str, why: str | None) -> str | None:
    if why is None and bound(name) != "upper":
        return (
            f"{name} gives {BOUND_WORDS[bound(name)]}, not a guarantee: a run claims upper bounds"
            " only (docs/sampling.md)"
        )
    return why


def phases_exclusion(name: str, settings: list[Setting], update: Update = Update()) -> str | None:
    """Why a run in phases (one :class:`Setting` each, one relation) reports no ε from ``name``:
    the first phase's :func:`exclusion`, else the accountant's refusal of the phases' composed
    event (:meth:`~dplab.accounting.base.Accountant.supports`)."""
    from dplab.accounting import events  # dp_accounting's events: imported where used

    why = next(filter(None, (exclusion(name, s, update) for s in settings)), None)
    return why or get(name).supports(events.phases(settings), settings[0].neighbouring)


def exclusion(
    name: str, setting: Setting | None, update: Update = Update(), any_sigma: bool = False
) -> str | None:
    """Why a run with ``setting`` and ``update`` reports no ε from accountant ``name`` (None: it
    reports one: as its claim if ``name`` is an upper bound, else beside the claims under
    :func:`key`); ``any_sigma``: as in :func:`refusal`.

    An unknown name is a :class:`DPLabError` listing the valid ones.  ``setting`` is None for
    runs that record none (non-private, dp_mf: its MF event is checked by ``mf`` when planned).
    """
    accountant = get(name)  # unknown name: DPLabError naming the valid ones
    if update.noise == "none":
        return NON_PRIVATE
    if update.noise != accountant.noise:
        return OTHER_NOISE[accountant.noise]
    if update.noise == "correlated":
        return None
    if setting is None:
        return "the run records no privacy setting"
    try:  # the accountant's own assumptions first: they are what a reader looks up
        accountant.check(setting)
    except DPLabError as err:  # AssumptionError, or a range check of the Setting
        if not (any_sigma and err.key == "noise_multiplier"):
            return str(err)
    return _update_refusal(setting, update, accountant.release)


def _update_refusal(setting: Setting, update: Update, release: str) -> str | None:
    """Why an accountant of the given ``release`` kind does not describe this update, for
    reasons the Setting cannot express (None: no objection)."""
    if update.optimizer != PLAIN_SGD and release == "last_iterate":
        return (
            "hidden-state bounds analyse the plain SGD step at a constant learning rate "
            f"(001 eq. 12, 17; 002 Alg. 1); the run updates with {update.optimizer}"
        )
    if update.filtered and release == "last_iterate":
        return (
            "the Rényi filter (individual_budget) drops records from the steps by their history, so"
            " the steps descend no one fixed loss; hidden-state bounds analyse one loss with the"
            " same constants (λ, β, L) at every step (001 eq. 12, 17; 002 Alg. 1, Cor. 1)"
        )
    # |B| varies with Poisson and balls-in-bins batches, and wherever the filter drops records;
    # other batches have |B| = b, where the two normalizations agree
    varies = setting.sampling in (Sampling.POISSON, Sampling.BALLS_IN_BINS) or update.filtered
    if update.normalize == "realized" and release == "trajectory" and varies:
        why = (
            "the Rényi filter (individual_budget) drops records from the batches"
            if update.filtered
            else f"{setting.sampling} batches vary in size"
        )
        return (
            f"the update divides the clipped sum by the realized batch size |B| (001 eq. 12) and"
            f" {why}: one record moves every other record's term through |B|, and a small |B|"
            " scales the sum up against the noise; composition bounds assume the noisy sum"
            " divided by the fixed b (normalize: expected)"
        )
    if (
        update.normalize == "expected"
        and release == "last_iterate"
        and setting.sampling == Sampling.POISSON
    ):
        return (
            "the update divides the clipped sum by the expected b, so a step can exceed ηC when |B|"
            " > b; hidden-state bounds under Poisson sampling (001 eq. 12, Lemma 2) need the"
            " realized mean"
        )
    return None


def defaults() -> list[str]:
    """The accountants a run that names none reports: every registered one of independent noise
    (a dp_mf run names its own, ``mf``)."""
    return [
        name
        for name in names()
        if ACCOUNTANTS.meta.get(name, {}).get("noise", "independent") == "independent"
    ]


def check_accountants(run: dict, err) -> None:
    """A run's ``accountant`` and every name in its ``accountants`` must be an accountant
    (``dplab accountants``), and the ``accountant`` that calibrates σ from
    ``target_epsilon`` an upper bound; ``err(key, message)`` makes the DPLabError to raise."""
    valid = sorted(names())
    for field, given in (
        ("accountants", run.get("accountants") or []),
        ("accountant", [run.get("accountant")]),
    ):
        for name in given:
            if name is not None and name not in valid:
                raise err(field, f"unknown accountant {name!r}; valid: {', '.join(valid)}")
    name = run.get("accountant")
    if run.get("target_epsilon") is not None and name is not None and bound(name) != "upper":
        upper = ", ".join(n for n in valid if bound(n) == "upper")
        raise err(
            "accountant",
            f"{name} gives {BOUND_WORDS[bound(name)]}, not a guarantee: σ is calibrated "
            f"with an upper bound only; one of {upper}",
        )
