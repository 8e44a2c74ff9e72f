"""A run in phases (dplab.training.phased): trained phase by phase, its ε that of the phases'
composed event, equal to dp_accounting's RdpAccountant on the same ComposedDpEvent."""

from __future__ import annotations

import json

import dp_accounting
import pandas as pd
import pytest
import torch
import yaml
from dp_accounting.rdp import rdp_privacy_accountant

from conftest import small_config
from dplab import dvc_yaml, jobs, layout
from dplab.cli import main
from dplab.accounting.risk import phases_risk
from dplab.accounting.setting import Setting
from dplab.commands.figures import run_risks
from dplab.commands.train import pipeline_runs
from dplab.figures import figure
from dplab.figures.runs import claims
from dplab.errors import DPLabError
from dplab.training import phased
from dplab.training.resolve import load_runs, resolve_run
from dplab.schemas import validate
from dplab.training.summary import RunSummary

RUN = {
    "method": "dp_sgd",
    "dataset": "s",
    "batch_size": 10,
    "clip": 1.0,
    "lr": 0.5,
    "delta": 1e-5,
    "log_every": 5,
    "device": "cpu",
    "checkpoint_every": 0,
    "accountants": ["rdp", "pld", "naive"],
    "phases": [
        {"steps": 6, "noise_multiplier": 4.0},
        {"steps": 4, "batch_size": 20, "noise_multiplier": 8.0, "lr": 0.1},
    ],
}


def _peer(phases: list[tuple[int, float, float]], delta: float) -> float:
    event = dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
            )
            for steps, q, sigma in phases
        ]
    )
    return rdp_privacy_accountant.RdpAccountant().compose(event).get_epsilon(delta)


def test_a_two_phase_run_trains_each_phase_and_claims_the_composed_events_epsilon(synth, tmp_path):
    summary = phased.train(resolve_run(RUN), synth, tmp_path)
    assert summary.epsilon["rdp"] == pytest.approx(
        _peer([(6, 10 / 60, 4.0), (4, 20 / 60, 8.0)], 1e-5), rel=1e-9
    )
    assert summary.epsilon["pld"] <= summary.epsilon["rdp"]
    assert "phases" in summary.excluded_accountants["naive"]
    assert json.loads((tmp_path / "phases.json").read_text())["epsilon"] == summary.epsilon
    written = RunSummary.read(tmp_path / "summary.json")
    assert written == summary and written.final.step == 10 and written.settings.steps == 10
    assert [p["batch_size"] for p in written.details["phases"]] == [10, 20]
    table = pd.read_csv(tmp_path / "metrics.csv")
    steps = table["step"].tolist()
    # ε at each logged step: phase 0 alone at steps 5 and 6, then both phases, the run's ε last
    assert [c for c in table.columns if c.startswith("epsilon")] == ["epsilon_rdp", "epsilon_pld"]
    assert table["epsilon_rdp"].tolist() == pytest.approx(
        [
            _peer([(5, 10 / 60, 4.0)], 1e-5),
            _peer([(6, 10 / 60, 4.0)], 1e-5),
            summary.epsilon["rdp"],
        ],
        rel=1e-9,
    )
    assert table["epsilon_pld"].iloc[-1] == summary.epsilon["pld"]
    assert table["epsilon_pld"].is_monotonic_increasing
    assert (
        steps == [5, 6, 10]
        and (tmp_path / "model.pt").read_bytes() == (tmp_path / "phase1" / "model.pt").read_bytes()
    )
    assert claims(written) == {
        "rdp": None,
        "pld": None,
        "naive": written.excluded_accountants["naive"],
    }
    runs_dir = tmp_path / "results" / "runs" / "p"
    runs_dir.mkdir(parents=True)
    (runs_dir / "summary.json").write_text(written.text())
    (line,) = [r for r in run_risks(tmp_path / "results") if r.startswith("| p |")]
    assert f"pld {summary.epsilon['pld']:.4g}, rdp {summary.epsilon['rdp']:.4g}" in line
    composed = phases_risk(  # the attack risk of the composition: pld's PLDs of both phases
        [
            Setting(noise_multiplier=4.0, sampling_rate=10 / 60, steps=6),
            Setting(noise_multiplier=8.0, sampling_rate=20 / 60, steps=4),
        ]
    )
    assert written.risk["tpr"] == pytest.approx(composed["tpr"], rel=1e-12)
    assert written.risk["advantage"] == pytest.approx(composed["advantage"], rel=1e-12)
    assert f"| {composed['tpr'][1]:.4g} | {composed['advantage']:.4g} |" in line
    first = torch.load(tmp_path / "phase0" / "model.pt", weights_only=True)
    second = json.loads((tmp_path / "phase1" / "summary.json").read_text())
    assert second["setting"]["batch_size"] == 20 and second["setting"]["noise_multiplier"] == 8.0
    assert second["epsilon"] == {} and all(torch.isfinite(v).all() for v in first.values())


