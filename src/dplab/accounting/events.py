"""A run's privacy as a composition of events, as dp_accounting models it (docs/architecture.md).

The events of ``dp_accounting.dp_event`` are used as they are: ``GaussianDpEvent`` (one release,
noise multiplier σ = std / sensitivity), ``PoissonSampledDpEvent``,
``SampledWithoutReplacementDpEvent``, ``SelfComposedDpEvent`` (T steps), ``ComposedDpEvent``
(phases), ``RepeatAndSelectDpEvent`` (private selection).  This module adds the events it has
none for, as small frozen dataclasses subclassing ``DpEvent``:

- :class:`ShuffledDpEvent`, :class:`BallsInBinsDpEvent`: T steps of an epoch sampler (the
  batches of one epoch are disjoint, so its steps are no self-composition of one sampled step);
- :class:`HiddenStateDpEvent`: only the last iterate of a noisy-gradient run is released, with
  the update's constants (clip, η, projection, weight decay) and the loss's (λ, β, L) that the
  hidden-state analyses assume;
- :class:`MatrixFactorizationDpEvent`: the matrix mechanism C·G + Z (strategy, participation,
  sampler), accounted by ``mf``.

The neighbouring relation is not part of an event (dp_accounting gives it to the accountant):
``Accountant.supports(event, neighbouring)`` and ``Accountant.epsilon(event, δ, neighbouring)``
take it.  Noise multipliers are in the project's unit (std / C on the clipped sum, docs/units.md),
which is dp_accounting's for add_remove and what its PLD expects for replace_one.

:func:`run_event` builds a run's event from its :class:`Setting`; :func:`view` is the inverse, the
Setting an accountant of one homogeneous (σ, q, T) reads (a composition of unequal phases has none).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from dp_accounting import dp_event

from dplab.accounting.setting import Setting
from dplab.errors import DPLabError
from dplab.schemes import Neighbouring, Sampling


@dataclass(frozen=True)
class ShuffledDpEvent(dp_event.DpEvent):
    """``steps`` steps of ``event`` over epochs of the data in a random order cut into batches of
    ``batch_size`` (000 Alg. 2): one fixed order cycled, or a new one each epoch (``reshuffle``)."""

    dataset_size: int
    batch_size: int
    steps: int
    event: dp_event.DpEvent
    reshuffle: bool = False


@dataclass(frozen=True)
class BallsInBinsDpEvent(dp_event.DpEvent):
    """``steps`` steps of ``event`` over epochs whose batches are bins: each record thrown into one
    of n/b bins uniformly and independently each epoch (Chua et al. 2025, balls-in-bins)."""

    dataset_size: int
    batch_size: int
    steps: int
    event: dp_event.DpEvent


#: the update's and the loss's constants a hidden-state analysis reads (:class:`HiddenStateDpEvent`)
HIDDEN_STATE = (
    "clip",
    "lr",
    "diameter",
    "regularization",
    "strong_convexity",
    "smoothness",
    "lipschitz",
    "dimension",
    "dataset_size",
    "batch_size",
)


@dataclass(frozen=True)
class HiddenStateDpEvent(dp_event.DpEvent):
    """Only the last iterate of the noisy-gradient run ``event`` is released (001, 002, 003): the
    step w ← Π((1 − λ)w − η(g + Z)/b) with clip C, learning rate η, projection onto a ball of
    diameter D (None: none) and weight decay λ (None: none), on a loss whose constants are given
    (strongly convex, β-smooth, L-Lipschitz; None: not guaranteed), in dimension d, and, where the
    sampler's event has only a rate, the divisor b and the dataset size n.  A trajectory accountant
    bounds it by ``event`` (post-processing); a hidden-state accountant needs the constants its
    theorem assumes (its ``requires``)."""

    event: dp_event.DpEvent
    clip: float | None = None
    lr: float | None = None
    diameter: float | None = None
    regularization: float | None = None
    strong_convexity: float | None = None
    smoothness: float | None = None
    lipschitz: float | None = None
    dimension: int | None = None
    dataset_size: int | None = None
    batch_size: int | None = None


@dataclass(frozen=True)
class MatrixFactorizationDpEvent(dp_event.DpEvent):
    """The matrix mechanism A·G + B·Z = B(C·G + Z) over ``steps`` steps (004 §4.3): ``strategy``
    names C; a record participates at most ``participations`` times, ``separation`` steps apart; Z
    has std σ·C (``noise_multiplier``).  ``sampler``: ``min_separation`` (fixed partitions, no
    amplification; ``scale`` = sens(C; k, b)·Δ₁) or ``cyclic_poisson`` (each partition's members
    kept with probability ``sampling_rate``; ``scale`` = ζ, C's largest column norm, Choquette-Choo
    et al. 2023, "(Amplified) Banded Matrix Factorization", Thm 4).  Δ₁ folds the relation into
    ``scale``, so the event records the ``neighbouring`` relation it was built for."""

    strategy: str
    noise_multiplier: float
    steps: int
    participations: int
    separation: int
    sampler: str
    scale: float
    sampling_rate: float | None = None
    neighbouring: str = Neighbouring.ADD_REMOVE


def run_event(setting: Setting) -> dp_event.DpEvent:
    """The event of a run with one homogeneous ``setting`` (its relation is
    ``setting.neighbouring``): T steps of the Gaussian step σ under the run's sampler,
    wrapped in :class:`HiddenStateDpEvent` when the setting gives any constant a
    hidden-state analysis reads."""
    steps = setting.steps if setting.steps is not None else 1
    step = dp_event.GaussianDpEvent(setting.noise_multiplier)
    n, b = setting.dataset_size, setting.batch_size
    if setting.sampling == Sampling.SHUFFLE:
        event = ShuffledDpEvent(n, b, steps, step, bool(setting.reshuffle))
    elif setting.sampling == Sampling.BALLS_IN_BINS:
        event = BallsInBinsDpEvent(n, b, steps, step)
    else:
        if setting.sampling == Sampling.POISSON:
            step = dp_event.PoissonSampledDpEvent(setting.sampling_rate, step)
        elif setting.sampling == Sampling.WITHOUT_REPLACEMENT:
            step = dp_event.SampledWithoutReplacementDpEvent(n, b, step)
        elif setting.sampling != Sampling.FULL_BATCH:  # a scheme no event models: never full batch
            raise _none(f"no event models {setting.sampling} sampling", "sampling")
        event = step if setting.steps is None else dp_event.SelfComposedDpEvent(step, steps)
    carried = _fields(event)
    hidden = {
        key: getattr(setting, key)
        for key in HIDDEN_STATE
        if getattr(setting, key) is not None and key not in carried
    }
    return HiddenStateDpEvent(event, **hidden) if hidden else event


def view(event: dp_event.DpEvent, neighbouring: str = Neighbouring.ADD_REMOVE) -> Setting:
    """The :class:`Setting` of one homogeneous (σ, q, T) that ``event`` is (the inverse of
    :func:`run_event`); an :class:`AssumptionError` (key ``event``) for an event that has none: a
    composition of unequal events, a matrix-factorization event, an event this
    project does not model."""
    return Setting(neighbouring=neighbouring, **_fields(event))


def _fields(event: dp_event.DpEvent) -> dict:
    if isinstance(event, HiddenStateDpEvent):
        constants = {f.name: getattr(event, f.name) for f in fields(event) if f.name != "event"}
        return {**_fields(event.event), **{k: v for k, v in constants.items() if v is not None}}
    if isinstance(event, dp_event.GaussianDpEvent):
        return {
            "noise_multiplier": event.noise_multiplier,
            "sensitivity": 1.0,
            "sampling": Sampling.FULL_BATCH,
            "steps": 1,
        }
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return {
            **_gaussian(event.event),
            "sampling": Sampling.POISSON,
            "sampling_rate": event.sampling_probability,
        }
    if isinstance(event, dp_event.SampledWithoutReplacementDpEvent):
        return {
            **_gaussian(event.event),
            "sampling": Sampling.WITHOUT_REPLACEMENT,
            "dataset_size": event.source_dataset_size,
            "batch_size": event.sample_size,
        }
    if isinstance(event, (ShuffledDpEvent, BallsInBinsDpEvent)):
        shuffle = isinstance(event, ShuffledDpEvent)
        return {
            **_gaussian(event.event),
            "sampling": Sampling.SHUFFLE if shuffle else Sampling.BALLS_IN_BINS,
            "dataset_size": event.dataset_size,
            "batch_size": event.batch_size,
            "steps": event.steps,
            **({"reshuffle": True} if shuffle and event.reshuffle else {}),
        }
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = _fields(event.event)
        return {**inner, "steps": inner["steps"] * event.count}
    if isinstance(event, dp_event.ComposedDpEvent):
        return _composed(event)
    if isinstance(event, dp_event.RepeatAndSelectDpEvent):
        raise _none(
            "a RepeatAndSelectDpEvent (releasing the best of K runs) is bounded from its runs' RDP "
            "curve (Papernot & Steinke 2022): rdp accounts it"
        )
    raise _none(
        f"{type(event).__name__} has no setting of one (σ, q, T) that the accountants here read"
    )


def _gaussian(event: dp_event.DpEvent) -> dict:
    if not isinstance(event, dp_event.GaussianDpEvent):
        raise _none(f"a sampled step must be a GaussianDpEvent; got {type(event).__name__}")
    return {"noise_multiplier": event.noise_multiplier, "steps": 1}


def _composed(event: dp_event.ComposedDpEvent) -> dict:
    """A composition of events with one setting apart from T: that setting, the T summed (one
    event: its own setting, whatever its sampler)."""
    parts = [_fields(e) for e in event.events]
    if not parts:
        raise _none("an empty composition")
    if len(parts) == 1:
        return parts[0]
    rest = [{k: v for k, v in p.items() if k != "steps"} for p in parts]
    if Sampling(rest[0]["sampling"]).epochs:
        raise _none(
            f"{len(parts)} phases under {rest[0]['sampling']} (an epoch sampler: each phase "
            "starts its own epochs) are not one run of the summed steps, and no accountant here "
            "composes them: use one phase",
            "phases",
        )
    if any(r != rest[0] for r in rest[1:]):
        raise _none(
            "a composition of unequal phases has no single (σ, q, T): "
            "rdp and pld compose heterogeneous phases, nested ones too",
            "phases",
        )
    return {**rest[0], "steps": sum(p["steps"] for p in parts)}


def phase_events(event: dp_event.DpEvent) -> list[dp_event.DpEvent]:
    """The phases of a composition with nested compositions flattened and ``NoOpDpEvent`` parts
    dropped; any other event is one phase.  The accountants that compose phases (rdp, pld)
    compose commutatively, so ``SelfComposed(Composed([A, B]), k)`` is the phases
    ``SelfComposed(A, k)``, ``SelfComposed(B, k)``."""
    if isinstance(event, dp_event.ComposedDpEvent):
        return [p for e in event.events for p in phase_events(e)]
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = phase_events(event.event)
        if inner != [event.event]:
            return [dp_event.SelfComposedDpEvent(p, event.count) for p in inner]
    if isinstance(event, dp_event.NoOpDpEvent):
        return []
    return [event]


def selects(event: dp_event.DpEvent) -> bool:
    """Whether ``event`` holds a ``RepeatAndSelectDpEvent`` (private selection) anywhere."""
    if isinstance(event, dp_event.RepeatAndSelectDpEvent):
        return True
    if isinstance(event, dp_event.ComposedDpEvent):
        return any(selects(e) for e in event.events)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return selects(event.event)
    return False


def _none(message: str, key: str = "event") -> DPLabError:
    return DPLabError(key, message)


def phases(settings: list[Setting]) -> dp_event.DpEvent:
    """The event of a run in phases: the composition of each phase's :func:`run_event`."""
    return dp_event.ComposedDpEvent([run_event(s) for s in settings])
