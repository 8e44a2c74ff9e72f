import json

import numpy as np
import pytest

from dplab.cli import main


def run(capsys, *args):
    rc = main(["mf", *args])
    out = capsys.readouterr()
    return rc, out


def test_identity_json(capsys):
    rc, out = run(capsys, "--strategy", "identity", "--steps", "20")
    assert rc == 0
    res = json.loads(out.out)
    assert res["mean_error"] == pytest.approx(10.5) and res["max_error"] == pytest.approx(20)
    assert res["sensitivity"] == 1.0 and res["steps"] == 20 and res["strategy"] == "identity"
    assert res["seconds"] >= 0


def test_banded_with_calibration(capsys):
    rc, out = run(
        capsys,
        "--strategy",
        "banded",
        "--steps",
        "12",
        "--min-separation",
        "4",
        "--bands",
        "3",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
    )
    res = json.loads(out.out)
    assert rc == 0 and res["participations"] == 3 and res["bands"] == 3
    assert res["sensitivity"] == pytest.approx(3**0.5)
    assert res["noise_multiplier"] > 0


@pytest.mark.parametrize(
    "args,key",
    [
        (["--strategy", "nope", "--steps", "4"], "strategy"),
        (["--strategy", "identity", "--steps", "0"], "steps"),
        (
            ["--strategy", "banded", "--steps", "10", "--bands", "5", "--min-separation", "3"],
            "bands",
        ),
        (["--strategy", "identity", "--steps", "10", "--epsilon", "1"], "epsilon"),
        (["--strategy", "identity", "--steps", "10", "--epsilon", "1", "--delta", "2"], "delta"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, args, key):
    rc, out = run(capsys, *args)
    assert rc == 2
    assert out.err.count("\n") == 1 and key in out.err


def test_cyclic_poisson_takes_any_strategy_over_at_least_t_partitions(capsys):
    """b ≥ T partitions: every T×T lower-triangular C has at most b bands, so amplified BandMF
    holds for sqrt too (one Poisson-sampled participation, q = 0.8, noise σ/ζ, ζ = max column
    norm): ε lies between dp_accounting's optimistic and pessimistic PLDs.  It was refused
    ("amplified BandMF holds for C with at most b bands")."""
    from test_accounting_rdp_pld import _dp_accounting_bracket

    from dplab.mf import factorizations, workload

    args = ["--strategy", "sqrt", "--steps", "8", "--sampling", "cyclic_poisson"]
    args += ["--dataset-size", "100", "--batch-size", "10", "--noise-multiplier", "1"]
    rc, out = run(capsys, *args, "--delta", "1e-5")
    assert rc == 0, out.err
    res = json.loads(out.out)
    zeta = np.linalg.norm(factorizations.sqrt(workload.prefix_sum(8)).encoder, axis=0).max()
    assert res["sensitivity"] == pytest.approx(zeta, rel=1e-12) and res["sampling_rate"] == 0.8
    lower, upper = _dp_accounting_bracket(1 / zeta, 0.8, 1, 1e-5)
    assert lower <= res["epsilon"] <= upper * (1 + 1e-9)
    # fewer partitions than T: sqrt has T bands, refused before any optimization
    rc, out = run(capsys, *args, "--min-separation", "4", "--delta", "1e-5")
    assert rc == 2 and out.err.count("\n") == 1 and "sampling_rate" in out.err


def test_amplified_replace_one_is_refused_before_optimizing(capsys):
    rc, out = run(
        capsys,
        *["--strategy", "banded", "--bands", "2", "--steps", "8", "--sampling-rate", "0.1"],
        *["--noise-multiplier", "1", "--delta", "1e-5", "--neighbouring", "replace_one"],
    )
    assert rc == 2 and out.err.count("\n") == 1 and "neighbouring" in out.err
    assert "optimiz" not in out.err.lower().split("error:")[0]


def test_cyclic_poisson_prints_the_sensitivity_and_errors_its_epsilon_and_dp_mf_use(capsys):
    """cyclic_poisson's amplified ε depends on ζ = the max column norm only, and a dp_mf run
    optimizes C for one participation: `dplab mf` optimized and printed it for k = ⌈T/b⌉ (T = 200,
    b = 16: sensitivity 3.575, mean error 141.9 against the run's 1.0 and 11.10)."""
    from dplab.mf import toeplitz

    args = ["--strategy", "banded_toeplitz", "--steps", "40", "--bands", "4"]
    args += ["--sampling", "cyclic_poisson", "--min-separation", "8"]
    args += ["--dataset-size", "160", "--batch-size", "20", "--noise-multiplier", "1"]
    rc, out = run(capsys, *args, "--delta", "1e-5")
    assert rc == 0, out.err
    res = json.loads(out.out)
    single = toeplitz.banded_toeplitz(40, 4, "mean", 1, None).errors(1, 8)
    assert res["participations"] == 1 and res["sensitivity"] == pytest.approx(1.0, rel=1e-12)
    assert res["mean_error"] == single["mean_error"] and res["max_error"] == single["max_error"]
    rc, out = run(capsys, *args, "--delta", "1e-5", "--participations", "5")
    assert rc == 2 and "error: participations: cyclic_poisson" in out.err.splitlines()[-1]
