"""rdp and pld against dp_accounting called directly, and rdp against Opacus's RDP accountant."""

import itertools
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant, privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant
from opacus.accountants.analysis import rdp as opacus_rdp

from dplab.accounting import Setting, get, pld_tilted
from dplab.accounting.gaussian import sigma_analytic
from dplab.errors import AssumptionError

# 24 settings (σ, q, T, δ)
GRID = [
    (sigma, q, t, delta)
    for (sigma, q), (t, delta) in itertools.product(
        [(0.8, 0.01), (1.0, 0.004), (1.5, 0.05), (4.0, 0.1)],
        [(1, 1e-5), (100, 1e-5), (1000, 1e-6), (50, 1e-3), (3000, 1e-5), (10, 1e-8)],
    )
]
assert len(GRID) >= 20


def _setting(sigma, q, t):
    return Setting(noise_multiplier=sigma, sampling_rate=q, steps=t)


@pytest.mark.parametrize("sigma,q,t,delta", GRID)
def test_rdp_matches_dp_accounting_and_opacus(sigma, q, t, delta):
    ours = get("rdp").epsilon(_setting(sigma, q, t), delta)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), t)
    assert ours == pytest.approx(acc.get_epsilon(delta), rel=1e-12)
    # Opacus's own RDP of the sampled Gaussian and conversion, on dp_accounting's orders
    orders = list(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
    rdp = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=t, orders=orders)
    eps_opacus, _ = opacus_rdp.get_privacy_spent(orders=orders, rdp=rdp, delta=delta)
    # the two libraries sum the fractional-order series differently: agree to ~1e-5
    assert ours == pytest.approx(eps_opacus, rel=1e-4)


@pytest.mark.parametrize("sigma,q,t,delta", GRID[::3])
def test_pld_matches_dp_accounting(sigma, q, t, delta):
    ours = get("pld").epsilon(_setting(sigma, q, t), delta)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), t)
    # dp_accounting's read-off of its FFT composition, which pld only tilts at: pld's certified
    # value adds a rounding allowance (pld_tilted), ≤ 1e-4 relative at these δ
    assert acc.get_epsilon(delta) * (1 - 1e-9) <= ours <= acc.get_epsilon(delta) * (1 + 1e-4)
    assert ours <= get("rdp").epsilon(_setting(sigma, q, t), delta) * (1 + 1e-9)


def _dp_accounting_bracket(sigma, q, t, delta, interval=1e-4):
    """dp_accounting's ε of T Poisson-sampled Gaussian steps from its optimistic PLD (privacy
    buckets rounding down: a lower bound on the true ε) and its pessimistic one (connect the dots:
    an upper bound, but for its FFT's absolute rounding), both at ``interval``."""
    return [
        privacy_loss_distribution.from_gaussian_mechanism(
            sigma,
            sampling_prob=q,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
            value_discretization_interval=interval,
        )
        .self_compose(t)
        .get_epsilon_for_delta(delta)
        for pessimistic in (False, True)
    ]


