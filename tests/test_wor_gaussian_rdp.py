"""The RDP of a batch drawn without replacement (dplab.accounting.wor_gaussian_rdp): its central
moments and its bound against exact forward differences in mpmath, dp_accounting where its own
differences keep their digits, and an ε that no longer jumps between adjacent σ."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as peer

from dplab.accounting import wor_gaussian_rdp as wor
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting

ORDERS = np.array(peer.DEFAULT_RDP_ORDERS)


def _exact_moment(sigma: float, k: int) -> mpmath.mpf:
    """M_k = Δ^k of y ↦ e^{(y−1)y/(2σ²)} at 0, summed exactly at 800 digits."""
    mpmath.mp.dps = 800
    c = 1 / (2 * mpmath.mpf(sigma) ** 2)
    return mpmath.fsum(
        (-1) ** (k - j) * mpmath.binomial(k, j) * mpmath.exp(c * j * (j - 1)) for j in range(k + 1)
    )


@pytest.mark.parametrize("sigma", [0.3, 44.666527594226444])
def test_central_moments_are_the_exact_forward_differences(sigma):
    logs = wor.log_central_moments(sigma, 128)
    assert logs[0] == pytest.approx(math.log(math.expm1(1 / sigma**2)), rel=1e-12)  # Var W
    for m in (2, 29, 128):
        assert logs[m - 1] == pytest.approx(
            float(mpmath.log(_exact_moment(sigma, 2 * m))), rel=1e-12
        )


def test_the_bound_is_its_exact_value_where_dp_accountings_differences_lose_their_digits():
    """q = 1/2, σ = 44.67, α = 58: log A_α with exact moments is 0.80524; dp_accounting 0.6.0
    differences the sequence in floating point and gets 2.216."""
    q, sigma, alpha = 0.5, 44.666527594226444, 58
    mpmath.mp.dps = 800
    s2, Q = mpmath.mpf(sigma) ** 2, mpmath.mpf(q)
    total = 1 + Q**2 * mpmath.binomial(alpha, 2) * min(
        4 * mpmath.expm1(1 / s2), 2 * mpmath.exp(1 / s2)
    )
    moments = {k: _exact_moment(sigma, k) for k in range(2, alpha + 2, 2)}
    for j in range(3, alpha + 1):
        pair = 4 * mpmath.sqrt(moments[2 * (j // 2)] * moments[2 * ((j + 1) // 2)])
        total += (
            Q**j * mpmath.binomial(alpha, j) * min(pair, 2 * mpmath.exp((j - 1) * j / (2 * s2)))
        )
    ours = wor._log_a_int(q, sigma, alpha, wor.log_central_moments(sigma, 30))
    assert ours == pytest.approx(float(mpmath.log(total)), rel=1e-12)
    assert peer._compute_rdp_sample_wor_gaussian_int(q, sigma, alpha) > ours + 1  # noqa: SLF001


@pytest.mark.parametrize(("q", "sigma"), [(0.125, 1.0), (0.5, 2.0), (0.01, 0.8)])
def test_equal_to_dp_accounting_at_orders_where_its_differences_are_exact(q, sigma):
    ours = wor.wor_gaussian_rdp(q, sigma, ORDERS)
    theirs = peer._compute_rdp_sample_wor_gaussian(q, sigma, ORDERS)  # noqa: SLF001
    low = ORDERS <= 10
    assert ours[low] == pytest.approx(theirs[low], rel=1e-12)
    assert wor.wor_gaussian_rdp(1.0, sigma, [2.0, 7.5]) == pytest.approx(
        [2 / (2 * sigma**2), 7.5 / (2 * sigma**2)]
    )


def test_rdp_without_replacement_is_smooth_in_sigma_and_its_calibration_meets_the_target():
    """dp_accounting's ε moved by 2.7 % over 40 adjacent floats of σ (n = 2, b = 1), and a σ
    calibrated to ε = 0.3219 (n = 96, b = 12, T = 10) gave 0.3219064; now both hold."""
    rdp = get("rdp")
    drawn = {"sampling": "without_replacement", "neighbouring": "replace_one"}
    pair = Setting(
        **drawn, dataset_size=2, batch_size=1, steps=4, noise_multiplier=44.666527594226444
    )
    sigmas = [pair.noise_multiplier]
    for _ in range(40):
        sigmas.append(float(np.nextafter(sigmas[-1], 100.0)))
    eps = [rdp.epsilon(pair.replace(noise_multiplier=s), 7.874554659256458e-06) for s in sigmas]
    assert max(eps) - min(eps) <= 1e-12 * min(eps)
    batch = Setting(**drawn, dataset_size=96, batch_size=12, steps=10)
    delta, target = 6.801454251592307e-11, 0.32190407985477487
    sigma = rdp.sigma(batch, target, delta)
    assert rdp.epsilon(batch.replace(noise_multiplier=sigma), delta) <= target
    assert rdp.epsilon(batch.replace(noise_multiplier=sigma * (1 - 1e-4)), delta) > target
