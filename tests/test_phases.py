"""Runs in phases (dplab.accounting.phases): the composition of heterogeneous steps against
dp_accounting's composed event, the exact Gaussian, and the single-setting accountants."""

from __future__ import annotations

import json
import math
import re

import dp_accounting
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.cli import main
from dplab.accounting import phases
from dplab.accounting.gaussian import gaussian_epsilon
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError

DELTA = 1e-5
PHASES = [
    Setting(steps=300, sampling_rate=0.01, noise_multiplier=1.2),
    Setting(steps=100, sampling_rate=0.05, noise_multiplier=2.0),
    Setting(steps=50, batch_size=64, dataset_size=6400, noise_multiplier=0.9),
]


#: the second phase sampled without replacement: rdp refuses that with add_remove, pld always
WITHOUT_REPLACEMENT = [
    PHASES[0],
    PHASES[1].replace(
        sampling="without_replacement", dataset_size=2000, batch_size=100, sampling_rate=None
    ),
]


def _event(steps: list[Setting], scale: float = 1.0) -> dp_accounting.DpEvent:
    return dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(
                    p.sampling_rate, dp_accounting.GaussianDpEvent(p.noise_multiplier * scale)
                ),
                p.steps,
            )
            for p in steps
        ]
    )


def test_rdp_phases_equal_dp_accountings_composed_event():
    peer = rdp_privacy_accountant.RdpAccountant().compose(_event(PHASES)).get_epsilon(DELTA)
    assert phases.epsilon("rdp", PHASES, DELTA) == pytest.approx(peer, rel=1e-9)


def test_one_phase_is_the_accountants_own_answer_and_splitting_a_phase_changes_nothing():
    one = PHASES[0]
    assert phases.epsilon("rdp", [one], DELTA) == pytest.approx(
        get("rdp").epsilon(one, DELTA), rel=1e-12
    )
    halves = [one.replace(steps=120), one.replace(steps=180)]
    assert phases.epsilon("rdp", halves, DELTA) == pytest.approx(
        phases.epsilon("rdp", [one], DELTA), rel=1e-12
    )
    assert phases.epsilon("rdp", PHASES, DELTA) > phases.epsilon("rdp", PHASES[:2], DELTA)


def test_epsilon_curve_is_the_composition_of_the_steps_so_far():
    """ε after s steps: dp_accounting's RdpAccountant on the phases before s and the one s falls in
    cut short; it grows with s and ends at the run's ε."""
    steps = [1, 300, 301, 400, 437, 450]
    curve = phases.epsilon_curve("rdp", PHASES, DELTA, steps)
    cut = [[PHASES[0].replace(steps=1)], PHASES[:1], [PHASES[0], PHASES[1].replace(steps=1)]]
    cut += [PHASES[:2], [*PHASES[:2], PHASES[2].replace(steps=37)], PHASES]
    for value, prefix in zip(curve, cut, strict=True):
        peer = rdp_privacy_accountant.RdpAccountant().compose(_event(prefix)).get_epsilon(DELTA)
        assert value == pytest.approx(peer, rel=1e-9)
    assert all(a < b for a, b in zip(curve, curve[1:]))
    assert curve[-1] == phases.epsilon("rdp", PHASES, DELTA)
    (pld,) = phases.epsilon_curve("pld", PHASES, DELTA, [450])
    assert pld == phases.epsilon("pld", PHASES, DELTA)
    for bad in (0, 451):
        with pytest.raises(DPLabError, match=r"steps: must be in \[1, 450\]"):
            phases.prefix(PHASES, bad)


def test_full_batch_phases_compose_to_one_gaussian():
    """Full-batch phases, and Poisson ones at q = 1 (the same mechanism), are one Gaussian
    mechanism of μ = √(Σᵢ Tᵢ/σᵢ²) (Dong, Roth & Su 2022, Cor. 3.3): its exact ε."""
    steps = [
        Setting(steps=40, noise_multiplier=3.0, sampling="full_batch"),
        Setting(steps=10, noise_multiplier=1.5, sampling="full_batch"),
    ]
    mu = math.sqrt(40 / 9 + 10 / 2.25)
    assert phases.epsilon("pld", steps, DELTA) == pytest.approx(
        gaussian_epsilon(DELTA, mu), rel=1e-12
    )
    assert phases.epsilon("pld", steps, DELTA) <= phases.epsilon("rdp", steps, DELTA)
    poisson = [s.replace(sampling="poisson", sampling_rate=1.0) for s in steps]
    assert phases.epsilon("pld", poisson, DELTA) == phases.epsilon("pld", steps, DELTA)


def test_calibration_scales_every_phase_by_one_factor():
    factor = phases.calibrate("rdp", PHASES, 2.0, DELTA)
    assert phases.epsilon("rdp", phases.scaled(PHASES, factor), DELTA) <= 2.0
    assert phases.epsilon("rdp", phases.scaled(PHASES, factor * (1 - 3e-5)), DELTA) > 2.0
    peer = rdp_privacy_accountant.RdpAccountant().compose(_event(PHASES, factor)).get_epsilon(DELTA)
    assert peer == pytest.approx(2.0, rel=1e-5)


