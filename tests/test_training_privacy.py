"""The run's privacy claim: which accountants are valid, calibration, peer agreement."""

import math

import pytest

from conftest import model_settings
from dplab import accounting
from dplab.accounting.eligibility import defaults
from dplab.errors import DPLabError
from dplab.training import data
from dplab.training.resolve import resolve_run
from dplab.training.methods import update_of
from dplab.training.privacy import loss_constants, plan
from dplab.training.settings import RunSettings


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 200, "test_size": 50, "dim": 4, "feature_norm": 1.0},
        "s",
    )
    train, _, info = data.prepare(cfg, "s")
    return {**info, "x_train": train["x"]}  # info.json's content, and the records the runs train on


def _plan(run, info, n=200, b=20, d=10):
    cfg = resolve_run({"steps": 50, "batch_size": b, **run})
    run = RunSettings.of(cfg)
    return plan(run, update_of(run), n, run.b(n), d, info, [10, 50], info["x_train"])


def test_sgd_claims_nothing(synth):
    p = _plan({"method": "sgd"}, synth)
    assert not p.curves and set(p.excluded) == set(defaults())


def test_shuffled_batches_get_no_poisson_epsilon(synth):
    p = _plan({"method": "dp_sgd", "sampling": "shuffle", "noise_multiplier": 1.0}, synth, b=30)
    assert "rdp" not in p.curves and "sampling" in p.excluded["rdp"]


@pytest.mark.parametrize("sampling", ["shuffle", "balls_in_bins"])
def test_add_remove_runs_whose_neighbours_change_the_epoch_are_refused(synth, sampling):
    """n = 200 with b = 20 (n mod b = 0) or b = 67 (n mod b = b − 1): a neighbour's run has another
    ⌊n/b⌋ steps per epoch, so no upper bound holds and the run is refused before training (it
    trained and claimed nothing before); replace_one keeps n."""
    for b in (20, 67):
        with pytest.raises(
            DPLabError, match="batch_size: add_remove .* in \\[1, batch_size − 2\\]"
        ):
            _plan({"method": "dp_sgd", "sampling": sampling, "noise_multiplier": 1.0}, synth, b=b)
        assert (
            _plan(
                {
                    "method": "dp_sgd",
                    "sampling": sampling,
                    "noise_multiplier": 1.0,
                    "neighbouring": "replace_one",
                },
                synth,
                b=b,
            ).curves["fixed_batches"]
            is not None
        )


def test_an_epoch_refusal_suggests_another_batch_size_only_where_the_accountant_takes_add_remove(
    synth,
):
    """pabi takes replace_one only: another batch size would only meet its next refusal."""
    with pytest.raises(DPLabError, match=r"use neighbouring = replace_one \(pabi takes no other\)"):
        _plan({"method": "dp_sgd_fixed_batches", "noise_multiplier": 1.0}, synth, b=20)
    with pytest.raises(DPLabError, match="use neighbouring = replace_one or another batch_size"):
        _plan({"method": "dp_sgd", "sampling": "shuffle", "noise_multiplier": 1.0}, synth, b=20)


def test_projected_poisson_normalisation_decides_validity(synth):
    realized = _plan(
        {
            "method": "projected_dp_sgd",
            "diameter": 2.0,
            "noise_multiplier": 1.0,
            "accountants": ["rdp", "pld"],
        },
        synth,
    )
    assert not realized.curves and "realized batch size" in realized.excluded["rdp"]
    expected = _plan(
        {
            "method": "projected_dp_sgd",
            "diameter": 2.0,
            "noise_multiplier": 1.0,
            "normalize": "expected",
            "accountants": ["rdp", "pld"],
        },
        synth,
    )
    assert set(expected.curves) == {"rdp", "pld"}


