"""002 Cor. 1/2, Thm 3 and App. E: closed forms, tightness, limit, crossing with the baseline."""

import math

import numpy as np
import pytest

from dplab import units
from dplab.accounting import Setting, get
from dplab.accounting import langevin as L
from dplab.errors import AssumptionError

FIG = dict(lr=0.02, sigma=0.02, n=5000, sensitivity=4.0)  # 002 Figs. 1-2


@pytest.mark.parametrize("alpha,lam,k", [(10, 1, 1), (20, 2, 50), (30, 4, 300), (10, 4, 5000)])
def test_cor1_formula(alpha, lam, k):
    expected = alpha * 4.0**2 / (lam * 0.02**2 * 5000**2) * (1 - math.exp(-lam * 0.02 * k / 2))
    assert L.cor1_rdp(alpha, [k], strong_convexity=lam, **FIG)[0] == pytest.approx(
        expected, rel=1e-12
    )


@pytest.mark.parametrize("alpha,k", [(10, 1), (20, 80), (30, 1000)])
def test_cor2_formula_and_thm2(alpha, k):
    eta = 0.02
    expected = (
        alpha * 16 / ((2 - eta) * 0.02**2 * 5000**2) * (1 - math.exp(-(2 - eta) / 2 * eta * k))
    )
    assert L.cor2_rdp(alpha, [k], **FIG)[0] == pytest.approx(expected, rel=1e-12)
    # Cor. 2 is Thm 2 with c = (2 − η)/(2σ²); Cor. 1 is Thm 2 with c = λ/(2σ²)
    assert L.thm2_rdp(alpha, [k], lsi_constant=(2 - eta) / (2 * 0.02**2), **FIG)[
        0
    ] == pytest.approx(expected)
    assert L.thm2_rdp(alpha, [k], lsi_constant=2 / (2 * 0.02**2), **FIG)[0] == pytest.approx(
        L.cor1_rdp(alpha, [k], strong_convexity=2, **FIG)[0]
    )


def test_thm3_exact_is_gaussian_divergence_and_above_eq17():
    # exact Rényi divergence of N(μ, v) vs N(μ', v): α‖Δμ‖²/(2v), from the proof's recursion
    eta, sig, n, s, alpha = 0.3, 0.7, 11, 2.5, 7
    for k in (1, 2, 9):
        dmu = eta * s / n * sum((1 - eta) ** i for i in range(k))
        var = 2 * eta * sig**2 * sum((1 - eta) ** (2 * i) for i in range(k))
        assert L.thm3_exact_rdp(alpha, [k], eta, sig, n, s)[0] == pytest.approx(
            alpha * dmu**2 / (2 * var)
        )
    k = np.arange(1, 3000)
    assert np.all(L.thm3_exact_rdp(10, k, **FIG) >= L.thm3_lower_bound(10, k, **FIG) * (1 - 1e-12))


@pytest.mark.parametrize("eta", [0.02, 0.2, 0.6])
def test_langevin_between_thm3_and_four_times_on_quadratic_loss(eta):
    """The quadratic loss ½‖θ−x‖² is 1-strongly convex and 1-smooth: Cor. 1 with λ = 1 (and
    Cor. 2) lie between the exact divergence (Thm 3) and 4× it, at every K (002 §4)."""
    k = np.arange(1, 20000)
    args = dict(lr=eta, sigma=0.02, n=5000, sensitivity=4.0)
    exact = L.thm3_exact_rdp(20, k, **args)
    for upper in (L.cor1_rdp(20, k, strong_convexity=1.0, **args), L.cor2_rdp(20, k, **args)):
        assert np.all(upper >= exact) and np.all(upper <= 4 * exact)


def test_finite_limit():
    k = np.array([10**3, 10**5, 10**7])
    lim = 20 * 16 / (2 * 0.02**2 * 5000**2)
    assert L.cor1_rdp(20, k, strong_convexity=2, **FIG) == pytest.approx(
        [lim * (1 - math.exp(-20)), lim, lim]
    )
    lim2 = 20 * 16 / (1.98 * 0.02**2 * 5000**2)
    assert L.cor2_rdp(20, k[-1:], **FIG)[0] == pytest.approx(lim2)


