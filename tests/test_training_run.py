"""`dplab train` end to end: outputs, config validation, reproducibility, resume, NaN guard."""

import csv
import json
import re

import pytest
import yaml

from dplab.cli import main
from dplab.commands.train import pipeline_runs
from dplab.errors import Diverged, DPLabError
from dplab.training import data, loop
from dplab.training.resolve import load_runs, resolve_run
from dplab.training.settings import RunSettings

FAST = {"steps": 30, "batch_size": 64, "lr": 1.0, "log_every": 10, "device": "cpu"}


def _config(tmp_path, runs):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"datasets": {"digits": {"kind": "digits"}}, "runs": runs}))
    return path


def test_train_writes_metrics_and_summary(digits_dir, tmp_path):
    path = _config(tmp_path, {"dp": {"method": "dp_sgd", "noise_multiplier": 1.1, **FAST}})
    out = tmp_path / "out"
    assert (
        main(
            [
                "train",
                "--config",
                str(path),
                "--run",
                "dp",
                "--data",
                str(digits_dir),
                "--out",
                str(out),
                "--threads",
                "1",
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    assert [int(r["step"]) for r in rows] == [10, 20, 30]
    assert {
        "epoch",
        "train_loss",
        "test_loss",
        "test_accuracy",
        "epsilon_rdp",
        "epsilon_pld",
    } <= set(rows[0])
    eps = [float(r["epsilon_rdp"]) for r in rows]
    assert eps == sorted(eps) and eps[0] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["epsilon"]["rdp"] == pytest.approx(eps[-1])
    assert summary["setting"]["sampling_rate"] == pytest.approx(64 / 1437)
    assert summary["noise_multiplier"] == 1.1 and summary["delta"] == 1e-5
    assert summary["neighbouring"] == "add_remove" and summary["sampling"] == "poisson"
    assert (
        summary["risk"]["fpr"] == [0.001, 0.01, 0.1] and 0 < summary["risk"]["advantage"] < 1
    )  # from pld's PLD
    assert not (out / "checkpoint.pt").exists()
    assert (
        out / "grad_norms.csv"
    ).read_text() == "step,grad_norm\n"  # no record_grad_norms: the header only
    assert (
        out / "individual_epsilon.csv"
    ).read_text() == "index,class,individual_epsilon\n"  # likewise
    assert "individual_privacy" not in summary


def test_runs_trained_in_one_process_are_each_the_run_trained_alone(digits_dir, tmp_path, capsys):
    """`dplab train --run-json [r, r'] --out A B` (a job of grouped grid runs, config group_runs):
    each folder byte for byte what the run writes alone, the second run of the process included
    (its ε curve the first run's, kept: dplab.accounting.memo); folders that do not match the
    runs, or a bad run anywhere in the list: exit 2, nothing written."""
    runs = [
        {
            "method": "dp_sgd",
            "noise_multiplier": 1.1,
            "accountants": ["rdp"],
            "seed": seed,
            **FAST,
            "steps": 10,
        }
        for seed in (3, 4)
    ]
    common = ["--data", str(digits_dir), "--threads", "1"]
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps(runs),
                "--out",
                str(tmp_path / "a"),
                str(tmp_path / "b"),
                *common,
            ]
        )
        == 0
    )
    for run, name in zip(runs, "ab"):
        alone = tmp_path / f"alone_{name}"
        assert main(["train", "--run-json", json.dumps(run), "--out", str(alone), *common]) == 0
        assert {f.name: f.read_bytes() for f in alone.iterdir()} == {
            f.name: f.read_bytes() for f in (tmp_path / name).iterdir()
        }
    capsys.readouterr()
    refused = {"--out": (runs, ["c"]), "lr": ([runs[0], {**runs[1], "lr": -1}], ["c", "d"])}
    for key, (listed, outs) in refused.items():
        assert (
            main(
                [
                    "train",
                    "--run-json",
                    json.dumps(listed),
                    "--out",
                    *(str(tmp_path / o) for o in outs),
                    *common,
                ]
            )
            == 2
        )
        assert (
            capsys.readouterr().err.startswith(f"dplab train: error: {key}:")
            and not (tmp_path / "c").exists()
        )


