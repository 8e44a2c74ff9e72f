"""Figures computed by calibrating σ: gaussian_sigma (004 §2), sigma_vs_steps (004 §3; 003 §3),
techniques_table (000 Table I), sampling_gap (new)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dplab.accounting import Setting, get, risk
from dplab.errors import DPLabError
from dplab.figures import gaussian_sigma, sampling_gap, sigma_vs_steps, techniques_table
from dplab.figures.techniques_table import technique_setting
from dplab.accounting.base import SIGMA_RTOL as RTOL
from figure_params import default_params


# ------------------------------------------------------------------------ gaussian_sigma
@pytest.fixture(scope="module")
def salary():
    return gaussian_sigma.table({}, default_params("gaussian_sigma"))


def test_salary_defaults_are_004():
    params = default_params("gaussian_sigma")
    assert (params["dataset_size"], params["bound"], params["delta"]) == (10_000, 1_000_000, 1e-6)


def test_salary_analytic_sigma_is_806_at_half(salary):
    """004 §2: "for ε=0.5, δ=1e-6 … σ ≈ 806 with the analytic version", "≈ 1026 with Pei's"."""
    at_half = salary[np.isclose(salary.epsilon, 0.5)].set_index("accountant").noise_std
    assert at_half["gaussian_analytic"] == pytest.approx(806, abs=1)
    assert at_half["gaussian_pei"] == pytest.approx(1026, abs=1)
    # the exact Gaussian profile (Balle & Wang Thm 8) by hand, at the tabulated σ: δ(0.5) = 1e-6
    mu = 100 / at_half["gaussian_analytic"]
    delta = norm.cdf(mu / 2 - 0.5 / mu) - math.exp(0.5) * norm.cdf(-mu / 2 - 0.5 / mu)
    assert delta == pytest.approx(1e-6, rel=1e-4)


def test_salary_closed_forms_and_classic_only_below_one(salary):
    simple = salary[salary.accountant == "gaussian_simple"]
    expected = 100 * np.sqrt(2 * np.log(1e6) + 2 * simple.epsilon) / simple.epsilon
    np.testing.assert_allclose(simple.noise_std, expected, rtol=1e-12)
    classic = salary[salary.accountant == "gaussian_classic"]
    assert classic.epsilon.max() < 1 and len(classic) > 10
    np.testing.assert_allclose(
        classic.noise_std, 100 * np.sqrt(2 * np.log(1.25e6)) / classic.epsilon, rtol=1e-12
    )
    wide = salary.pivot(index="epsilon", columns="accountant", values="noise_std")
    assert (wide.gaussian_analytic <= wide.gaussian_pei * (1 + 1e-12)).all()
    assert (wide.gaussian_pei <= wide.gaussian_simple * (1 + 1e-12)).all()


# ------------------------------------------------------------------------ sigma_vs_steps
@pytest.fixture(scope="module")
def steps_table():
    params = {**default_params("sigma_vs_steps"), "steps": [2, 50, 1000]}
    return sigma_vs_steps.table({}, params)


def test_sigma_vs_steps_defaults_are_004():
    params = default_params("sigma_vs_steps")
    assert (params["epsilon"], params["delta"], params["sampling_rates"]) == (1.0, 1e-6, [0.05])
    assert set(params["accountants"]) == {"naive", "advanced", "kairouz", "moments", "rdp", "pld"}


@pytest.mark.slow
def test_sigma_vs_steps_orderings(steps_table):
    acc = steps_table[steps_table.kind == "accountant"]
    tol = 1 + 2 * RTOL
    for (sampling, q), panel in acc.groupby(["sampling", "sampling_rate"]):
        wide = panel.pivot(index="steps", columns="curve", values="noise_multiplier")
        assert wide.notna().all().all(), (sampling, wide)
        # pld is the tightest: ≤ rdp ≤ moments, and ≤ every composition accountant
        assert (wide.pld <= wide.rdp * tol).all() and (wide.rdp <= wide.moments * tol).all()
        for name in ("naive", "advanced", "kairouz", "moments"):
            assert (wide.pld <= wide[name] * tol).all(), name
        # 003 §3: σ_naive > σ_strong (advanced) > σ_moments for large T
        big = wide.loc[1000]
        assert big.naive > big.advanced > big.moments
        # each σ is a calibration: the accountant meets ε = 1 there and not 1 % below
        for name in ("rdp", "advanced"):
            s = Setting(noise_multiplier=big[name], sampling=sampling, sampling_rate=q, steps=1000)
            assert get(name).epsilon(s, 1e-6) <= 1.0
            assert get(name).epsilon(s.replace(noise_multiplier=0.99 * big[name]), 1e-6) > 1.0


@pytest.mark.slow
def test_sigma_vs_steps_closed_forms_are_003(steps_table):
    forms = steps_table[steps_table.kind == "closed_form"]
    for _, row in forms.iterrows():
        q, t = row.sampling_rate, row.steps
        if row.curve == "naive_003":
            expected = q * t * math.sqrt(2 * math.log(1.25 * q * t / 1e-6))
        else:
            expected = q * math.sqrt(t * math.log(1e6) * math.log(t / 1e-6))
        assert row.noise_multiplier == pytest.approx(expected, rel=1e-12)


@pytest.mark.slow
def test_full_batch_pld_matches_exact_gaussian_composition(steps_table):
    """T full-batch Gaussian steps = one Gaussian with σ/√T: σ(T) = √T·σ_analytic(ε, δ)."""
    acc = steps_table[(steps_table.kind == "accountant") & (steps_table.sampling == "full_batch")]
    pld = acc[acc.curve == "pld"].set_index("steps").noise_multiplier

    def exact_sigma(t):
        def delta(s):
            return norm.cdf(math.sqrt(t) / (2 * s) - s / math.sqrt(t)) - math.e * norm.cdf(  # noqa: E731
                -math.sqrt(t) / (2 * s) - s / math.sqrt(t)
            )

        return brentq(lambda s: delta(s) - 1e-6, 0.1, 1e4, xtol=1e-12)

    for t in (2, 50, 1000):
        assert pld[t] == pytest.approx(
            exact_sigma(t), rel=2e-3
        )  # PLD discretization is pessimistic
        assert pld[t] >= exact_sigma(t) * (1 - 2 * RTOL)


# ---------------------------------------------------------------------- techniques_table
def test_techniques_table_rows_meet_the_target():
    params = {
        **default_params("techniques_table"),
        "accountants": ["advanced", "rdp", "pld", "pabi", "ye_shokri", "asoodeh_projected"],
    }
    table = techniques_table.table({}, params).set_index("accountant")
    assert table.noise_multiplier.notna().all(), table.reason
    assert (
        table.noise_multiplier["pld"]
        <= table.noise_multiplier["rdp"]
        <= table.noise_multiplier["advanced"]
    )
    for name, row in table.iterrows():
        fields = {k: row[k] for k in techniques_table.SETTING_KEYS if k not in get(name).excludes}
        s = Setting(
            noise_multiplier=row.noise_multiplier,
            sampling=row.sampling,
            neighbouring=row.neighbouring,
            **{
                k: (int(v) if k in ("dataset_size", "batch_size", "steps", "dimension") else v)
                for k, v in fields.items()
            },
        )
        assert get(name).epsilon(s, params["delta"]) <= params["epsilon"] * (1 + 1e-9), name
        smaller = s.replace(noise_multiplier=row.noise_multiplier * (1 - 4 * RTOL))
        assert get(name).epsilon(smaller, params["delta"]) > params["epsilon"], name
    # σ over the sensitivity of the sum: σ/2 under replace-one
    assert table.effective_noise_multiplier["pabi"] == pytest.approx(
        table.noise_multiplier["pabi"] / 2
    )
    # the attack risk beside pld's σ is risk()'s at that σ; the others have no PLD and say so
    pld = table.loc["pld"]
    expected = risk.risk(
        technique_setting("pld", pld, int(pld.steps)).replace(noise_multiplier=pld.noise_multiplier)
    )
    assert [pld[f"tpr_at_fpr_{a:g}"] for a in risk.FPRS] == expected[
        "tpr"
    ] and pld.advantage == expected["advantage"]
    assert table.drop(index="pld").advantage.isna().all()
    assert table.drop(index="pld").risk_note.str.contains("no privacy-loss distribution").all()


# -------------------------------------------------------------------------- sampling_gap
@pytest.fixture(scope="module")
def gap():
    params = {**default_params("sampling_gap"), "noise_multipliers": [1.0], "epochs": [1, 4]}
    return params, sampling_gap.table({}, params)


def test_sampling_gap_defaults_are_the_default_run():
    import yaml
    from conftest import ROOT

    params, run = (
        default_params("sampling_gap"),
        yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["runs"]["dp_sgd"],
    )
    assert (params["dataset_size"], params["batch_size"], params["delta"]) == (
        1437,
        run["batch_size"],
        run["delta"],
    )
    with pytest.raises(DPLabError, match="batch_size"):
        sampling_gap.check({}, {**params, "batch_size": 2000})


def test_sampling_gap_rows_carry_their_bound_and_order(gap):
    params, table = gap
    assert table.reason.eq("").all() and {
        "bound",
        "accountant",
        "sampling",
        "neighbouring",
        "delta",
    } <= set(table)
    for name, rows in table.groupby("curve"):
        assert set(rows.bound) == {get(name).bound}
    eps = table[table.panel == "epsilon"].pivot(index="epochs", columns="curve", values="epsilon")
    assert (eps.shuffle_lower <= eps.fixed_batches).all()
    assert (eps.balls_in_bins_lower <= eps.balls_in_bins).all()
    assert (eps.balls_in_bins <= 1.15 * eps.pld).all() and (eps.shuffle_lower > eps.pld).all()
    # one epoch of fixed batches: one Gaussian mechanism of μ = 2/σ (add_remove, fixed batch size)
    assert eps.fixed_batches[1] == pytest.approx(
        get("gaussian_analytic").epsilon(Setting(noise_multiplier=0.5, sensitivity=1.0), 1e-5)
    )


def test_sampling_gap_sigma_rows_meet_or_certainly_miss_the_target(gap):
    params, table = gap
    sig = table[table.panel == "sigma"]
    for row in sig.itertuples():
        s = Setting(
            noise_multiplier=row.noise_multiplier,
            steps=int(row.steps),
            sampling=row.sampling,
            dataset_size=row.dataset_size,
            batch_size=row.batch_size,
        )
        eps = get(row.accountant).epsilon(s, row.delta)
        if row.bound == "upper":  # a σ that suffices, within RTOL of the smallest
            assert eps <= params["epsilon"]
            assert (
                get(row.accountant).epsilon(
                    s.replace(noise_multiplier=row.noise_multiplier / (1 + 2 * sampling_gap.RTOL)),
                    row.delta,
                )
                > params["epsilon"]
            )
        else:  # below this σ the lower bound already exceeds the target
            assert eps > params["epsilon"]
    assert sampling_gap.draw(table) is not None
