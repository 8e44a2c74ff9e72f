"""ye_shokri and pabi formulas, and invariants across the hidden-state accountants."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplab.accounting import Setting, get
from dplab.accounting.pabi import pabi_rdp
from dplab.accounting.ye_shokri import recursion_rdp
from dplab.errors import AssumptionError


def test_ye_shokri_recursion_by_hand():
    # two epochs of n/b = 2 steps, α = 3, σ = 1.5, p = 1/2, c = 1 − ηλ = 0.9
    a, sig, p, c2 = 3.0, 1.5, 0.5, 0.81
    s = 1.0
    for _ in range(4):
        s = p * math.exp((a - 1) * a / (2 * sig**2)) * s + (1 - p) * s**c2
    got = recursion_rdp([a], [4], p, sig, lr=0.1, strong_convexity=1.0)[0, 0]
    assert got == pytest.approx(math.log(s) / (a - 1), rel=1e-12)


def test_ye_shokri_converges_and_full_batch_composes():
    """The recursion converges when p·exp((α−1)α/(2σ²)) < 1 (α = 2, σ = 1, p = 0.01) and otherwise
    grows linearly at rate ((α−1)α/(2σ²) + log p)/(α−1) per step (α = 8)."""
    r = recursion_rdp(
        [2.0, 8.0], [1, 100, 10**4, 2 * 10**4], 0.01, 1.0, lr=0.1, strong_convexity=1.0
    )
    assert np.all(np.diff(r, axis=0) >= -1e-15)
    assert r[-1, 0] == pytest.approx(r[-2, 0], rel=1e-9)
    assert (r[-1, 1] - r[-2, 1]) / 10**4 == pytest.approx((28 + math.log(0.01)) / 7, rel=1e-6)
    # p = 1: S = exp(K(α−1)α/(2σ²)) → ε_α = Kα/(2σ²), plain composition of Gaussian steps
    full = recursion_rdp([4.0], [7], 1.0, 2.0, lr=0.1, strong_convexity=1.0)[0, 0]
    assert full == pytest.approx(7 * 4 / (2 * 4.0))


def test_pabi_formula():
    # K = QT: α/(2σ²)·[(T−1)/Q + 1]; K = 1: a single Gaussian step α/(2σ²)
    assert pabi_rdp(4.0, [50 * 3], 50, 2.0)[0] == pytest.approx(4 / 8 * (2 / 50 + 1))
    assert pabi_rdp(4.0, [1], 50, 2.0)[0] == pytest.approx(4 / 8)
    # Q = 1 (one batch): plain composition Kα/(2σ²)
    assert pabi_rdp(4.0, [9], 1, 2.0)[0] == pytest.approx(9 * 4 / 8)


def _ws(**kw):
    base = dict(
        noise_multiplier=2.0,
        steps=300,
        sampling="without_replacement",
        neighbouring="replace_one",
        batch_size=50,
        dataset_size=1000,
        lr=0.1,
        strong_convexity=1.0,
        smoothness=4.0,
        clip=1.0,
        lipschitz=1.0,
    )
    base.update(kw)
    return Setting(**base)


def _pabi(**kw):
    base = dict(
        noise_multiplier=2.0,
        steps=300,
        sampling="shuffle",
        neighbouring="replace_one",
        batch_size=50,
        dataset_size=1000,
        lr=0.1,
        smoothness=4.0,
        lipschitz=1.0,
        clip=1.0,
    )
    base.update(kw)
    return Setting(**base)


def _lang(**kw):
    base = dict(
        noise_multiplier=2.0,
        steps=300,
        sampling="full_batch",
        neighbouring="replace_one",
        dataset_size=1000,
        lr=0.1,
        strong_convexity=1.0,
        smoothness=4.0,
        clip=1.0,
        lipschitz=1.0,
    )
    base.update(kw)
    return Setting(**base)


def _proj(**kw):
    base = dict(
        noise_multiplier=50.0,
        steps=300,
        sampling="poisson",
        neighbouring="replace_one",
        batch_size=10,
        dataset_size=10000,
        lr=0.1,
        diameter=1.0,
        clip=1.0,
    )
    base.update(kw)
    return Setting(**base)


CASES = {"ye_shokri": _ws, "pabi": _pabi, "langevin": _lang, "asoodeh_projected": _proj}


@pytest.mark.parametrize("name", CASES)
def test_release_and_monotone(name):
    acc, make = get(name), CASES[name]
    assert acc.release == "last_iterate" and acc.assumptions
    eps = acc.epsilon_curve(make(), 1e-5, [1, 10, 100, 300])
    assert np.all(np.diff(eps) >= -1e-9)  # weakly increasing in T
    s = make()
    assert acc.epsilon(s.replace(noise_multiplier=1.5 * s.noise_multiplier), 1e-5) < acc.epsilon(
        s, 1e-5
    )  # σ


@pytest.mark.parametrize("name", CASES)
def test_epsilon_delta_inverse_and_sigma(name):
    acc, s = get(name), CASES[name]()
    eps = acc.epsilon(s, 1e-5)
    assert acc.delta(s, eps) == pytest.approx(1e-5, rel=1e-3)
    sigma = acc.sigma(s, 1.0, 1e-5)
    assert acc.epsilon(s.replace(noise_multiplier=sigma), 1e-5) <= 1.0 + 1e-9
    assert acc.epsilon(s.replace(noise_multiplier=sigma * (1 - 1e-3)), 1e-5) > 1.0


@settings(max_examples=25, deadline=None)
@given(sigma=st.floats(0.5, 20), steps=st.integers(1, 400), factor=st.floats(1.01, 3))
def test_property_monotone(sigma, steps, factor):
    for name, make in CASES.items():
        acc = get(name)
        s = make(noise_multiplier=sigma, steps=steps)
        e = acc.epsilon(s, 1e-5)
        assert acc.epsilon(s.replace(steps=steps + 17), 1e-5) >= e - 1e-9
        assert acc.epsilon(s.replace(noise_multiplier=sigma * factor), 1e-5) <= e + 1e-9


def test_pabi_not_above_composition_of_the_same_steps():
    """000 §VI.A: every visit but the last is amplified by 1/Q, so at equal α the PABI RDP never
    exceeds that of composing the T/Q visits' Gaussian steps (each α/(2σ²)), and they agree
    when the record's batch is visited once."""
    k = np.arange(1, 2001)
    visits = np.ceil(k / 20)
    assert np.all(pabi_rdp(3.0, k, 20, 1.5) <= visits * 3 / (2 * 1.5**2) + 1e-12)
    assert pabi_rdp(3.0, [20], 20, 1.5)[0] == pytest.approx(3 / (2 * 1.5**2))