def test_run_json_and_single_run_yaml_give_the_same_run(tmp_path):
    run = {"method": "dp_sgd", "noise_multiplier": 1.0, "dataset": "digits", **FAST}
    single = tmp_path / "run.yaml"
    single.write_text(yaml.safe_dump(run))
    assert (
        load_runs(run_json=json.dumps(run))
        == load_runs(single)
        == load_runs(run_json=json.dumps([run]))
    )
    assert pipeline_runs(str(_config(tmp_path, {"a": run})), ["a"]) == [
        {**load_runs(single)[0], "name": "a"}
    ]


def test_a_run_of_a_pipeline_config_is_named_by_its_job(tmp_path):
    """`dplab train --config FILE --run NAME`: an unknown name is refused naming --run, the
    defined runs (the first 10) and what makes a stale dvc.yaml stage current; --run with a
    single-run YAML, or without --config, is refused."""
    run = {"method": "dp_sgd", "noise_multiplier": 1.0, "dataset": "digits", **FAST}
    with pytest.raises(DPLabError, match=r"^--run: unknown run 'b' .*defined: a \(.*dvc-yaml"):
        pipeline_runs(str(_config(tmp_path, {"a": run})), ["b"])
    many = {f"r{i:02d}": run for i in range(12)}
    with pytest.raises(DPLabError, match=r"defined: r00, .*, r09 and 2 more \("):
        pipeline_runs(str(_config(tmp_path, many)), ["b"])
    single = tmp_path / "run.yaml"
    single.write_text(yaml.safe_dump(run))
    with pytest.raises(DPLabError, match="single-run config"):
        pipeline_runs(str(single), ["a"])
    with pytest.raises(DPLabError, match="give --config"):
        pipeline_runs(None, ["a"])


@pytest.mark.parametrize(
    "bad,key",
    [
        ({"colour": 1}, "colour"),
        ({"steps": "many"}, "steps"),
        ({"steps": 0}, "steps"),
        ({"delta": 1.5}, "delta"),
        ({"clip": -1}, "clip"),
        ({"sampling": "shuffle", "method": "projected_dp_sgd", "diameter": 1.0}, "sampling"),
        ({"method": "projected_dp_sgd"}, "diameter"),
        ({"method": "regularized_dp_sgd"}, "regularization"),
        ({"target_epsilon": 1.0}, "noise_multiplier"),
        ({"model": "mlp", "l2": 0.1}, "l2"),
        ({"device": "tpu"}, "device"),
        ({"accountants": ["nonexistent"]}, "accountant"),
    ],
)
def test_bad_config_exits_2_naming_the_key_and_writes_nothing(
    bad, key, digits_dir, tmp_path, capsys
):
    run = {"method": "dp_sgd", "noise_multiplier": 1.0, **FAST, **bad}
    out = tmp_path / "out"
    assert (
        main(["train", "--run-json", json.dumps(run), "--data", str(digits_dir), "--out", str(out)])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0]
    assert not out.exists() or not any(out.iterdir())


def test_same_config_same_summary_and_resume_after_a_crash(digits_dir, tmp_path):
    ds = data.load(digits_dir)
    cfg = resolve_run(
        {
            "method": "dp_sgd",
            "model": "mlp",
            "hidden": 16,
            "noise_multiplier": 1.0,
            **FAST,
            "steps": 20,
            "checkpoint_every": 7,
            "accountants": ["rdp"],
        }
    )
    loop.train(RunSettings.of(cfg), ds, tmp_path / "a")
    loop.train(RunSettings.of(cfg), ds, tmp_path / "b")
    files = ("summary.json", "metrics.csv", "model.pt")
    assert all(
        (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files
    )

    def crash(step):
        if step == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loop.train(RunSettings.of(cfg), ds, tmp_path / "c", hook=crash)
    assert (tmp_path / "c" / "checkpoint.pt").exists() and not (
        tmp_path / "c" / "summary.json"
    ).exists()
    resumed = []
    loop.train(RunSettings.of(cfg), ds, tmp_path / "c", hook=resumed.append)
    assert resumed[0] == 8  # restarted after the checkpoint at step 7
    for f in files[:2]:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "c" / f).read_bytes()


