"""The FFT rounding allowance of pld's certified read-off (:func:`pld_tilted.rounding_bound`)
against compositions computed exactly, where rounding dominates (long T, tiny tail masses).

The one-step PMFs are dyadic (every probability k/2^m, exact in float64), so their T-fold
composition is an integer polynomial power: computed exactly with Python integers (repeated
squaring), circularly folded with mpmath at 60 digits, or, for T up to 1e8, in long double.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import special

from dplab.accounting import pld_tilted

#: one-step PMFs: integer weights over 2^BITS (sum exactly 2^BITS)
BITS = 10
STEPS = {3: [1, 1022, 1], 5: [3, 100, 818, 100, 3]}


def exact_power(weights: list[int], t: int) -> list[int]:
    """Coefficients of (Σ_i weights_i x^i)^t, exactly (Kronecker substitution: one big integer per
    polynomial, squared by Python's own multiplication)."""
    slot = BITS * t + (t * len(weights)).bit_length() + 1  # every coefficient < 2^(BITS·t)·(t·len)

    def pack(coef):
        return sum(c << (slot * i) for i, c in enumerate(coef))

    def unpack(value, length):
        mask = (1 << slot) - 1
        return [(value >> (slot * i)) & mask for i in range(length)]

    result, base, length, base_len = 1, pack(weights), 1, len(weights)
    while t:
        if t & 1:
            result, length = result * base, length + base_len - 1
        t >>= 1
        if t:
            base, base_len = base * base, 2 * base_len - 1
    return unpack(result, length)


@pytest.mark.parametrize("precise", [False, True])
def test_fft_composition_error_is_within_the_allowance_without_wrap(precise):
    """T = 300 of a 3-bin PMF in 1024 bins (no wrap-around): the composed tail falls to 1e-900, so
    almost every bin's value is rounding; the observed 2-norm error against the exact composition
    lies within :func:`rounding_bound`, and above it if FFT_C were 1e-3 (the test can fail).
    ``precise`` (long double, the careful window): within its own allowance, 2^11 times smaller
    (measured 8.7e-18 against 1.35e-15, where float64's error is 1.6e-14), plus the relative ulp of
    its rounding to float64 (which the read-off counts per bin)."""
    if precise and np.finfo(np.longdouble).eps > 1e-18:
        pytest.skip("no extended precision long double on this platform")
    weights, t, size = STEPS[3], 300, 1024
    w = np.zeros(size)
    w[:3] = np.array(weights) / 2**BITS
    exact = [float(Fraction(c, 2 ** (BITS * t))) for c in exact_power(weights, t)]
    computed, bound = pld_tilted.fft_compose([w], [t], precise)
    error = float(np.linalg.norm(computed - np.pad(exact, (0, size - len(exact)))))
    cast = pld_tilted.U * float(np.linalg.norm(exact)) if precise else 0.0
    assert 0 < error <= bound + cast
    assert (
        error > 1e-3 / pld_tilted.FFT_C * bound
    )  # the allowance is not vacuous: FFT_C = 1e-3 would fail
    assert (
        np.max(np.abs(computed[len(exact) :])) > 0 and min(exact) < 1e-300
    )  # rounding where the truth is ~0


def test_fft_composition_error_is_within_the_allowance_for_a_long_circular_run():
    """T = 1e4 of a 5-bin PMF folded into 60 bins (radices 2, 3, 5: pocketfft's mixed-radix passes):
    exact circular composition in mpmath (60 digits) by repeated squaring."""
    weights, size, t = STEPS[5], 60, 10**4
    w = np.zeros(size)
    w[: len(weights)] = np.array(weights) / 2**BITS
    mpmath.mp.dps = 60

    def circular(a, b):
        full = np.convolve(a, b)
        return full[:size] + np.concatenate((full[size:], [mpmath.mpf(0)]))

    result = np.array([mpmath.mpf(1)] + [mpmath.mpf(0)] * (size - 1), dtype=object)
    base = np.array(
        [mpmath.mpf(int(c)) / 2**BITS for c in np.pad(weights, (0, size - len(weights)))],
        dtype=object,
    )
    n = t
    while n:
        if n & 1:
            result = circular(result, base)
        n >>= 1
        if n:
            base = circular(base, base)
    computed, bound = pld_tilted.fft_compose([w], [t])
    error = float(np.linalg.norm(computed - np.array([float(x) for x in result])))
    assert 0 < error <= bound


@pytest.mark.parametrize("t", [10**6, 10**7])
def test_fft_composition_error_is_within_the_allowance_at_ten_million_steps(t):
    """T = 1e6 and 1e7 in 3000 bins (2^3·3·5^3; not yet mixed to uniform): the reference is the same
    composition in x87 long double (u = 2^-64, 2^11 times finer; its own allowance is the bound
    scaled by that), which scipy's pocketfft computes natively.  The float64 error stays within the
    allowance (measured: 6.1e-13 against 8.9e-9 at T = 1e6; the bound is a worst case)."""
    if np.finfo(np.longdouble).eps > 1e-18:
        pytest.skip("no extended precision long double on this platform")
    from scipy import fft

    weights, size = STEPS[5], 3000
    w = np.zeros(size)
    w[: len(weights)] = np.array(weights) / 2**BITS
    wide = w.astype(np.longdouble)
    reference = fft.irfft(np.exp(t * np.log(fft.rfft(wide))), size)
    computed, bound = pld_tilted.fft_compose([w], [t])
    finer = np.finfo(np.longdouble).eps / np.finfo(float).eps
    error = float(np.linalg.norm((computed - reference).astype(float)))
    assert 0 < error <= bound * (1 + finer)


def test_certified_delta_is_at_or_above_the_exact_delta_in_the_far_tail():
    """The whole read-off (window, tilt, Chernoff, rounding allowance) on a dyadic 5-bin PMF of
    losses (−2 … 2)·0.05 composed T = 300 times: δ(ε) where it is about 1e-12 … 1e-60 is never below
    the exact value (integer composition), and within 1e-6 relative of it."""
    weights, t, disc = [1, 6, 50, 6, 1], 300, 0.05
    bits = 6
    pmf = pld_tilted.TiltedPmf(np.array(weights) / 2**bits, -2, 0.0, disc)
    slot = bits * t + 16
    packed = sum(c << (slot * i) for i, c in enumerate(weights)) ** t
    coefficients = [(packed >> (slot * k)) & ((1 << slot) - 1) for k in range(4 * t + 1)]
    losses = (np.arange(4 * t + 1) - 2 * t) * disc
    log_p = np.array([math.log(c) - bits * t * math.log(2) if c else -np.inf for c in coefficients])

    def exact_delta(epsilon):
        above = losses > epsilon
        return float(np.exp(special.logsumexp(log_p[above], b=-np.expm1(epsilon - losses[above]))))

    for epsilon in (3.0, 5.0, 7.0):
        exact = exact_delta(epsilon)
        ours = pmf.delta(t, epsilon)
        assert 1e-80 < exact < 1e-10 and exact <= ours <= exact * (1 + 1e-6), (epsilon, exact, ours)


def test_composition_of_two_pmfs_is_within_the_allowance_and_certified_in_the_far_tail():
    """Phases: T₁ = 200 steps of a 3-bin PMF then T₂ = 100 of a 5-bin one (dyadic, composed exactly
    as one integer polynomial product).  :func:`fft_compose` of the pair stays within its allowance
    (without wrap-around), and :class:`pld_tilted.Composition`'s δ(ε) is never below the exact δ
    where it is about 1e-13 … 1e-80, and within 1e-6 relative of it."""
    (t1, a), (t2, b), disc = (200, STEPS[3]), (100, [1, 6, 50, 6, 1]), 0.05
    bits_a, bits_b = BITS, 6
    size = 2048
    wa, wb = np.zeros(size), np.zeros(size)
    wa[:3], wb[:5] = np.array(a) / 2**bits_a, np.array(b) / 2**bits_b
    # exact: (Σ a_i x^i)^T₁ · (Σ b_i x^i)^T₂, over 2^(bits_a·T₁ + bits_b·T₂)
    slot = bits_a * t1 + bits_b * t2 + 16

    def pack(coef):
        return sum(c << (slot * i) for i, c in enumerate(coef))

    packed = pack(a) ** t1 * pack(b) ** t2
    length = 2 * t1 + 4 * t2 + 1
    coefficients = [(packed >> (slot * k)) & ((1 << slot) - 1) for k in range(length)]
    scale = (bits_a * t1 + bits_b * t2) * math.log(2)
    exact = np.array([float(Fraction(c, 2 ** (bits_a * t1 + bits_b * t2))) for c in coefficients])
    computed, bound = pld_tilted.fft_compose([wa, wb], [t1, t2])
    error = float(np.linalg.norm(computed - np.pad(exact, (0, size - length))))
    assert 0 < error <= bound and error > 1e-3 / pld_tilted.FFT_C * bound

    # losses: a's bins at (−1 … 1)·disc, b's at (−2 … 2)·disc
    pmf_a = pld_tilted.TiltedPmf(np.array(a) / 2**bits_a, -1, 0.0, disc)
    pmf_b = pld_tilted.TiltedPmf(np.array(b) / 2**bits_b, -2, 0.0, disc)
    composition = pld_tilted.Composition([(pmf_a, t1), (pmf_b, t2)])
    losses = (np.arange(length) - t1 - 2 * t2) * disc
    log_p = np.array([math.log(c) - scale if c else -np.inf for c in coefficients])

    def exact_delta(epsilon):
        above = losses > epsilon
        return float(np.exp(special.logsumexp(log_p[above], b=-np.expm1(epsilon - losses[above]))))

    for epsilon in (2.0, 4.0, 6.0):
        want = exact_delta(epsilon)
        ours = composition.delta(epsilon)
        assert 1e-90 < want < 1e-10 and want <= ours <= want * (1 + 1e-6), (epsilon, want, ours)


def test_window_edge_search_is_the_linear_scan_in_log_many_bounds():
    """``_first_edge`` returns the edge a scan of start, start + step, … (capped at ``last``)
    would stop at, for a predicate that turns true once, with O(log) calls: the scan made one
    Chernoff bound per step, hours of them where small q leaves a spread of a few bins (σ = 0.5,
    q = 1e-10, T = 8, δ = 1e-6; now 66 bounds, ε = 0)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        start, step = int(rng.integers(0, 50)), int(rng.integers(1, 9))
        last = start + int(rng.integers(0, 10**4))
        threshold = int(rng.integers(0, last + 2))
        calls = []

        def enough(edge, threshold=threshold, calls=calls):
            calls.append(edge)
            return edge >= threshold

        scan = start
        while scan < last and not enough(scan):
            scan = min(last, scan + step)
        calls.clear()
        assert pld_tilted._first_edge(start, step, last, enough) == scan
        assert len(calls) <= 2 * math.log2((last - start) / step + 2) + 2


def test_pld_where_dp_accountings_inverse_refuses_near_the_loss_edge():
    """σ = 1, q = 1e-13: at pld's refined interval dp_accounting's scalar inverse privacy loss
    refuses a grid point within rounding of log(1 − q) (``_log_sub``: "a must be greater than b"),
    an internal error in every pld query at such q; that point now takes the edge's own value.
    T = 8, δ = 1e-12: T·q < δ bounds δ(0), so ε = 0 exactly."""
    from dp_accounting.pld import privacy_loss_distribution

    from dplab.accounting import Setting, get

    setting = Setting(noise_multiplier=1.0, sampling_rate=1e-13, steps=8)
    disc = get("pld").discretization(setting)
    with pytest.raises(ValueError, match="greater than"):
        privacy_loss_distribution.from_gaussian_mechanism(
            1.0, sampling_prob=1e-13, value_discretization_interval=disc, use_connect_dots=True
        )
    assert get("pld").epsilon(setting, 1e-12) == 0.0


@pytest.mark.parametrize("neighbouring,factor", [("add_remove", 1), ("replace_one", 2)])
def test_loss_std_where_the_likelihood_ratio_overflows(neighbouring, factor):
    """q = 1: the loss is Gaussian, std 1/σ (replace_one: 2/σ); it was NaN (log1p(−1) = −∞ at
    one node, e^z overflowing at σ = 0.01)."""
    from dplab.accounting import Setting
    from dplab.accounting.pld_accountant import loss_std

    for sigma in (0.5, 0.01):
        s = Setting(noise_multiplier=sigma, sampling_rate=1.0, steps=1, neighbouring=neighbouring)
        assert loss_std(s) == pytest.approx(factor / sigma, rel=1e-9)
