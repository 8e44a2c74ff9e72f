"""naive, advanced, kairouz, moments, rdp_closed_form: valid upper bounds, seed formulas."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld.accountant import advanced_composition
from dp_accounting.pld.common import DifferentialPrivacyParameters
from dp_accounting.rdp import rdp_privacy_accountant
from scipy.optimize import brentq

from dplab.accounting import Setting, get
from dplab.accounting.composition import kairouz_bound, sigma_naive_note, sigma_strong_note
from dplab.accounting.gaussian import gaussian_epsilon
from dplab.accounting.moments import LAMBDAS, log_e1, log_e2
from dplab.accounting.rdp_closed_form import valid_orders
from dplab.errors import AssumptionError
from test_accounting_rdp_pld import GRID


@pytest.mark.parametrize("sigma,q,t,delta", GRID)
def test_moments_at_least_rdp(sigma, q, t, delta):
    s = Setting(noise_multiplier=sigma, sampling_rate=q, steps=t)
    assert get("moments").epsilon(s, delta) >= get("rdp").epsilon(s, delta) * (1 - 1e-12)


@pytest.mark.parametrize("sigma,q", [(0.8, 0.01), (1.0, 0.1), (2.0, 0.3), (5.0, 0.01), (1.0, 1.0)])
def test_log_moments_equal_lambda_times_rdp(sigma, q):
    """α(λ) = λ·RDP(λ + 1) (000 §V): our binomial/numerical log-moments vs dp_accounting."""
    orders = LAMBDAS + 1.0
    acc = rdp_privacy_accountant.RdpAccountant(orders=list(orders))
    event = dp_accounting.GaussianDpEvent(sigma)
    acc.compose(event if q == 1.0 else dp_accounting.PoissonSampledDpEvent(q, event))
    ref = LAMBDAS * np.asarray(acc._rdp)
    ours = np.array([log_e2(q, sigma, int(lam)) for lam in LAMBDAS])
    np.testing.assert_allclose(ours, ref, rtol=1e-9)
    # the other direction E₁ (numerical integration) never exceeds E₂ (Mironov et al. 2019)
    for lam in (1, 4, 16):
        assert log_e1(q, sigma, lam) <= log_e2(q, sigma, lam) + 1e-9


def test_naive_closed_form_full_batch():
    """Full batch, add_remove: naive = T·ε₀(δ/T) of the exact Gaussian profile."""
    s = Setting(noise_multiplier=3.0, sampling="full_batch", steps=10)
    assert get("naive").epsilon(s, 1e-5) == pytest.approx(
        10 * float(gaussian_epsilon(1e-6, 1 / 3.0)), rel=1e-10
    )


def test_advanced_formula_and_optimized_split():
    """advanced = min over δ' of Dwork–Roth eq. (3) (000 Thm II.3); check one split by hand."""
    s = Setting(noise_multiplier=20.0, sampling="full_batch", steps=100)
    delta = 1e-5
    eps = get("advanced").epsilon(s, delta)
    dp = delta / 2
    e0 = float(gaussian_epsilon(delta / 2 / 100, 1 / 20.0))
    by_hand = e0 * math.sqrt(2 * 100 * math.log(1 / dp)) + 100 * e0 * math.expm1(e0)
    assert eps <= by_hand * (1 + 1e-12)
    assert eps >= 0.8 * by_hand  # the split is worth little here; the optimum is near
    # better than naive at many small steps (the point of the theorem)
    assert eps < get("naive").epsilon(s, delta)


def test_advanced_at_a_vanishing_step_equals_naive_zero():
    """σ = 8, q = 1e-300, T = 10, δ = 1e-300: each step is (0, δ/T)-DP (its δ(0) =
    q·(2Φ(1/(2σ)) − 1) ≈ 5e-302 ≤ 1e-301), so naive gives ε = 0 and advanced (min with naive) must
    too; it refused ("no finite ε"): x·δ' underflowed to 0 and 0·∞ made every candidate NaN."""
    from scipy.stats import norm

    s = Setting(noise_multiplier=8.0, sampling_rate=1e-300, steps=10)
    assert 1e-300 * (2 * norm.cdf(1 / 16) - 1) <= 1e-300 / 10
    assert get("naive").epsilon(s, 1e-300) == 0.0
    assert get("advanced").epsilon(s, 1e-300) == 0.0


