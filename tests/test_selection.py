"""Private selection (Papernot & Steinke 2022): dplab.accounting.selection against dp_accounting's
RepeatAndSelectDpEvent on the same candidate, and the invariants of the protocol's bound."""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting import dp_event
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting import selection
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError

SETTING = Setting(noise_multiplier=1.1, sampling_rate=0.01, steps=1000, sampling="poisson")
DELTA = 1e-6


def _peer(mean: float, shape: float) -> float:
    """dp_accounting's ε of the best of K DP-SGD runs (its own RDP of the sampled Gaussian)."""
    step = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
    event = dp_event.RepeatAndSelectDpEvent(
        dp_accounting.SelfComposedDpEvent(step, 1000), mean, shape
    )
    return rdp_privacy_accountant.RdpAccountant().compose(event).get_epsilon(DELTA)


@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("mean", [1.0, 4.0, 30.0])
def test_selection_equals_dp_accountings_repeat_and_select(mean, shape):
    curve = selection.candidate_curve(get("rdp"), SETTING)
    ours = selection.epsilon([curve], DELTA, mean, shape)
    assert ours == pytest.approx(_peer(mean, shape), rel=1e-6)


def test_selection_costs_more_than_one_run_and_grows_with_the_mean():
    curve = selection.candidate_curve(get("rdp"), SETTING)
    single = get("rdp").epsilon(SETTING, DELTA)
    eps = [selection.epsilon([curve], DELTA, m, 1.0) for m in (1.0, 2.0, 10.0, 100.0)]
    assert single < eps[0] and np.all(np.diff(eps) > 0)


def test_truncated_negative_binomial_mean_inverts():
    """E K = 1/γ for the geometric law; the bisection returns γ whose mean is the one asked for."""
    assert selection.tnb_mean(0.25, 1.0) == pytest.approx(4.0)
    for shape in (0.0, 0.5, 2.0):
        gamma = selection.tnb_gamma(12.0, shape)
        assert selection.tnb_mean(gamma, shape) == pytest.approx(12.0, rel=1e-9)
        assert selection.tnb_mean(gamma, shape) >= 12.0


def test_candidates_are_covered_by_their_worst_curve():
    """Two candidates: the selection ε is that of the noisier-free one's curve at least, and equal
    to the single-candidate answer when the other candidate is dominated."""
    strong = selection.candidate_curve(get("rdp"), SETTING)
    weak = selection.candidate_curve(get("rdp"), SETTING.replace(noise_multiplier=3.0))
    both = selection.epsilon([strong, weak], DELTA, 2.0, 1.0)
    assert both == pytest.approx(selection.epsilon([strong], DELTA, 2.0, 1.0), rel=1e-12)
    orders, worst = selection.worst_curve([strong, (np.array([2.0, 1e3]), np.array([0.5, 0.6]))])
    assert worst[orders == 1.5][0] >= 0.5 and np.isinf(worst[orders > 1e3]).all()


@pytest.mark.parametrize(
    ("mean", "shape", "key"),
    [
        (0.5, 1.0, "selection_mean"),
        (math.nan, 1.0, "selection_mean"),
        (2.0, -1.0, "selection_shape"),
    ],
)
def test_bad_selection_parameters_are_refused(mean, shape, key):
    with pytest.raises(DPLabError, match=key):
        selection.check(mean, shape)


def _selected(mean: float, shape: float, inner=None) -> dp_event.DpEvent:
    step = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
    inner = inner or dp_accounting.SelfComposedDpEvent(step, 1000)
    return dp_event.RepeatAndSelectDpEvent(inner, mean, shape)


@pytest.mark.parametrize(("mean", "shape"), [(1.0, 1.0), (4.0, 0.0), (30.0, math.inf)])
def test_rdp_accounts_the_selection_event_as_the_selection_module_and_the_peer(mean, shape):
    """The event path (``supports``/``epsilon``) gives the module's number, and dp_accounting's."""
    rdp = get("rdp")
    assert rdp.supports(_selected(mean, shape)) is None
    ours = rdp.epsilon(_selected(mean, shape), DELTA)
    curve = selection.candidate_curve(rdp, SETTING)
    assert ours == selection.epsilon([curve], DELTA, mean, shape)
    assert ours == pytest.approx(_peer(mean, shape), rel=1e-6)


def test_a_selection_over_phases_costs_more_than_the_phases():
    rdp = get("rdp")
    one = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
    two = dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0))
    phases = dp_event.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(one, 300), dp_accounting.SelfComposedDpEvent(two, 100)]
    )
    chosen = rdp.epsilon(_selected(5.0, 1.0, phases), DELTA)
    peer = rdp_privacy_accountant.RdpAccountant().compose(_selected(5.0, 1.0, phases))
    assert chosen > rdp.epsilon(phases, DELTA)
    assert chosen == pytest.approx(peer.get_epsilon(DELTA), rel=1e-6)


@pytest.mark.parametrize("name", ["pld", "naive", "moments"])
def test_accountants_without_an_rdp_curve_refuse_the_selection_event(name):
    reason = get(name).supports(_selected(4.0, 1.0))
    assert reason is not None and "rdp accounts it" in reason


def test_bad_selection_parameters_in_the_event_are_refused_naming_the_key():
    assert "selection_mean" in get("rdp").supports(_selected(0.5, 1.0))


def test_a_grid_run_once_per_candidate_costs_their_composition_as_dp_accounting_composes_it():
    """A fixed grid (every candidate trained once, the best released) is the candidates composed:
    dp_accounting's RdpAccountant on the ComposedDpEvent gives the same ε. Papernot & Steinke's
    bound is for a random number of runs; for 6 fixed runs it is below their composition."""
    weak = SETTING.replace(noise_multiplier=3.0, steps=400)
    curves = [selection.candidate_curve(get("rdp"), s) for s in (SETTING, weak)]
    step = lambda s: dp_accounting.PoissonSampledDpEvent(  # noqa: E731
        s.sampling_rate, dp_accounting.GaussianDpEvent(s.noise_multiplier)
    )
    both = dp_event.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(step(s), s.steps) for s in (SETTING, weak)]
    )
    peer = rdp_privacy_accountant.RdpAccountant().compose(both).get_epsilon(DELTA)
    assert selection.grid_epsilon(curves, DELTA) == pytest.approx(peer, rel=1e-9)
    one = curves[0]
    six = selection.grid_epsilon([one] * 6, DELTA)
    assert six == pytest.approx(get("rdp").epsilon(SETTING.replace(steps=6000), DELTA), rel=1e-12)
    assert selection.epsilon([one], DELTA, 6.0, 1.0) < six  # not a bound on the grid that ran
