"""Exact privacy of full-batch noisy GD when the released last iterate is Gaussian.

With a loss whose gradient is affine in θ with a θ-independent difference between the worst
neighbouring datasets, every iterate is Gaussian with the same covariance under both datasets,
so the exact Rényi divergence and the exact δ(ε) (hockey-stick divergence) are those of two
Gaussians: with μ_T = ‖mean difference‖ / std,

    R_α = α μ_T² / 2,        δ(ε) = Φ(μ_T/2 − ε/μ_T) − e^ε Φ(−μ_T/2 − ε/μ_T)

(Balle & Wang 2018, Thm 8; :func:`dplab.accounting.gaussian.gaussian_delta`).

Canonical update (docs/training.md), full batch b = n, no clipping acting:
θ ← c·θ − η(Σ_i ∇ℓ_i + σC·Z)/n, with contraction c = 1 − η for 002 Thm 3's loss
ℓ(θ; x) = ½‖θ − x‖² (App. E: θ ← (1−η)θ + ηx̄ + noise) and c = 1 for a linear loss
ℓ(θ; x) = −⟨θ, x⟩.  On the pair D, D′ that differ in one record with ‖x − x′‖ = S_g
(S_g = units.sum_sensitivity(C, replace_one) = 2C for records in the ball of radius C), after T
steps the means differ by (η S_g/n)·Σ_{i<T} cⁱ and the std per coordinate is
(ησC/n)·(Σ_{i<T} c²ⁱ)^{1/2}:

    μ_T = (S_g / (σC)) · Σ_{i<T} cⁱ / (Σ_{i<T} c²ⁱ)^{1/2}.

For c = 1 − η, α μ_T²/2 is 002 Thm 3's exact value (App. E), computed in 002's units by
:func:`dplab.accounting.langevin.thm3_exact_rdp`; for c = 1 it is the T-fold Gaussian
composition (μ√T with μ = S_g/(σC)): the last iterate reveals as much as the trajectory.
Add/remove neighbours change n and the contraction, so only replace-one is exact here.
"""

from __future__ import annotations

import numpy as np

from dplab import units
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon
from dplab.errors import DPLabError

LOSSES = {"quadratic": "002 Thm 3 / App. E: ℓ(θ; x) = ½‖θ − x‖², contraction 1 − η",
          "linear": "ℓ(θ; x) = −⟨θ, x⟩, contraction 1 (no hidden-state gain)"}


def contraction(loss: str, lr: float) -> float:
    if loss == "quadratic":
        if not 0 < lr < 1:
            raise DPLabError("lr", f"002 Thm 3 needs lr in (0, 1); got {lr}")
        return 1.0 - lr
    if loss == "linear":
        return 1.0
    raise DPLabError("loss", f"must be one of {', '.join(LOSSES)}; got {loss!r}")


def last_iterate_mu(noise_multiplier: float, lr: float, steps, loss: str, neighbouring: str = "replace_one",
                    clip: float = 1.0) -> np.ndarray:
    """μ_T = mean distance / std of the last iterates on the worst neighbouring pair, every T."""
    if neighbouring != "replace_one":
        raise DPLabError("neighbouring", "the exact last-iterate value is derived for replace_one only (002 Thm 3's pair)")
    c = contraction(loss, lr)
    t = np.asarray(steps, dtype=float)
    if np.any(t < 1):
        raise DPLabError("steps", "must be >= 1")
    if c == 1.0:
        ratio = np.sqrt(t)
    else:
        ratio = (1 - c**t) / (1 - c) / np.sqrt((1 - c ** (2 * t)) / (1 - c * c))
    return units.sum_sensitivity(clip, neighbouring) / units.noise_std_on_sum(noise_multiplier, clip) * ratio


def exact_rdp(alpha: float, noise_multiplier: float, lr: float, steps, loss: str, **kw) -> np.ndarray:
    """Exact Rényi divergence α μ_T²/2 of the two last iterates (002 Thm 3 for the quadratic loss)."""
    return alpha * last_iterate_mu(noise_multiplier, lr, steps, loss, **kw) ** 2 / 2


def exact_delta(epsilon: float, noise_multiplier: float, lr: float, steps, loss: str, **kw) -> np.ndarray:
    """Exact δ(ε) of the last iterate (hockey-stick divergence of the two Gaussians), every T."""
    return gaussian_delta(epsilon, last_iterate_mu(noise_multiplier, lr, steps, loss, **kw))


def exact_epsilon(delta: float, noise_multiplier: float, lr: float, steps, loss: str, **kw) -> np.ndarray:
    """Exact ε(δ) of the last iterate, every T (inverse of :func:`exact_delta`)."""
    return gaussian_epsilon(delta, last_iterate_mu(noise_multiplier, lr, steps, loss, **kw))