def test_loss_constants_only_when_guaranteed(synth):
    r2 = 1.0 + 1.0
    base = {"method": "noisy_gd", "noise_multiplier": 1.0, "l2": 0.5, "diameter": 2.0, "clip": 10.0}
    consts, _ = loss_constants(RunSettings.of(resolve_run(base)), synth, synth["x_train"])
    assert consts == pytest.approx(
        {"strong_convexity": 0.5, "smoothness": r2 / 2 + 0.5, "lipschitz": math.sqrt(2 * r2) + 0.5}
    )
    for change in ({"clip": 1.0}, {"diameter": None}):  # clipping may act / gradient unbounded
        assert (
            loss_constants(
                RunSettings.of(resolve_run({**base, **change})), synth, synth["x_train"]
            )[0]
            == {}
        )
    assert (
        loss_constants(
            RunSettings.of(resolve_run({**base, "model": "mlp", "l2": 0.0})),
            synth,
            synth["x_train"],
        )[0]
        == {}
    )
    setting = _plan({**base, "accountants": []}, synth).setting
    assert setting.strong_convexity == 0.5 and setting.lipschitz == pytest.approx(
        math.sqrt(2 * r2) + 0.5
    )


def test_logreg_constants_bound_the_real_gradients(synth, tmp_path):
    """The derived L and β hold on random points of the data: ||∇ℓ|| ≤ L, curvature ≤ β."""
    import torch
    from torch import nn

    from dplab.training import models

    cfg = data.resolve_dataset(
        {
            "kind": "synthetic",
            "train_size": 300,
            "test_size": 10,
            "dim": 6,
            "classes": 4,
            "feature_norm": 3.0,
        },
        "s",
    )
    train, _, info = data.prepare(cfg, "s")
    lip, beta = info["logreg_constants"]["lipschitz"], info["logreg_constants"]["smoothness"]
    model = models.build(model_settings("logreg"), info["input_shape"], 4).double()
    x, y = torch.from_numpy(train["x"]).double(), torch.from_numpy(train["y"])
    theta = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.manual_seed(0)

    def f(flat, i):
        w, c = flat[:24].view(4, 6), flat[24:]
        return nn.functional.cross_entropy((x[i : i + 1] @ w.T) + c, y[i : i + 1])

    worst_g, worst_h = 0.0, 0.0
    for i in range(0, 300, 10):
        t = theta + 3 * torch.randn_like(theta)
        worst_g = max(
            worst_g, float(torch.autograd.functional.jacobian(lambda v: f(v, i), t).norm())
        )
        worst_h = max(
            worst_h,
            float(
                torch.linalg.eigvalsh(torch.autograd.functional.hessian(lambda v: f(v, i), t)).max()
            ),
        )
    assert worst_g <= lip and worst_h <= beta
    assert worst_g > 0.3 * lip and worst_h > 0.05 * beta  # not vacuous


def test_calibrated_sigma_meets_the_target(synth):
    p = _plan({"method": "dp_sgd", "target_epsilon": 2.0, "accountants": ["rdp"]}, synth)
    eps = p.curves["rdp"][-1]
    assert eps <= 2.0 and eps == pytest.approx(2.0, rel=1e-3)
    assert (
        accounting.get("rdp").epsilon(
            p.setting.replace(noise_multiplier=p.noise_multiplier * 0.99), 1e-5
        )
        > 2.0
    )


def test_calibration_with_an_invalid_accountant_fails(synth):
    from dplab.errors import DPLabError

    with pytest.raises(DPLabError, match="accountant"):
        _plan(
            {"method": "dp_sgd", "sampling": "shuffle", "target_epsilon": 1.0, "accountant": "rdp"},
            synth,
        )


def test_rdp_epsilon_matches_opacus(synth):
    """ε of the run's rdp accountant = Opacus's RDP accountant on the same (q, σ, T, δ)."""
    pytest.importorskip("opacus")
    from opacus.accountants import RDPAccountant

    p = _plan({"method": "dp_sgd", "noise_multiplier": 1.1, "accountants": ["rdp"]}, synth)
    peer = RDPAccountant()
    for _ in range(50):
        peer.step(noise_multiplier=1.1, sample_rate=20 / 200)
    # the two libraries optimise over different grids of Rényi orders: equal to 2e-4, never below
    assert p.curves["rdp"][-1] == pytest.approx(peer.get_epsilon(1e-5), rel=2e-4)