def test_ye_shokri_not_above_its_own_composition():
    """The recursion's per-step factor is the same (α−1)α/(2σ²) Gaussian term that composition
    pays with probability p; with the contraction it never exceeds its c = 1 version (λ → 0)."""
    r = recursion_rdp([5.0], np.arange(1, 500), 0.05, 1.0, lr=0.1, strong_convexity=1.0)
    r0 = recursion_rdp([5.0], np.arange(1, 500), 0.05, 1.0, lr=0.1, strong_convexity=0.0)
    assert np.all(r <= r0 + 1e-12)


@pytest.mark.parametrize(
    "make,name,kw,key",
    [
        (_ws, "ye_shokri", dict(lr=0.4), "lr"),  # 2/(1+4) = 0.4
        (_ws, "ye_shokri", dict(sampling="poisson"), "sampling"),
        (_ws, "ye_shokri", dict(neighbouring="add_remove"), "neighbouring"),
        (_ws, "ye_shokri", dict(strong_convexity=None), "strong_convexity"),
        (
            _ws,
            "ye_shokri",
            dict(lipschitz=None),
            "lipschitz",
        ),  # clipping may act: the recursion does not hold
        (_ws, "ye_shokri", dict(clip=None), "clip"),
        (_lang, "langevin", dict(lipschitz=None), "lipschitz"),
        (_pabi, "pabi", dict(lr=0.51), "lr"),  # 2/β = 0.5
        (_pabi, "pabi", dict(clip=0.5), "clip"),
        (_pabi, "pabi", dict(batch_size=300), "batch_size"),
        (_pabi, "pabi", dict(lipschitz=None), "lipschitz"),
        (_pabi, "pabi", dict(sampling="poisson"), "sampling"),
    ],
)
def test_refusals(make, name, kw, key):
    with pytest.raises(AssumptionError) as err:
        get(name).epsilon(make(**kw), 1e-5)
    assert err.value.key == key
    assert "got" in str(err.value) or "required" in str(err.value) or "must" in str(err.value)


def test_units_added_for_000():
    from dplab import units

    # 000 Alg. 2: noise N(0, 4σ₀²L²) on the sum = our σ·C → σ₀ = σC/(2L); C = L gives σ/2
    assert units.pabi_sigma(3.0, 2.0, 0.5) == pytest.approx(6.0)
    assert units.pabi_sigma(3.0, 1.0, 1.0) == pytest.approx(units.boninsegna_sigma(3.0))
    assert units.ye_shokri_sigma(3.0, "replace_one") == pytest.approx(1.5)
    assert units.ye_shokri_sigma(3.0, "add_remove") == pytest.approx(3.0)
