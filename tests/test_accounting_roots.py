"""The accountants' one root search (dplab.accounting.roots)."""

import math

from dplab.accounting.gaussian import gaussian_delta, sigma_analytic
import numpy as np
import pytest

from dplab.accounting.roots import bracket, doubling, expand, multisection, safe_root


def test_expand_doubles_to_the_first_meeting_point_or_reports_the_cap():
    assert expand(lambda x: x < 5.0, 1.0, lambda x: 2 * x) == 8.0
    assert expand(lambda x: x < 5.0, 1.0, lambda x: 2 * x, within=lambda x: x <= 4.0) is None


def test_safe_root_returns_the_side_meeting_the_target():
    # gap(x) = 2 − x²: meets for x ≥ √2; a coarse Brent answer is stepped up until it meets
    gap = lambda x: 2.0 - x * x  # noqa: E731
    x = safe_root(gap, 0.0, 2.0, xtol=1e-3, rtol=1e-3, nudge=lambda x: x * (1 + 1e-4))
    assert gap(x) <= 0 and x - math.sqrt(2) < 2e-3
    # σ of the analytic Gaussian mechanism: δ(ε, 1/σ) meets δ, and 0.1% less σ does not
    sigma = sigma_analytic(1.0, 1e-5)
    assert gaussian_delta(1.0, 1 / sigma) <= 1e-5 < gaussian_delta(1.0, 1 / (sigma * 0.999))


def test_doubling_brackets_the_target_between_the_last_miss_and_the_first_meet():
    assert doubling(lambda x: x < 5.0, 1.0) == (4.0, 8.0)  # 1, 2, 4 miss, 8 meets
    assert doubling(lambda x: x < 0.3, 1.0) == (
        0.0,
        1.0,
    )  # the start meets: nothing below was tried
    assert doubling(lambda x: x < 600.0, 1.0, cap=512.0) is None  # 1024 is past the cap


def test_bracket_steps_outward_in_widening_steps_to_the_target():
    # from 0 upwards by 0.02, 0.08, 0.32, 1.28: 0.02, 0.10, 0.42 miss x >= 1.3, 1.70 meets it
    lo, hi = bracket(lambda x: x >= 1.3, 0.0, -10.0, 10.0)
    assert math.isclose(lo, 0.42) and math.isclose(hi, 1.70)
    # from 5 downwards: 4.98, 4.90, 4.58, 3.30, −1.82 (the first that misses)
    lo, hi = bracket(lambda x: x >= 1.3, 5.0, -10.0, 10.0)
    assert math.isclose(lo, -1.82) and math.isclose(hi, 3.30)
    assert bracket(lambda x: True, 0.0, -1.0, 1.0) == (None, -1.0)  # even the lowest meets it
    assert bracket(lambda x: False, 0.0, -1.0, 1.0) == (1.0, None)  # not even the highest does


def test_multisection_finds_the_last_lattice_point_where_the_predicate_holds():
    calls = []

    def over_at(first, step, count):
        s = first + step * np.arange(count)
        calls.append(count)
        return s < 377, (10 * s,)

    assert multisection(over_at, 3, 1000, 8) == (376, (3760,))
    assert sum(calls) < 60  # rounds of ≤ 9 points, not a scan of 997
    assert multisection(lambda f, st, c: (np.zeros(c, bool), (np.zeros(c),)), 3, 1000, 8) is None


def _calls(solver, f, a, b, **tol):
    """(root, every x ``solver`` evaluated ``f`` at) as raw bytes, or the exception's type."""
    xs = []

    def g(x):
        xs.append(float(x).hex())
        return f(x)

    try:
        return float(solver(g, a, b, **tol)).hex(), xs
    except (ValueError, RuntimeError) as e:
        return type(e), xs


def test_brent_takes_scipy_brentqs_steps_bit_for_bit():
    from scipy.optimize import brentq

    from dplab.accounting.gaussian import gaussian_delta
    from dplab.accounting.roots import brent

    cases = [  # (f, a, b): smooth, steep, flat, kinked, a root at an end, the Gaussian's δ
        (lambda x: x**3 - 2 * x - 5, 2.0, 3.0),
        (lambda x: math.exp(x) - 10.0, -5.0, 10.0),
        (lambda x: math.atan(50 * (x - 0.3)), -1.0, 1.0),
        (lambda x: (x - 0.7) ** 9, 0.0, 1.0),
        (lambda x: abs(x - 0.123) ** 0.5 * (1 if x > 0.123 else -1), 0.0, 1.0),
        (lambda x: x - 1.0, 1.0, 3.0),
        (lambda x: (x**3 - 2 * x - 5) * 1e-300, 2.0, 3.0),  # products underflow
        (lambda x: math.log(gaussian_delta(1.0, 1 / x)) - math.log(1e-5), 0.5, 20.0),
        (lambda x: 1.0 / (x - 0.5) if x != 0.5 else math.inf, 0.0, 1.0),  # a pole: no root
    ]
    tolerances = [{}, {"xtol": 1e-3, "rtol": 1e-3}, {"xtol": 1e-15, "rtol": 1e-15}]
    for f, a, b in cases:
        for tol in tolerances:
            for lo, hi in ((a, b), (b, a)):
                assert _calls(brent, f, lo, hi, **tol) == _calls(brentq, f, lo, hi, **tol)


def test_brent_refuses_what_brentq_refuses():
    from dplab.accounting.roots import brent

    with pytest.raises(ValueError, match="different signs"):
        brent(lambda x: x * x + 1, -1.0, 1.0)
    with pytest.raises(ValueError, match="xtol"):
        brent(lambda x: x, -1.0, 1.0, xtol=0.0)
    with pytest.raises(ValueError, match="rtol"):
        brent(lambda x: x, -1.0, 1.0, rtol=1e-17)
    with pytest.raises(ValueError, match="NaN"):
        brent(lambda x: math.nan if x > 0 else -1.0, -1.0, 1.0)
    with pytest.raises(RuntimeError, match="converge"):
        brent(lambda x: x**3 - 2 * x - 5, 2.0, 3.0, xtol=1e-15, maxiter=3)
