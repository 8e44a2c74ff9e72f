"""dplab epsilon | delta | sigma | accountants: JSON keys, and one-line refusals with exit 2."""

import json

import pytest

from dplab.accounting import get, names
from dplab.cli import main

RUN = ["--noise-multiplier", "1.1", "--sampling-rate", "0.01", "--steps", "100"]


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_epsilon_delta_sigma(capsys):
    out = _json(capsys, ["epsilon", "--accountant", "rdp", "--delta", "1e-5", *RUN])
    assert set(out) >= {"epsilon", "accountant", "delta", "neighbouring", "sampling", "setting"}
    assert (
        out["accountant"] == "rdp"
        and out["neighbouring"] == "add_remove"
        and out["sampling"] == "poisson"
    )
    assert out["setting"]["steps"] == 100
    assert out["epsilon"] == pytest.approx(
        get("rdp").epsilon(
            __import__("dplab").accounting.Setting(
                noise_multiplier=1.1, sampling_rate=0.01, steps=100
            ),
            1e-5,
        )
    )
    back = _json(capsys, ["delta", "--accountant", "rdp", "--epsilon", str(out["epsilon"]), *RUN])
    assert back["delta"] == pytest.approx(1e-5, rel=1e-6)
    sig = _json(
        capsys,
        [
            "sigma",
            "--accountant",
            "rdp",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--batch-size",
            "100",
            "--dataset-size",
            "10000",
            "--steps",
            "100",
            "--clip",
            "2",
        ],
    )
    assert sig["noise_multiplier"] > 0 and sig["noise_std"] == pytest.approx(
        2 * sig["noise_multiplier"]
    )


def test_gaussian_sigma_reports_std(capsys):
    out = _json(
        capsys,
        [
            "sigma",
            "--accountant",
            "gaussian_analytic",
            "--epsilon",
            "0.5",
            "--delta",
            "1e-6",
            "--sensitivity",
            "100",
        ],
    )
    assert round(out["noise_std"]) == 806
    assert out["noise_std"] == pytest.approx(100 * out["noise_multiplier"])


def test_accountants_lists_everything(capsys):
    assert main(["accountants"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in listed] == names()
    assert all(a["source"] and "assumptions" in a for a in listed)


@pytest.mark.parametrize(
    "argv,key",
    [
        (["epsilon", "--accountant", "rdp", "--delta", "1.5", *RUN], "delta"),
        (
            [
                "epsilon",
                "--accountant",
                "rdp",
                "--delta",
                "1e-5",
                "--noise-multiplier",
                "-1",
                "--sampling-rate",
                "0.01",
                "--steps",
                "10",
            ],
            "noise_multiplier",
        ),
        (
            [
                "epsilon",
                "--accountant",
                "rdp",
                "--delta",
                "1e-5",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "2",
                "--steps",
                "10",
            ],
            "sampling_rate",
        ),
        (
            ["epsilon", "--accountant", "naive", "--delta", "1e-5", *RUN, "--sampling", "shuffle"],
            "sampling",
        ),
        (
            [
                "epsilon",
                "--accountant",
                "rdp",
                "--delta",
                "1e-5",
                *RUN,
                "--neighbouring",
                "replace_one",
            ],
            "sampling",
        ),
        (
            [
                "sigma",
                "--accountant",
                "gaussian_classic",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--sensitivity",
                "1",
            ],
            "epsilon",
        ),
        (["epsilon", "--accountant", "nope", "--delta", "1e-5"], "accountant"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, argv, key):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and f"error: {key}:" in lines[0] and "Traceback" not in captured.err


def test_usage_error_exit_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["epsilon", "--accountant", "rdp", "--delta", "abc"])
    assert err.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_accountants_lists_only_what_it_accepts(capsys):
    """`dplab accountants` lists a sampling × neighbouring pair only where `dplab delta` then
    answers: every listed pair gives a δ, every other pair of the same samplings is refused
    on sampling or neighbouring.  The composition bounds amplify Poisson sampling for add_remove
    and sampling without replacement for replace_one only, and none is proved for shuffle
    (dplab.accounting.amplification); PABI (000 Thm VII.4) is for fixed batches and replace_one."""
    from dplab.commands.accounting import PROBE

    assert main(["accountants"]) == 0
    listed = {a["name"]: a for a in json.loads(capsys.readouterr().out)}
    for name in ("naive", "advanced", "kairouz", "rdp"):
        assert listed[name]["proved_for"] == {
            "poisson": ["add_remove"],
            "without_replacement": ["replace_one"],
            "full_batch": ["add_remove", "replace_one"],
        }, name
    assert listed["pabi"]["proved_for"] == {"shuffle": ["replace_one"]}
    assert listed["mf"]["proved_for"] == {
        "min_separation": ["add_remove", "replace_one"],
        "cyclic_poisson": ["add_remove"],
    }
    for name, entry in listed.items():
        assert entry["samplings"] == list(entry["proved_for"]) and entry["samplings"], name
        if entry["noise"] != "independent":
            continue  # mf accounts an MF event, not the setting flags below
        keys = set(entry["requires"])
        sized = bool(keys & {"sampling_rate", "batch_size", "dataset_size"})  # q = b/n
        flags = [
            f"--{k.replace('_', '-')}={PROBE[k]}"
            for k in keys - {"sampling_rate", "batch_size", "dataset_size"}
        ]
        for sampling in entry["samplings"]:
            # n divisible by b (pabi's equal batches) and not (fixed batches under
            # add_remove keep ⌊n/b⌋)
            sizes = (
                [
                    [f"--dataset-size={n}", f"--batch-size={n if sampling == 'full_batch' else 10}"]
                    for n in (1000, 1001)
                ]
                if sized
                else [[]]
            )
            for neighbouring in ("add_remove", "replace_one"):
                answers = []
                for size in sizes:
                    argv = [
                        "delta",
                        "--accountant",
                        name,
                        "--epsilon",
                        "0.5",
                        "--sampling",
                        sampling,
                        "--neighbouring",
                        neighbouring,
                        *flags,
                        *size,
                    ]
                    answers.append((main(argv), capsys.readouterr()))
                if neighbouring in entry["proved_for"][sampling]:
                    assert any(
                        code == 0 and 0 <= json.loads(out.out)["delta"] <= 1
                        for code, out in answers
                    ), (argv, answers)
                else:
                    for code, captured in answers:
                        assert code == 2 and (
                            "error: neighbouring:" in captured.err
                            or "error: sampling:" in captured.err
                        ), argv


def test_one_release_reports_full_batch_not_the_poisson_default(capsys):
    """A gaussian_* accountant's one release sees every record once: the JSON said
    "sampling": "poisson" (the flag's default, which it never read). The σ is the same either
    way."""
    base = ["sigma", "--accountant", "gaussian_analytic", "--epsilon", "1", "--delta", "1e-5"]
    base += ["--sensitivity", "1"]
    assert main(base) == 0
    full = json.loads(capsys.readouterr().out)
    assert full["sampling"] == full["setting"]["sampling"] == "full_batch"
    assert main([*base, "--sampling", "poisson"]) == 0
    poisson = json.loads(capsys.readouterr().out)
    assert poisson["sampling"] == "poisson"
    assert full["noise_multiplier"] == poisson["noise_multiplier"] == full["noise_std"]
    rdp = ["epsilon", "--accountant", "rdp", "--noise-multiplier", "1", "--sampling-rate", "0.01"]
    assert main([*rdp, "--steps", "10", "--delta", "1e-5"]) == 0
    assert json.loads(capsys.readouterr().out)["sampling"] == "poisson"  # the others' default
