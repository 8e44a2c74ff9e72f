"""Composition of per-step (ε, δ) guarantees: ``naive``, ``advanced``, ``kairouz``.

Each step is the Gaussian mechanism with its exact (ε₀, δ₀) profile, amplified by
subsampling where proved (:mod:`dplab.accounting.amplification`, 000 Thm II.4), and T steps
are composed with a generic (mechanism-agnostic) theorem.  Every free parameter of a
theorem is optimized numerically, and every candidate it tries is itself a valid bound, so
the result is always a valid upper bound.

Also the closed forms of 003 §3.1–3.2 (:func:`sigma_naive_note`, :func:`sigma_strong_note`)
for the ``sigma_vs_steps`` figure.
"""

from __future__ import annotations

import math

import numpy as np

from dplab.accounting.amplification import (
    SHUFFLE_REFUSAL,
    refuse_unamplified,
    step_delta,
    step_epsilon,
)
from dplab.accounting.base import Accountant
from dplab.accounting.roots import bisect, expand
from dplab.schemes import Neighbouring, Sampling

#: log-spaced fractions in (0, 1) scanned by the numerical optimizations, then refined
_COARSE = np.concatenate([np.geomspace(1e-12, 0.5, 120), 1 - np.geomspace(0.5, 1e-12, 120)[1:]])