def test_balls_in_bins_run_calibrates_with_its_accountant_and_resumes(digits_dir, tmp_path):
    ds = data.load(digits_dir)
    run = {
        "method": "dp_sgd",
        "sampling": "balls_in_bins",
        **FAST,
        "steps": 30,
        "accountants": ["balls_in_bins"],
    }
    cfg = resolve_run({**run, "target_epsilon": 2.0})
    assert cfg["accountant"] == "balls_in_bins"
    loop.train(RunSettings.of(cfg), ds, tmp_path / "a")
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert (
        summary["sampling"] == "balls_in_bins" and 1.99 < summary["epsilon"]["balls_in_bins"] <= 2.0
    )

    cfg = resolve_run(
        {**run, "noise_multiplier": summary["noise_multiplier"], "checkpoint_every": 7}
    )
    loop.train(RunSettings.of(cfg), ds, tmp_path / "b")

    def crash(step):
        if step == 12:  # mid-epoch (t = ⌊1437/64⌋ = 22 steps)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loop.train(RunSettings.of(cfg), ds, tmp_path / "c", hook=crash)
    loop.train(RunSettings.of(cfg), ds, tmp_path / "c")
    for f in ("summary.json", "metrics.csv", "model.pt"):
        assert (tmp_path / "b" / f).read_bytes() == (tmp_path / "c" / f).read_bytes()


def test_divergence_stops_with_an_error(digits_dir, tmp_path):
    cfg = resolve_run({"method": "sgd", "l2": 1.0, **FAST, "lr": 1e3})
    with pytest.raises(Diverged, match="NaN/inf"):
        loop.train(RunSettings.of(cfg), data.load(digits_dir), tmp_path)
    assert not (tmp_path / "summary.json").exists()


def test_device_auto_and_missing_cuda():
    import torch

    assert loop.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(DPLabError, match="device"):
            loop.resolve_device("cuda")


def test_dataset_name_must_match_the_data(digits_dir, tmp_path, capsys):
    run = {"method": "sgd", "dataset": "mnist", **FAST}
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps(run),
                "--data",
                str(digits_dir),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "dataset" in capsys.readouterr().err


def test_progress_bar_on_a_terminal_shows_steps_loss_and_epsilon(digits_dir, tmp_path, monkeypatch):
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    ds = data.load(digits_dir)
    cfg = resolve_run({"method": "dp_sgd", "noise_multiplier": 1.0, **FAST, "accountants": ["rdp"]})
    loop.train(RunSettings.of(cfg), ds, tmp_path / "bar")
    text = screen.getvalue()
    assert f"{FAST['steps']}/{FAST['steps']}" in text and "loss=" in text and "rdp" in text


def test_progress_lines_in_the_log_when_not_on_a_terminal(
    digits_dir, tmp_path, capsys, monkeypatch
):
    """What `tail -f logs/runs/<run>.log` shows: no bar, a line per interval (here 0 s: every
    step) with step/T, the last logged losses and ε (accountant, δ, neighbouring, sampling),
    elapsed and time left; at the default 30 s a 30-step run writes only its first and last line."""
    run = {
        "method": "dp_sgd",
        "noise_multiplier": 1.0,
        **FAST,
        "accountants": ["rdp"],
        "name": "dp",
    }
    monkeypatch.setenv("DPLAB_PROGRESS_SECONDS", "0")
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps(run),
                "--data",
                str(digits_dir),
                "--out",
                str(tmp_path / "a"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "dplab train dp: step" in line]
    assert "\r" not in err and len(lines) == FAST["steps"]
    eps = {int(r["step"]): r for r in csv.DictReader(open(tmp_path / "a" / "metrics.csv"))}
    line = lines[14]  # step 15: the values logged at step 10
    assert line.split(" | ")[0].endswith("dplab train dp: step 15/30 (50.0%)")
    assert f"train_loss={float(eps[10]['train_loss']):.4g} " in line
    assert (
        "ε at step 10 (δ=1e-05, add_remove, poisson sampling):"
        f" rdp={float(eps[10]['epsilon_rdp']):.4g}" in line
    )
    assert re.search(r"\| elapsed \d:\d\d:\d\d, left ~\d:\d\d:\d\d$", line)
    monkeypatch.delenv("DPLAB_PROGRESS_SECONDS")
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps(run),
                "--data",
                str(digits_dir),
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if "dplab train dp:" in line]
    assert (
        len(lines) == 2
        and "starting at step 0/30" in lines[0]
        and "step 30/30 (100.0%)" in lines[1]
    )
