"""Figures of 001 (Figs. 1–3) and 002 (Figs. 1–2): their tables against the
source papers' formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import chi2, norm

from dplab.figures import asoodeh_projected, asoodeh_regularized, langevin_rdp, langevin_tightness
from figure_params import default_params


def theta(eps, r):
    """001 Prop. 1, by hand: Q(ε/r − r/2) − e^ε Q(ε/r + r/2)."""
    return norm.sf(eps / r - r / 2) - math.exp(eps) * norm.sf(eps / r + r / 2)


# ------------------------------------------------------------------------------ 001
@pytest.fixture(scope="module")
def projected():
    params = default_params("asoodeh_projected")
    return params, asoodeh_projected.table({}, params)


def test_projected_defaults_are_fig1_parameters(projected):
    params, _ = projected
    assert (
        params["diameter"],
        params["clip"],
        params["lr"],
        params["sigma_a"],
        params["sampling_rate"],
    ) == (3.0, 2.0, 0.01, 1.0, 0.001)
    assert (params["epsilon"], params["delta"]) == (3.0, 1e-3)


def test_projected_delta_is_thm2_closed_form(projected):
    params, table = projected
    p, r = 0.001, (3 + 2 * 0.01 * 2) / 1.0
    th = theta(3.0, r)
    rows = table[(table.panel == "delta_vs_steps") & (table.curve == "bound")]
    for t in (1, 2, 5, 30):
        expected = p * th * (1 - ((1 - p) * th) ** t) / (1 - (1 - p) * th)
        assert rows[rows.steps == t].delta.item() == pytest.approx(expected, rel=1e-9)
    limit = table[(table.panel == "delta_vs_steps") & (table.curve == "limit")].delta.iloc[0]
    assert limit == pytest.approx(p * th / (1 - (1 - p) * th), rel=1e-9)
    assert np.all(np.diff(rows.delta) > 0) and rows.delta.max() <= limit


def test_projected_epsilon_converges_to_eq22_and_stays_below_eq23(projected):
    params, table = projected
    p, delta, r = 0.001, 1e-3, (3 + 2 * 0.01 * 2) / 1.0
    target = delta / (p + (1 - p) * delta)
    eq22 = brentq(lambda e: theta(e, r) - target, 0.0, 20.0, xtol=1e-13)
    eq23 = r * (r / 2 + norm.ppf(p * (1 - delta) / (p + (1 - p) * delta)))
    eps = table[table.panel == "epsilon_vs_steps"]
    bound = eps[eps.curve == "bound"]
    assert eps[eps.curve == "eq22"].epsilon.iloc[0] == pytest.approx(eq22, rel=1e-9)
    assert eps[eps.curve == "eq23"].epsilon.iloc[0] == pytest.approx(eq23, rel=1e-12)
    assert np.all(np.diff(bound.epsilon) >= -1e-12)
    assert np.all(bound.epsilon <= eq22 * (1 + 1e-9)) and eq22 < eq23
    assert bound.epsilon.iloc[-1] == pytest.approx(eq22, rel=1e-6)  # converged by T = 30


@pytest.fixture(scope="module")
def regularized():
    params = default_params("asoodeh_regularized")
    params = {**params, "max_steps": 400, "points": 5}
    return params, asoodeh_regularized.table({}, params)


def eq21(eps, t, p, lr, clip, sigma, lam, d, kappa):
    """001 Thm 3, eq. (21) by hand, with θ at the diameter 2(r_s − σκ)/σ (docs/hidden_state.md)."""
    s = np.arange(1, t + 1)
    r = (lr * clip + kappa * sigma) * (1 - (1 - lam) ** s) / lam
    th = np.array(
        [
            theta(eps, 2 * max(x - sigma * kappa, 0.0) / sigma) if x > sigma * kappa else 0.0
            for x in r
        ]
    )
    second = sum((1 - p) ** (t - k) * np.prod(th[k - 1 :]) for k in range(1, t + 1)) * p / (1 - p)
    return (1 + math.exp(eps)) * (1 - chi2.cdf(kappa**2, d) ** t) + second


def test_regularized_defaults_are_fig2_parameters(regularized):
    params = default_params("asoodeh_regularized")
    assert (
        params["clip"],
        params["lr"],
        params["sigma_a"],
        params["epsilon"],
        params["sampling_rate"],
    ) == (1.0, 0.1, 5.0, 5.0, 0.001)
    assert params["regularizations"] == [0.65, 0.01]


def test_regularized_delta_is_eq21_at_its_kappa_and_kappa_is_optimal(regularized):
    params, table = regularized
    for _, row in table[table.steps.isin([200, 400])].iterrows():
        args = (5.0, int(row.steps), 0.001, 0.1, 1.0, 5.0, row.regularization, params["dimension"])
        assert row.delta == pytest.approx(eq21(*args, row.kappa), rel=1e-8)
        for other in (0.5 * row.kappa, 0.9 * row.kappa, 1.1 * row.kappa, 2 * row.kappa):
            assert row.delta <= eq21(*args, other) * (1 + 1e-9)
    for _, rows in table.groupby("regularization"):
        assert np.all((rows.delta > 0) & (rows.delta < 1))


# ------------------------------------------------------------------------------ 002
A = {"lr": 0.02, "sigma": 0.02, "n": 5000, "s_g": 4.0}


def test_langevin_rdp_is_cor1_and_app_e_as_printed():
    params = default_params("langevin_rdp")
    assert (
        params["lr"],
        params["langevin_sigma"],
        params["dataset_size"],
        params["sensitivity"],
        params["smoothness"],
    ) == (0.02, 0.02, 5000, 4.0, 4.0)
    table = langevin_rdp.table({}, params)
    eta, sigma, n, s_g = A["lr"], A["sigma"], A["n"], A["s_g"]
    for alpha, lam in [(30, 1), (20, 1), (10, 1), (10, 2), (10, 4)]:
        rows = table[
            (table.bound == "cor1") & (table.alpha == alpha) & (table.strong_convexity == lam)
        ]
        for k in (0, 50, 200, 500):
            printed = alpha * s_g**2 / (lam * sigma**2 * n**2) * (1 - math.exp(-lam * eta * k / 2))
            assert rows[rows.steps == k].rdp_epsilon.item() == pytest.approx(
                printed, rel=1e-12, abs=1e-15
            )
    for alpha in (10, 20, 30):
        rows = table[(table.bound == "composition") & (table.alpha == alpha)]
        for k in (1, 100, 500):
            assert rows[rows.steps == k].rdp_epsilon.item() == pytest.approx(
                alpha * s_g**2 / (4 * n**2 * sigma**2) * eta * k, rel=1e-12
            )
    # Fig. 1: α = 30, λ = 1 levels off at αS_g²/(λσ²n²) = 0.048 while composition passes it
    top = table[
        (table.bound == "cor1") & (table.alpha == 30) & (table.strong_convexity == 1)
    ].rdp_epsilon.max()
    assert 0.046 < top < 0.048


def test_langevin_rdp_refuses_lr_above_one_over_beta():
    from dplab.errors import DPLabError

    with pytest.raises(DPLabError, match="lr"):
        langevin_rdp.check({}, {**default_params("langevin_rdp"), "lr": 0.3})


def test_langevin_tightness_bounds_as_printed_and_ordered():
    params = default_params("langevin_tightness")
    table = langevin_tightness.table({}, params)
    eta, sigma, n, s_g = A["lr"], A["sigma"], A["n"], A["s_g"]
    for alpha in (10, 20, 30):
        rows = table[table.alpha == alpha].pivot(
            index="steps", columns="bound", values="rdp_epsilon"
        )
        for k in (10, 100, 300):
            cor2 = (
                alpha
                * s_g**2
                / ((2 - eta) * sigma**2 * n**2)
                * (1 - math.exp(-(2 - eta) * eta * k / 2))
            )
            lower = alpha * s_g**2 / (4 * sigma**2 * n**2) * (1 - math.exp(-eta * k))
            assert rows.loc[k, "cor2"] == pytest.approx(cor2, rel=1e-12)
            assert rows.loc[k, "thm3_lower"] == pytest.approx(lower, rel=1e-12)
            assert rows.loc[k, "composition"] == pytest.approx(
                alpha * s_g**2 / (4 * n**2 * sigma**2) * eta * k
            )
        k = rows.index[rows.index > 0]
        assert np.all(rows.loc[k, "thm3_lower"] <= rows.loc[k, "thm3_exact"] * (1 + 1e-12))
        assert np.all(rows.loc[k, "thm3_exact"] <= rows.loc[k, "cor2"] * (1 + 1e-12))
        # 002 §5: "the upper bound is roughly two times larger than the lower bound"
        assert 1.9 < rows.loc[300, "cor2"] / rows.loc[300, "thm3_lower"] < 2.1
        # composition grows as fast as the lower bound early, then linearly above both
        assert rows.loc[1, "composition"] == pytest.approx(rows.loc[1, "thm3_lower"], rel=0.02)
        assert rows.loc[300, "composition"] > rows.loc[300, "cor2"]
