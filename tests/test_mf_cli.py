import json

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
