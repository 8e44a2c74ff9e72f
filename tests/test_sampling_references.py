"""The epoch-sampler accountants against the authors' own public implementation (docs/sampling.md,
"Checked against").

Reference values come from google-research/google-research, folder dpsgd_batch_sampler_accounting
(Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha & Zhang: "How Private are DP-SGD Implementations?",
ICML 2024; "Scalable DP-SGD: Shuffling vs. Poisson Subsampling", NeurIPS 2024; with Harrison &
Leeman, "Balls-and-Bins Sampling for DP-SGD", AISTATS 2025), run on settings of our choosing with
dp_accounting 0.6.0 (from the copy of its three modules in moshenfeld/random_allocation,
external_sources/Monte_Carlo_external.py, whose functions used read the same as google-research
commit 4c42994), and, for the exact Rényi divergence of balls-in-bins, from Feldman & Shenfeld's
package random_allocation (moshenfeld/random_allocation, "Privacy amplification by random
allocation").  Their code is not part of this repository; each value below names the function
that printed it and its arguments.

Their conventions, and how each comparison matches them:
- σ is the noise std for a query whose records move it by 1; our shift s (C for add_remove with
  balls-in-bins, 2C for replace_one and for shuffle) is their σ/s or their mean s.
- t steps per epoch, E epochs, sampling probability 1/t: we take n = t·b (no record left over, so
  a shuffled record is used every epoch, w = 1) and T = t·E.
- Their shuffle lower bound defaults to the "zero-out" pair MoG(2) vs MoG(1); its class takes the
  two means, and our pairs are MoG(s) vs N(0) (docs/sampling.md), so we pass (s, 0), and (0, s)
  for the other order of the pair, whose larger ε we report.
"""

import numpy as np
import pytest

from dplab.accounting import Setting, get
from dplab.accounting import balls_in_bins as bnb
from dplab.accounting.shuffle_lower import DISCRETIZATION

B = 10  # batch size; n = t·B


def _setting(sampling, neighbouring, sigma, t, epochs, steps=None):
    """n = t·b; t·b + 1 for balls-in-bins under add_remove, where n mod b = 0 is refused (the
    neighbour would have t − 1 steps per epoch) and w = 1 either way (as_if_poisson, a comparison,
    refuses nothing)."""
    bump = sampling == "balls_in_bins" and neighbouring == "add_remove"
    return Setting(
        noise_multiplier=sigma,
        steps=steps or t * epochs,
        sampling=sampling,
        neighbouring=neighbouring,
        dataset_size=t * B + bump,
        batch_size=B,
    )


# ------------------------------------------------------------------ fixed_batches (upper)
#: DeterministicAccountant().get_epsilons(σ', [δ], E) (dpsgd_bounds.py): E Gaussian mechanisms of
#: sensitivity 1, noise σ'.  Rows: (sampling, neighbouring, our σ, E, δ, their ε) with σ' = σ/s.
DETERMINISTIC = [
    ("balls_in_bins", "add_remove", 1.0, 1, 1e-5, 4.377178102731705),  # σ' = 1.0
    ("balls_in_bins", "add_remove", 0.8, 5, 1e-6, 16.610736697912216),  # σ' = 0.8
    ("balls_in_bins", "add_remove", 2.0, 20, 1e-5, 11.480022817850113),  # σ' = 2.0
    ("shuffle", "replace_one", 1.0, 1, 1e-5, 9.99725617468357),  # σ' = 0.5
    ("shuffle", "replace_one", 0.8, 5, 1e-6, 41.47569887340069),  # σ' = 0.4
    ("balls_in_bins", "replace_one", 2.0, 20, 1e-5, 28.373473808169365),  # σ' = 1.0
]


@pytest.mark.parametrize("sampling,neighbouring,sigma,epochs,delta,theirs", DETERMINISTIC)
def test_fixed_batches_is_the_authors_deterministic_sampler(
    sampling, neighbouring, sigma, epochs, delta, theirs
):
    """The same closed form; theirs is inverted by bisection (measured agreement 3e-9).  A partial
    last epoch (T = tE − 3) counts whole, so it gives the same ε."""
    t = 20
    acc = get("fixed_batches")
    assert acc.epsilon(_setting(sampling, neighbouring, sigma, t, epochs), delta) == pytest.approx(
        theirs, rel=1e-7
    )
    partial = _setting(sampling, neighbouring, sigma, t, epochs, steps=t * epochs - 3)
    assert acc.epsilon(partial, delta) == pytest.approx(theirs, rel=1e-7)


#: DeterministicAccountant().get_sigma(ε, δ, E) (dpsgd_bounds.py): σ' for (ε, δ) after E epochs.
#: Rows: (ε, δ, E, their σ').
DETERMINISTIC_SIGMA = [(1.0, 1e-5, 5, 8.341946005821228), (8.0, 1e-5, 30, 3.2875900715589523)]


