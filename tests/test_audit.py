"""Tightness audit (issue 9): Clopper–Pearson, ε from rates, exact Gaussian last iterate, the
lockstep runner against loop.train, and a tiny audit below the PLD upper bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import beta, binomtest

from dplab import accounting
from dplab.accounting import Setting
from dplab.accounting.gaussian import gaussian_delta
from dplab.accounting.langevin import cor2_rdp, thm3_exact_rdp
from dplab import units
from dplab.audit import exact, stats
from dplab.audit.runner import train_many
from dplab.errors import DPLabError
from dplab.training import data, loop
from dplab.training.config import resolve_run


def test_clopper_pearson_matches_scipy_and_closed_forms():
    lo, hi = stats.clopper_pearson(7, 20, 0.95)
    ci = binomtest(7, 20).proportion_ci(0.95, method="exact")
    assert lo == pytest.approx(ci.low, rel=1e-10) and hi == pytest.approx(ci.high, rel=1e-10)
    assert lo == pytest.approx(beta.ppf(0.025, 7, 14)) and hi == pytest.approx(beta.ppf(0.975, 8, 13))
    # k = n: lower end (a/2)^(1/n); k = 0: upper end 1 − (a/2)^(1/n)
    lo, hi = stats.clopper_pearson([10, 0], [10, 10], 0.95)
    assert lo[0] == pytest.approx(0.025 ** (1 / 10)) and hi[0] == 1.0
    assert lo[1] == 0.0 and hi[1] == pytest.approx(1 - 0.025 ** (1 / 10))
    with pytest.raises(DPLabError, match="confidence"):
        stats.clopper_pearson(1, 2, 1.5)


def test_epsilon_from_known_rates():
    assert stats.epsilon_from_rates(0.5, 0.05, 0.0) == pytest.approx(math.log(10))
    assert stats.epsilon_from_rates(0.5, 0.05, 0.1) == pytest.approx(math.log(8))
    # symmetric: TNR = 0.99, FNR = 0.9 → log(0.99/0.9) beats log(0.1/0.01)? no: log(10) > log(1.1)
    assert stats.epsilon_from_rates(0.1, 0.01, 0.0) == pytest.approx(math.log(10))
    assert stats.epsilon_from_rates(0.95, 0.5, 0.0) == pytest.approx(math.log(0.5 / 0.05))
    assert stats.epsilon_from_rates(0.3, 0.3, 0.0) == 0.0
    # the Gaussian mechanism's own optimal test at threshold μ/2 gives ε ≤ its exact ε(δ)
    from scipy.stats import norm

    mu = 2.0
    tpr, fpr = norm.sf(0.0 - mu / 2), norm.sf(mu / 2)
    assert float(stats.epsilon_from_rates(tpr, fpr, 0.0)) == pytest.approx(math.log(tpr / fpr))


def test_audit_bound_on_separated_scores_and_budget():
    rng = np.random.default_rng(0)
    b = stats.audit_bound(rng.normal(20, 1, 400), rng.normal(0, 1, 400), 1e-5)
    # 200 evaluation runs per world; at perfect separation the CP ends are 0.025^(1/200)
    t = 0.025 ** (1 / 200)
    assert b.fp == 0 and b.tp == 200 and b.positives == b.negatives == 200
    assert b.ci_low == pytest.approx(math.log((t - 1e-5) / (1 - t)), rel=1e-9)
    assert b.ci_low <= b.epsilon <= b.ci_high
    # the budget that certifies ε > 1 at rates (0.5, 0.05) exists, and more runs certify more
    n1 = stats.runs_to_certify(0.5, 0.05, 1.0, 1e-5)
    n2 = stats.runs_to_certify(0.5, 0.05, 1.5, 1e-5)
    assert n1 is not None and n2 is not None and n2 > n1
    _, low, _ = stats.epsilon_interval(round(0.5 * n1), n1, round(0.05 * n1), n1, 1e-5)
    assert low > 1.0
    assert stats.runs_to_certify(0.5, 0.05, math.log(10) + 0.01, 0.0) is None


def test_exact_delta_is_the_gaussian_profile_and_linear_equals_composition():
    sigma, lr, steps = 3.0, 0.3, np.array([1, 5, 50])
    mu = exact.last_iterate_mu(sigma, lr, steps, "linear")
    np.testing.assert_allclose(mu, 2.0 / sigma * np.sqrt(steps))  # replace-one: Δ = 2C
    np.testing.assert_allclose(exact.exact_delta(1.0, sigma, lr, steps, "linear"), gaussian_delta(1.0, mu))
    # T = 1: one Gaussian mechanism whatever the loss
    assert exact.last_iterate_mu(sigma, lr, [1], "quadratic")[0] == pytest.approx(2.0 / sigma)
    # linear loss: the last iterate is the T-fold composition, so PLD (tight) agrees with it
    s = Setting(noise_multiplier=sigma, steps=50, sampling="full_batch", neighbouring="replace_one",
                dataset_size=100, batch_size=100, clip=1.0, lr=lr)
    pld = accounting.get("pld").epsilon_curve(s, 1e-5, steps)
    np.testing.assert_allclose(exact.exact_epsilon(1e-5, sigma, lr, steps, "linear"), pld, rtol=2e-3)
    with pytest.raises(DPLabError, match="neighbouring"):
        exact.last_iterate_mu(sigma, lr, steps, "quadratic", neighbouring="add_remove")
    with pytest.raises(DPLabError, match="lr"):
        exact.last_iterate_mu(sigma, 1.5, steps, "quadratic")


def test_exact_rdp_is_thm3_and_below_cor2():
    sigma, lr, n, clip, alpha = 2.0, 0.02, 5000, 1.0, 10.0
    steps = np.array([1, 10, 100, 300, 5000])
    ours = exact.exact_rdp(alpha, sigma, lr, steps, "quadratic", clip=clip)
    s002 = units.langevin_sigma(sigma, clip, lr, n)
    s_g = units.sum_sensitivity(clip, "replace_one")
    np.testing.assert_allclose(ours, thm3_exact_rdp(alpha, steps, lr, s002, n, s_g), rtol=1e-10)
    assert np.all(ours <= cor2_rdp(alpha, steps, lr, s002, n, s_g) * (1 + 1e-12))
    # and in 002's own Fig. 2 setting (σ = 0.02, S_g = 4)
    k = np.arange(1, 301)
    assert np.all(thm3_exact_rdp(alpha, k, 0.02, 0.02, 5000, 4.0) <= cor2_rdp(alpha, k, 0.02, 0.02, 5000, 4.0))


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    from dplab.training.data import prepare, write

    out = tmp_path_factory.mktemp("digits")
    write(out, *prepare({"kind": "digits", "seed": 0, "test_fraction": 0.2}, "digits"))
    return data.load(out)


@pytest.mark.parametrize("method,extra", [("dp_sgd", {}), ("projected_dp_sgd", {"diameter": 2.0}),
                                          ("regularized_dp_sgd", {"regularization": 0.1})])
def test_lockstep_runs_are_the_engines_runs(digits, tmp_path, method, extra):
    n = 60
    sub = data.Dataset(digits.x_train[:n], digits.y_train[:n], digits.x_test[:20], digits.y_test[:20], digits.info)
    cfg = resolve_run({"method": method, "model": "mlp", "hidden": 4, "steps": 5, "batch_size": 8, "lr": 0.5,
                       "noise_multiplier": 1.0, "accountants": [], "seed": 3, "log_every": 5, "checkpoint_every": 0,
                       "device": "cpu", **extra})
    loop.train(cfg, sub, tmp_path)
    ref = torch.load(tmp_path / "model.pt")
    res = train_many(cfg, torch.stack([sub.x_train] * 2), torch.stack([sub.y_train] * 2), [7, 3], [5], 10)
    for k in ref:
        torch.testing.assert_close(res.params[k][1], ref[k], rtol=1e-6, atol=1e-7)
    assert not torch.allclose(res.params["1.weight"][0], ref["1.weight"])


def test_dead_feature_canary_is_the_only_gradient_on_its_block(digits):
    from dplab.audit import canary
    from dplab.training import models
    from dplab.training.per_example import clipped_grad_sum

    dead = canary.dead_features(digits.x_train)
    assert {0, 32, 39} <= set(dead.tolist())  # 0 in all 1797 digits images (24 too in this training split)
    assert float(digits.x_train.flatten(1)[:, dead].abs().max()) == 0.0 and float(digits.x_train.flatten(1)[:, 1].max()) > 0
    cfg = resolve_run({"method": "dp_sgd", "model": "logreg", "steps": 1, "batch_size": 8, "noise_multiplier": 1.0})
    model = models.build(cfg, [1, 8, 8], 10)
    params = {k: v.detach() for k, v in model.named_parameters()}
    c = canary.build(digits.x_train, 16.0, 0, params)
    assert c.weight == "1.weight" and float(c.x_in.norm()) == pytest.approx(16.0)
    loss = models.example_loss(model, 0.0)
    stack = lambda g: {k: v[None] for k, v in g.items()}  # noqa: E731
    rest = clipped_grad_sum(loss, params, digits.x_train[:200], digits.y_train[:200], 1.0).grad_sum
    assert float(canary.block(c, stack(rest)).abs().max()) == 0.0  # no real record reaches W[:, P]
    # θ = 0: p uniform, ∇ = (p − e_y)⊗(x, 1), ‖·‖ = √0.9·√(s² + 1) > C: clipped to C, the share
    # s/√(s² + 1) of it on v = W[:, P]·x̂, along p − e_y for the canary and the opposite for its mirror
    for x, sign in ((c.x_in, 1.0), (c.x_out, -1.0)):
        g = clipped_grad_sum(loss, params, x[None], c.label[None], 1.0).grad_sum
        v = canary.block(c, stack(g))[0]
        assert float(v.norm()) == pytest.approx(16.0 / math.sqrt(257.0), rel=1e-5)
        e = torch.full((10,), 0.1)
        e[0] -= 1.0
        torch.testing.assert_close(sign * v / v.norm(), e / e.norm())


def bound_violations(table) -> list[str]:
    """Rows where a certified lower bound exceeds a valid upper bound of the same release (a
    trajectory lower bound: trajectory accountants; a last-iterate one: every accountant) or the
    exact value."""
    out = []
    for _, row in table.iterrows():
        for obs in ("last_iterate", "trajectory"):
            low = row.get(f"lower_{obs}_ci_low")
            if low is None or not np.isfinite(low):
                continue
            for col in [c for c in table if c.startswith("upper_") or c == "exact_epsilon"]:
                if col.startswith("upper_") and obs == "trajectory" and row.get("release_" + col[6:]) != "trajectory":
                    continue
                if np.isfinite(row[col]) and low > row[col] + 1e-9:
                    out.append(f"{row.method} T={row.steps} {obs}: {low} > {col}={row[col]}")
    return out


@pytest.mark.slow
def test_tiny_audit_certifies_a_positive_bound_below_every_upper_bound(digits, tmp_path):
    """q = 1/2, σ = 1/2, T = 4, 64 runs per world (32 evaluate): PLD ε = 21.8; the ideal 1-D problem
    (shift ±0.99/σ per sampled step) gives a 95% lower bound ≥ 0.99 in 95% of 300 simulated audits
    (simulation in the issue-9 report), so the engine's audit must certify well above 0."""
    from dplab.audit.membership import run_audit

    entry = {"dataset": "digits", "dataset_size": 20, "runs": 64, "chunk": 64, "confidence": 0.95, "steps": [1, 4],
             "canary_norm": 16.0, "canary_label": 0,
             "run": {"model": "logreg", "lr": 0.5, "clip": 1.0, "noise_multiplier": 0.5, "batch_size": 10, "delta": 1e-5},
             "methods": {"dp_sgd": {}, "projected_dp_sgd": {"diameter": 2.0}, "regularized_dp_sgd": {"regularization": 0.5}}}
    table = run_audit(entry, digits, 0)
    assert set(table.observation) == {"last_iterate", "trajectory"} and "upper_pld" in table
    assert (table.positives == 32).all() and (table.negatives == 32).all()
    assert (table.epsilon_lower_ci_low <= table.epsilon_lower).all()
    strong = table[(table.method == "dp_sgd") & (table.steps == 4)].set_index("observation").epsilon_lower_ci_low
    assert strong["trajectory"] > 0.5 and strong["last_iterate"] > 0.5

    from dplab.figures import tightness_audit

    path = tmp_path / "audit.csv"
    table.to_csv(path, index=False)
    fig_table = tightness_audit.table([str(path)], {"audit": "tiny", "exact_losses": ["quadratic", "linear"]})
    assert bound_violations(fig_table) == []
    assert {"noisy_gd_quadratic", "noisy_gd_linear", "dp_sgd"} <= set(fig_table.method)
    quad = fig_table[fig_table.method == "noisy_gd_quadratic"]
    assert (quad.exact_epsilon <= quad.upper_langevin).all() and (quad.exact_epsilon <= quad.upper_pld * (1 + 1e-9)).all()
