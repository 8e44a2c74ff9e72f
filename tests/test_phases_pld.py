"""pld's certified composition of Poisson phases (PldAccountant.phases_epsilon, one tilted FFT of
every phase's PMF): equal phases against the one-phase read-off, unequal ones between an optimistic
(lower) PLD of dp_accounting and rdp, beside dp_accounting's PLDAccountant, and σ calibration."""

from __future__ import annotations

import re

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant, privacy_loss_distribution

from dplab.accounting import phases
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError

DELTA = 1e-5
PLD = get("pld")
#: pld's interval in these tests (10 × its own: 10 × fewer bins, each test well under a second);
#: the read-off is certified at any interval
DISC = 1e-3
PHASES = [
    Setting(steps=300, sampling_rate=0.2, noise_multiplier=6.0),
    Setting(steps=100, sampling_rate=0.5, noise_multiplier=10.0),
]
REPLACE = [p.replace(neighbouring="replace_one") for p in PHASES]
_RELATION = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}


@pytest.fixture(autouse=True)
def coarse(monkeypatch):
    monkeypatch.setattr(type(PLD), "value_discretization_interval", DISC)


def _event(steps: list[Setting]) -> dp_accounting.DpEvent:
    return dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(
                    p.sampling_rate, dp_accounting.GaussianDpEvent(p.noise_multiplier)
                ),
                p.steps,
            )
            for p in steps
        ]
    )


def _optimistic(steps: list[Setting], disc: float) -> float:
    """dp_accounting's optimistic PLD (each step's loss rounded down): a lower bound on the true ε,
    up to its FFT's absolute rounding and 1e-15 tail truncation (1e-10 of δ = 1e-5 at most)."""
    total = None
    for p in steps:
        one = privacy_loss_distribution.from_gaussian_mechanism(
            p.noise_multiplier,
            sampling_prob=p.sampling_rate,
            value_discretization_interval=disc,
            pessimistic_estimate=False,
            use_connect_dots=False,
            neighboring_relation=_RELATION[p.neighbouring],
        ).self_compose(p.steps)
        total = one if total is None else total.compose(one)
    return total.get_epsilon_for_delta(DELTA)


@pytest.mark.parametrize("steps", [PHASES[:1], REPLACE[:1]], ids=["add_remove", "replace_one"])
def test_two_equal_phases_are_one_phase_of_their_steps(steps):
    """The composition of T₁ = 120 and T₂ = 180 steps of one setting, computed as two phases, is the
    one-phase certified ε of T = 300 to the read-off's own precision (measured: ≤ 8e-13 relative):
    the same PMFs, tilted at another guess."""
    one = steps[0]
    split = [one.replace(steps=120), one.replace(steps=180)]
    assert PLD.phases_epsilon(split, DELTA) == pytest.approx(PLD.epsilon(one, DELTA), rel=1e-10)
    assert phases.epsilon("pld", split, DELTA) == PLD.epsilon(one, DELTA)  # one setting: merged


@pytest.mark.parametrize("steps", [PHASES, REPLACE], ids=["add_remove", "replace_one"])
def test_unequal_phases_lie_between_a_lower_pld_and_rdp_beside_dp_accounting(steps):
    """Ours is ≥ dp_accounting's optimistic PLD (a lower bound on the truth), ≤ rdp's ε
    (add_remove), and within 1e-8 relative of dp_accounting's PLDAccountant on the same
    ComposedDpEvent: both compose the same pessimistic PMFs (one interval here, no phase's loss std
    asking for a finer one), so only the read-offs differ, ours with certified error terms, theirs
    an FFT with absolute rounding; at δ = 1e-5 both are far above it
    (measured ≤ 2.3e-11 at 1e-4)."""
    ours = phases.epsilon("pld", steps, DELTA)
    relation = _RELATION[steps[0].neighbouring]
    peer = pld_privacy_accountant.PLDAccountant(relation, DISC).compose(_event(steps))
    assert ours == pytest.approx(peer.get_epsilon(DELTA), rel=1e-8)
    assert ours >= _optimistic(steps, DISC)
    if steps[0].neighbouring == "add_remove":
        assert ours <= phases.epsilon("rdp", steps, DELTA)
    assert ours > PLD.epsilon(steps[0], DELTA)  # the second phase adds privacy loss


def test_calibration_over_phases_with_pld():
    """One factor on every σ meets ε = 1.5 with pld, and 1e-4 less misses it."""
    factor = phases.calibrate("pld", PHASES, 1.5, DELTA)
    assert phases.epsilon("pld", phases.scaled(PHASES, factor), DELTA) <= 1.5
    assert phases.epsilon("pld", phases.scaled(PHASES, factor * (1 - 1e-4)), DELTA) > 1.5


def test_a_phase_whose_pld_is_beyond_reach_is_refused_naming_it():
    tiny = [PHASES[0], PHASES[1].replace(noise_multiplier=0.01)]
    with pytest.raises(DPLabError, match=re.escape("phases[1].noise_multiplier")):
        phases.epsilon("pld", tiny, DELTA)


def test_a_full_batch_phase_among_poisson_phases_is_the_step_of_q_1():
    """A ComposedDpEvent of a Gaussian phase (full batch, one symmetric PMF) and a Poisson one (a
    pair): within 1e-8 of dp_accounting's PLDs of the two phases composed (its PLDAccountant
    merges T Gaussian steps into one Gaussian of σ/√T before discretizing: 2e-6 below)."""
    event = dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(20.0), 10),
            _event(PHASES[:1]),
        ]
    )
    gaussian, poisson = (
        privacy_loss_distribution.from_gaussian_mechanism(
            sigma, sampling_prob=q, value_discretization_interval=DISC
        ).self_compose(t)
        for sigma, q, t in ((20.0, 1.0, 10), (6.0, 0.2, 300))
    )
    assert PLD.epsilon(event, DELTA) == pytest.approx(
        gaussian.compose(poisson).get_epsilon_for_delta(DELTA), rel=1e-8
    )


def test_the_curve_builds_each_one_step_pld_once_and_each_row_is_its_prefix_s_epsilon(
    monkeypatch,
):
    """The ε curve of a run in phases: its rows in the first phase are that phase's own curve, the
    others the composition of their prefix; each row, in the order asked, equals its prefix's ε
    asked alone, and no one-step PLD (σ, interval, q) is built twice (they were, once per row and
    phase)."""
    from dplab.accounting import pld_gaussian

    steps = [350, 100, 200, 300, 100, 400]  # any order, a row twice
    alone = [phases.epsilon("pld", phases.prefix(PHASES, s), DELTA) for s in steps]
    built, build = [], pld_gaussian.gaussian_pld
    monkeypatch.setattr(pld_gaussian, "gaussian_pld", lambda *a: built.append(a[:3]) or build(*a))
    assert phases.epsilon_curve("pld", PHASES, DELTA, steps) == alone
    assert len(built) == len(set(built)) and {a[0] for a in built} == {6.0, 10.0}