@pytest.mark.parametrize(
    ("name", "steps", "key"),
    [
        ("naive", PHASES, "phases"),
        (
            "pld",
            WITHOUT_REPLACEMENT,
            "phases[1].sampling",
        ),
        (
            "rdp",
            [PHASES[0], PHASES[1].replace(neighbouring="replace_one")],
            "phases[1].neighbouring",
        ),
        (
            "rdp",
            WITHOUT_REPLACEMENT,
            "phases[1].sampling",
        ),
        (
            "rdp",
            [
                Setting(
                    steps=10, sampling_rate=0.1, noise_multiplier=1.0, neighbouring="replace_one"
                )
            ],
            "sampling",
        ),
    ],
)
def test_an_accountant_that_cannot_compose_phases_says_why(name, steps, key):
    with pytest.raises(DPLabError, match=re.escape(key)):
        phases.epsilon(name, steps, DELTA)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"phases": []}, "phases"),
        (
            {"phases": [{"steps": 10, "noise_multiplier": 1.0, "sampling_rate": 0.1, "lr": 0.1}]},
            r"phases\[0\].lr",
        ),
        ({"phases": [{"steps": 10, "sampling_rate": 0.1}]}, r"phases\[0\].noise_multiplier"),
        (
            {"phases": [{"steps": 10, "noise_multiplier": 1.0, "sampling_rate": 1.5}]},
            r"phases\[0\].sampling_rate",
        ),
        ({"phases": [{"steps": 10, "noise_multiplier": 1.0}], "clip": 1.0}, "clip"),
    ],
)
def test_bad_phases_files_are_refused_naming_the_key(data, key):
    with pytest.raises(DPLabError, match=key):
        phases.parse(data)


def test_cli_phases(tmp_path, capsys):
    path = tmp_path / "phases.yaml"
    path.write_text(
        "phases:\n  - {steps: 300, sampling_rate: 0.01, noise_multiplier: 1.2}\n"
        "  - {steps: 100, sampling_rate: 0.05, noise_multiplier: 2.0}\n"
    )
    assert (
        main(["epsilon", "--accountant", "rdp", "--phases", str(path), "--delta", str(DELTA)]) == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed["epsilon"] == pytest.approx(phases.epsilon("rdp", PHASES[:2], DELTA), rel=1e-12)
    assert (
        main(
            [
                "sigma",
                "--accountant",
                "rdp",
                "--phases",
                str(path),
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
            ]
        )
        == 0
    )
    sigmas = json.loads(capsys.readouterr().out)["noise_multipliers"]
    assert sigmas[1] / sigmas[0] == pytest.approx(2.0 / 1.2)
    assert (
        main(
            [
                "epsilon",
                "--accountant",
                "rdp",
                "--phases",
                str(path),
                "--delta",
                "1e-5",
                "--steps",
                "3",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "--steps" in err and len(err.splitlines()) == 1


def test_phases_print_the_accountant_s_bound_and_calibrate_with_upper_bounds_only(tmp_path, capsys):
    """A one-phase shuffle file: shuffle_lower's ε was printed with bound "upper", and `sigma`
    calibrated σ = 3.07 for ε = 1 with it, where fixed_batches (an upper bound) gives 6.82 there."""
    path = tmp_path / "phases.yaml"
    path.write_text(
        "sampling: shuffle\nneighbouring: add_remove\ndataset_size: 1000\n"
        "phases:\n  - {steps: 100, noise_multiplier: 2.0, batch_size: 50}\n"
    )
    for name, bound in (("shuffle_lower", "lower"), ("as_if_poisson", "comparison")):
        args = ["--accountant", name, "--phases", str(path), "--delta", "1e-5"]
        assert main(["epsilon", *args]) == 0
        assert json.loads(capsys.readouterr().out)["bound"] == bound
        assert main(["sigma", *args, "--epsilon", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert "σ can only be calibrated with an upper bound" in err and len(err.splitlines()) == 1
    with pytest.raises(DPLabError, match="upper bound"):
        phases.calibrate("shuffle_lower", phases.from_file(path), 1.0, 1e-5)


def test_cli_reads_the_risk_of_phases(tmp_path, capsys):
    """``epsilon --phases FILE --risk``: pld's reading of the phases composed
    (:func:`dplab.accounting.risk.phases_risk`); rdp says why it has none; a risk target beside
    --phases is refused, naming its flag."""
    from dplab.accounting.risk import phases_risk

    path = tmp_path / "phases.yaml"
    path.write_text(
        "phases:\n  - {steps: 6, sampling_rate: 0.05, noise_multiplier: 1.2}\n"
        "  - {steps: 4, sampling_rate: 0.1, noise_multiplier: 2.0}\n"
    )
    base = ["epsilon", "--phases", str(path), "--delta", "1e-5", "--risk", "--accountant"]
    assert main([*base, "pld"]) == 0
    printed = json.loads(capsys.readouterr().out)["risk"]
    want = phases_risk(phases.from_file(path))
    assert printed["tpr"] == want["tpr"] and printed["advantage"] == want["advantage"]
    assert main([*base, "rdp"]) == 0
    assert "privacy-loss distribution" in json.loads(capsys.readouterr().out)["risk"]["unavailable"]
    sigma = ["sigma", "--accountant", "pld", "--phases", str(path), "--delta", "1e-5"]
    assert main([*sigma, "--tpr", "0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--tpr" in err and len(err.splitlines()) == 1