@pytest.mark.parametrize("epsilon,delta,epochs,theirs", DETERMINISTIC_SIGMA)
def test_fixed_batches_calibration_is_the_authors(epsilon, delta, epochs, theirs):
    """Both bisect the same closed form (measured agreement 2.5e-6); ours stops on the safe side."""
    acc = get("fixed_batches")
    for sampling, neighbouring, shift in (
        ("balls_in_bins", "add_remove", 1.0),
        ("shuffle", "replace_one", 2.0),
    ):
        s = _setting(sampling, neighbouring, 1.0, 20, epochs)
        sigma = acc.sigma(s, epsilon, delta)
        assert sigma == pytest.approx(shift * theirs, rel=1e-5)
        assert acc.delta(s.replace(noise_multiplier=sigma), epsilon) <= delta * (1 + 1e-9)


# ------------------------------------------------------------------ as_if_poisson (comparison)
#: PoissonPLDAccountant(pessimistic_estimate=True).get_epsilons(σ, [δ], t, E, 1e-4)
#: (dpsgd_bounds.py): dp_accounting's pessimistic PLD of tE Poisson-subsampled Gaussians at q = 1/t,
#: add/remove, discretization 1e-4 (ours too).  Rows: (σ, t, E, δ, their ε).
POISSON = [
    (1.0, 20, 5, 1e-5, 3.5021485410489386),
    (0.8, 50, 2, 1e-6, 3.237348607832846),
    (2.0, 100, 10, 1e-5, 0.6220485250880967),
]


@pytest.mark.parametrize("sigma,t,epochs,delta,theirs", POISSON)
def test_as_if_poisson_is_the_authors_poisson_accountant(sigma, t, epochs, delta, theirs):
    """The same one-step PLD as the authors' dp_accounting computation, read off by pld's certified
    tilted composition: an upper bound on their FFT value, within 1e-4 of it."""
    ours = get("as_if_poisson").epsilon(_setting("shuffle", "add_remove", sigma, t, epochs), delta)
    assert theirs * (1 - 1e-9) <= ours <= theirs * (1 + 1e-4)


# ------------------------------------------------- shuffle_lower, balls_in_bins_lower (lower)
#: ShuffleAccountant(mean_upper=s, mean_lower=0)._get_multi_epoch_pld(σ, t,
#: E).get_epsilon_for_delta(δ) and the same with (mean_upper=0, mean_lower=s) (dpsgd_bounds.py;
#: get_epsilons(σ, [δ], t, E, reshuffle=True) is the first for E ≥ 2): the PLD of the per-epoch
#: maximum of the pair MoG(s) vs N(0), epochs redrawn, binned every 1e-3·σ² and its losses rounded
#: down to 1e-3.  The first is also what BnBAccountant().get_deltas_lower_bound inverts
#: (balls_and_bins.py, s = 1). Rows: (σ, t, E, δ, s, their ε for P‖Q, their ε for Q‖P).
PAIRS = [
    (1.0, 20, 1, 1e-5, 1.0, 1.5949746414558503, 0.82359272801458),
    (1.0, 20, 1, 1e-5, 2.0, 7.001947559114845, 2.4729544651427626),
    (0.5, 10, 1, 1e-5, 1.0, 7.694781508100454, 3.4096109871549505),
    (0.5, 10, 1, 1e-5, 2.0, 22.07846360884151, 10.595814667497642),
    (1.5, 100, 1, 1e-5, 1.0, 0.1365765687721713, 0.14740789650580302),
    (1.5, 100, 1, 1e-5, 2.0, 1.71882557705715, 0.5115190141554147),
    (1.0, 20, 5, 1e-5, 1.0, 2.6802807742314285, 1.9772680440801773),
    (1.0, 20, 5, 1e-5, 2.0, 14.545001957001901, 7.014991333039864),
    (0.8, 50, 2, 1e-6, 1.0, 2.8280978397677528, 1.1432859401662283),
    (0.8, 50, 2, 1e-6, 2.0, 14.607200485568553, 4.34596521517219),
    (1.5, 100, 10, 1e-5, 1.0, 0.39582199235465, 0.44283073132584505),
    (1.5, 100, 10, 1e-5, 2.0, 3.107979817135531, 1.8726723702428947),
    (0.5, 10, 3, 1e-5, 1.0, 13.353898512162125, 6.907696443033484),
    (0.5, 10, 3, 1e-5, 2.0, 45.8610706185776, 24.25213150749842),
]


def _agrees_from_below(ours, theirs, epochs):
    """Both compute the same lower bound; ours bins the maximum into 250 cuts and rounds losses
    down to DISCRETIZATION per epoch, so it may lie below theirs by E·DISCRETIZATION plus the
    coarser binning (≤ 0.2% measured), and above it only by their own rounding (E·1e-3).  Dropping
    one order of the pair or using the wrong shift moves ε by far more (e.g. 0.396 vs 0.443)."""
    assert theirs - epochs * DISCRETIZATION - 2e-3 * theirs <= ours <= theirs + epochs * 1e-3, (
        ours,
        theirs,
    )