def _refined_min(objective, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """min over x ∈ (lo, hi) of ``objective(x)`` (vectorized in x, shape (..., len(x)))
    by a coarse log-spaced scan and one finer linear scan around the best coarse point."""
    x = lo + (hi - lo) * _COARSE
    values = objective(x)
    best = np.argmin(values, axis=-1)
    left = x[np.maximum(best - 1, 0)]
    right = x[np.minimum(best + 1, len(x) - 1)]
    fine = left[..., None] + (right - left)[..., None] * np.linspace(0, 1, 101)
    fine_values = objective(fine)
    return np.minimum(values.min(axis=-1), fine_values.min(axis=-1))


class _Composition(Accountant):
    samplings = (
        Sampling.POISSON,
        Sampling.WITHOUT_REPLACEMENT,
        Sampling.FULL_BATCH,
        Sampling.SHUFFLE,
    )
    neighbourings = (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE)
    assumptions = (
        "every intermediate iterate may be released (composition)",
        "poisson requires add_remove; without_replacement requires replace_one (q = b/n)",
        SHUFFLE_REFUSAL,
    )

    def check_setting(self, setting):
        refuse_unamplified(self.name, setting)


class NaiveComposition(_Composition):
    """Basic composition (003 §3.1; 000 Thm II.3 context): T steps of (ε_s, δ_s) are
    (Tε_s, Tδ_s)-DP.  ε at δ: δ_s = δ/T exactly (no free parameter), ε = T·ε_s(δ/T)."""

    name = "naive"
    source = "003 §3.1; 000 Thm II.3–II.4: basic composition of amplified Gaussian steps"

    def _epsilon_curve(self, setting, delta, steps):
        return steps * step_epsilon(setting, delta / steps)

    def _delta_curve(self, setting, epsilon, steps):
        return np.minimum(steps * step_delta(setting, epsilon / steps), 1.0)


class AdvancedComposition(_Composition):
    """Dwork–Roth advanced composition (000 Thm II.3, eq. (3); 003 §3.2; 004 §3.2):
    T steps of (ε_s, δ_s) are (ε_s√(2T ln(1/δ')) + Tε_s(e^ε_s − 1), Tδ_s + δ')-DP.

    ε at δ: the split δ' = xδ, δ_s = (1 − x)δ/T is optimized over x ∈ (0, 1) by a
    log-spaced scan (near both ends) refined by a linear scan around the best point.
    δ at ε: the per-step ε_s ∈ (0, ε_max), Tε_s(e^ε_max − 1) = ε, is optimized the same way;
    δ' then follows in closed form from ε' = ε.

    Basic composition (Dwork & Roth 2014, Thm 3.16; :class:`NaiveComposition`) holds for the same
    steps, so each answer is the smaller of the two: the term Tε_s(e^ε_s − 1) makes the advanced
    bound useless for large ε_s (σ = 0.3, q = 0.99, T = 1, δ = 1e-5: 3.8e9 against basic's 19.11).
    """

    name = "advanced"
    source = "000 Thm II.3 eq. (3); 003 §3.2; 004 §3.2 (Dwork & Roth 2014, Thm 3.20)"

    def _epsilon_curve(self, setting, delta, steps):
        t = np.asarray(steps, float)[:, None]

        def total(x):
            xs = np.broadcast_to(x, np.broadcast_shapes(np.shape(x), t.shape))
            eps_s = step_epsilon(setting, (1 - xs) * delta / t)
            # ln(1/δ') as −ln x − ln δ: x·δ underflows to 0 at δ = 1e-300 (then 0·∞ for ε_s = 0)
            log_inverse = -(np.log(xs) + math.log(delta))
            with np.errstate(over="ignore"):  # huge per-step ε: an infinite (useless) candidate
                return eps_s * np.sqrt(2 * t * log_inverse) + t * eps_s * np.expm1(eps_s)

        return np.minimum(
            _refined_min(total), NaiveComposition()._epsilon_curve(setting, delta, steps)
        )

    def _delta_curve(self, setting, epsilon, steps):
        out = np.empty(len(steps))
        for i, t in enumerate(np.asarray(steps, float)):
            # largest ε_s with T ε_s (e^ε_s − 1) < ε (the linear term alone)
            lo, hi = (
                0.0,
                1.0 + math.log1p(epsilon) + math.sqrt(epsilon),
            )  # ε_s² ≤ ε and e^ε_s − 1 ≤ ε
            eps_max = float(bisect(lambda e: t * e * math.expm1(e) < epsilon, lo, hi, steps=100)[0])  # noqa: B023

            def total(y, t=t, eps_max=eps_max):
                eps_s = y * eps_max
                slack = (epsilon - t * eps_s * np.expm1(eps_s)) / eps_s
                log_delta_prime = -(slack**2) / (2 * t)
                return t * step_delta(setting, eps_s) + np.exp(log_delta_prime)

            out[i] = _refined_min(total)
        return np.minimum(
            np.minimum(out, NaiveComposition()._delta_curve(setting, epsilon, steps)), 1.0
        )


def kairouz_bound(eps0, delta_tilde: float, steps):
    """Kairouz, Oh & Viswanath (2015), Thm 3.4: for any ε₀ > 0, δ₀ ∈ [0, 1], δ̃ ∈ (0, 1], the
    T-fold adaptive composition of (ε₀, δ₀)-DP mechanisms is (ε̃, 1 − (1 − δ₀)^T (1 − δ̃))-DP for

        ε̃ = min{ Tε₀,
                 Tε₀(e^ε₀ − 1)/(e^ε₀ + 1) + ε₀√(2T log(e + √(Tε₀²)/δ̃)),
                 Tε₀(e^ε₀ − 1)/(e^ε₀ + 1) + ε₀√(2T log(1/δ̃)) }

    (vectorized; (e^ε₀ − 1)/(e^ε₀ + 1) = tanh(ε₀/2)).  The first term is basic composition.
    """
    eps0, t = np.asarray(eps0, float), np.asarray(steps, float)
    drift = t * eps0 * np.tanh(eps0 / 2)
    second = drift + eps0 * np.sqrt(2 * t * np.log(math.e + np.sqrt(t) * eps0 / delta_tilde))
    third = drift + eps0 * np.sqrt(2 * t * math.log(1 / delta_tilde))
    return np.minimum(t * eps0, np.minimum(second, third))


class KairouzComposition(_Composition):
    """The per-step split of Kairouz, Oh & Viswanath (2015) used in 004 §3.2: (ε, δ)-DP
    after T steps if each step is (ε₀, δ₀)-DP with ε₀ = ε/(2√(T log(e + ε/δ))), δ₀ = δ/(2T).

    ε at δ: δ₀ = δ/(2T) is fixed by the rule; ε is the smallest value whose ε₀ reaches the
    step's exact (amplified) ε at δ₀ (ε₀ increases with ε: bisection).  δ at ε: by inversion.

    The rule is a shortcut, not a theorem: it is certified where :func:`kairouz_bound` (their
    Thm 3.4, every term, the first being basic composition Tε₀) at the same (ε₀, δ₀) with
    δ̃ = δ/2 is ≤ ε, the total δ being ≤ Tδ₀ + δ̃ = δ.  Outside (large T·ε₀·tanh(ε₀/2)) the
    accountant refuses instead of printing ε.
    """

    name = "kairouz"
    source = "004 §3.2 (Kairouz, Oh & Viswanath 2015): ε₀ = ε/(2√(T log(e+ε/δ))), δ₀ = δ/(2T)"
    assumptions = _Composition.assumptions + (
        "the 004 §3.2 split is certified by Kairouz et al. Thm 3.4 (refused where it is not)",
    )

    def _epsilon_curve(self, setting, delta, steps):
        t = np.asarray(steps, float)
        eps_s = step_epsilon(setting, delta / (2 * t))
        if not np.all(np.isfinite(eps_s)):
            raise self.fail(
                "noise_multiplier",
                f"σ = {setting.noise_multiplier} is too small for a finite per-step ε",
            )

        def eps0(eps):
            return eps / (2 * np.sqrt(t * np.log(math.e + eps / delta)))

        hi = expand(
            lambda e: np.any(eps0(e) < eps_s),
            np.ones_like(t),
            lambda e: np.where(eps0(e) < eps_s, 2 * e, e),
            within=lambda e: np.all(e <= 1e300),
        )
        if hi is None:
            raise self.fail("noise_multiplier", f"σ = {setting.noise_multiplier} is too small")
        lo, hi = bisect(
            lambda e: eps0(e) < eps_s,
            np.zeros_like(t),
            hi,
            steps=200,
            done=lambda lo, hi: hi - lo <= 1e-13 * hi,
        )
        e0 = eps0(hi)
        general = kairouz_bound(e0, delta / 2, t)
        if np.any(general > hi):
            bad = int(np.argmax(general > hi))
            raise self.fail(
                "epsilon",
                f"the 004 §3.2 split is not certified at T = {int(t[bad])}: Kairouz et al. Thm 3.4"
                f" gives {general[bad]:.4g} > ε = {hi[bad]:.4g} (per-step ε₀ = {e0[bad]:.3g} too"
                " large)",
            )
        return hi


# ------------------------------------------------------------- 003 closed forms
def sigma_naive_note(sampling_rate: float, steps: int, epsilon: float, delta: float) -> float:
    """003 §3.1: σ_naive = qT√(2 ln(1.25 qT/δ))/ε (ε' = ε/T, δ' = δ/(qT), Dwork–Roth σ).

    A formula of the source papers, not an accountant: 003 amplifies to first order (ε_step ≈ qε₀),
    which is not a valid upper bound in general (the exact amplification is log(1 + q(e^ε₀ −
    1)) ≥ qε₀), and Dwork–Roth's σ needs ε' < 1.  Expose it for the ``sigma_vs_steps`` figure only.
    """
    q, t = sampling_rate, steps
    return q * t * math.sqrt(2 * math.log(1.25 * q * t / delta)) / epsilon


def sigma_strong_note(sampling_rate: float, steps: int, epsilon: float, delta: float) -> float:
    """003 §3.2 (000 eq. (4)): the order σ_strong = O(q√(T ln(1/δ) ln(T/δ))/ε), constant 1.

    An asymptotic order with first-order amplification, not a valid upper bound: plot it
    for its slope in T only.
    """
    q, t = sampling_rate, steps
    return q * math.sqrt(t * math.log(1 / delta) * math.log(t / delta)) / epsilon