def test_calibration_scales_the_phases_sigma_by_one_factor(synth):
    runs, record, settings = phased.plan(
        resolve_run({**RUN, "target_epsilon": 2.0, "accountant": "rdp"}), 6000, 6
    )
    low, high = record["noise_multipliers"]
    assert high / low == pytest.approx(2.0) and [r["noise_multiplier"] for r in runs] == [low, high]
    assert [s.noise_multiplier for s in settings] == [low, high]
    assert record["epsilon"]["rdp"] <= 2.0
    assert _peer([(6, 10 / 6000, low), (4, 20 / 6000, high)], 1e-5) == pytest.approx(2.0, rel=1e-4)


def test_a_phase_with_an_unknown_key_is_refused_by_the_schema():
    with pytest.raises(DPLabError, match="sampling"):
        resolve_run({**RUN, "phases": [{"steps": 3, "sampling": "shuffle"}]})
    assert load_runs(str(_example()), None)[0]["phases"][1]["batch_size"] == 256


def _example():
    from pathlib import Path

    return Path(__file__).resolve().parents[1] / "config" / "runs" / "dp_sgd_digits_phases.yaml"


def test_cli_trains_a_run_in_phases(digits_dir, tmp_path, capsys):
    run = {
        **load_runs(str(_example()), None)[0],
        "target_epsilon": None,
        "accountants": ["rdp"],
        "phases": [
            {"steps": 2, "noise_multiplier": 1.0},
            {"steps": 1, "batch_size": 256, "noise_multiplier": 2.0},
        ],
    }
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
        == 0
    )
    record = json.loads((tmp_path / "o" / "phases.json").read_text())
    n = json.loads((tmp_path / "o" / "phase1" / "summary.json").read_text())["setting"][
        "dataset_size"
    ]
    printed = capsys.readouterr()
    assert "none asked for (accountants: [])" in printed.err  # a phase's progress: no ε of its own
    assert "epsilon: rdp=" in printed.out and [p["steps"] for p in record["phases"]] == [2, 1]
    assert record["epsilon"]["rdp"] == pytest.approx(
        _peer([(2, 128 / n, 1.0), (1, 256 / n, 2.0)], 1e-5), rel=1e-9
    )


