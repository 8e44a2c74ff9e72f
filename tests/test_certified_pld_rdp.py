"""pld and rdp against independent certified values at the edges of what they accept.

An upper bound is never below the truth: its ε is at least a certified lower bound on the true ε,
and the true δ at its ε is at most δ.  References:
- one step (T = 1) and full batch: the exact δ(ε) of the pair, from normal CDFs in log space
  (P(L > ε) − e^ε·Q(L > ε), the privacy loss L monotone in the output);
- T > 1, Poisson: brackets [ε_low, ε_up] from tests/references/certified_pld.py (privacy buckets
  rounded down and up, composed by a tilted FFT with error terms; independent of dplab and of
  dp_accounting), stored in tests/references/certified_pld.json with each row's run time.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, special

from dplab.accounting import Setting, get
from dplab.accounting.pld_accountant import PLD_DISC_MAX, PLD_STEP_BINS
from dplab.errors import AssumptionError

ROWS = json.loads((Path(__file__).parent / "references" / "certified_pld.json").read_text())["rows"]


def _log_tail(x, mean, sigma, upper):
    """log P(X > x) (upper) or log P(X ≤ x) for X ~ N(mean, σ²)."""
    z = (x - mean) / sigma
    return special.log_ndtr(-z) if upper else special.log_ndtr(z)


def _log_mix(x, parts, sigma, upper):
    return special.logsumexp(
        [math.log(w) + _log_tail(x, m, sigma, upper) for w, m in parts if w > 0]
    )


def exact_one_step_delta(sigma, q, neighbouring, epsilon):
    """The exact δ(ε) of one Poisson-subsampled Gaussian step (σ = std/C on the clipped sum; the
    record adds 0 or C, replace_one moves it between +C and −C): max over the
    relation's directions."""
    mix_up, mix_down, zero = [(1 - q, 0.0), (q, 1.0)], [(1 - q, 0.0), (q, -1.0)], [(1.0, 0.0)]
    pairs = (
        [(mix_up, zero), (zero, mix_up)] if neighbouring == "add_remove" else [(mix_up, mix_down)]
    )
    deltas = []
    for p, qq in pairs:

        def loss(x, p=p, qq=qq):
            def dens(parts):
                return special.logsumexp(
                    [
                        math.log(w) - (x - m) ** 2 / (2 * sigma**2)  # noqa: E731
                        for w, m in parts
                        if w > 0
                    ]
                )

            return dens(p) - dens(qq)

        increasing = loss(1.0) > loss(-1.0)
        span = 50 * sigma + 50
        lo, hi = (-span, span)
        f = (lambda x: loss(x) - epsilon) if increasing else (lambda x: epsilon - loss(x))
        if f(hi) <= 0:  # the loss never exceeds ε on this side: δ = 0 within the span
            deltas.append(0.0)
            continue
        if f(lo) > 0:
            cut = lo
        else:
            cut = optimize.brentq(f, lo, hi, xtol=1e-15, rtol=1e-15)
        a, b = _log_mix(cut, p, sigma, increasing), _log_mix(cut, qq, sigma, increasing)
        deltas.append(math.exp(a) * -math.expm1(epsilon + b - a) if epsilon + b - a < 0 else 0.0)
    return max(deltas)


def exact_gaussian_delta(mu, epsilon):
    """δ(ε) of the Gaussian mechanism of sensitivity/std μ (Balle & Wang 2018,
    Thm 8), in log space."""
    a = special.log_ndtr(-epsilon / mu + mu / 2)
    b = special.log_ndtr(-epsilon / mu - mu / 2)
    return math.exp(a) * -math.expm1(epsilon + b - a)


def _poisson(sigma, q, t, neighbouring="add_remove"):
    return Setting(noise_multiplier=sigma, sampling_rate=q, steps=t, neighbouring=neighbouring)


@pytest.mark.parametrize(
    "row",
    ROWS,
    ids=lambda r: (
        f"s{r['noise_multiplier']}-q{r['sampling_rate']}-T{r['steps']}-"
        f"{r['neighbouring']}-d{r['delta']:g}"
    ),
)
def test_pld_epsilon_never_below_the_certified_bracket(row):
    """Large-T settings (σ = 2, q = 0.5, T = 1000 and σ = 3, q = 0.3, T = 3000 at δ = 1e-12,
    printed 91.056 and 54.79 before) and others at δ = 1e-12, q = 0.99, T = 20000, replace_one."""
    setting = _poisson(
        row["noise_multiplier"], row["sampling_rate"], row["steps"], row["neighbouring"]
    )
    eps = get("pld").epsilon(setting, row["delta"])
    assert row["epsilon_low"] <= eps <= row["epsilon_up"] * (1 + 1e-4)


