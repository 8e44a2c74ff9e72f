"""pld_curve: ε(T) for many T from one shared one-step PLD, against direct dp_accounting calls."""

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant

from dplab.accounting import pld_curve
from dplab.accounting.pld_accountant import PldAccountant
from dplab.accounting.setting import Setting

_REL = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}


class CoarsePld(PldAccountant):
    value_discretization_interval = 1e-3  # dp_accounting is called with the same interval below


def _direct(setting, t, delta, interval=1e-3):
    acc = pld_privacy_accountant.PLDAccountant(
        _REL[setting.neighbouring], value_discretization_interval=interval
    )
    acc.compose(
        dp_accounting.PoissonSampledDpEvent(
            setting.sampling_rate, dp_accounting.GaussianDpEvent(setting.noise_multiplier)
        ),
        int(t),
    )
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_short_grid_is_certified_at_every_step(neighbouring):
    """Every step of a short grid: the certified read-off (pld_tilted) of dp_accounting's PMF, at
    or above dp_accounting's own read-off (to its FFT rounding), above by at most the rounding
    allowance."""
    s = Setting(
        noise_multiplier=0.9,
        sampling_rate=0.02,
        steps=400,
        sampling="poisson",
        neighbouring=neighbouring,
    )
    steps = [1, 3, 50, 400]
    got = CoarsePld().epsilon_curve(s, 1e-6, steps)
    want = np.array([_direct(s, t, 1e-6) for t in steps])
    assert np.all(got >= want * (1 - 1e-7)) and np.all(got <= want * (1 + 1e-4))


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_long_grid_is_an_upper_bound_within_the_excess(neighbouring):
    s = Setting(
        noise_multiplier=1.1,
        sampling_rate=0.02,
        steps=600,
        sampling="poisson",
        neighbouring=neighbouring,
    )
    curve = CoarsePld().epsilon_curve(s, 1e-5)  # T = 1..600 in one call
    assert curve.shape == (600,) and np.all(np.diff(curve) >= 0)
    for t in [1, 2, 17, 97, 255, 421, 599, 600]:
        exact = _direct(s, t, 1e-5)
        assert (
            exact * (1 - 1e-7)
            <= curve[t - 1]
            <= exact * (1 + pld_curve.EXCESS) * (1 + 1e-4) + 1e-12
        )


@pytest.mark.parametrize("band_ratio", [0, 1e12], ids=["fourier-band", "inverse-fft"])
@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_both_read_offs_equal_dp_accounting(monkeypatch, band_ratio, neighbouring):
    """ε read from the few Fourier coefficients of φ^T (forced for every T) and from the inverse
    FFT both give dp_accounting's value, from T = 1 (wide band) to T = 3000 (narrow band): the
    tilt points of pld's certified read-off."""
    monkeypatch.setattr(pld_curve, "BAND_RATIO", band_ratio)
    s = Setting(
        noise_multiplier=0.8,
        sampling_rate=0.05,
        steps=3000,
        sampling="poisson",
        neighbouring=neighbouring,
    )
    steps = np.array([1, 7, 300, 3000])
    composed, _ = CoarsePld().composed(s, steps)
    got = None
    for c in composed:
        got = c.epsilons(steps, 1e-6, floor=got)
    np.testing.assert_allclose(got, [_direct(s, t, 1e-6) for t in steps], rtol=1e-7)


def test_monotone_curve_on_a_known_function():
    f = lambda ts: np.sqrt(np.asarray(ts, dtype=float))  # noqa: E731
    steps = np.arange(1, 5001)
    got = pld_curve.monotone_curve(f, steps, excess=0.01)
    assert np.all(got >= f(steps)) and np.all(got <= 1.01 * f(steps))
    assert got[-1] == f([5000])[0]
