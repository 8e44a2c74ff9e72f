"""Attack risk beside ε (dplab.accounting.risk): against riskcal 1.5.1 on the same PLD, against the
closed-form Gaussian trade-off curve, and the CLI's --risk and σ-for-risk with their refusals."""

import json

import numpy as np
import pytest

from dplab.accounting.risk import (
    FPRS,
    _profile_reading,
    advantage_of,
    composed_pld,
    gaussian_tpr,
    phases_risk,
    risk,
    sigma_for_risk,
)
from dplab.accounting.setting import Setting
from dplab.cli import main

pytest.importorskip("riskcal")  # the `peers` extra
from riskcal.analysis import (  # noqa: E402
    get_advantage_from_gdp,
    get_advantage_from_pld,
    get_beta_from_gdp,
    get_beta_from_pld,
)
from riskcal.calibration.dpsgd import get_advantage_for_dpsgd, get_beta_for_dpsgd  # noqa: E402

#: (σ, q, T) of the grid checked against riskcal (each ≤ 1 s here)
GRID = [(1.0, 0.01, 100), (2.0, 0.1, 50), (0.8, 0.05, 20)]


@pytest.mark.parametrize("sigma,q,steps", GRID)
def test_poisson_risk_equals_riskcal_and_bounds_it(sigma, q, steps):
    """TPR at each FPR within 0.5 % of riskcal's Algorithm 1 on the same (Poisson,
    add/remove) DP-SGD PLD, never below it (ours is the symmetrised curve's bound);
    advantage equal to riskcal's."""
    ours = risk(Setting(noise_multiplier=sigma, sampling_rate=q, steps=steps))
    theirs = 1 - np.asarray(get_beta_for_dpsgd(sigma, q, steps, alpha=np.array(FPRS)))
    assert np.asarray(ours["tpr"]) == pytest.approx(theirs, rel=5e-3)
    assert np.all(np.asarray(ours["tpr"]) >= theirs - 1e-12)
    assert ours["advantage"] == pytest.approx(get_advantage_for_dpsgd(sigma, q, steps), rel=1e-9)


def test_poisson_at_rate_one_is_the_exact_gaussian_curve():
    """Poisson at q = 1 is the full-batch Gaussian of μ = √T/σ: its reading, its advantage and its
    σ-for-risk are full_batch's closed form, in phases too; the PLD profile reading of the same
    mechanism is at least the exact Φ(Φ⁻¹(α) + μ) (validity) and within 1e-5 of it, where
    riskcal's own Algorithm 1 on the same discretized PLD falls below it (so we do not use it as
    the bound)."""
    sigma, steps = 2.0, 20
    mu = np.sqrt(steps) / sigma
    exact = gaussian_tpr(FPRS, mu)
    poisson = Setting(noise_multiplier=sigma, sampling_rate=1.0, steps=steps)
    full = poisson.replace(sampling="full_batch")
    ours = risk(poisson)
    assert np.asarray(ours["tpr"]) == pytest.approx(exact, rel=1e-15)
    assert ours["advantage"] == risk(full)["advantage"] == advantage_of(poisson)
    assert sigma_for_risk(poisson, advantage=0.5) == sigma_for_risk(full, advantage=0.5)
    both = [poisson, poisson.replace(noise_multiplier=3.0, steps=5)]
    assert (
        phases_risk(both)["tpr"]
        == phases_risk([s.replace(sampling="full_batch") for s in both])["tpr"]
    )
    profile = np.asarray(
        _profile_reading(composed_pld([poisson]), np.asarray(FPRS), "add_remove")["tpr"]
    )
    assert np.all(profile >= exact) and profile == pytest.approx(exact, abs=1e-5)
    riskcal_pld = 1 - np.asarray(get_beta_for_dpsgd(sigma, 1.0, steps, alpha=np.array(FPRS)))
    assert np.any(riskcal_pld < exact)


