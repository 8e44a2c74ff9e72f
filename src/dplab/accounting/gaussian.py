"""The Gaussian mechanism: its exact privacy profile and four one-release calibrations.

Exact profile (Balle & Wang 2018, Thm 8; 000 §II after Thm II.2): releasing f(D) + N(0, s²)
with ‖f(D) − f(D')‖ ≤ Δ is (ε, δ)-DP exactly for

    δ(ε) = Φ(Δ/(2s) − εs/Δ) − e^ε Φ(−Δ/(2s) − εs/Δ),

the hockey-stick divergence E_{e^ε}(N(Δ, s²) ‖ N(0, s²)).  With μ = Δ/s this depends on μ
only; :func:`gaussian_delta` and its inverse :func:`gaussian_epsilon` are vectorized and
reused by the composition accountants and the tightness audit.

Calibrations (004 §2): the Setting gives ``sensitivity`` Δ and
``noise_multiplier`` σ = std/Δ; one release, so ``steps`` must be 1 or unset and no
sampling rate below 1 is accepted (no amplification is claimed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import erfcx, ndtr

from dplab.accounting.base import DELTA_FLOOR, EPSILON_MAX, Accountant
from dplab.accounting.roots import bisect, brent, expand, safe_root
from dplab.accounting.setting import SAMPLINGS, Setting, check_delta, check_epsilon
from dplab.schemes import Neighbouring

_BISECTION_STEPS = 200
#: the smallest ε a calibration is inverted at (ε of a σ below it is reported as this bound)
EPSILON_MIN = 1e-12
#: rounding pad of :func:`gaussian_delta` in units of its error scale (:func:`profile_terms`): 32
#: ulp (ulp = 2^-52), 4.8× the largest error measured against 60-digit mpmath, 6.7 ulp
#: (tests/references/gaussian_profile_error.py)
PROFILE_PAD = 32 * np.finfo(float).eps
_SQRT_HALF = math.sqrt(0.5)


def gaussian_delta(epsilon, mu):
    """δ(ε) of the Gaussian mechanism with μ = Δ/std (Balle & Wang 2018, Thm 8), rounded up.

    With c = ε/μ − μ/2 the two terms are Φ(−c) and e^ε Φ(−c − μ), and since
    ε − (c + μ)²/2 = −c²/2,

        δ(ε) = Φ(−c) − ½ e^{−c²/2} erfcx((c + μ)/√2),    Φ(−c) = ½ e^{−c²/2} erfcx(c/√2),

    the second form used for c ≥ 0 (where δ ≤ ½): both terms carry the one factor e^{−c²/2}, so
    no e^ε overflows and the tail keeps its relative precision down to δ = 1e-300 (the former
    difference of ndtr terms was up to 1.3e-8 relative low for μ ≥ 1e-3).  Vectorized over
    ``epsilon`` ≥ 0 and ``mu`` > 0 (broadcast).  The rounding that remains is padded
    (:data:`PROFILE_PAD` times the error scale of :func:`profile_terms`), so the result is never
    below the exact δ wherever that is ≥ 1e-300, and the ε and σ inverted from it are never below
    the exact ones.
    """
    first, second, scale = profile_terms(epsilon, mu)
    return np.minimum(np.maximum(first - second, 0.0) + PROFILE_PAD * scale, 1.0)


def profile_terms(epsilon, mu):
    """Φ(−c), e^ε Φ(−c − μ) of :func:`gaussian_delta` and the scale of their rounding error,

        first + (1 + c²)·(first − second) + (ε + μ²/2)·second:

    the evaluation of erfcx or ndtr and their difference (a few ulp of ``first``); e^{−c²/2},
    whose rounding scales both terms (≈ c² ulp of δ); and c, rounded by ≈ ulp·(ε/μ + μ/2),
    which moves δ by ∂δ/∂c = −μ·second times that.  At 60 digits the error is at most 6.7 ulp
    of this scale over μ ∈ [1e-6, 1e4], ε ∈ [0, 1e7], δ ≥ 1e-300
    (tests/references/gaussian_profile_error.py).
    """
    epsilon, mu = np.broadcast_arrays(np.asarray(epsilon, float), np.asarray(mu, float))
    c = epsilon / mu - mu / 2
    with np.errstate(under="ignore", over="ignore"):
        half_tail = 0.5 * np.exp(-0.5 * c * c)
        first = np.where(c >= 0, half_tail * erfcx(np.maximum(c, 0.0) * _SQRT_HALF), ndtr(-c))
        second = half_tail * erfcx((c + mu) * _SQRT_HALF)
        scale = (
            first
            + (1 + np.minimum(c * c, 1e300)) * np.maximum(first - second, 0.0)
            + (epsilon + mu * mu / 2) * second
        )
    return first, second, scale


def gaussian_epsilon(delta, mu):
    """Smallest ε ≥ 0 with :func:`gaussian_delta` (ε, μ) ≤ δ (vectorized bisection).

    δ(ε) is strictly decreasing in ε; where δ ≥ δ(0) (the total variation) the answer is 0.
    The returned ε is the upper end of the final bracket, so δ(ε) ≤ δ holds.
    """
    delta, mu = np.broadcast_arrays(np.asarray(delta, float), np.asarray(mu, float))
    lo = np.zeros(delta.shape)
    hi = np.ones(delta.shape)
    for _ in range(200):  # bracket: δ(ε) → 0 as ε → ∞
        bad = gaussian_delta(hi, mu) > delta
        if not bad.any():
            break
        hi = np.where(bad, 2 * hi, hi)
    lo, hi = bisect(
        lambda e: gaussian_delta(e, mu) > delta,
        lo,
        hi,
        steps=_BISECTION_STEPS,
        done=lambda lo, hi: hi - lo <= 1e-13 * np.maximum(hi, 1e-300),
    )
    return np.where(gaussian_delta(0.0, mu) <= delta, 0.0, hi)


# ----------------------------------------------------------------- calibrations
def sigma_classic(epsilon: float, delta: float) -> float:
    """Dwork & Roth Thm A.1 (000 Thm II.2): σ = √(2 ln(1.25/δ))/ε, stated for ε ∈ (0, 1)."""
    return math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def sigma_simple(epsilon: float, delta: float) -> float:
    """004 §2: σ = √(2 ln(1/δ) + 2ε)/ε (valid for every ε > 0)."""
    return math.sqrt(2 * math.log(1 / delta) + 2 * epsilon) / epsilon


def _pei_edge(t0: float) -> float:
    """The largest ε with ε² ≤ 8 + 4·t₀·√ε (where Pei's 1st/2nd expression is proved; ≥ 2√2).

    With u = √ε this is the positive root of u⁴ − 4t₀u − 8 (convex in u, −8 at u = 0); the
    root is shrunk by 1e-12 so that rounding cannot put the edge outside the region.
    """
    hi = 2.0 + (4 * t0 + 4) ** (1 / 3)  # u ≥ 2 and u³ ≥ 4t₀ + 4 make u⁴ − 4t₀u − 8 ≥ 0
    u = brent(lambda u: u**4 - 4 * t0 * u - 8, 0.0, hi, xtol=1e-15, rtol=1e-15)
    return u * u * (1 - 1e-12)


def pei_terms(epsilon: float, delta: float) -> tuple[float, float, float, float]:
    """The four expressions of Pei's refinement (004 §2), σ/Δ, each a valid bound as used here.

    1. √(2 log(1/δ))/ε + 2ε^{-3/2}
    2. (1 ∨ √((log((2π)^{-1} δ^{-2}))_+) + 2ε^{-1/2}) / ε   (∨ binds before +)
    3. √(log(e^ε δ^{-2})) / ε
    4. (√(1+ε) ∨ √((log(e^ε (2π)^{-1} δ^{-2}))_+)) / ε

    Derivation (004 §2): with s = σ/Δ the privacy loss is L ~ N(1/(2s²), 1/s²), and
    P(L > ε) = Φ̄(t), t = εs − 1/(2s), is ≤ δ (which gives (ε, δ)-DP) as soon as t ≥ t₀ for
    t₀ = √(2 log(1/δ)) (Chernoff, Φ̄(t) ≤ e^{−t²/2}; expressions 1 and 3) or
    t₀ = 1 ∨ √((2 log(1/δ) − log 2π)_+) (Mills, Φ̄(t) ≤ φ(t) for t ≥ 1; expressions 2 and 4).

    - 3 and 4 are √(t₀² + ε)/ε, at least the root (t₀ + √(t₀² + 2ε))/(2ε) of εs − 1/(2s) = t₀:
      valid for every ε > 0.
    - 1 and 2 are s = t₀/ε + 2ε^{-3/2}, so t = t₀ + 2ε^{-1/2} − 1/(2s) ≥ t₀ only while
      4s ≥ √ε, i.e. ε² ≤ 8 + 4t₀√ε (:func:`_pei_edge`; always for ε ≤ 2√2).  Beyond that edge
      they are not bounds (ε = 20, δ = 1e-6: expression 1 gives 0.2763 while the exact smallest
      σ is 0.3091); a σ that is valid at the edge ε_e is valid at every ε ≥ ε_e, so there
      they are evaluated at ε_e (σ then stays continuous and non-increasing in ε and δ).
    """
    e, ld = epsilon, math.log(1 / delta)
    chernoff = math.sqrt(2 * ld)
    mills = max(1.0, math.sqrt(max(2 * ld - math.log(2 * math.pi), 0.0)))
    e1 = min(e, _pei_edge(chernoff))
    e2 = min(e, _pei_edge(mills))
    t1 = chernoff / e1 + 2 * e1**-1.5
    t2 = (mills + 2 * e2**-0.5) / e2
    t3 = math.sqrt(e + 2 * ld) / e
    t4 = max(math.sqrt(1 + e), math.sqrt(max(e - math.log(2 * math.pi) + 2 * ld, 0.0))) / e
    return t1, t2, t3, t4


def sigma_pei(epsilon: float, delta: float) -> float:
    """004 §2 (Pei's refinement): the minimum of :func:`pei_terms` (valid for every ε > 0)."""
    return min(pei_terms(epsilon, delta))


def sigma_analytic(epsilon: float, delta: float) -> float:
    """Balle & Wang 2018 (analytic Gaussian mechanism): the smallest σ = std/Δ with
    :func:`gaussian_delta` (ε, 1/σ) ≤ δ, by root finding on the exact profile."""

    def gap(log_sigma: float) -> float:
        return float(gaussian_delta(epsilon, math.exp(-log_sigma))) - delta

    hi = expand(lambda x: gap(x) > 0, 1.0, lambda x: x + 2.0)
    lo = expand(lambda x: gap(x) <= 0, -10.0, lambda x: x - 2.0, within=lambda x: x > -60)
    # the side that meets the target
    return safe_root(
        gap,
        -60.0 if lo is None else lo,
        hi,
        xtol=1e-14,
        rtol=1e-14,
        answer=math.exp,
        misses=lambda s: gap(math.log(s)) > 0,
        nudge=lambda s: s * (1 + 1e-12),
    )


@dataclass(frozen=True)
class Calibration:
    """One row of :data:`CALIBRATIONS`: a one-release calibration σ(ε, δ) = std/Δ as data."""

    name: str
    source: str
    formula: Callable[[float, float], float]  # σ(ε, δ)
    epsilon_below: float | None = None  # the theorem covers only ε < this (None: every ε > 0)
    validity: str = ""  # the theorem's name in the message refusing ε ≥ epsilon_below
    exact: bool = False  # ε and δ straight from the exact profile (else by inverting the formula)


#: the calibrations of 004 §2, one accountant each
CALIBRATIONS = (
    Calibration(
        "gaussian_classic",
        "000 Thm II.2 (Dwork & Roth 2014, Thm A.1): σ = Δ√(2 ln(1.25/δ))/ε for ε ∈ (0, 1)",
        sigma_classic,
        epsilon_below=1.0,
        validity="Dwork–Roth Thm A.1",
    ),
    Calibration("gaussian_simple", "004 §2: σ = Δ/ε·√(2 ln(1/δ) + 2ε)", sigma_simple),
    Calibration(
        "gaussian_pei",
        "004 §2: Pei's refinement, σ = Δ·min of four expressions (1st, 2nd only where proved)",
        sigma_pei,
    ),
    Calibration(
        "gaussian_analytic",
        "004 §2; 000 §II (Balle & Wang 2018, Thm 8): exact profile, σ by root finding",
        sigma_analytic,
        exact=True,
    ),
)


class GaussianCalibration(Accountant):
    """One release of f + N(0, (σΔ)²) under one :class:`Calibration`: ``sigma`` returns the
    calibration σ(ε, δ) itself; ε(σ, δ) and δ(σ, ε) invert it (it is decreasing in ε and in δ),
    or, for an ``exact`` calibration, come from the exact profile (:func:`gaussian_epsilon`,
    :func:`gaussian_delta`).
    """

    release = "trajectory"
    samplings = SAMPLINGS
    neighbourings = (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE)
    requires = ("noise_multiplier", "sensitivity")
    #: one release: no training constants (steps and sampling_rate are read, and must be 1)
    reads = ("steps", *Accountant.reads)
    assumptions = (
        "one release of f(D) + N(0, (σΔ)²) with ‖f(D) − f(D')‖ ≤ Δ under the chosen relation "
        "(steps = 1, no amplification by subsampling)",
    )
    limits = {
        "epsilon": (EPSILON_MIN, EPSILON_MAX, "the range the calibration σ(ε, δ) is inverted on")
    }

    def __init__(self, entry: Calibration):
        self.entry = entry
        self.name, self.source = entry.name, entry.source
        if entry.epsilon_below is not None:
            self.assumptions = GaussianCalibration.assumptions + (
                f"ε < {entry.epsilon_below:g} (the theorem's high-privacy regime)",
            )

    def calibrate(self, epsilon: float, delta: float) -> float:
        """σ = std/Δ that the calibration prescribes for (ε, δ)."""
        return self.entry.formula(epsilon, delta)

    def valid_epsilon(self, epsilon: float) -> None:
        """Raise where the calibration's theorem does not cover ``epsilon``."""
        below = self.entry.epsilon_below
        if below is not None and not epsilon < below:
            raise self.fail(
                "epsilon",
                f"{self.entry.validity} holds only for ε < {below:g}; got ε = {epsilon:.6g}",
            )

    def check_setting(self, setting: Setting) -> None:
        if setting.steps is not None and setting.steps != 1:
            raise self.fail(
                "steps", f"a single Gaussian release has steps = 1; got {setting.steps}"
            )
        if setting.sampling_rate is not None and setting.sampling_rate != 1.0:
            raise self.fail(
                "sampling_rate",
                "no amplification by subsampling is claimed: leave it unset or 1; got"
                f" {setting.sampling_rate}",
            )

    def _steps(self, setting: Setting) -> int:
        return 1 if setting.steps is None else int(setting.steps)

    def _epsilon_one(self, sigma: float, delta: float) -> float:
        def gap(log_eps: float) -> float:
            return self.calibrate(math.exp(log_eps), delta) - sigma

        lo, hi = math.log(EPSILON_MIN), math.log(EPSILON_MAX)
        if gap(hi) > 0:
            raise self.too_far(
                "noise_multiplier", f"σ = {sigma:g} is too small: ε would exceed {EPSILON_MAX:g}"
            )
        if gap(lo) <= 0:
            return EPSILON_MIN
        eps = safe_root(
            gap,
            lo,
            hi,
            xtol=1e-15,
            rtol=1e-14,
            answer=math.exp,
            misses=lambda e: self.calibrate(e, delta) > sigma,
            nudge=lambda e: e * (1 + 1e-13),
        )
        self.valid_epsilon(eps)
        return eps

    def _epsilon_curve(self, setting, delta, steps):
        if self.entry.exact:
            eps = float(gaussian_epsilon(delta, 1.0 / setting.noise_multiplier))
        else:
            eps = self._epsilon_one(setting.noise_multiplier, delta)
        return np.full(len(steps), eps)

    def _delta_curve(self, setting, epsilon, steps):
        if self.entry.exact:
            return np.full(
                len(steps), float(gaussian_delta(epsilon, 1.0 / setting.noise_multiplier))
            )
        self.valid_epsilon(epsilon)

        def gap(log_delta: float) -> float:
            return self.calibrate(epsilon, math.exp(log_delta)) - setting.noise_multiplier

        lo, hi = math.log(DELTA_FLOOR), math.log(1 - 1e-12)
        if gap(hi) > 0:
            return np.full(len(steps), 1.0)  # no δ < 1 certified at this ε
        if gap(lo) <= 0:
            return np.full(len(steps), DELTA_FLOOR)
        # the side that the calibration certifies
        log_delta = safe_root(
            gap, lo, hi, xtol=1e-12, rtol=1e-12, nudge=lambda x: x + 1e-12 * max(1.0, abs(x))
        )
        return np.full(len(steps), math.exp(log_delta))

    def sigma(
        self, setting: Setting, epsilon: float, delta: float, start: float | None = None
    ) -> float:
        epsilon, delta = check_epsilon(epsilon), check_delta(delta)
        self.check_limit("epsilon", epsilon)
        self.check_limit("delta", delta)
        self.check(setting.replace(noise_multiplier=1.0))
        self.valid_epsilon(epsilon)
        sigma = self.calibrate(epsilon, delta)
        lo, hi, _ = self.resolved("noise_multiplier")
        if not lo <= sigma <= hi:
            raise self.too_far(
                "epsilon",
                f"ε = {epsilon:g} at δ = {delta:g} needs σ = {sigma:.3g}, outside "
                f"[{lo:g}, {hi:g}], the range σ is calibrated in",
            )
        return sigma


#: one accountant per calibration (:data:`dplab.accounting.registry.ACCOUNTANTS` names each)
GAUSSIAN_CLASSIC, GAUSSIAN_SIMPLE, GAUSSIAN_PEI, GAUSSIAN_ANALYTIC = (
    GaussianCalibration(entry) for entry in CALIBRATIONS
)
