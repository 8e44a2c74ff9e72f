"""The δ floor of float noise: draws stop at |z| ≤ c, so a record along one coordinate reaches
outputs its neighbour never does (dplab.training.noise_floor)."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import norm

from conftest import synthetic_data
from dplab.accounting import Setting
from dplab.errors import DPLabError
from dplab.philox import _box_muller_f32
from dplab.training import loop, noise_floor
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings


def test_the_cpu_cut_is_the_kernel_s_largest_draw():
    """u₁ = 2⁻⁴⁰ (a's top 24 bits and the pair's two low bytes all 0) is the CPU stream's smallest
    uniform: its radius is the cut, 7.446; every other pair gives less (the smallest 24-bit bucket's
    top, u₁ = 2⁻²⁴, 5.768, as torch's float32 randn's cut)."""
    r, _ = _box_muller_f32(torch.tensor([0, 0xFF, 1 << 8]), torch.tensor([0, 0xFF, 0]))
    assert float(r[0]) == pytest.approx(noise_floor.CUTS["cpu"], rel=1e-6)
    assert float(r[1]) == pytest.approx(math.sqrt(48 * math.log(2)), rel=1e-6)
    assert float(r[2]) < float(r[1]) < float(r[0])
    assert noise_floor.CUTS["portable"] == pytest.approx(math.sqrt(108 * math.log(2)), rel=1e-12)


@pytest.mark.parametrize(
    "sigma, q, steps, neighbouring",
    [(0.681, 100 / 3200, 160, "add_remove"), (1.024, 0.05, 200, "replace_one")],
)
def test_delta_floor_is_the_band_beyond_the_cut(sigma, q, steps, neighbouring):
    """1 − (1 − q·p)^T, p the Gaussian's mass within Δ/σ below the cut (Δ = 1; 2 replace-one)."""
    shift = (2.0 if neighbouring == "replace_one" else 1.0) / sigma
    for cut in noise_floor.CUTS.values():
        p = norm.cdf(cut) - norm.cdf(cut - shift)
        setting = Setting(
            noise_multiplier=sigma, sampling_rate=q, steps=steps, neighbouring=neighbouring
        )
        assert noise_floor.delta_floor(setting, cut) == pytest.approx(
            1 - (1 - q * p) ** steps, rel=1e-9
        )


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    folder = tmp_path_factory.mktemp("floor")
    return synthetic_data(folder, 200, 20), folder


RUN = {
    "method": "dp_sgd",
    "dataset": "synthetic",
    "batch_size": 20,
    "steps": 30,
    "log_every": 30,
    "device": "cpu",
}


def test_a_run_whose_noise_floor_reaches_its_delta_is_refused_before_training(synthetic):
    """σ = 0.3, q = 0.1, T = 30 on the CPU stream: δ ≥ 5.9e-5 at every ε, above δ = 3e-5;
    refused naming noise_rng, nothing written; with noise_rng: portable (1.6e-7) it trains."""
    dataset, folder = synthetic
    run = {**RUN, "noise_multiplier": 0.3, "delta": 3e-5}
    with pytest.raises(DPLabError) as err:
        loop.train(RunSettings.of(resolve_run(run)), dataset, folder / "refused")
    assert err.value.key == "noise_rng" and "noise_rng: portable" in str(err.value)
    assert not (folder / "refused").exists()
    summary = loop.train(
        RunSettings.of(resolve_run({**run, "noise_rng": "portable"})), dataset, folder / "portable"
    )
    assert "float noise" not in summary.note


def test_a_floor_above_one_percent_of_delta_is_in_the_note(synthetic):
    """σ = 0.5, q = 0.1, T = 30: the CPU stream's floor 7.7e-8, 8 % of δ = 1e-6, is in the note."""
    dataset, folder = synthetic
    run = {**RUN, "noise_multiplier": 0.5, "delta": 1e-6}
    summary = loop.train(RunSettings.of(resolve_run(run)), dataset, folder / "noted")
    setting = Setting(noise_multiplier=0.5, sampling_rate=0.1, steps=30)
    floor = noise_floor.delta_floor(setting, noise_floor.CUTS["cpu"])
    assert 0.01 < floor / 1e-6 < 1
    assert f"float noise's δ is at least {floor:.2g} at every ε" in summary.note


def test_a_dp_mf_run_s_correlated_noise_has_its_floor_too(synthetic):
    """dp_mf releases C y = C x + Z: a participation moves its own coordinate by C[s, s]·C, so
    at σ = 0.2 and k = 3 participations the CPU stream's floor (1.5e-3) is far above δ = 1e-5;
    refused naming noise_rng (it was not checked)."""
    dataset, folder = synthetic
    run = {
        **RUN,
        "method": "dp_mf",
        "strategy": "banded",
        "bands": 2,
        "sampling": "min_separation",
        "min_separation": 10,
        "noise_multiplier": 0.2,
        "delta": 1e-5,
    }
    with pytest.raises(DPLabError) as err:
        loop.train(RunSettings.of(resolve_run(run)), dataset, folder / "mf_refused")
    assert err.value.key == "noise_rng" and "drawn up to 3 times" in str(err.value)
    assert not (folder / "mf_refused").exists()


def test_a_run_claiming_only_its_last_iterate_is_not_held_to_the_trajectory_s_floor(synthetic):
    """The floor is the trajectory's (each step's noise); a last iterate's noise is the steps' sum.
    projected DP-SGD claiming only asoodeh_projected at σ = 0.5 was refused ("δ is at least
    0.86"); it trains now, with no floor in its note."""
    dataset, folder = synthetic
    run = {
        **RUN,
        "method": "projected_dp_sgd",
        "neighbouring": "replace_one",
        "sampling": "without_replacement",
        "diameter": 2.0,
        "noise_multiplier": 0.5,
        "delta": 1e-5,
        "accountants": ["asoodeh_projected"],
        "accountant": None,
    }
    summary = loop.train(RunSettings.of(resolve_run(run)), dataset, folder / "last_iterate")
    assert summary.epsilon_covers == {"asoodeh_projected": "the final parameters only"}
    assert "float noise" not in summary.note


def test_a_run_in_phases_is_held_to_the_floor_of_its_phases_together(synthetic):
    """Each phase was checked alone against the run's δ (three phases at 0.6 δ each: none
    refused, together above δ); a phase claims nothing, and the run checks the phases'
    1 − Π(1 − floorᵢ)."""
    from dplab.training import phased

    dataset, folder = synthetic
    exposure = noise_floor.Exposure(shift=1.0, rate=0.1, count=10, sigma=1.0)
    one = exposure.floor(noise_floor.CUTS["cpu"])
    assert noise_floor.floor([exposure] * 3, noise_floor.CUTS["cpu"]) == pytest.approx(
        1 - (1 - one) ** 3, rel=1e-12
    )
    sigma, steps = 1.2, 10
    setting = Setting(noise_multiplier=sigma, sampling_rate=0.1, steps=steps)
    alone = noise_floor.delta_floor(setting, noise_floor.CUTS["cpu"])
    delta = alone / 0.6
    run = {
        **{k: v for k, v in RUN.items() if k != "steps"},
        "delta": delta,
        "accountants": ["pld"],
        "phases": [{"steps": steps, "noise_multiplier": sigma}] * 3,
    }
    with pytest.raises(DPLabError) as err:
        phased.train(resolve_run(run), dataset, folder / "phases_refused")
    assert err.value.key == "noise_rng" and "drawn up to 30 times" in str(err.value)
