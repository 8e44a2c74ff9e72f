"""The benchmarks run (their smallest setting): benchmarks/README.md's
commands must not rot unseen."""

import json
import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_dp_step_times_every_model_it_builds(monkeypatch, capsys):
    """One round of the engine's DP step beside the non-private step, on the CPU, for the models
    built through the run settings (as `dplab train` builds them): two steps of each in a row,
    the second timed, and the operations one step dispatches."""
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "dp_step.py",
            "--device",
            "cpu",
            "--batch",
            "4",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--no-memory",
            "--models",
            "logreg",
            "mlp004",
            "cnn",
            "tanh_cnn",
            "--methods",
            "non_private",
            "engine_dp",
            "--count-ops",
            "--consecutive",
            "2",
        ],
    )
    runpy.run_path(str(BENCHMARKS / "dp_step.py"), run_name="__main__")
    rows = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    assert [r["model"] for r in rows] == ["logreg", "mlp004", "cnn", "tanh_cnn"]
    assert [r["parameters"] for r in rows] == [7850, 101770, 6090, 26010]
    for r in rows:
        ms = r["median_ms"]
        assert ms["non_private"] > 0  # the ratio of the unrounded medians, printed to 3 decimals
        assert r["ratio"]["engine_dp"] == pytest.approx(
            ms["engine_dp"] / ms["non_private"], rel=1e-2, abs=2e-3
        )
        assert r["consecutive"] == 2 and set(r["ops_per_step"]) == {"non_private", "engine_dp"}
        assert min(r["ops_per_step"].values()) > 0


def test_noise_floor_times_each_draw_of_a_models_size(monkeypatch, capsys):
    """benchmarks/noise_floor.py, one round: one draw of each way per model, of the model's
    parameter count, each ratio over the non-private step of the same run."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it builds its models with dp_step's
    monkeypatch.setattr(
        sys, "argv", ["noise_floor.py", "--batch", "4", "--rounds", "1", "--models", "logreg"]
    )
    runpy.run_path(str(BENCHMARKS / "noise_floor.py"), run_name="__main__")
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["model"] == "logreg" and row["numbers"] == 7850
    ms = row["median_ms"]
    assert set(ms) == {"non_private", *row["ratio"]} and len(row["ratio"]) == 7
    for way, ratio in row["ratio"].items():
        assert ratio == pytest.approx(ms[way] / ms["non_private"], rel=1e-2, abs=2e-3)
    gaussian = ("dplab_philox", "torch_normal", "numpy_normal", "bits_box_muller", "two_threads")
    assert row["cheapest_gaussian"] in gaussian


def test_phases_curve_times_our_curve_beside_dp_accounting_row_by_row(monkeypatch, capsys):
    """benchmarks/phases_curve.py on two phases of 10 steps, two rows: rdp's values are
    dp_accounting's, pld's certified ones lie at or just above them, each ratio is ours over
    theirs."""
    monkeypatch.setattr(sys, "argv", ["phases_curve.py", "--steps", "10", "--log-every", "10"])
    runpy.run_path(str(BENCHMARKS / "phases_curve.py"), run_name="__main__")
    row = json.loads(capsys.readouterr().out)
    assert row["rows"] == 2 and set(row) >= {"pld", "rdp"}
    assert row["rdp"]["relative_difference"] == pytest.approx([0.0, 0.0], abs=1e-9)
    low, high = row["pld"]["relative_difference"]
    assert -1e-6 <= low <= high < 0.02
    for name in ("pld", "rdp"):
        r = row[name]
        assert r["ratio"] == pytest.approx(r["ours_s"] / r["dp_accounting_s"], rel=1e-2, abs=2e-3)


def test_pld_random_compares_pld_with_dp_accounting_setting_by_setting(monkeypatch, capsys):
    """benchmarks/pld_random.py on two random settings at dp_accounting's default interval: pld's
    certified ε lies at or just above dp_accounting's, grows with T and falls with δ, and the
    summary counts what the rows show."""
    argv = ["pld_random.py", "--count", "2", "--interval", "1e-4"]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(BENCHMARKS / "pld_random.py"), run_name="__main__")
    *rows, summary = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["dp_accounting"] * (1 - 1e-4) <= row["pld"] <= row["dp_accounting"] * 1.001
        assert row["pld_2T"] > row["pld"] > row["pld_10delta"]
    assert summary["summary"] == {
        "settings": 2,
        "refused": 0,
        "ratio_median": pytest.approx(sum(r["ratio"] for r in rows) / 2),
        "ratio_min": min(r["ratio"] for r in rows),
        "ratio_max": max(r["ratio"] for r in rows),
        "loose": 0,
        "below": 0,
        "not_monotone": 0,
    }


def test_job_profile_charges_every_cpu_second_of_a_job_to_one_category(tmp_path):
    """benchmarks/job_profile.py on a small job (`dplab index` of one table): the categories add up
    to the process's CPU time (nothing lost, nothing counted twice) and the
    job's output is written."""
    import subprocess

    (tmp_path / "results" / "accounting").mkdir(parents=True)
    (tmp_path / "results" / "accounting" / "x.csv").write_text("a\n1\n")
    out = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "job_profile.py"),
            "--",
            "dplab",
            "index",
            "--results",
            str(tmp_path / "results"),
            "--out",
            str(tmp_path / "index.md"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    row = json.loads(out.stdout.splitlines()[-1])
    assert row["exit"] == 0 and "accounting/x.csv" in (tmp_path / "index.md").read_text()
    parts = sum(row[c] for c in ("imports", "planning", "accounting", "writing", "work"))
    assert parts == pytest.approx(row["cpu_s"], abs=0.05)
    # every field is rounded to 1e-3: the share's own rounding, and its numerator's (two fields)
    # and denominator's read through a CPU time of a few tenths of a second (0.989 against 0.9914
    # from the rounded fields at 0.278 s)
    share = (row["imports"] + row["planning"]) / row["cpu_s"]
    assert row["startup_share"] == pytest.approx(share, abs=5e-4 + (1e-3 + 5e-4) / row["cpu_s"])


def test_audit_share_times_an_audit_and_extrapolates_from_every_variant(built, tmp_path):
    """audit_share.py on the built DAG's audit with two variants, 4 of its runs: every variant's
    training seconds are read (each "done:" line is logged, not only those the progress throttle
    lets through), and the full time adds them × (runs / share − 1) to the share's wall time."""
    import re
    import subprocess

    import yaml

    config = yaml.safe_load((built / "config" / "config.yaml").read_text())
    name, entry = next(iter(config["audits"].items()))
    entry["methods"] = {"dp_sgd": {}, "dp_sgd_again": {"method": "dp_sgd"}}
    config["audits"] = {name: entry}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "audit_share.py"), "--config", str(tmp_path / "c.yaml")]
        + ["--data", str(built / "results" / "data"), "--runs", "4", "--device", "cpu"]
        + ["--threads", "1", "--logs", str(tmp_path / "logs")],
        cwd=built,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    row = [line for line in out.splitlines() if line.startswith(name)]
    _, runs, share, wall, training, full, rc = (c.strip() for c in row[0].split("|"))
    assert (int(runs), int(share), rc) == (entry["runs"], 4, "0")
    done = re.findall(r" done: [^|]*?, ([\d.]+) s", (tmp_path / "logs" / f"{name}.log").read_text())
    assert len(done) == 2 and float(training) == pytest.approx(sum(map(float, done)), abs=0.06)
    assert 0 < float(training) < float(wall)
    expected = float(wall) + float(training) * (entry["runs"] / 4 - 1)
    assert float(full) == pytest.approx(expected, abs=1)