@pytest.mark.parametrize("neighbouring,factor", [("add_remove", 1.0), ("replace_one", 2.0)])
def test_full_batch_closed_form(neighbouring, factor):
    """full_batch: exactly riskcal's GDP curve and advantage at μ = √T/σ_eff
    (σ_eff = σ/2 for replace_one)."""
    out = risk(
        Setting(noise_multiplier=3.0, sampling="full_batch", steps=16, neighbouring=neighbouring)
    )
    mu = factor * 4 / 3.0
    assert out["tpr"] == pytest.approx(1 - get_beta_from_gdp(mu, np.array(FPRS)), rel=1e-12)
    assert out["advantage"] == pytest.approx(get_advantage_from_gdp(mu), rel=1e-12)
    assert out["neighbouring"] == neighbouring


def test_sigma_for_risk_full_batch_meets_target_exactly():
    """Full batch: TPR(σ) at the FPR is the target (closed form), and a hair less σ misses it."""
    setting = Setting(sampling="full_batch", steps=100)
    sigma = sigma_for_risk(setting, tpr=0.1, fpr=0.01)
    assert risk(setting.replace(noise_multiplier=sigma), fprs=(0.01,))["tpr"][0] <= 0.1
    assert risk(setting.replace(noise_multiplier=sigma * (1 - 1e-6)), fprs=(0.01,))["tpr"][0] > 0.1


@pytest.mark.parametrize("target", [{"advantage": 0.1}, {"tpr": 0.05, "fpr": 0.01}])
def test_sigma_for_risk_poisson_is_riskcals_smallest(target):
    """Poisson: the σ returned meets the target on riskcal's own reading of the DP-SGD PLD,
    and 0.5 % less σ misses it there: riskcal's calibration (its bisection to the same
    target) lands within 0.5 %."""
    q, steps = 0.1, 10
    sigma = sigma_for_risk(Setting(sampling_rate=q, steps=steps), **target)

    def reading(s):
        if "advantage" in target:
            return get_advantage_for_dpsgd(s, q, steps), target["advantage"]
        return 1 - get_beta_for_dpsgd(s, q, steps, alpha=target["fpr"]), target["tpr"]

    value, bound = reading(sigma)
    assert value <= bound
    value, bound = reading(sigma * (1 - 5e-3))
    assert value > bound


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_epsilon_risk(capsys):
    base = [
        "epsilon",
        "--delta",
        "1e-5",
        "--noise-multiplier",
        "2",
        "--sampling-rate",
        "0.1",
        "--steps",
        "50",
        "--risk",
    ]
    out = _json(capsys, [*base, "--accountant", "pld"])
    assert out["risk"]["fpr"] == list(FPRS) and out["risk"]["neighbouring"] == "add_remove"
    assert out["risk"]["tpr"] == pytest.approx(
        risk(Setting(noise_multiplier=2, sampling_rate=0.1, steps=50))["tpr"]
    )
    assert (
        "no privacy-loss distribution"
        in _json(capsys, [*base, "--accountant", "rdp"])["risk"]["unavailable"]
    )


def test_cli_sigma_for_risk(capsys):
    out = _json(
        capsys,
        [
            "sigma",
            "--accountant",
            "pld",
            "--sampling",
            "full_batch",
            "--steps",
            "100",
            "--tpr",
            "0.1",
            "--fpr",
            "0.01",
            "--delta",
            "1e-5",
        ],
    )
    assert out["risk"]["tpr"][1] <= 0.1 and out["target"] == {"tpr": 0.1, "fpr": 0.01}
    assert out["epsilon"] > 0 and out["noise_multiplier"] == pytest.approx(
        sigma_for_risk(Setting(sampling="full_batch", steps=100), tpr=0.1, fpr=0.01)
    )