def test_pld_curve_delta_and_rdp_paths_at_the_issue_setting():
    """The same bracket holds on the sweep path (ε at several T in one call), on the δ path (the δ
    printed at ε_low exceeds the δ at which ε_low is certified too small), and for rdp."""
    row = ROWS[0]
    assert (row["noise_multiplier"], row["sampling_rate"], row["steps"]) == (2.0, 0.5, 1000)
    setting = _poisson(2.0, 0.5, 1000)
    curve = get("pld").epsilon_curve(setting, row["delta"], [10, 500, 1000])
    assert row["epsilon_low"] <= curve[-1] <= row["epsilon_up"] * (1 + 1e-4) and np.all(
        np.diff(curve) > 0
    )
    assert get("pld").delta(setting, row["epsilon_low"]) > row["delta"]
    assert get("rdp").epsilon(setting, row["delta"]) >= row["epsilon_low"]


def test_pld_pair_is_certified_in_both_directions(monkeypatch):
    """add_remove: the printed ε (curve path) is where both PMFs' certified δ are ≤ δ, and it is the
    larger of their certified ε.  The other PMF's ε is only searched where its certified δ at the
    first's ε exceeds δ; swapping the pair (add first, the smaller ε here) takes that branch."""
    acc, setting, delta, steps = get("pld"), _poisson(2.0, 0.5, 10), 1e-5, np.array([3, 10])
    composed, tilted = acc.composed(setting, steps)
    alone = [
        [p.epsilon(int(t), delta, g) for t, g in zip(steps, c.epsilons(steps, delta))]
        for c, p in zip(composed, tilted)
    ]
    assert np.all(np.array(alone[0]) > np.array(alone[1]))  # remove's ε is the larger here
    for pair in ((composed, tilted), (composed[::-1], tilted[::-1])):
        monkeypatch.setattr(type(acc), "composed", lambda self, s, t, disc, pair=pair: pair)
        eps = acc.epsilon_curve(setting, delta, steps)
        np.testing.assert_allclose(eps, np.max(alone, axis=0), rtol=1e-9)
        for p in tilted:  # up to the rounding of the read-off's closed form ε = log((A − δ)/E)
            assert all(p.delta(int(t), e) <= delta * (1 + 1e-12) for t, e in zip(steps, eps))


@pytest.mark.parametrize(
    "sigma, q, delta, neighbouring",
    [
        (1.0, 0.3, 1e-12, "add_remove"),
        (1.0, 0.3, 1e-12, "replace_one"),
        (2.0, 0.999, 1e-12, "add_remove"),
        (0.8, 0.01, 1e-6, "replace_one"),
    ],
)
def test_pld_one_step_never_below_the_exact_epsilon(sigma, q, delta, neighbouring):
    """T = 1: the true δ at the printed ε is at most δ (δ at the floor, q near 1)."""
    eps = get("pld").epsilon(_poisson(sigma, q, 1, neighbouring), delta)
    assert exact_one_step_delta(sigma, q, neighbouring, eps) <= delta * (1 + 1e-9)
    assert exact_one_step_delta(sigma, q, neighbouring, eps - 1e-3) > delta  # and tight to 1e-3


def test_pld_large_epsilon_is_answered_not_refused():
    """Large ε: σ = 0.3, q = 0.3, replace_one, T = 1 reaches ε = 16 at δ = 4.96e-5
    (dp_accounting's own test: GaussianPrivacyLoss.from_privacy_guarantee answers σ = 0.3).  Its
    one-step PLD needs 6.3e5 bins of 1e-4 (over PLD_STEP_BINS): it was refused; now the interval
    is coarsened (≤ PLD_DISC_MAX) and the ε printed is certified and within
    1e-3 of the exact one."""
    setting = _poisson(0.3, 0.3, 1, "replace_one")
    assert (
        get("pld").step_width(setting) / 1e-4 > PLD_STEP_BINS
        and get("pld").discretization(setting) <= PLD_DISC_MAX
    )
    eps = get("pld").epsilon(setting, 4.96e-5)
    assert exact_one_step_delta(0.3, 0.3, "replace_one", eps) <= 4.96e-5
    assert exact_one_step_delta(0.3, 0.3, "replace_one", 16.0) == pytest.approx(4.96e-5, rel=2e-3)
    assert eps <= 16.0 + 1e-2