def test_calibration_searches_sigma_beyond_a_probe_outside_the_accountants_range(synth):
    # rdp_closed_form (000 Thm A.1) needs σ >= 4: the σ it calibrates lies there, though the probe
    # σ = 1 does not; the run gets the σ that `dplab sigma` gives for the same setting
    p = _plan(
        {
            "method": "dp_sgd",
            "target_epsilon": 1.0,
            "accountant": "rdp_closed_form",
            "accountants": ["rdp_closed_form"],
            "steps": 50,
        },
        synth,
    )
    assert p.noise_multiplier >= 4.0
    assert p.noise_multiplier == pytest.approx(
        accounting.get("rdp_closed_form").sigma(p.setting, 1.0, 1e-5), rel=1e-12
    )
    assert p.curves["rdp_closed_form"][-1] <= 1.0


def test_risk_reading_from_the_runs_pld_or_a_reason(synth):
    """summary.json's risk: the pld PLD's reading of the run's T steps when pld is a claim; a named
    reason otherwise (no pld requested; a non-private run)."""
    from dplab.accounting.risk import risk
    from dplab.training.privacy import risk_reading

    p = _plan({"method": "dp_sgd", "noise_multiplier": 2.0, "accountants": ["rdp", "pld"]}, synth)
    assert p.setting.steps == 50
    assert risk_reading(p) == risk(p.setting)
    assert (
        "not among"
        in risk_reading(
            _plan({"method": "dp_sgd", "noise_multiplier": 2.0, "accountants": ["rdp"]}, synth)
        )["unavailable"]
    )
    assert risk_reading(_plan({"method": "sgd"}, synth)) == {"unavailable": "non-private run"}
    from dplab.accounting.eligibility import Update
    from dplab.training.privacy import Plan

    plan = Plan(
        setting=None,
        noise_multiplier=4.2,
        sigma_source="given",
        constants_note="",
        update=Update(noise="correlated"),
    )  # dp_mf: private
    correlated = risk_reading(plan)
    assert (
        "correlated noise" in correlated["unavailable"]
        and "non-private" not in correlated["unavailable"]
    )


def test_run_calibrated_to_a_risk_target(synth):
    """target_tpr/target_fpr: σ from dplab.accounting.risk.sigma_for_risk with pld; the plan claims
    pld's ε at that σ and the risk reading meets the target."""
    from dplab.accounting.risk import sigma_for_risk
    from dplab.training.privacy import risk_reading

    p = _plan(
        {"method": "dp_gd", "target_tpr": 0.1, "target_fpr": 0.01, "accountants": ["pld"]}, synth
    )
    assert p.noise_multiplier == pytest.approx(
        sigma_for_risk(p.setting, tpr=0.1, fpr=0.01), rel=1e-12
    )
    assert "attack TPR <= 0.1 at FPR 0.01" in p.sigma_source and p.curves["pld"][-1] > 0
    assert risk_reading(p)["tpr"][1] <= 0.1


@pytest.mark.parametrize(
    "run,key",
    [
        ({"target_tpr": 0.1}, "target_fpr"),
        ({"target_tpr": 0.01, "target_fpr": 0.1}, "target_tpr"),
        ({"target_tpr": 0.1, "target_fpr": 0.01, "target_epsilon": 1.0}, "noise_multiplier"),
        ({"target_tpr": 0.1, "target_fpr": 0.01, "accountant": "rdp"}, "accountant"),
        ({"target_tpr": 0.1, "target_fpr": 0.01, "sampling": "shuffle"}, "target_tpr"),
    ],
)
def test_bad_risk_target_in_a_run_config(run, key):
    with pytest.raises(DPLabError) as bad:
        resolve_run({"method": "dp_sgd", "steps": 10, "batch_size": 10, **run})
    assert bad.value.key == key
