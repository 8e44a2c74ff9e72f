"""``mf``: (ε, δ) of the matrix-factorization mechanism's event (004 §4.3; the event and the
samplers it is valid for: :mod:`dplab.mf.accounting`).

A :class:`~dplab.accounting.events.MatrixFactorizationDpEvent` is one of two dp_accounting events
(:meth:`MatrixFactorizationAccountant.dp_event`):

- ``min_separation``: one ``GaussianDpEvent`` of noise multiplier σ / (sens(C; k, b)·Δ₁),
  accounted exactly (the Gaussian profile, 000 §II; Balle & Wang 2018, Thm 8);
- ``cyclic_poisson``: k = ⌈T/b⌉ compositions of the Poisson-sampled Gaussian of rate p and noise
  multiplier σ/ζ (Choquette-Choo et al. 2023, "(Amplified) Banded Matrix Factorization", Thm 4),
  accounted by ``pld`` (and its limits, refused as ``mf``'s); at p = 1 exactly.

A DP-SGD :class:`Setting` (independent noise) is refused: ``mf`` accounts correlated-noise runs.
"""

from __future__ import annotations

import math
from dataclasses import replace

from dp_accounting import dp_event

from dplab.accounting.base import (
    DELTA_FLOOR,
    EPSILON_MAX,
    SIGMA_MAX,
    SIGMA_MIN,
    Accountant,
    ResolutionError,
)
from dplab.accounting.events import MatrixFactorizationDpEvent
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon, sigma_analytic
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting, check_delta, check_epsilon
from dplab.schemes import Neighbouring, Sampling

#: the samplers an MF event may name, and the relations each is proved for
SAMPLERS = {
    Sampling.MIN_SEPARATION: (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE),
    Sampling.CYCLIC_POISSON: (Neighbouring.ADD_REMOVE,),
}


