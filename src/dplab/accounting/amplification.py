"""One DP-SGD step as an (ε, δ)-DP mechanism, and the sampling schemes composition may use.

A step adds N(0, σ²C²) to a clipped sum of sensitivity C (add_remove) or 2C (replace_one):
a Gaussian mechanism with effective multiplier σ_eff = std/sensitivity
(:func:`dplab.units.effective_noise_multiplier`), whose exact profile is
:func:`dplab.accounting.gaussian.gaussian_delta`.  Amplification by subsampling:

- Poisson sampling, add_remove: 000 Thm II.4 (Balle, Barthe & Gaboardi 2018, Thm 8):
  an (ε₀, δ₀)-DP mechanism run on a Poisson sample of rate q is
  (log(1 + q(e^ε₀ − 1)), qδ₀)-DP;
- sampling without replacement (batch b of n), replace_one: the same formula with q = b/n
  (Balle, Barthe & Gaboardi 2018, Thm 9, substitution relation);
- full_batch: no amplification (q = 1).

``shuffle`` (fixed disjoint batches) is refused: the source papers prove no amplification for it.
"""

from __future__ import annotations

import numpy as np

from dplab import units
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon
from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError
from dplab.schemes import Sampling

#: the smallest log-moment (α − 1)·ρ(α), per unit of α, taken from a numerical Rényi divergence of a
#: sampled Gaussian step (rdp, moments): their sums of about α terms of size ≈ 1 carry float64
#: rounding of ~1e-16 each, 1000 times below this
LOG_MOMENT_FLOOR = 1e-10

SHUFFLE_REFUSAL = (
    "shuffle (fixed disjoint batches) is refused: no amplification by shuffling is proved; use "
    "the fixed_batches accountant for a valid bound without amplification (docs/sampling.md), or a "
    "hidden-state accountant"
)


def refuse_unamplified(accountant: str, setting: Setting) -> None:
    """Refuse shuffle, and a sampling paired with a relation its amplification theorem lacks."""
    if setting.sampling == Sampling.SHUFFLE:
        raise AssumptionError(accountant, "sampling", SHUFFLE_REFUSAL)
    wanted = Sampling(setting.sampling).amplified  # the one relation its theorem is proved for
    if wanted is not None and setting.neighbouring != wanted:
        raise AssumptionError(
            accountant,
            "neighbouring",
            f"amplification by {setting.sampling} sampling is proved here for {wanted} only; "
            f"got {setting.neighbouring}",
        )


def step_mu(setting: Setting) -> float:
    """μ = sensitivity/std of one step's Gaussian mechanism: 1/σ_eff."""
    return 1.0 / units.effective_noise_multiplier(setting.noise_multiplier, setting.neighbouring)


def step_rate(setting: Setting) -> float:
    """The amplification rate q (1 for full_batch)."""
    return 1.0 if setting.sampling == Sampling.FULL_BATCH else float(setting.sampling_rate)


def step_epsilon(setting: Setting, step_delta):
    """ε of one (amplified) step at per-step δ (vectorized): log(1 + q(e^ε₀ − 1)), ε₀ = ε₀(δ/q)."""
    q = step_rate(setting)
    eps0 = gaussian_epsilon(np.minimum(np.asarray(step_delta, float) / q, 1.0), step_mu(setting))
    with np.errstate(over="ignore"):  # e^ε₀ overflows only where ε₀ is huge: ε_s ≈ ε₀ + log q
        return np.where(eps0 > 700, eps0 + np.log(q), np.log1p(q * np.expm1(np.minimum(eps0, 700))))


def step_delta(setting: Setting, step_eps):
    """δ of one (amplified) step at per-step ε (vectorized): q·δ₀(ε₀), e^ε₀ = 1 + (e^ε − 1)/q."""
    q = step_rate(setting)
    eps = np.asarray(step_eps, float)
    with np.errstate(over="ignore"):  # e^ε overflows only where ε is huge: ε₀ ≈ ε − log q
        eps0 = np.where(eps > 700, eps - np.log(q), np.log1p(np.expm1(np.minimum(eps, 700)) / q))
    return q * gaussian_delta(eps0, step_mu(setting))


def safe_log_moments(log_moments, orders, setting: Setting) -> np.ndarray:
    """Log-moments (α − 1)·ρ(α) of one sampled Gaussian step, computed numerically, made float-safe
    while staying upper bounds: a value below 2·:data:`LOG_MOMENT_FLOOR`·α (where rounding may
    dominate it; a negative one is the symptom, which dp_accounting turns into ε = 0) is raised
    to it (a floor, not a jump: the result stays monotone in the moment, so in q and σ); every
    value is capped by (α − 1)α/(2σ_eff²), the same step without amplification (subsampling
    never increases a Rényi divergence: the sampled pair is a mixture, and e^{(α−1)D_α} is
    jointly convex), which also replaces +∞ (a series that did not converge)."""
    orders, log_moments = np.asarray(orders, dtype=float), np.asarray(log_moments, dtype=float)
    raised = np.maximum(log_moments, 2 * LOG_MOMENT_FLOOR * orders)  # monotone in the moment
    raised[np.isnan(log_moments)] = np.inf  # not a value: the cap below
    mu = step_mu(setting)
    return np.minimum(raised, (orders - 1) * orders * mu**2 / 2)
