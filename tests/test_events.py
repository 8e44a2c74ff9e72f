"""A run's privacy as events (dplab.accounting.events): our rdp and pld on dp_accounting's own
events against dp_accounting's RdpAccountant and PLDAccountant, and a run's event against its
setting."""

from __future__ import annotations

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting import events
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError

DELTA = 1e-5
RELATIONS = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}
POISSON = dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(5.0))
GAUSSIAN = {
    "gaussian": dp_accounting.GaussianDpEvent(2.0),
    "self-composed gaussian": dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(4.0), 30
    ),
    "composed gaussians": dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(4.0), 30),
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 5),
        ]
    ),
}
SAMPLED = {
    "poisson": POISSON,
    "self-composed poisson": dp_accounting.SelfComposedDpEvent(POISSON, 20),
    "composed poisson": dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(POISSON, 12), POISSON]
    ),
}


PHASE = dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(3.0))
#: compositions within compositions (refused as "unequal phases" before)
NESTED = {
    "composition in a composition": dp_accounting.ComposedDpEvent(
        [
            dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(POISSON, 12), PHASE]),
            POISSON,
        ]
    ),
    "self-composed composition": dp_accounting.SelfComposedDpEvent(
        dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(POISSON, 5), PHASE]), 3
    ),
}
#: private selection (Papernot & Steinke 2022) within compositions: rdp only
SELECTED = {
    "selection, then a phase": dp_accounting.ComposedDpEvent(
        [
            dp_accounting.dp_event.RepeatAndSelectDpEvent(
                dp_accounting.SelfComposedDpEvent(POISSON, 20), 5, 1
            ),
            PHASE,
        ]
    ),
    "a selection three times": dp_accounting.SelfComposedDpEvent(
        dp_accounting.dp_event.RepeatAndSelectDpEvent(
            dp_accounting.SelfComposedDpEvent(POISSON, 20), 5, 1
        ),
        3,
    ),
    # a composition of one selection, twice: its single setting is not its ε (2.48 against 5.25)
    "a composed selection twice": dp_accounting.SelfComposedDpEvent(
        dp_accounting.ComposedDpEvent(
            [
                dp_accounting.dp_event.RepeatAndSelectDpEvent(
                    dp_accounting.SelfComposedDpEvent(POISSON, 20), 5, 1
                )
            ]
        ),
        2,
    ),
    "a selection twice, three times": dp_accounting.SelfComposedDpEvent(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.dp_event.RepeatAndSelectDpEvent(PHASE, 3, 0), 2
        ),
        3,
    ),
}
#: parts that add nothing: a NoOpDpEvent, an empty composition (rdp refused both)
EMPTY_PARTS = dp_accounting.ComposedDpEvent(
    [dp_accounting.NoOpDpEvent(), dp_accounting.ComposedDpEvent([]), POISSON, PHASE]
)


@pytest.mark.parametrize("name", [*GAUSSIAN, *SAMPLED, *NESTED, *SELECTED, "empty parts"])
def test_rdp_on_an_event_equals_dp_accountings_rdp_accountant(name):
    event = {**GAUSSIAN, **SAMPLED, **NESTED, **SELECTED, "empty parts": EMPTY_PARTS}[name]
    peer = rdp_privacy_accountant.RdpAccountant().compose(event).get_epsilon(DELTA)
    assert get("rdp").supports(event) is None
    assert get("rdp").epsilon(event, DELTA) == pytest.approx(peer, rel=1e-9)


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("name", GAUSSIAN)
def test_pld_on_a_gaussian_event_is_exact_and_below_dp_accountings_pld(name, relation):
    """Gaussian steps compose exactly; dp_accounting's discretized PLD (pessimistic, interval 1e-3)
    lies above, within 1 %."""
    event = GAUSSIAN[name]
    theirs = (
        pld_privacy_accountant.PLDAccountant(
            RELATIONS[relation], value_discretization_interval=1e-3
        )
        .compose(event)
        .get_epsilon(DELTA)
    )
    ours = get("pld").epsilon(event, DELTA, relation)
    assert ours <= theirs <= ours * 1.01


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("name", [*SAMPLED, *NESTED, "empty parts"])
def test_pld_on_a_poisson_event_equals_dp_accountings_pld(name, relation):
    """The certified read-off adds a rounding allowance: ≤ 1e-4 relative (as for one setting)."""
    event = {**SAMPLED, **NESTED, "empty parts": EMPTY_PARTS}[name]
    theirs = (
        pld_privacy_accountant.PLDAccountant(RELATIONS[relation]).compose(event).get_epsilon(DELTA)
    )
    ours = get("pld").epsilon(event, DELTA, relation)
    assert theirs * (1 - 1e-9) <= ours <= theirs * (1 + 1e-4)