@pytest.mark.parametrize("lam", [None, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("alpha", [10, 30])
def test_crossing_with_app_e_baseline(lam, alpha):
    """Below K* = y/(uη) (y = 2 + W₀(−2e⁻²)) the App. E baseline is smaller; from ⌈K*⌉ on the
    hidden-state bound is (002 Fig. 1/2).  For Cor. 2 K* ≈ 1.6/η."""
    k_star = L.crossing_steps(0.02, lam)
    if lam is None:
        assert k_star == pytest.approx(1.5936 / (0.99 * 0.02), rel=1e-4)  # ≈ 80.5 ≈ 1.6/η
    k = np.arange(1, 5001)
    bound = (
        L.cor2_rdp(alpha, k, **FIG)
        if lam is None
        else L.cor1_rdp(alpha, k, strong_convexity=lam, **FIG)
    )
    base = L.composition_rdp(alpha, k, **FIG)
    assert np.all(bound[k < k_star] > base[k < k_star])
    assert np.all(bound[k > k_star] < base[k > k_star])
    assert abs(L.CROSSING_Y / 2 - (1 - math.exp(-L.CROSSING_Y))) < 1e-14


def _setting(**kw):
    base = dict(
        noise_multiplier=2.0,
        steps=500,
        sampling="full_batch",
        dataset_size=1000,
        clip=1.0,
        lr=0.1,
        strong_convexity=1.0,
        smoothness=4.0,
        lipschitz=1.0,
    )
    base.update(kw)
    return Setting(**base)


def test_accountant_units_match_cor1():
    s = _setting(neighbouring="replace_one", alpha=8.0)
    sig = units.langevin_sigma(2.0, 1.0, 0.1, 1000)
    rdp = L.cor1_rdp(8.0, [500], 0.1, sig, 1000, 2.0, 1.0)[0]
    # α S_g²·2/(λ η σ² C²)·(1 − e^(−ληK/2)) with S_g = 2C (replace_one)
    assert rdp == pytest.approx(
        8.0 * 4 * 2 / (1.0 * 0.1 * 4.0) * (1 - math.exp(-0.1 * 500 / 2)), rel=1e-12
    )
    eps = get("langevin").epsilon(s, 1e-5)
    # dp_accounting's conversion at a single order: rdp + log((α−1)/α) − (log δ + log α)/(α−1)
    assert eps == pytest.approx(rdp + math.log(7 / 8) - (math.log(1e-5) + math.log(8)) / 7)


def test_accountant_below_composition_after_crossing_only():
    """Canonical units: the App. E baseline is the RDP of K Gaussian steps, Kα/(2σ²) (add_remove);
    at a fixed α the accountant exceeds `rdp` at K=1 and is below it after the crossing."""
    s = _setting(alpha=10.0)
    k_star = L.crossing_steps(0.1, 1.0)
    lang = get("langevin").epsilon_curve(s, 1e-5, [1, int(k_star) + 2, 5000])
    rdp = [
        10 * k / (2 * 2.0**2) + math.log(0.9) - (math.log(1e-5) + math.log(10)) / 9
        for k in (1, int(k_star) + 2, 5000)
    ]
    assert lang[0] > rdp[0] and lang[1] < rdp[1] and lang[2] < rdp[2]


@pytest.mark.parametrize(
    "kw,key",
    [
        (dict(lr=0.25), "lr"),
        (dict(lr=0.3), "lr"),
        (dict(smoothness=None), "smoothness"),
        (dict(strong_convexity=None), "strong_convexity"),
        (dict(strong_convexity=5.0), "strong_convexity"),
        (dict(sampling="poisson", sampling_rate=0.1), "sampling"),
        (dict(lipschitz=2.0), "clip"),
        (dict(lipschitz=None), "lipschitz"),
    ],
)
def test_refusals(kw, key):
    with pytest.raises(AssumptionError) as err:
        get("langevin").epsilon(_setting(**kw), 1e-5)
    assert err.value.key == key


def test_add_remove_constants_are_the_neighbours_hessian_extremes():
    """Under add_remove a neighbour holds m = n ∓ 1 records averaged over the public n: for
    ℓ(θ; x) = ½(θ − x)ᵀA(θ − x), spectrum(A) = [λ, β], the Hessian of (1/n)Σ_{x∈D'} ℓ is (m/n)·A.
    LangevinAccountant.constants returns exactly its smallest and largest eigenvalues over both
    neighbours, which are not (λ, β): 002 Lemma 5 needs these."""
    import torch

    n, lam, beta = 5, 0.5, 3.0
    a = torch.diag(
        torch.tensor([lam, 1.0, beta], dtype=torch.float64)
    )  # per-record Hessian, spectrum [λ, β]
    x = torch.randn(n + 1, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    eigs = []
    for m in (n - 1, n + 1):
        loss = lambda th, m=m: sum(0.5 * (th - xi) @ a @ (th - xi) for xi in x[:m]) / n  # noqa: E731
        eigs.append(
            torch.linalg.eigvalsh(
                torch.autograd.functional.hessian(loss, torch.zeros(3, dtype=torch.float64))
            )
        )
    setting = _setting(dataset_size=n, strong_convexity=lam, smoothness=beta, lr=0.01)
    assert L.LangevinAccountant.constants(setting) == pytest.approx(
        (float(eigs[0].min()), float(eigs[1].max()))
    )
    assert float(eigs[0].min()) < lam and float(eigs[1].max()) > beta
    assert L.LangevinAccountant.constants(setting.replace(neighbouring="replace_one")) == (
        lam,
        beta,
    )


def test_add_remove_epsilon_is_cor1_with_the_neighbours_strong_convexity():
    """ε under add_remove = Cor. 1 with S_g = C and λ(n−1)/n (n = 10: 10 % below λ), at one order;
    larger than with λ itself (what the code claimed before)."""
    n, k = 10, 500
    sig = units.langevin_sigma(2.0, 1.0, 0.1, n)
    lam = 1.0 * (n - 1) / n
    rdp = 8.0 * 1.0**2 / (lam * sig**2 * n**2) * (1 - math.exp(-lam * 0.1 * k / 2))
    eps = get("langevin").epsilon(_setting(alpha=8.0, dataset_size=n, smoothness=4.0), 1e-5)
    assert eps == pytest.approx(
        rdp + math.log(7 / 8) - (math.log(1e-5) + math.log(8)) / 7, rel=1e-12
    )
    old = (
        L.cor1_rdp(8.0, [k], 0.1, sig, n, 1.0, 1.0)[0]
        + math.log(7 / 8)
        - (math.log(1e-5) + math.log(8)) / 7
    )
    assert eps > old * 1.05


def test_add_remove_step_size_and_size_limits():
    """η < 1/β is not enough under add_remove: the (n+1)-record neighbour is β(n+1)/n-smooth."""
    s = _setting(dataset_size=10, smoothness=4.0, lr=0.24)  # 1/β = 0.25, n/((n+1)β) = 0.2273
    assert get("langevin").epsilon(s.replace(neighbouring="replace_one"), 1e-5) > 0
    with pytest.raises(AssumptionError) as err:
        get("langevin").epsilon(s, 1e-5)
    assert err.value.key == "lr" and "0.227273" in str(err.value)
    with pytest.raises(AssumptionError) as err:
        get("langevin").epsilon(_setting(dataset_size=1, lr=0.01), 1e-5)
    assert err.value.key == "dataset_size"


@pytest.mark.parametrize("neighbouring", ["replace_one", "add_remove"])
def test_private_selection_reads_langevins_whole_run_curve(neighbouring):
    """selection.candidate_curve calls the base ``rdp_curve(setting)``: langevin's is Cor. 1 at
    every order (its per-order helper no longer shadows it, which raised TypeError), and converting
    it at δ gives the accountant's own ε."""
    from dplab.accounting import rdp_conversion, selection

    s = _setting(neighbouring=neighbouring)
    orders, rdp = selection.candidate_curve(get("langevin"), s)
    sig = units.langevin_sigma(2.0, 1.0, 0.1, 1000)
    s_g = units.sum_sensitivity(1.0, neighbouring)
    lam = 1.0 * 999 / 1000 if neighbouring == "add_remove" else 1.0
    np.testing.assert_allclose(rdp, L.cor1_rdp(orders, 500, 0.1, sig, 1000, s_g, lam), rtol=1e-12)
    eps = rdp_conversion.epsilon_from_rdp(rdp[None, :], orders, 1e-5)[0]
    assert eps == pytest.approx(get("langevin").epsilon(s, 1e-5), rel=1e-12)