@pytest.mark.slow
def test_pld_sigma_at_large_epsilon_matches_dp_accounting():
    """The CLI command of point 4: σ within 0.2 % of dp_accounting's 0.3,
    never below the exact σ."""
    setting = _poisson(1.0, 0.3, 1, "replace_one")
    sigma = get("pld").sigma(setting, 16.0, 4.96e-5, start=0.31)
    exact = optimize.brentq(
        lambda s: exact_one_step_delta(s, 0.3, "replace_one", 16.0) - 4.96e-5, 0.2, 0.4
    )
    assert exact <= sigma <= exact * (1 + 1e-3)
    assert sigma == pytest.approx(0.3, rel=2e-3)


@pytest.mark.parametrize(
    "sigma, q, delta, epsilon", [(0.3, 0.3, 3.294e-05, 16.0), (0.2, 0.2, 0.02302382, 16.0)]
)
def test_rdp_sigma_at_large_epsilon_is_answered_and_valid(sigma, q, delta, epsilon):
    """dp_accounting's test_gaussian_from_privacy_parameters (add/remove): σ = 0.3 and 0.4/2 reach
    ε = 16 exactly; rdp answers a σ at least as large, whose exact one-step δ meets the target."""
    got = get("rdp").sigma(_poisson(1.0, q, 1), epsilon, delta)
    assert exact_one_step_delta(sigma, q, "add_remove", epsilon) == pytest.approx(delta, rel=2e-3)
    assert got >= sigma * (1 - 1e-3)
    assert exact_one_step_delta(got, q, "add_remove", epsilon) <= delta


@pytest.mark.parametrize("neighbouring", ["add_remove"])
@pytest.mark.parametrize(
    "sigma, q, delta",
    [(1.0, 0.3, 1e-300), (2.0, 0.999, 1e-12), (0.5, 0.01, 1e-100), (30.0, 0.5, 0.5)],
)
def test_rdp_one_step_never_below_the_exact_epsilon(sigma, q, delta, neighbouring):
    """T = 1: rdp's δ floor (1e-300), q near 1, σ large: the exact δ at the
    printed ε is at most δ."""
    eps = get("rdp").epsilon(_poisson(sigma, q, 1, neighbouring), delta)
    assert exact_one_step_delta(sigma, q, neighbouring, eps) <= delta * (1 + 1e-9)


@pytest.mark.parametrize("name", ["pld", "rdp"])
@pytest.mark.parametrize("neighbouring, shift", [("add_remove", 1.0), ("replace_one", 2.0)])
@pytest.mark.parametrize(
    "steps, delta", [(1, 1e-12), (10**6, 1e-12), (10**15, 1e-12), (100, 1e-300)]
)
def test_full_batch_never_below_the_exact_gaussian(name, neighbouring, shift, steps, delta):
    """Full batch: T steps are one Gaussian of μ = shift·√T/σ; the exact δ at the printed ε is ≤ δ
    (T up to the count limit 1e15, δ down to 1e-300 where the accountant accepts it)."""
    acc = get(name)
    sigma = 1e6
    setting = Setting(
        noise_multiplier=sigma, sampling="full_batch", neighbouring=neighbouring, steps=steps
    )
    lo = acc.resolved("delta")[0]
    if delta < lo:
        with pytest.raises(AssumptionError, match="delta"):
            acc.epsilon(setting, delta)
        return
    eps = acc.epsilon(setting, delta)
    assert exact_gaussian_delta(shift * math.sqrt(steps) / sigma, eps) <= delta * (1 + 1e-9)


@pytest.mark.parametrize("epsilon", [5.0, 1e4])
def test_delta_at_the_epsilon_ceiling_is_an_upper_bound(epsilon):
    """ε up to its ceiling (EPSILON_MAX = 1e4): δ printed ≥ the exact one-step δ (T = 1)."""
    for name in ("pld", "rdp"):
        got = get(name).delta(_poisson(1.0, 0.3, 1), epsilon)
        assert got >= exact_one_step_delta(1.0, 0.3, "add_remove", epsilon)