def test_kairouz_rule_and_refusal():
    """004 §3.2: each step (ε₀, δ/(2T)) with ε₀ = ε/(2√(T log(e + ε/δ))) — check the rule
    is met with equality at the returned ε, and refused where Thm 3.4 does not certify it."""
    s = Setting(noise_multiplier=30.0, sampling="full_batch", steps=100)
    delta = 1e-6
    eps = get("kairouz").epsilon(s, delta)
    e0_rule = eps / (2 * math.sqrt(100 * math.log(math.e + eps / delta)))
    e0_step = float(gaussian_epsilon(delta / 200, 1 / 30.0))
    assert e0_rule == pytest.approx(e0_step, rel=1e-9)
    with pytest.raises(AssumptionError) as err:
        get("kairouz").epsilon(Setting(noise_multiplier=1.0, sampling_rate=0.01, steps=1000), 1e-6)
    assert err.value.key == "epsilon"


def _kairouz_thm_3_4(e0, t, delta_tilde):
    """Kairouz, Oh & Viswanath (2015) Thm 3.4 as printed: the minimum of its three terms."""
    drift = t * e0 * (math.exp(e0) - 1) / (math.exp(e0) + 1)
    return min(
        t * e0,
        drift + e0 * math.sqrt(2 * t * math.log(math.e + math.sqrt(t * e0**2) / delta_tilde)),
        drift + e0 * math.sqrt(2 * t * math.log(1 / delta_tilde)),
    )


@pytest.mark.parametrize("e0", [0.01, 0.3, 1.0, 2.5])
def test_kairouz_bound_dominates_the_optimal_composition(e0):
    """Thm 3.4 (every term) is never below their Thm 3.3, the exact k-fold composition of
    (ε₀, δ₀)-DP mechanisms (dp_accounting's ``advanced_composition``), at the same total δ."""
    for t, delta_tilde, delta0 in [
        (1, 1e-3, 0.0),
        (10, 1e-6, 1e-8),
        (60, 1e-5, 1e-9),
        (200, 1e-3, 0.0),
    ]:
        ours = float(kairouz_bound(e0, delta_tilde, t))
        assert ours == pytest.approx(_kairouz_thm_3_4(e0, t, delta_tilde), rel=1e-12)
        total = 1 - (1 - delta0) ** t * (1 - delta_tilde)
        optimal = advanced_composition(DifferentialPrivacyParameters(e0, delta0), t, total)
        assert ours >= optimal * (1 - 1e-12)


def test_kairouz_certified_exactly_where_the_theorem_reaches_the_rule():
    """Both sides of the boundary (full batch, σ = 2, δ = 1e-5): for every T ≤ 100 the rule's ε
    is printed iff min(Tε₀, Thm 3.4's terms at δ̃ = δ/2) ≤ ε, else refused.  T = 10 is the
    case the old check (the second term alone: 58.36 > 58.09) refused although Tε₀ = 23.3."""
    delta, sigma = 1e-5, 2.0
    outcomes = set()
    for t in range(1, 101):
        e0 = float(gaussian_epsilon(delta / (2 * t), 1 / sigma))
        rule = brentq(
            lambda e: e / (2 * math.sqrt(t * math.log(math.e + e / delta))) - e0,
            1e-9,
            1e6,
            xtol=1e-12,
        )
        certified = _kairouz_thm_3_4(e0, t, delta / 2) <= rule
        s = Setting(noise_multiplier=sigma, sampling="full_batch", steps=t)
        if certified:
            assert get("kairouz").epsilon(s, delta) == pytest.approx(rule, rel=1e-9)
        else:
            with pytest.raises(AssumptionError, match="not certified"):
                get("kairouz").epsilon(s, delta)
        outcomes.add(certified)
    assert outcomes == {True, False}
    ten = Setting(noise_multiplier=sigma, sampling="full_batch", steps=10)
    assert get("kairouz").epsilon(ten, delta) == pytest.approx(58.09, abs=0.01)