def test_a_pipeline_run_in_phases_is_a_training_job_and_a_dvc_stage(tmp_path):
    """The small config's run in phases (alone here) is planned as a training job (rule train, the
    files every training job writes, its phases in the run it passes), and as a dvc.yaml stage
    whose `dplab train --config … --run` resolves the same run; its plot is test accuracy (its
    metrics.csv has no ε column)."""
    small = small_config()
    config = {
        **{k: v for k, v in small.items() if k not in ("grids", "audits", "sweeps", "figures")},
        "runs": {"dp_sgd_phases": small["runs"]["dp_sgd_phases"]},
    }
    plan = jobs.plan(validate(config))
    job = plan.runs["runs/dp_sgd_phases"]
    assert job.rule == "train" and job.outputs == layout.training_files("runs/dp_sgd_phases")
    assert job.run["steps"] == 30 and [p["batch_size"] for p in job.run["phases"][1:]] == [128]
    stage = dvc_yaml.stages(plan)[dvc_yaml.stage_name("train", "dp_sgd_phases")]
    assert (
        "--run dp_sgd_phases --data results/data/digits --out results/runs/dp_sgd_phases"
        in (stage["cmd"])
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert pipeline_runs(str(path), ["dp_sgd_phases"]) == [job.run]
    (plot,) = stage["plots"]
    drawn = plot[job.outputs["metrics"]]  # ε vs step of the phases so far, as any DP run's
    assert drawn["template"] == dvc_yaml.RUN_TEMPLATE and "composed phases" in drawn["title"]


def test_the_run_based_figures_draw_a_run_in_phases(synth, tmp_path):
    """dp_training_tries and hidden_state_gain read a run in phases as any DP run: its ε curve
    (the phases so far), and captions giving each value its phases differ in, "4 → 8"."""
    phased.train(resolve_run({**RUN, "target_epsilon": 2.0, "accountant": "rdp"}), synth, tmp_path)
    sigmas = json.loads((tmp_path / "phases.json").read_text())["noise_multipliers"]
    sigma = " → ".join(f"{v:.4g}" for v in sigmas)
    inputs = {
        "summaries": [str(tmp_path / "summary.json")],
        "metrics": [str(tmp_path / "metrics.csv")],
    }
    tries = figure("dp_training_tries")
    table = tries.table(inputs, {"tries": [{"run": "p", "label": "two phases"}]})
    assert set(table.noise_multiplier) == {sigma} and set(table.batch_size) == {"10 → 20"}
    legend = tries.draw(table).legends[0].get_texts()[0].get_text()
    assert f"σ={sigma} calibrated by rdp, ε=" in legend and "η=0.5 → 0.1" in legend
    gain = figure("hidden_state_gain")
    table = gain.table(inputs, {"runs": ["p"], "skip": []})
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    for name in ("rdp", "pld"):
        rows = table[table.accountant == name]
        assert rows.epsilon.tolist() == metrics[f"epsilon_{name}"].tolist()
    (ax,) = gain.draw(table).axes
    assert f"\nσ={sigma}, η=0.5 → 0.1, C=1\nb=10 → 20, add-remove" in ax.get_title()


def test_a_rerun_goes_on_from_the_first_phase_not_completed(synth, tmp_path, step_loops):
    """A job killed in phase 1 (a scheduler's time limit) is retried: phase 0, completed for this
    run, is not trained again, phase 1 resumes from its checkpoint, and the run ends byte for byte
    as an uninterrupted one. A phase whose config, or whose start, changed is trained again."""
    step_loops.crash = ("phase1", 2)
    quick = {**RUN, "checkpoint_every": 1, "accountants": ["rdp"]}  # the phases, not their ε
    run = resolve_run(quick)
    with pytest.raises(KeyboardInterrupt):
        phased.train(run, synth, tmp_path / "o")
    trained = step_loops.calls
    assert trained == [("phase0", 1, 6), ("phase1", 1, 2)]
    step_loops.crash = None
    phased.train(run, synth, tmp_path / "o")  # phase 0 kept, phase 1 resumed after its step 2
    phased.train(run, synth, tmp_path / "o")  # both completed: nothing trained
    assert trained[2:] == [("phase1", 3, 2)]
    clean = tmp_path / "clean"
    phased.train(run, synth, clean)
    files = ("model.pt", "metrics.csv", "summary.json", "phase0/model.pt", "phase1/metrics.csv")
    assert all((tmp_path / "o" / f).read_bytes() == (clean / f).read_bytes() for f in files)
    del trained[:]
    second = {**RUN["phases"][1], "lr": 0.2}
    changed = {**quick, "phases": [RUN["phases"][0], second]}
    phased.train(resolve_run(changed), synth, tmp_path / "o")  # phase 1's config changed
    start = {**changed, "phases": [{**RUN["phases"][0], "noise_multiplier": 5.0}, second]}
    phased.train(resolve_run(start), synth, tmp_path / "o")  # phase 1's start changed
    assert trained == [("phase1", 1, 4), ("phase0", 1, 6), ("phase1", 1, 4)]