@pytest.mark.parametrize("sigma,q,t,delta", [(0.5, 1.5e-4, 5, 3e-7), (0.5, 1e-4, 10, 1e-7)])
def test_pld_is_tight_at_small_sigma_small_q_small_delta(sigma, q, t, delta):
    """Where the certified read-off's tilt is steep across a wide window (small σ and q: one
    step's losses span ~12.7, δ far below q): pld printed twice dp_accounting's ε here (0.832
    against 0.409), and fell from T = 10 to T = 20, because mass wrapping around its FFT was
    scaled up by the untilting.  Now between dp_accounting's lower and upper bounds (the upper
    within 1e-4), and growing with T."""
    lower, upper = _dp_accounting_bracket(sigma, q, t, delta)
    curve = get("pld").epsilon_curve(_setting(sigma, q, 2 * t), delta, [t // 2, t, 2 * t])
    assert lower <= curve[1] <= upper * (1 + 1e-4)
    assert np.all(np.diff(curve) > 0)


@pytest.mark.parametrize("sigma", [0.82, 1.0])
def test_pld_is_tight_where_float64_rounding_would_dominate_delta(sigma):
    """q = 7.4e-5, T = 614, δ = 1e-12: the losses of the few sampled steps lie far apart, the tilt
    cannot lift the mass near ε to the tilted composition's peak, and the float64 FFT's rounding
    allowance alone exceeded δ: at σ = 0.82 pld printed 0.743 where dp_accounting's ε is 0.2967,
    and at σ = 1 it refused ("no finite ε"; dp_accounting: 0.0636).  Read again in long double
    (the careful window): 0.2939 and 0.0636, above dp_accounting's optimistic PLD at 1e-4 and
    within 1e-3 of its pessimistic one (at σ = 1, 0.06352; at 1e-5, not run here: [0.2899, 0.2954]
    and [0.06051, 0.06357])."""
    lower, upper = _dp_accounting_bracket(sigma, 7.4e-5, 614, 1e-12)
    ours = get("pld").epsilon(_setting(sigma, 7.4e-5, 614), 1e-12)
    assert lower <= ours <= upper * (1 + 1e-3)


def test_pld_reads_at_the_default_interval_where_the_refined_one_fails(monkeypatch):
    """pld refines its interval to a quarter of one step's loss std (σ = 2, q = 1e-4: 1.33e-5);
    where the read-off at that interval fails (here: its windows, 2603–7499 bins, made too wide by
    a WINDOW_MAX of 2000; in the wild σ = 0.9, q = 1e-5, T = 1e5, δ = 1e-12 gave no finite ε, now
    0.0579), it reads again at dp_accounting's 1e-4 (any interval gives an upper bound): equal to
    dp_accounting's pessimistic PLD at 1e-4 (0.006379), above the refined interval's value
    (0.005015); a run in two phases of 500 such steps the same.  Where both fail, the refusal
    names WINDOW_MAX and rdp's ε."""
    setting, delta = _setting(2.0, 1e-4, 1000), 1e-6
    refined = get("pld").epsilon(setting, delta)
    monkeypatch.setattr(pld_tilted, "WINDOW_MAX", 2000)
    ours = get("pld").epsilon(setting, delta)
    upper = _dp_accounting_bracket(2.0, 1e-4, 1000, delta)[1]
    assert ours == pytest.approx(upper, rel=1e-4) and ours > refined * (1 + 1e-3)
    halves = [setting.replace(steps=500)] * 2
    assert get("pld").phases_epsilon(halves, delta) == pytest.approx(ours, rel=1e-6)
    monkeypatch.setattr(pld_tilted, "WINDOW_MAX", 100)
    with pytest.raises(AssumptionError, match="WINDOW_MAX = 100.*rdp gives ε ≤"):
        get("pld").epsilon(setting, delta)


def test_replace_one_conventions():
    """Our σ is std/C on the sum: replace_one doubles the sensitivity.  Full batch, one step:
    pld (dp_accounting shifts ±C itself) and rdp (σ/2 passed) both see a Gaussian of μ = 2/σ."""
    s = Setting(noise_multiplier=2.0, sampling="full_batch", neighbouring="replace_one", steps=1)
    same = Setting(noise_multiplier=1.0, sampling="full_batch", neighbouring="add_remove", steps=1)
    assert get("pld").epsilon(s, 1e-5) == pytest.approx(get("pld").epsilon(same, 1e-5), rel=1e-3)
    assert get("rdp").epsilon(s, 1e-5) == pytest.approx(get("rdp").epsilon(same, 1e-5), rel=1e-12)


def test_rdp_without_replacement_matches_dp_accounting():
    s = Setting(
        noise_multiplier=2.0,
        batch_size=50,
        dataset_size=1000,
        steps=200,
        sampling="without_replacement",
        neighbouring="replace_one",
    )
    acc = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    event = dp_accounting.SampledWithoutReplacementDpEvent(
        1000, 50, dp_accounting.GaussianDpEvent(1.0)
    )
    acc.compose(event, 200)
    assert get("rdp").epsilon(s, 1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12)


@pytest.mark.parametrize(
    "name,changes",
    [
        (
            "rdp",
            dict(neighbouring="replace_one"),
        ),  # poisson + replace_one: not in dp_accounting's RDP
        ("rdp", dict(sampling="shuffle")),
        (
            "pld",
            dict(
                sampling="without_replacement",
                neighbouring="replace_one",
                batch_size=10,
                dataset_size=1000,
                sampling_rate=None,
            ),
        ),
        ("pld", dict(sampling="shuffle")),
        (
            "rdp",
            dict(
                sampling="without_replacement",
                neighbouring="add_remove",
                batch_size=10,
                dataset_size=1000,
                sampling_rate=None,
            ),
        ),
    ],
)
def test_unsupported_pairs_refused(name, changes):
    s = Setting(noise_multiplier=1.0, sampling_rate=0.01, steps=10).replace(**changes)
    with pytest.raises(AssumptionError) as err:
        get(name).epsilon(s, 1e-5)
    assert err.value.key in ("sampling", "neighbouring")
    if changes.get("sampling") == "shuffle":
        assert "no amplification" in str(err.value)


def test_calibration_reaches_large_sigma():
    """T full-batch Gaussian steps with multiplier σ are one Gaussian with σ/√T: at T = 10⁶ the
    calibrated σ is 1000× the analytic single-release σ, far beyond the search's first steps."""

    setting = Setting(noise_multiplier=1.0, sampling="full_batch", steps=10**6)
    sigma = get("pld").sigma(setting, 1.0, 1e-5)
    assert sigma == pytest.approx(1000 * sigma_analytic(1.0, 1e-5), rel=2e-3)


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_pld_at_a_poisson_rate_of_one_is_the_full_batch_gaussian(neighbouring):
    """q = 1 draws every record at every step: the full-batch mechanism, T steps one Gaussian of
    μ√T. It went through the discretized composition, refused at T = 23875 (a window of 1.5e7
    bins) and 4e-7 above the exact ε where it answered."""
    setting = Setting(
        noise_multiplier=2.26,
        steps=23875,
        sampling="poisson",
        sampling_rate=1.0,
        neighbouring=neighbouring,
    )
    full = setting.replace(sampling="full_batch", sampling_rate=None)
    pld = get("pld")
    assert pld.epsilon(setting, 1.4e-12) == pld.epsilon(full, 1.4e-12)
    assert pld.delta(setting, 30.0) == pld.delta(full, 30.0)


@pytest.mark.parametrize("neighbouring,shift", [("add_remove", 1.0), ("replace_one", 2.0)])
def test_pld_sigma_at_a_poisson_rate_of_one_is_the_closed_form(neighbouring, shift):
    """σ at q = 1 is the full-batch closed form σ = Δ√T·σ₁ (σ₁ the exact one-release
    calibration). Poisson q = 1 started from rdp's σ and stopped within the search's tolerance:
    14.098418 where the closed form gives 14.098383 (T = 50, ε = 2, δ = 1e-5)."""
    setting = Setting(steps=50, sampling="poisson", sampling_rate=1.0, neighbouring=neighbouring)
    full = setting.replace(sampling="full_batch", sampling_rate=None)
    pld = get("pld")
    exact = shift * math.sqrt(50) * sigma_analytic(2.0, 1e-5)
    assert pld.sigma(setting, 2.0, 1e-5) == pld.sigma(full, 2.0, 1e-5)
    assert pld.sigma(setting, 2.0, 1e-5) == pytest.approx(exact, rel=1e-9)