@pytest.mark.parametrize(
    "flags,key",
    [
        (["--tpr", "0.01", "--fpr", "0.1"], "tpr"),
        (["--tpr", "1.5", "--fpr", "0.1"], "tpr"),
        (["--tpr", "0.5", "--fpr", "0"], "fpr"),
        (["--tpr", "0.5"], "fpr"),
        (["--advantage", "1"], "advantage"),
        (["--tpr", "0.5", "--fpr", "0.1", "--epsilon", "1"], "epsilon"),
        (["--tpr", "0.5", "--fpr", "0.1", "--accountant", "rdp"], "accountant"),
        ([], "epsilon"),
    ],
)
def test_cli_sigma_bad_risk_target(capsys, flags, key):
    """A bad risk target is one line naming the key, exit 2."""
    argv = ["sigma", "--sampling", "full_batch", "--steps", "10", *flags]
    if "--accountant" not in flags:
        argv += ["--accountant", "pld"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"error: {key}:" in err


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
@pytest.mark.parametrize(
    "flags,key,ceiling",
    [
        (["--tpr", "0.9", "--fpr", "0.01"], "tpr", 0.01 + 0.99 * (1 - 0.99**10)),
        (["--tpr", "0.1047", "--fpr", "0.01"], "tpr", 0.01 + 0.99 * (1 - 0.99**10)),
        (["--advantage", "0.5"], "advantage", 1 - 0.99**10),
    ],
)
def test_cli_sigma_refuses_a_poisson_risk_target_every_sigma_meets(
    capsys, flags, key, ceiling, neighbouring
):
    """As σ → 0 no attacker beats detecting that the record was ever sampled (probability
    1 − (1 − q)^T): TPR ≤ α + (1 − α)·p, advantage ≤ p.  A target at or above that was refused as
    met at pld's smallest σ, "the smallest σ meeting it lies below", with a TPR (0.1056) above
    this ceiling (q = 0.01, T = 10: 0.10466); now it names the ceiling, at once."""
    argv = ["sigma", "--accountant", "pld", "--sampling-rate", "0.01", "--steps", "10"]
    assert main([*argv, "--neighbouring", neighbouring, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"error: {key}: every σ > 0 meets it" in err
    assert f"exceeds {ceiling:.4g} even without noise" in err


def test_poisson_replace_one_equals_riskcal_on_the_same_pld():
    """replace_one: riskcal's Algorithm 1 on the very PLD we read (dp_accounting's REPLACE_ONE
    sampled Gaussian) agrees within 0.5 %, never above ours; the advantage is the PLD's δ(0)."""
    from riskcal.analysis import get_beta_from_pld

    from dplab.accounting.risk import composed_pld

    setting = Setting(
        noise_multiplier=1.5, sampling_rate=0.05, steps=30, neighbouring="replace_one"
    )
    ours = risk(setting)
    pld = composed_pld([setting])
    theirs = 1 - np.asarray(get_beta_from_pld(pld, alpha=np.array(FPRS)))
    assert np.asarray(ours["tpr"]) == pytest.approx(theirs, rel=5e-3)
    assert np.all(np.asarray(ours["tpr"]) >= theirs - 1e-12)
    assert ours["neighbouring"] == "replace_one"
    assert ours["advantage"] == pytest.approx(pld.get_delta_for_epsilon(0.0), rel=1e-12)


def test_sweep_rows_carry_riskcals_risk_where_a_pld_exists():
    """The ε-vs-T table: each pld row's TPRs and advantage are riskcal's at its own T; rdp's rows
    (no PLD) leave them empty and say so; the same columns appear in every row."""
    from dplab.accounting.sweep import COLUMNS, sweep

    setting = Setting(
        noise_multiplier=1.0, sampling="poisson", dataset_size=1000, batch_size=10, steps=100
    )
    table = sweep(setting, 1e-5, ["pld", "rdp"], np.array([5, 40]))
    assert list(table.columns) == COLUMNS
    tprs = [f"tpr_at_fpr_{a:g}" for a in FPRS]
    for row in table[table.accountant == "pld"].itertuples():
        theirs = 1 - np.asarray(get_beta_for_dpsgd(1.0, 0.01, row.steps, alpha=np.array(FPRS)))
        assert table.loc[row.Index, tprs].to_numpy(float) == pytest.approx(theirs, rel=5e-3)
        assert row.advantage == pytest.approx(
            get_advantage_for_dpsgd(1.0, 0.01, row.steps), rel=1e-9
        )
    rdp = table[table.accountant == "rdp"]
    assert rdp[[*tprs, "advantage"]].isna().all().all()
    assert rdp.risk_note.str.contains("rdp has no privacy-loss distribution").all()


def test_full_batch_phases_are_one_gaussian_mechanism():
    """Full-batch phases compose to one Gaussian mechanism of μ = √(Σᵢ Tᵢ/σᵢ_eff²) (Dong, Roth &
    Su 2022, Cor. 3.3): riskcal's GDP curve and advantage at that μ, in both relations."""
    for neighbouring, factor in (("add_remove", 1.0), ("replace_one", 2.0)):
        phases = [
            Setting(noise_multiplier=s, sampling="full_batch", steps=t, neighbouring=neighbouring)
            for s, t in ((1.2, 20), (2.0, 10))
        ]
        mu = factor * np.sqrt(20 / 1.2**2 + 10 / 2.0**2)
        out = phases_risk(phases)
        assert out["tpr"] == pytest.approx(1 - get_beta_from_gdp(mu, np.array(FPRS)), rel=1e-12)
        assert out["advantage"] == pytest.approx(get_advantage_from_gdp(mu), rel=1e-12)
        assert out["neighbouring"] == neighbouring


#: Poisson phases, a full-batch one among them (q = 1)
PHASES = [
    Setting(noise_multiplier=1.2, sampling_rate=0.05, steps=6),
    Setting(noise_multiplier=2.0, sampling_rate=0.1, steps=4),
    Setting(noise_multiplier=8.0, sampling="full_batch", steps=2),
]


def test_poisson_phases_read_dp_accounting_s_composition():
    """Within 0.01 % of riskcal's reading of dp_accounting's own composition of the phases' PLDs
    (built here at one interval, 1e-3)."""
    from dp_accounting.pld.privacy_loss_distribution import from_gaussian_mechanism

    composed = None
    for p in PHASES:
        part = from_gaussian_mechanism(
            p.noise_multiplier,
            sampling_prob=p.sampling_rate,
            value_discretization_interval=1e-3,
            pessimistic_estimate=True,
        ).self_compose(p.steps)
        composed = part if composed is None else composed.compose(part)
    out = phases_risk(PHASES)
    theirs = 1 - np.asarray(get_beta_from_pld(composed, alpha=np.array(FPRS)))
    assert np.asarray(out["tpr"]) == pytest.approx(theirs, rel=1e-4)
    assert out["advantage"] == pytest.approx(get_advantage_from_pld(composed), rel=1e-4)


def test_phases_risk_grows_with_each_phase_and_splits_exactly():
    """The phases' risk exceeds each phase's own, and phases equal apart from T read as the one
    setting of ΣTᵢ steps, also under replace_one and with a phase of one step."""
    out = phases_risk(PHASES)
    for p in PHASES:
        alone = risk(p)
        assert np.all(np.asarray(out["tpr"]) > np.asarray(alone["tpr"]))
        assert out["advantage"] > alone["advantage"]
    one = PHASES[0].replace(steps=10)
    split = phases_risk([one.replace(steps=6), one.replace(steps=4)])
    assert split["tpr"] == pytest.approx(risk(one)["tpr"], rel=1e-9)
    assert split["advantage"] == pytest.approx(risk(one)["advantage"], rel=1e-9)
    one = PHASES[0].replace(steps=3, neighbouring="replace_one")
    split = phases_risk([one.replace(steps=1), one.replace(steps=2)])
    assert split["neighbouring"] == "replace_one"
    assert split["tpr"] == pytest.approx(risk(one)["tpr"], rel=1e-9)
    assert split["advantage"] == pytest.approx(risk(one)["advantage"], rel=1e-9)