class MatrixFactorizationAccountant(Accountant):
    """The MF mechanism's ε from its event (module docstring)."""

    name = "mf"
    source = "004 §4.3 (matrix mechanism; Choquette-Choo et al. 2023, amplified banded MF, Thm 4)"
    noise = "correlated"
    samplings = tuple(SAMPLERS)
    samplers = SAMPLERS
    neighbourings = (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE)
    requires = ()
    reads = ()
    assumptions = (
        "a MatrixFactorizationDpEvent: C lower-triangular; min_separation: (k, b)-participation, "
        "sensitivity sens(C; k, b)·Δ₁; cyclic_poisson: C with at most b bands, add_remove",
    )

    def check(self, setting: Setting, *, steps_needed: bool = True) -> None:
        raise self.fail(
            "sampling",
            "mf accounts the matrix mechanism (method dp_mf: correlated noise over an MF "
            "sampler), given as its MatrixFactorizationDpEvent; a DP-SGD setting "
            f"(independent noise, sampling {setting.sampling!r}) is not one",
        )

    def _epsilon_curve(self, setting, delta, steps):
        self.check(setting)

    def parts(self, event, neighbouring):
        """No setting: an MF event is accounted as its own :meth:`dp_event`."""
        self.dp_event(event, neighbouring)
        return []

    def dp_event(
        self, event: dp_event.DpEvent, neighbouring: str = Neighbouring.ADD_REMOVE
    ) -> dp_event.DpEvent:
        """The dp_accounting event ``event`` is (module docstring); refused unless an MF event of a
        known sampler under its own relation (cyclic_poisson: add_remove)."""
        if not isinstance(event, MatrixFactorizationDpEvent):
            raise self.fail(
                "event", f"mf accounts a MatrixFactorizationDpEvent; got {type(event).__name__}"
            )
        if event.sampler not in SAMPLERS:
            raise self.fail(
                "sampler", f"must be one of {', '.join(SAMPLERS)}; got {event.sampler!r}"
            )
        if event.neighbouring != neighbouring:
            raise self.fail(
                "neighbouring",
                f"the event's Δ₁ is for {event.neighbouring}; asked for {neighbouring}",
            )
        gaussian = dp_event.GaussianDpEvent(event.noise_multiplier / event.scale)
        if event.sampler == Sampling.MIN_SEPARATION:
            return gaussian
        if neighbouring != Neighbouring.ADD_REMOVE:
            raise self.fail(
                "neighbouring",
                f"amplified banded MF is proved for add_remove only; got {neighbouring!r}",
            )
        rate = event.sampling_rate
        step = gaussian if rate == 1 else dp_event.PoissonSampledDpEvent(rate, gaussian)
        return dp_event.SelfComposedDpEvent(step, event.participations)

    def event_epsilon(self, event, delta, neighbouring=Neighbouring.ADD_REMOVE) -> float:
        """ε at δ: exact for a Gaussian event (k Gaussians of μ compose to one of μ√k, Dong, Roth &
        Su 2022, Cor. 3.3; :func:`gaussian_epsilon`), ``pld`` for a Poisson-sampled one."""
        delta = check_delta(delta)
        sigma, rate, count = _parts(self.dp_event(event, neighbouring))
        if rate is None:
            return float(gaussian_epsilon(delta, math.sqrt(count) / sigma))
        return self._as_mf(lambda: get("pld").epsilon(_poisson(sigma, rate, count), delta))

    def event_delta(
        self, event, epsilon: float, neighbouring: str = Neighbouring.ADD_REMOVE
    ) -> float:
        """δ at ε (as :meth:`event_epsilon`), never below :data:`DELTA_FLOOR`."""
        epsilon = check_epsilon(epsilon)
        sigma, rate, count = _parts(self.dp_event(event, neighbouring))
        if rate is None:
            return max(float(gaussian_delta(epsilon, math.sqrt(count) / sigma)), DELTA_FLOOR)
        return self._as_mf(lambda: get("pld").delta(_poisson(sigma, rate, count), epsilon))

    def event_sigma(
        self, event, epsilon: float, delta: float, neighbouring: str = Neighbouring.ADD_REMOVE
    ) -> float:
        """The smallest σ (the event's own ignored) with ε ≤ ``epsilon`` at ``delta``: the event's
        noise multiplier is σ/s; a Gaussian event needs √k·σ₁, σ₁ the exact one-release calibration
        (:func:`sigma_analytic`); a Poisson-sampled one what ``pld`` calibrates (SIGMA_RTOL)."""
        epsilon, delta = check_epsilon(epsilon), check_delta(delta)
        if not epsilon <= EPSILON_MAX:
            raise self.too_far(
                "epsilon", f"must be <= {EPSILON_MAX:g} (EPSILON_MAX); got {epsilon:g}"
            )
        unit, rate, count = _parts(
            self.dp_event(_with_sigma(event, 1.0), neighbouring)
        )  # unit = 1/s
        if rate is None:
            needed = math.sqrt(count) * sigma_analytic(epsilon, delta)
        else:
            needed = self._as_mf(
                lambda: get("pld").sigma(_poisson(1.0, rate, count), epsilon, delta)
            )
        sigma = needed / unit
        if not SIGMA_MIN <= sigma <= SIGMA_MAX:
            raise self.too_far(
                "epsilon",
                f"ε = {epsilon:g} at δ = {delta:g} needs σ = {sigma:.3g}, outside "
                f"[{SIGMA_MIN:g}, {SIGMA_MAX:g}], the range σ is calibrated in",
            )
        return sigma

    def _as_mf(self, call):
        """``call()``, a refusal of ``pld`` re-raised as one of ``mf``."""
        try:
            return call()
        except ResolutionError as err:
            raise ResolutionError(
                self.name, err.key, str(err).removesuffix(" (accountant 'pld')")
            ) from None


def _parts(event: dp_event.DpEvent) -> tuple[float, float | None, int]:
    """(noise multiplier of one Gaussian, Poisson rate or None, compositions) of an MF dp_event."""
    count = 1
    if isinstance(event, dp_event.SelfComposedDpEvent):
        event, count = event.event, event.count
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return event.event.noise_multiplier, event.sampling_probability, count
    return event.noise_multiplier, None, count


def _poisson(sigma: float, rate: float, count: int) -> Setting:
    """``count`` Poisson-sampled Gaussian steps (add/remove; replace-one is folded into Δ₁)."""
    return Setting(noise_multiplier=sigma, sampling_rate=rate, steps=count)


def _with_sigma(event: MatrixFactorizationDpEvent, sigma: float) -> MatrixFactorizationDpEvent:
    return (
        replace(event, noise_multiplier=sigma)
        if isinstance(event, MatrixFactorizationDpEvent)
        else event
    )
