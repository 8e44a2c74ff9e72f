"""The Gaussian mechanism: exact profile and the four calibrations (004 §2, 000 Thm II.2)."""

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate
from scipy.optimize import brentq
from scipy.stats import norm

from dplab.accounting import Setting, get
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon, pei_terms, sigma_analytic
from dplab.errors import AssumptionError

SALARY = Setting(noise_multiplier=1.0, sensitivity=1e6 / 1e4)  # 004 §2: Δ = B/n = 100
CALIBRATIONS = ["gaussian_classic", "gaussian_simple", "gaussian_pei", "gaussian_analytic"]


@pytest.mark.parametrize("eps,mu", [(0.0, 1.0), (0.5, 0.3), (1.0, 1.0), (3.0, 2.5)])
def test_profile_is_the_hockey_stick_divergence(eps, mu):
    """δ(ε) = ∫ (p₁ − e^ε p₀)₊ for p₁ = N(μ, 1), p₀ = N(0, 1), by quadrature."""

    def f(z):
        return max(norm.pdf(z, mu) - math.exp(eps) * norm.pdf(z), 0.0)

    ref, _ = integrate.quad(f, -20, 20, points=[mu / 2 + eps / mu], limit=200, epsabs=1e-14)
    assert float(gaussian_delta(eps, mu)) == pytest.approx(ref, rel=1e-7, abs=1e-14)


def exact_delta(epsilon: float, mu: float) -> mpmath.mpf:
    """Balle & Wang 2018, Thm 8 at 60 digits, at the float inputs exactly."""
    with mpmath.workdps(60):
        e, m = mpmath.mpf(epsilon), mpmath.mpf(mu)
        return mpmath.ncdf(m / 2 - e / m) - mpmath.exp(e) * mpmath.ncdf(-m / 2 - e / m)


@pytest.mark.parametrize("mu", [1e-3, 0.02, 1.0, 30.0, 1e3])
def test_profile_is_never_below_the_60_digit_value(mu):
    """gaussian_delta ≥ the exact δ at every ε from 0 to 1e4 with δ ≥ 1e-300 (c = ε/μ − μ/2
    up to 37.5), and above it by at most 1e-8 relative where δ ≤ ½ (the pad, measured ≤ 2.8e-10
    for μ ≥ 1e-3 by tests/references/gaussian_profile_error.py).  The former difference of ndtr's
    was up to 1e-8 relative low, e.g. 2.9e-10 at μ = 0.02, δ = 1e-300."""
    c = np.concatenate([np.linspace(-mu / 2, 37.5, 40), [0.0, 36.9]])
    eps = np.unique(np.clip(mu * (c + mu / 2), 0.0, 1e4))
    ours = gaussian_delta(eps, mu)
    for e, d in zip(eps, ours):
        exact = exact_delta(e, mu)
        if exact >= 1e-300:
            assert d >= exact, (e, mu)
            assert exact > 0.5 or d <= exact * (1 + 1e-8), (e, mu)


@pytest.mark.parametrize(
    "sigma,delta", [(50.0, 1e-300), (1000.0, 1e-100), (0.5, 1e-300), (2.0, 1e-12)]
)
def test_epsilon_is_never_below_the_60_digit_value(sigma, delta):
    """The ε inverted from the profile at the δ floor is an upper bound: the exact δ there is ≤ δ
    (the ndtr difference gave ε 2.1e-13 low at σ = 50, δ = 1e-300, and low at σ = 1000,
    δ = 1e-100), and within 1e-10 relative of the exact ε (δ at ε·(1 − 1e-10) exceeds it)."""
    eps = float(gaussian_epsilon(delta, 1 / sigma))
    assert exact_delta(eps, 1 / sigma) <= delta
    assert exact_delta(eps * (1 - 1e-10), 1 / sigma) > delta


@pytest.mark.parametrize(
    "eps,delta", [(0.5, 1e-300), (1.0, 1e-300), (1.0, 1e-100), (5.0, 1e-300), (1.0, 1e-5)]
)
def test_analytic_sigma_is_never_below_the_60_digit_value(eps, delta):
    """sigma_analytic is a valid σ: the exact δ at its σ is ≤ δ (the ndtr difference gave a σ
    too small at each of these, by 6e-15 relative on δ at δ = 1e-5 and 2e-10 at 1e-300), and within
    1e-9 relative of the smallest valid σ."""
    sigma = sigma_analytic(eps, delta)
    assert exact_delta(eps, 1 / sigma) <= delta
    assert exact_delta(eps, 1 / (sigma * (1 - 1e-9))) > delta


def test_profile_inverse():
    mu = np.array([0.1, 0.5, 1.0, 3.0])
    eps = gaussian_epsilon(1e-6, mu)
    np.testing.assert_allclose(gaussian_delta(eps, mu), 1e-6, rtol=1e-8)


