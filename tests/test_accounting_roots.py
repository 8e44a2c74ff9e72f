"""The accountants' one root search (dplab.accounting.roots)."""

import math

from dplab.accounting.gaussian import gaussian_delta, sigma_analytic
from dplab.accounting.roots import expand, safe_root


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
