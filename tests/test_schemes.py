"""The sampling schemes and neighbouring relations as types (dplab.schemes): a member is its name
wherever a name was (equality, hashing, JSON, repr, format), and each scheme's sampler draws the
batches its facts state."""

from __future__ import annotations

import json

import pytest
import torch

from dplab import units
from dplab.accounting.setting import NEIGHBOURINGS, SAMPLINGS, Setting
from dplab.errors import DPLabError
from dplab.schemes import Neighbouring, Sampling


@pytest.mark.parametrize("member", [*Sampling, *Neighbouring])
def test_a_member_is_its_name_wherever_a_name_was(member):
    name = member.value
    assert type(name) is str and member == name and hash(member) == hash(name)
    assert {name: 1}[member] == 1 and {member: 1}[name] == 1
    assert json.dumps({member: [member]}) == json.dumps({name: [name]})
    assert repr(member) == repr(name) and f"{member}" == name and str((member,)) == str((name,))
    assert type(member)(name) is member


def test_the_settings_names_are_the_types():
    assert SAMPLINGS == tuple(s for s in Sampling if s.accounted)
    assert set(Sampling) - set(SAMPLINGS) == {Sampling.MIN_SEPARATION, Sampling.CYCLIC_POISSON}
    assert NEIGHBOURINGS == ("add_remove", "replace_one")
    assert Setting(sampling="shuffle").sampling == Sampling.SHUFFLE


def test_a_relations_sensitivity_is_the_clipped_sums():
    """Replacing a record moves the clipped sum by up to 2C (one gradient out, one in); adding or
    removing one by up to C."""
    for relation in Neighbouring:
        assert units.sum_sensitivity(1.5, relation) == 1.5 * relation.sensitivity
    assert [r.sensitivity for r in Neighbouring] == [1.0, 2.0]
    with pytest.raises(DPLabError, match="must be add_remove or replace_one"):
        units.sum_sensitivity(1.0, "swap")


@pytest.mark.parametrize("scheme", [s for s in Sampling if s.facts.sampler is not None])
def test_each_schemes_sampler_draws_what_its_facts_state(scheme):
    n, b = 23, 5
    sampler, generator = scheme.sampler(n, b), torch.Generator().manual_seed(0)
    assert sampler.name == scheme
    per_epoch = n // b
    batches = [sampler.sample(step, generator).tolist() for step in range(1, 3 * per_epoch + 1)]
    sizes = {len(batch) for batch in batches}
    size = n if scheme == Sampling.FULL_BATCH else b
    assert (sizes == {size}) == scheme.fixed_size
    for batch in batches:
        assert len(set(batch)) == len(batch) and all(0 <= i < n for i in batch)
    if scheme.epochs:  # no example twice in one epoch of ⌊n/b⌋ steps
        for e in range(3):
            seen = [i for batch in batches[e * per_epoch : (e + 1) * per_epoch] for i in batch]
            assert len(seen) == len(set(seen))


def test_dp_mfs_schemes_have_no_engine_sampler():
    for scheme in (Sampling.MIN_SEPARATION, Sampling.CYCLIC_POISSON):
        with pytest.raises(DPLabError, match="dp_mf"):
            scheme.sampler(10, 2)


def test_amplification_is_proved_for_the_relation_the_scheme_names():
    """An amplified accountant refuses a scheme under the other relation (Balle, Barthe &
    Gaboardi 2018: Poisson add/remove, without replacement replace-one)."""
    from dplab.accounting import get
    from dplab.errors import AssumptionError

    for scheme in (s for s in Sampling if s.amplified):
        other = next(r for r in Neighbouring if r != scheme.amplified)
        base = {"noise_multiplier": 1.0, "steps": 3, "dataset_size": 100, "batch_size": 10}
        get("naive").check(Setting(sampling=scheme, neighbouring=scheme.amplified, **base))
        with pytest.raises(AssumptionError):
            get("naive").check(Setting(sampling=scheme, neighbouring=other, **base))


def test_a_scheme_no_event_models_is_refused_not_taken_for_full_batch():
    """A new scheme a Setting takes before events.run_event maps it gets no event at all."""
    from dplab.accounting import events

    setting = Setting(noise_multiplier=1.0, steps=2, dataset_size=10, batch_size=2)
    object.__setattr__(setting, "sampling", "planted")  # past the Setting's own check
    with pytest.raises(DPLabError, match="no event models planted sampling"):
        events.run_event(setting)
    full = events.run_event(Setting(noise_multiplier=1.0, steps=2, sampling=Sampling.FULL_BATCH))
    assert events.view(full).sampling == Sampling.FULL_BATCH