@pytest.mark.parametrize(
    "setting",
    [
        Setting(steps=300, sampling_rate=0.01, noise_multiplier=1.2),
        Setting(steps=50, batch_size=64, dataset_size=6400, noise_multiplier=0.9, clip=1.0, lr=0.1),
        Setting(steps=5, sampling="full_batch", neighbouring="replace_one", noise_multiplier=3.0),
        Setting(
            steps=30,
            dataset_size=100,
            batch_size=10,
            noise_multiplier=1.0,
            sampling="without_replacement",
            neighbouring="replace_one",
        ),
        Setting(
            steps=30,
            dataset_size=100,
            batch_size=10,
            noise_multiplier=1.0,
            sampling="shuffle",
            reshuffle=True,
            clip=1.0,
            lr=0.1,
            lipschitz=0.5,
            smoothness=1.0,
        ),
        Setting(
            steps=30,
            dataset_size=100,
            batch_size=10,
            noise_multiplier=1.0,
            sampling="balls_in_bins",
        ),
    ],
)
def test_a_run_event_and_its_setting_view_are_inverse(setting):
    """Up to the sensitivity: a Gaussian event's σ is std / sensitivity, so its view has Δ = 1."""
    seen = events.view(events.run_event(setting), setting.neighbouring)
    assert seen == (
        setting.replace(sensitivity=1.0) if setting.sampling == "full_batch" else setting
    )


def test_each_accountant_supports_a_run_event_exactly_when_it_accepts_the_setting():
    setting = Setting(
        steps=30,
        dataset_size=100,
        batch_size=10,
        noise_multiplier=1.0,
        sampling="shuffle",
        clip=1.0,
        lr=0.1,
        lipschitz=0.5,
        smoothness=1.0,
    )
    event = events.run_event(setting)
    for name in ("rdp", "pld", "moments", "pabi", "fixed_batches", "shuffle_lower"):
        accountant = get(name)
        try:
            accountant.check(setting)
            reason = None
        except Exception as err:  # noqa: BLE001 (the accountant's own refusal)
            reason = str(err)
        assert accountant.supports(event) == reason, name


def test_unequal_phases_have_no_setting_and_are_composed_by_rdp_and_pld_only():
    phases = events.phases(
        [
            Setting(steps=30, sampling_rate=0.01, noise_multiplier=1.2),
            Setting(steps=10, sampling_rate=0.05, noise_multiplier=2.0),
        ]
    )
    assert "rdp and pld compose" in get("naive").supports(phases)
    assert get("pld").supports(phases) is None and get("rdp").supports(phases) is None
    assert "HiddenStateDpEvent" in get("pabi").supports(
        events.run_event(Setting(steps=3, sampling_rate=0.1, noise_multiplier=1.0))
    )


def test_pld_refuses_a_selection_among_phases_and_a_delta_below_its_limit():
    """pld has no bound for private selection (rdp has); and its δ limit (1e-12) holds for phases
    as for one setting: δ = 1e-16 printed an ε, 1e-40 "no finite value"."""
    reason = get("pld").supports(SELECTED["selection, then a phase"])
    assert reason.startswith("phases[0].event") and "rdp accounts it" in reason
    for delta in (1e-16, 1e-40):
        with pytest.raises(DPLabError, match=r"delta: must lie in \[1e-12, 1\]"):
            get("pld").epsilon(NESTED["self-composed composition"], delta)


@pytest.mark.parametrize("name", ["balls_in_bins", "fixed_batches"])
def test_one_phase_under_an_epoch_sampler_is_its_setting_and_two_are_refused_as_such(name):
    """A one-phase composition is that phase, whatever its sampler: its ε is the setting's. Two
    phases of an epoch sampler each start their own epochs: refused for that, not as unequal."""
    setting = Setting(
        noise_multiplier=1.0, steps=10, sampling="balls_in_bins", dataset_size=1005, batch_size=10
    )
    accountant = get(name)
    one = events.phases([setting])
    assert accountant.supports(one) is None
    assert accountant.epsilon(one, DELTA) == accountant.epsilon(setting, DELTA)
    reason = accountant.supports(events.phases([setting, setting]))
    assert "2 phases under balls_in_bins (an epoch sampler" in reason and "unequal" not in reason


def test_mf_is_a_registered_accountant_of_its_own_event_only(capsys):
    """``mf`` on an MF event is the exact Gaussian of σ/scale; it refuses a DP-SGD setting and
    event, and every DP-SGD accountant refuses its event, each with its reason."""
    from dplab.accounting.events import MatrixFactorizationDpEvent
    from dplab.accounting.gaussian import gaussian_epsilon
    from dplab.cli import main

    mf = MatrixFactorizationDpEvent(
        "identity",
        noise_multiplier=3.0,
        steps=10,
        participations=1,
        separation=10,
        sampler="min_separation",
        scale=1.0,
    )
    assert get("mf").epsilon(mf, DELTA) == pytest.approx(
        float(gaussian_epsilon(DELTA, [1 / 3.0])[0]), rel=1e-12
    )
    assert get("mf").supports(mf) is None and "MatrixFactorizationDpEvent" in get("mf").supports(
        GAUSSIAN["gaussian"]
    )
    assert "add_remove" in get("mf").supports(mf, "replace_one")
    assert all(get(name).supports(mf) for name in ("rdp", "pld", "naive", "pabi"))
    assert (
        main(
            [
                "epsilon",
                "--accountant",
                "mf",
                "--delta",
                "1e-5",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "0.01",
                "--steps",
                "10",
            ]
        )
        == 2
    )
    assert "MatrixFactorizationDpEvent" in capsys.readouterr().err
