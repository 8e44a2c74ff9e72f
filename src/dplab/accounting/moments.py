"""``moments``: the moments accountant of Abadi et al. (2016) as published (000 §IV).

For one step of the sampled Gaussian with μ₀ = N(0, σ²), μ₁ = N(1, σ²) and the mixture
μ = (1 − q)μ₀ + qμ₁ (Poisson sampling, add/remove, sensitivity-1 clipped sum), Abadi et al.
bound the λ-th log-moment of the privacy loss (000 eq. (5)) by α(λ) = log max(E₁, E₂),

    E₁ = E_{z∼μ₀}[(μ₀(z)/μ(z))^λ],   E₂ = E_{z∼μ}[(μ(z)/μ₀(z))^λ].

We compute E₂ exactly for integer λ by the binomial expansion
E₂ = Σ_{k=0}^{λ+1} C(λ+1, k)(1 − q)^{λ+1−k} q^k e^{k(k−1)/(2σ²)} (in log space), and E₁ by
numerical integration (as Abadi et al. did for both).  T steps compose additively
(000 Thm IV.1.1) and the tail bound (000 Thm IV.1.2) gives δ = min_λ exp(Tα(λ) − λε),
equivalently ε = min_λ (Tα(λ) + log(1/δ))/λ, over λ = 1..32 as in Abadi et al. §3.1.
Full-batch steps (q = 1) use μ = N(Δ/std, 1)-shifted Gaussians: α(λ) = λ(λ+1)/(2σ_eff²).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import gammaln, logsumexp

from dplab import units
from dplab.accounting.amplification import SHUFFLE_REFUSAL, safe_log_moments
from dplab.accounting.base import Accountant
from dplab.schemes import Neighbouring, Sampling

#: the moment orders λ of Abadi et al. (their implementation: λ ≤ 32)
LAMBDAS = np.arange(1, 33)


def log_e2(q: float, sigma: float, lam: int) -> float:
    """log E₂ = log E_{μ₀}[(μ/μ₀)^{λ+1}] by the exact binomial expansion (integer λ)."""
    n = lam + 1
    if q == 1.0:
        return n * (n - 1) / (2 * sigma**2)  # only the k = n term
    k = np.arange(n + 1)
    log_binom = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    log_terms = (
        log_binom + (n - k) * math.log1p(-q) + k * math.log(q) + k * (k - 1) / (2 * sigma**2)
    )
    return float(logsumexp(log_terms))


def log_e1(q: float, sigma: float, lam: int) -> float:
    """log E₁ = log E_{z∼μ₀}[(μ₀/μ)^λ] by numerical integration over u = z/σ ∈ [−40, 40] (μ₀'s mass
    beyond is below e⁻⁸⁰⁰ and the integrand is at most (1 − q)^{−λ}), in log space, breaking at
    u = 0 and where μ/μ₀ turns from 1 − q to its exponential part; never above the bound
    −λ·log(1 − q) (μ ≥ (1 − q)μ₀ pointwise)."""
    if q == 1.0:
        return lam * (lam + 1) / (2 * sigma**2)  # μ = μ₁: the two directions coincide
    bound = -lam * math.log1p(-q)

    def log_integrand(u):
        log_ratio = np.logaddexp(
            math.log1p(-q), math.log(q) + (2 * sigma * u - 1) / (2 * sigma**2)
        )  # log μ/μ₀
        return -(u**2) / 2 - lam * log_ratio - 0.5 * math.log(2 * math.pi)

    turn = min(max((1 + 2 * sigma**2 * math.log((1 - q) / q)) / (2 * sigma), -39.0), 39.0)
    shift = float(np.max(log_integrand(np.linspace(-40, 40, 20001))))
    from scipy import integrate  # where a moment is integrated, not when planning

    value, _ = integrate.quad(
        lambda u: math.exp(log_integrand(u) - shift),
        -40,
        40,
        points=sorted({0.0, turn}),
        limit=500,
        epsabs=0,
        epsrel=1e-12,
    )
    return min(shift + math.log(value), bound) if value > 0 else bound


@lru_cache(maxsize=4096)
def log_moments(q: float, sigma: float) -> tuple[float, ...]:
    """α(λ) = log max(E₁, E₂) for λ in :data:`LAMBDAS` (000 eq. (5), Abadi et al. §3.1)."""
    return tuple(max(log_e1(q, sigma, int(lam)), log_e2(q, sigma, int(lam))) for lam in LAMBDAS)


class MomentsAccountant(Accountant):
    """Abadi et al.'s moments accountant (000 §IV, Thm IV.1) with numerical log-moments."""

    name = "moments"
    source = "000 §IV, eq. (5) and Thm IV.1 (Abadi et al. 2016): log-moments λ = 1..32, tail bound"
    samplings = (Sampling.POISSON, Sampling.FULL_BATCH, Sampling.SHUFFLE)
    neighbourings = (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE)
    assumptions = (
        "every intermediate iterate may be released (composition)",
        "poisson sampling with add_remove (the sampled Gaussian of Abadi et al.); "
        "full_batch with either relation",
        SHUFFLE_REFUSAL,
    )

    def check_setting(self, setting):
        if setting.sampling == Sampling.SHUFFLE:
            raise self.fail("sampling", SHUFFLE_REFUSAL)
        if setting.sampling == Sampling.POISSON and setting.neighbouring != Neighbouring.ADD_REMOVE:
            raise self.fail(
                "neighbouring", "the sampled-Gaussian moments are derived for add_remove only"
            )

    def alphas(self, setting) -> np.ndarray:
        """α(λ) of one step, λ in :data:`LAMBDAS` (the log-moment of order λ + 1; sampled steps made
        float-safe by :func:`amplification.safe_log_moments`)."""
        q = 1.0 if setting.sampling == Sampling.FULL_BATCH else float(setting.sampling_rate)
        sigma = units.effective_noise_multiplier(setting.noise_multiplier, setting.neighbouring)
        alphas = np.array(log_moments(q, float(sigma)))
        return alphas if q == 1.0 else safe_log_moments(alphas, LAMBDAS + 1, setting)

    def _epsilon_curve(self, setting, delta, steps):
        a = self.alphas(setting)
        t = np.asarray(steps, float)[:, None]
        return np.min((t * a + math.log(1 / delta)) / LAMBDAS, axis=1)

    def _delta_curve(self, setting, epsilon, steps):
        a = self.alphas(setting)
        t = np.asarray(steps, float)[:, None]
        return np.exp(np.minimum(np.min(t * a - LAMBDAS * epsilon, axis=1), 0.0))