def test_amplification_without_replacement():
    """WOR + replace_one: Balle et al. 2018 amplification with q = b/n and σ_eff = σ/2."""
    wor = Setting(
        noise_multiplier=4.0,
        batch_size=10,
        dataset_size=1000,
        steps=1,
        sampling="without_replacement",
        neighbouring="replace_one",
    )
    e0 = float(gaussian_epsilon(1e-5 / 0.01, 2 / 4.0))
    assert get("naive").epsilon(wor, 1e-5) == pytest.approx(
        math.log1p(0.01 * math.expm1(e0)), rel=1e-10
    )
    with pytest.raises(AssumptionError):
        get("naive").epsilon(wor.replace(neighbouring="add_remove"), 1e-5)
    with pytest.raises(AssumptionError):
        get("naive").epsilon(
            Setting(noise_multiplier=1.0, sampling_rate=0.1, steps=3, neighbouring="replace_one"),
            1e-5,
        )


def test_note_closed_forms():
    """003 §3.1: σ_naive = qT√(2 ln(1.25qT/δ))/ε; 003 §3.2 order."""
    assert sigma_naive_note(0.01, 100, 1.0, 1e-5) == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)), rel=1e-12
    )
    r = sigma_strong_note(0.01, 10**6, 1.0, 1e-5) / sigma_naive_note(0.01, 10**6, 1.0, 1e-5)
    assert r < 0.01  # O(√(ln T / T)) ratio of 003 §3.3


def test_rdp_closed_form_region_and_value():
    """000 Thm A.1: ε = T·2q²α/σ² + log(1/δ)/(α − 1) at a fixed valid α; refusals outside."""
    s = Setting(noise_multiplier=5.0, sampling_rate=0.01, steps=1000, alpha=15.0)
    assert valid_orders(0.01, 5.0, 15.0) and not valid_orders(0.01, 5.0, 20.0)
    expected = 1000 * 2 * 0.01**2 * 15 / 25 + math.log(1e5) / 14
    assert get("rdp_closed_form").epsilon(s, 1e-5) == pytest.approx(expected, rel=1e-12)
    # the optimum over valid α is no worse than any single valid α, and ≥ the numerical rdp
    free = s.replace(alpha=None)
    assert get("rdp_closed_form").epsilon(free, 1e-5) <= expected
    assert get("rdp_closed_form").epsilon(free, 1e-5) >= get("rdp").epsilon(free, 1e-5)
    for changes, key in [
        (dict(noise_multiplier=3.9), "noise_multiplier"),
        (dict(sampling_rate=0.25), "sampling_rate"),
        (dict(alpha=20.0), "alpha"),
    ]:
        with pytest.raises(AssumptionError) as err:
            get("rdp_closed_form").epsilon(s.replace(**changes), 1e-5)
        assert err.value.key == key


def test_rdp_closed_form_optimum_on_the_exact_edge():
    """σ = 5, q = 0.01, T = 1000, δ = 1e-5: the unconstrained optimum α* ≈ 27 is outside 000
    Thm A.1's region, whose edge ½σ²L − 2 log σ = α (L = log(1 + 1/(q(α − 1)))) solved here
    independently is α ≈ 19.8166; ε is the closed form there (the grid alone gave 0.77195)."""
    q, sigma, t, delta = 0.01, 5.0, 1000, 1e-5
    first = lambda a: 0.5 * sigma**2 * math.log1p(1 / (q * (a - 1))) - 2 * math.log(sigma) - a  # noqa: E731
    edge = brentq(first, 2.0, 100.0, xtol=1e-13)
    assert edge == pytest.approx(19.8166, abs=1e-4)
    assert valid_orders(q, sigma, edge * (1 - 1e-9)) and not valid_orders(
        q, sigma, edge * (1 + 1e-9)
    )
    closed_form = t * 2 * q**2 * edge / sigma**2 + math.log(1 / delta) / (edge - 1)
    s = Setting(noise_multiplier=sigma, sampling_rate=q, steps=t)
    assert get("rdp_closed_form").epsilon(s, delta) == pytest.approx(closed_form, rel=1e-9)
    assert closed_form == pytest.approx(0.77038, abs=1e-5)
    # δ at that ε is δ again (000 Prop. V.2 at the same edge), and the message names the edge
    assert get("rdp_closed_form").delta(s, closed_form) == pytest.approx(delta, rel=1e-6)
    with pytest.raises(AssumptionError, match="19.8166"):
        get("rdp_closed_form").epsilon(s.replace(alpha=20.0), delta)