def test_salary_example():
    """004 §2, ε = 0.5, δ = 1e-6: analytic ≈ 806, Pei ≈ 1026 (its 4th expression), and the
    stated simple formula gives ≈ 1070 (the blog's 1051 is √(2 ln(1/δ))/ε·Δ)."""
    std = {n: get(n).sigma(SALARY, 0.5, 1e-6) * 100 for n in CALIBRATIONS}
    assert round(std["gaussian_analytic"]) == 806
    assert round(std["gaussian_pei"]) == 1026
    t = pei_terms(0.5, 1e-6)
    assert min(t) == t[3]
    assert std["gaussian_simple"] == pytest.approx(
        100 * math.sqrt(2 * math.log(1e6) + 1) / 0.5, rel=1e-12
    )
    assert round(std["gaussian_simple"]) == 1070
    assert round(100 * math.sqrt(2 * math.log(1e6)) / 0.5) == 1051
    assert std["gaussian_classic"] == pytest.approx(
        100 * math.sqrt(2 * math.log(1.25e6)) / 0.5, rel=1e-12
    )


@pytest.mark.parametrize("eps,delta,smallest", [(20.0, 1e-6, 0.3091), (13.0, 1e-5, 0.4050)])
def test_pei_is_valid_at_large_epsilon(eps, delta, smallest):
    """The 1st expression alone gave σ = 0.2763 < 0.3091 (ε = 20, δ = 1e-6; the true δ
    was ~47× the target) and 0.3967 < 0.4050 (ε = 13, δ = 1e-5)."""
    sigma = get("gaussian_pei").sigma(Setting(sensitivity=1.0), eps, delta)
    assert get("gaussian_analytic").sigma(Setting(sensitivity=1.0), eps, delta) == pytest.approx(
        smallest, abs=1e-4
    )
    assert sigma >= smallest
    assert float(gaussian_delta(eps, 1 / sigma)) <= delta


def test_pei_first_two_expressions_only_where_derived():
    """Expressions 1–2 are s = t₀/ε + 2ε^{-3/2} (t₀ = √(2 log(1/δ)), resp. 1 ∨ √(2
    log(1/δ) − log 2π)): as printed while εs − 1/(2s) ≥ t₀, i.e. up to the edge ε_e² = 8 +
    4t₀√ε_e (≥ 2√2); beyond it held at their value at the edge, where εs − 1/(2s) = t₀ exactly
    (the tail bound's condition)."""
    delta = 1e-6
    chernoff = math.sqrt(2 * math.log(1 / delta))
    mills = max(1.0, math.sqrt(2 * math.log(1 / delta) - math.log(2 * math.pi)))
    printed = lambda e, t0: t0 / e + 2 * e**-1.5  # noqa: E731
    for k, t0 in ((0, chernoff), (1, mills)):
        edge = brentq(lambda e: e * e - 8 - 4 * t0 * math.sqrt(e), 1.0, 100.0, xtol=1e-14)
        for eps in (0.01, 1.0, 2 * math.sqrt(2), 0.999 * edge):
            assert pei_terms(eps, delta)[k] == pytest.approx(printed(eps, t0), rel=1e-12)
        at_edge = printed(edge, t0)
        assert edge * at_edge - 1 / (2 * at_edge) == pytest.approx(t0, rel=1e-9)
        for eps in (1.001 * edge, 20.0, 100.0):
            assert pei_terms(eps, delta)[k] == pytest.approx(at_edge, rel=1e-9)
            assert pei_terms(eps, delta)[k] > printed(eps, t0)


@pytest.mark.parametrize("eps", [0.05, 0.2, 0.5, 0.9, 1.5, 4.0, 10.0])
def test_analytic_is_smallest_valid(eps):
    sigmas = {}
    for n in CALIBRATIONS:
        try:
            sigmas[n] = get(n).sigma(SALARY, eps, 1e-6)
        except AssumptionError:
            assert n == "gaussian_classic" and eps >= 1
    assert min(sigmas, key=sigmas.get) == "gaussian_analytic"
    # every calibration is a valid σ: the exact profile at that σ meets δ
    for s in sigmas.values():
        assert float(gaussian_delta(eps, 1 / s)) <= 1e-6 * (1 + 1e-9)


def test_classic_refuses_large_epsilon():
    with pytest.raises(AssumptionError) as err:
        get("gaussian_classic").sigma(SALARY, 1.0, 1e-6)
    assert err.value.key == "epsilon"
    with pytest.raises(AssumptionError):  # σ too small: ε would be ≥ 1
        get("gaussian_classic").epsilon(SALARY.replace(noise_multiplier=1.0), 1e-6)


def test_one_release_only():
    with pytest.raises(AssumptionError) as err:
        get("gaussian_analytic").epsilon(SALARY.replace(steps=10), 1e-6)
    assert err.value.key == "steps"
    with pytest.raises(AssumptionError) as err:
        get("gaussian_analytic").epsilon(Setting(noise_multiplier=2.0), 1e-6)
    assert err.value.key == "sensitivity"


def test_analytic_equals_pld_single_gaussian():
    """One full-batch Gaussian step: the exact profile vs dp_accounting's PLD (pessimistic)."""
    s = Setting(noise_multiplier=2.0, sampling="full_batch", steps=1)
    exact = float(gaussian_epsilon(1e-5, 0.5))
    assert get("pld").epsilon(s, 1e-5) == pytest.approx(exact, abs=2e-4)
    assert get("gaussian_analytic").epsilon(
        Setting(noise_multiplier=2.0, sensitivity=1.0), 1e-5
    ) == pytest.approx(exact)