@pytest.mark.parametrize("sigma,t,epochs,delta,shift,remove,add", [p for p in PAIRS if p[4] == 1.0])
def test_balls_in_bins_lower_is_the_authors_lower_bound(
    sigma, t, epochs, delta, shift, remove, add
):
    """balls_in_bins_lower under add_remove is the pair MoG(1) vs N(0), epochs independent: the
    authors' balls-and-bins lower bound.  (Under replace_one its pair is MoG(1) vs MoG(−1), the
    record in the same random step: tests/test_certified_samplers.py.)"""
    ours = get("balls_in_bins_lower").epsilon(
        _setting("balls_in_bins", "add_remove", sigma, t, epochs), delta
    )
    _agrees_from_below(ours, max(remove, add), epochs)


@pytest.mark.parametrize("sigma,t,epochs,delta,shift,remove,add", [p for p in PAIRS if p[4] == 2.0])
def test_shuffle_lower_without_leftover_is_the_authors_shuffle_bound(
    sigma, t, epochs, delta, shift, remove, add
):
    """With n = tb every record is used every epoch (w = 1): shuffle_lower (replace_one) of a
    partition redrawn every epoch (``reshuffle``) is the authors' reshuffled bound; of one
    partition cycled, the persistent pair's, larger in every row (theirs, get_epsilons(...,
    reshuffle=False): 18.5–50.5).  shuffle_lower printed the smaller of the two for either."""
    setting = _setting("shuffle", "replace_one", sigma, t, epochs)
    ours = get("shuffle_lower").epsilon(setting.replace(reshuffle=True), delta)
    _agrees_from_below(ours, max(remove, add), epochs)
    cycled = get("shuffle_lower").epsilon(setting, delta)  # one epoch: the same pair
    assert cycled > ours if epochs > 1 else cycled == pytest.approx(ours, rel=1e-9)


# ------------------------------------------------------------------ balls_in_bins (upper)
#: random_allocation's allocation_RDP_remove(α, σ, t) (random_allocation_scheme/direct.py): the
#: remove-direction Rényi divergence of one epoch, a sum over the integer partitions of α.
#: Rows: (σ, t, {α: theirs}).
REMOVE_RDP = [
    (
        1.0,
        20,
        {
            2: 0.08242211287901036,
            5: 0.2462145486202587,
            12: 3.0046150508891243,
            20: 7.004267838502154,
        },
    ),
    (
        0.7,
        10,
        {2: 0.5126373701840903, 5: 2.802894373574791, 12: 9.942312867937716, 20: 18.10557817231208},
    ),
    (
        1.5,
        100,
        {
            2: 0.005580634229678694,
            5: 0.013995031137946867,
            12: 0.03385698346353843,
            20: 0.05840201246746951,
        },
    ),
]


@pytest.mark.parametrize("sigma,t,theirs", REMOVE_RDP)
def test_balls_in_bins_remove_rdp_is_feldman_shenfeld_exact_sum(sigma, t, theirs):
    """Two exact computations of E[M^α] (our moment generating series, their partition sum):
    agreement to rounding (measured 1e-14)."""
    orders = np.array(sorted(theirs), dtype=float)
    ours = bnb.remove_rdp(1.0 / sigma, t, orders)
    assert ours == pytest.approx([theirs[a] for a in sorted(theirs)], rel=1e-11)


#: BnBAccountant(max_memory_limit=2e7).estimate_deltas(σ, [ε], t, 2_000_000, E, direction,
#: use_importance_sampling=(E == 1)) (balls_and_bins.py), np.random.seed(12345), both directions
#: (REMOVE dominated in every row), on 21 values of ε; the ε where the larger δ estimate crosses δ
#: (log-linear interpolation): its mean, and where the mean minus 4 standard errors and the 99%
#: upper confidence bound (get_upper_confidence_bound(0.01)) cross it.  Rows: (σ, t, E, δ,
#: ε_low, ε_mean, ε_high).  The exact ε of the dominating pair lies in [ε_low, ε_high].
MONTE_CARLO = [
    (0.7, 10, 1, 1e-5, 4.3516, 4.3621, 4.3746),
    (1.0, 20, 1, 1e-5, 1.5623, 1.6250, 1.6821),
    (0.8, 50, 1, 1e-5, 1.8243, 1.9349, 2.0399),
    (1.0, 10, 3, 1e-3, 2.1442, 2.1590, 2.1785),
]


@pytest.mark.parametrize("sigma,t,epochs,delta,low,mean,high", MONTE_CARLO)
def test_balls_in_bins_brackets_the_authors_monte_carlo_estimate(
    sigma, t, epochs, delta, low, mean, high
):
    """The upper bound must not fall below the exact ε (here: its Monte-Carlo lower confidence
    end), and the lower bound must not rise above it (the upper confidence end).  The RDP
    conversion costs the upper bound 12–33% over the estimate (measured); 40% is allowed."""
    s = _setting("balls_in_bins", "add_remove", sigma, t, epochs)
    upper = get("balls_in_bins").epsilon(s, delta)
    lower = get("balls_in_bins_lower").epsilon(s, delta)
    assert low <= upper <= 1.4 * mean
    assert lower <= high
