"""Rényi DP of one step of the Gaussian mechanism on a batch drawn without replacement
(replace-one neighbours, n public), the bound dp_accounting's ``RdpAccountant`` states for a
``SampledWithoutReplacementDpEvent``, with its forward differences computed without cancellation.

Wang, Balle & Kasiviswanathan, "Subsampled Rényi Differential Privacy and Analytical Moments
Accountant" (AISTATS 2019): for an integer order α and sampling ratio q = b/n, ρ(α) ≤
log A_α / (α − 1) with A_α = 1 + q²·C(α, 2)·min{4(e^{ε(2)} − 1), 2e^{ε(2)}} + Σ_{j=3..α} q^j·C(α, j)
·min{4·√(M_{2⌊j/2⌋}·M_{2⌈j/2⌉}), 2e^{(j−1)ε(j)}} (Thm 9, tightened by Thm 27's forward
differences), ε(α) = α/(2σ²) the Gaussian's RDP; above order 256 only the second entry of the
min, as dp_accounting does; a fractional order interpolates log A between the integers around
it (Cor. 10).

M_k is the k-th forward difference at 0 of y ↦ e^{(y−1)y/(2σ²)} = E[W^y] with W = e^{Z/σ − 1/(2σ²)},
Z standard normal: M_k = E[(W − 1)^k], a central moment of a lognormal with mean 1 (nonnegative
for even k). dp_accounting 0.6.0 takes the differences by differencing the sequence itself, in
floating point: for a large σ the terms are near 1 and their k-th difference is ~(1/σ)^k, so the
difference loses all its digits (σ = 44.67, q = 1/2: the one-step RDP at order 58 moved by 28 %
between adjacent floats of σ, ε by 2.7 %; a σ calibrated by bisection missed its target). Here
log M_{2m} is the log of the integral of φ(z)·(e^{z/σ − 1/(2σ²)} − 1)^{2m}, a positive, smooth
integrand, by the trapezoid rule in log space over a grid that holds its peak (spectrally
accurate; tests/test_wor_gaussian_rdp.py checks it against exact differences in mpmath).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dplab.accounting.sampled_gaussian_rdp import log_comb

#: orders above which the bound keeps only 2e^{(j−1)ε(j)} (dp_accounting's ``max_alpha``)
EXACT_MAX_ORDER = 256
#: the quadrature's step in z (the integrand's peak is at least ~0.7 wide)
STEP = 0.02


def log_central_moments(sigma: float, m_max: int) -> np.ndarray:
    """log E[(W − 1)^{2m}] for m = 1 … ``m_max`` (index m − 1), W = e^{Z/σ − 1/(2σ²)}."""
    c = 1.0 / (2.0 * sigma**2)
    reach = math.sqrt(2.0 * m_max) + 40.0  # past the peaks: ~√(2m) below, ~2m/σ above
    z = np.arange(-reach, 2.0 * m_max / sigma + reach, STEP)
    base = -0.5 * z * z - 0.5 * math.log(2.0 * math.pi) + math.log(STEP)
    u = z / sigma - c
    with np.errstate(divide="ignore"):  # log |e^u − 1|; log 0 where W = 1 adds nothing
        log_gap = np.where(u > 0, u + np.log(-np.expm1(-np.abs(u))), np.log(-np.expm1(-np.abs(u))))
    m = np.arange(1, m_max + 1)[:, None]
    return special.logsumexp(base + 2.0 * m * log_gap, axis=1)


def _log_a_int(q: float, sigma: float, alpha: int, log_moments: np.ndarray) -> float:
    """log A_α of the module docstring for an integer α ≥ 2."""
    eps2 = 1.0 / sigma**2  # ε(2)
    log_expm1_eps2 = eps2 + math.log1p(-math.exp(-eps2))  # log(e^{ε(2)} − 1)
    j = np.arange(2, alpha + 1)
    bound = math.log(2.0) + (j - 1) * j / (2.0 * sigma**2)  # 2e^{(j−1)ε(j)}
    if alpha <= EXACT_MAX_ORDER:  # j ≥ 3: M_{2⌊j/2⌋}, M_{2⌈j/2⌉}
        lo, hi = log_moments[j[1:] // 2 - 1], log_moments[(j[1:] + 1) // 2 - 1]
        bound[1:] = np.minimum(math.log(4.0) + 0.5 * (lo + hi), bound[1:])
    bound[0] = min(math.log(4.0) + log_expm1_eps2, bound[0])  # j = 2: 4(e^{ε(2)} − 1)
    terms = bound + j * math.log(q) + log_comb(alpha, j)
    return float(special.logsumexp(np.concatenate([[0.0], terms])))


def wor_gaussian_rdp(q: float, sigma: float, orders) -> np.ndarray:
    """ρ(α) of one step at each order (module docstring): batch b of n records drawn without
    replacement (q = b/n), Gaussian noise of ``sigma`` times the replace-one sensitivity."""
    orders = np.asarray(orders, dtype=float)
    if q == 1.0:
        return orders / (2.0 * sigma**2)
    whole = {int(a) for o in orders for a in (math.floor(o), math.ceil(o)) if a >= 2}
    m_max = min(max(whole, default=2), EXACT_MAX_ORDER) // 2 + 1
    log_moments = log_central_moments(sigma, m_max)
    log_a = {a: _log_a_int(q, sigma, a, log_moments) for a in sorted(whole)}
    log_a[1] = 0.0
    out = np.empty(len(orders))
    for i, order in enumerate(orders):
        low, t = math.floor(order), order - math.floor(order)
        mixed = log_a[low] if t == 0 else (1 - t) * log_a[low] + t * log_a[low + 1]
        out[i] = mixed / (order - 1)
    return out
