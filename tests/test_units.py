"""Every conversion of dplab.units: hand-checkable values and round trips (docs/units.md)."""

import math

import pytest

from dplab import units
from dplab.errors import DPLabError


def test_sampling_rate():
    assert units.sampling_rate(50, 1000) == 0.05
    with pytest.raises(DPLabError):
        units.sampling_rate(2000, 1000)


def test_sum_sensitivity_and_effective_multiplier():
    assert units.sum_sensitivity(30.0, "add_remove") == 30.0
    assert units.sum_sensitivity(30.0, "replace_one") == 60.0
    assert units.effective_noise_multiplier(2.0, "add_remove") == 2.0
    assert units.effective_noise_multiplier(2.0, "replace_one") == 1.0
    with pytest.raises(DPLabError):
        units.sum_sensitivity(1.0, "swap")


def test_noise_std_on_sum():
    assert units.noise_std_on_sum(1.5, 2.0) == 3.0


def test_asoodeh_fig1():
    """001 Fig. 1: σ_A = 1, η = 0.01, C = 2, p = 0.001; with n = 10⁴ (b = 10):
    σ = 10/(0.01·2) = 500."""
    b = units.sampling_rate(10, 10_000) * 10_000
    assert units.noise_multiplier_from_asoodeh(1.0, 0.01, 2.0, b) == pytest.approx(500.0)
    assert units.asoodeh_sigma(500.0, 0.01, 2.0, b) == pytest.approx(1.0)


def test_langevin_fig1():
    """002 Fig. 1: σ₀₀₂ = 0.02, η = 0.02, S_g = C = 4, n = 5000: σ = 0.02·5000·√(2/0.02)/4 = 250;
    and 000 eq. (6): σ₀₀₂² = η·C²·σ²/(2n²)."""
    assert units.noise_multiplier_from_langevin(0.02, 4.0, 0.02, 5000) == pytest.approx(250.0)
    assert units.langevin_sigma(250.0, 4.0, 0.02, 5000) == pytest.approx(0.02)
    assert units.langevin_sigma(1.0, 4.0, 0.02, 5000) ** 2 == pytest.approx(
        0.02 * 16 / (2 * 5000**2)
    )


def test_boninsegna():
    """000 Alg. 1 adds N(0, 4σ₀₀₀²C²): σ₀₀₀ = 1 is our σ = 2, and effective
    σ/2 = σ₀₀₀ (replace-one)."""
    assert units.noise_multiplier_from_boninsegna(1.0) == 2.0
    assert units.boninsegna_sigma(2.0) == 1.0
    assert (
        units.effective_noise_multiplier(units.noise_multiplier_from_boninsegna(0.7), "replace_one")
        == 0.7
    )


def test_note():
    """003 Alg. 2 adds N(0, σ₀₀₃²C²) to the average of b = 64: σ₀₀₃ = 0.05 is our σ = 3.2."""
    assert units.noise_multiplier_from_note(0.05, 64) == pytest.approx(3.2)
    assert units.note_sigma(3.2, 64) == pytest.approx(0.05)


def test_blog():
    """004 §3.1 adds N(0, 4σ₀₀₄²C²/N²) to the average of N: std on the sum 2σ₀₀₄C, σ = 2σ₀₀₄."""
    assert units.noise_multiplier_from_blog(3.0) == 6.0
    assert units.blog_sigma(6.0) == 3.0


def test_gaussian_std():
    """004 §2 salary: Δ = 10⁶/10⁴ = 100; σ = 8.06 is std 806."""
    assert units.gaussian_noise_std(8.06, 100.0) == pytest.approx(806.0)
    assert units.noise_multiplier_from_gaussian_std(806.0, 100.0) == pytest.approx(8.06)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 7.5])
def test_round_trips(sigma):
    assert units.noise_multiplier_from_asoodeh(
        units.asoodeh_sigma(sigma, 0.1, 3.0, 17), 0.1, 3.0, 17
    ) == pytest.approx(sigma)
    assert units.noise_multiplier_from_langevin(
        units.langevin_sigma(sigma, 2.0, 0.05, 999), 2.0, 0.05, 999
    ) == pytest.approx(sigma)
    assert units.noise_multiplier_from_boninsegna(units.boninsegna_sigma(sigma)) == pytest.approx(
        sigma
    )
    assert units.noise_multiplier_from_note(units.note_sigma(sigma, 32), 32) == pytest.approx(sigma)
    assert units.noise_multiplier_from_blog(units.blog_sigma(sigma)) == pytest.approx(sigma)
    assert units.noise_multiplier_from_gaussian_std(
        units.gaussian_noise_std(sigma, 4.0), 4.0
    ) == pytest.approx(sigma)


def test_bad_values_refused():
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(DPLabError):
            units.noise_std_on_sum(bad, 1.0)
