"""Tables of figures individual_privacy and risk_calibration, from short runs on synthetic data
(risk_calibration on full-batch DP-GD: its σ searches are closed forms, the test stays cheap)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from conftest import synthetic_data
from dplab.accounting.risk import FPRS
from dplab.errors import DPLabError
from dplab.figures import figure, risk_calibration
from dplab.training import loop
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

pytest.importorskip("riskcal")  # the `peers` extra
from riskcal.analysis import get_beta_from_gdp  # noqa: E402

BASE = {
    "method": "dp_sgd",
    "model": "logreg",
    "dataset": "synthetic",
    "steps": 10,
    "batch_size": 20,
    "lr": 0.5,
    "clip": 1.0,
    "delta": 1e-5,
    "log_every": 10,
}
FULL_BATCH = {"method": "dp_gd", "batch_size": None, "accountant": "pld", "accountants": ["pld"]}


def resolved(**entry) -> dict:
    """The resolved run of BASE with ``entry`` (None: the key left out)."""
    return resolve_run({k: v for k, v in {**BASE, **entry}.items() if v is not None})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    synth = synthetic_data(tmp_path_factory.mktemp("synth"), 200, 60)
    out = tmp_path_factory.mktemp("runs")
    tau, alpha = 0.3, 0.1
    entries = {
        "individual": {"noise_multiplier": 1.0, "accountants": ["rdp"], "individual_epsilon": True},
        "by_risk": {**FULL_BATCH, "target_tpr": tau, "target_fpr": alpha},
        "by_epsilon": {
            **FULL_BATCH,
            "target_epsilon": risk_calibration.conversion_epsilon(tau, alpha, 1e-5),
        },
    }
    for name, entry in entries.items():
        loop.train(RunSettings.of(resolved(name=name, **entry)), synth, out / name)
    return out, synth


def test_individual_privacy_table_is_the_runs_records(runs):
    runs, synth = runs
    """Per class: quantiles of the CSV's ε, the run's worst case, accuracies that average (weighted
    by the test set's classes) to the run's test accuracy."""
    folder = runs / "individual"
    records = pd.read_csv(folder / "individual_epsilon.csv")
    summary = json.loads((folder / "summary.json").read_text())
    table = figure("individual_privacy").table(
        {
            "individual": str(folder / "individual_epsilon.csv"),
            "summary": str(folder / "summary.json"),
        },
        {"run": "individual"},
    )
    medians = records.groupby("class").individual_epsilon.median()
    assert table.set_index("class")["median"].to_dict() == pytest.approx(
        medians.to_dict(), rel=1e-12
    )
    assert (table["max"] <= table.worst_case_epsilon).all() and (
        table.worst_case_epsilon == summary["epsilon"]["rdp"]
    ).all()
    test_classes = np.bincount(synth.y_test.numpy(), minlength=3)
    weighted = (
        table.sort_values("class").test_accuracy.to_numpy() * test_classes
    ).sum() / test_classes.sum()
    assert weighted == pytest.approx(summary["final"]["test_accuracy"], abs=1e-12)


def test_risk_calibration_meets_the_target_with_less_noise(runs):
    """Both runs keep the attacker's TPR at α within τ (the conversion is valid); the
    risk-calibrated one needs less σ and sits at the target; each curve is riskcal's
    μ-GDP curve, μ = √T/σ."""
    runs, _ = runs
    inputs = {name: str(runs / name / "summary.json") for name in ("by_epsilon", "by_risk")}
    table = figure("risk_calibration").table(inputs, {})
    at = table[table.kind == "run"].set_index("calibrated_by")
    assert (at.tpr_at_target_fpr <= 0.3).all()
    assert at.noise_multiplier["by_risk"] < at.noise_multiplier["by_epsilon"]
    assert at.tpr_at_target_fpr["by_risk"] == pytest.approx(0.3, rel=5e-3)
    for name, curve in table[table.kind == "curve"].groupby("calibrated_by"):
        points = curve[curve.fpr.isin(FPRS)]
        theirs = 1 - np.asarray(
            get_beta_from_gdp(math.sqrt(10) / at.noise_multiplier[name], points.fpr.to_numpy())
        )
        assert points.tpr.to_numpy() == pytest.approx(theirs, rel=1e-9)


def test_risk_calibration_checks_the_practitioners_epsilon():
    runs_ = {
        "a": {"method": "dp_sgd", "target_epsilon": 1.0, "accountant": "pld", "delta": 1e-5},
        "b": {"method": "dp_sgd", "target_tpr": 0.3, "target_fpr": 0.1},
    }
    with pytest.raises(DPLabError, match=f"by_epsilon.*{math.log((0.3 - 1e-5) / 0.1):.6g}"):
        risk_calibration.check({"runs": runs_}, {"by_epsilon": "a", "by_risk": "b"})


def test_claims_read_004s_epsilon_as_a_risk(runs, tmp_path):
    """The claims rows of 004's (ε = 1, δ = 1e-6) read as a risk: ours is the run's PLD reading at
    FPR 0.01, the bound e·0.01 + 1e-6; the verdict follows the run (a σ far too
    small for ε = 1 differs)."""
    from dplab.figures import claims

    runs, synth = runs
    folders = {}
    for name, sigma in (("quiet", 20.0), ("loud", 0.5)):
        folders[name] = tmp_path / name
        run = resolved(
            **{**FULL_BATCH, "accountant": None},
            name=name,
            noise_multiplier=sigma,
            delta=1e-6,
            noise_rng="portable",  # the CPU stream's δ floor at σ = 0.5 is 8.2e-4 (refused)
        )
        loop.train(RunSettings.of(run), synth, folders[name])
    inputs = {
        "tables": [],
        "nonprivate": [],
        "sweeps": [],
        "benchmark": [],
        "try_summaries": [str(folders[n] / "summary.json") for n in ("quiet", "loud")],
        "try_metrics": [str(folders[n] / "metrics.csv") for n in ("quiet", "loud")],
    }
    table = claims.table(inputs, {})
    rows = table[table.statement.str.contains("read as a risk")]
    assert len(rows) == 8  # two rows per try, tries 3 and 4 not in this config
    for number, name, verdict in ((1, "quiet", "holds"), (2, "loud", "differs")):
        reading = json.loads((folders[name] / "summary.json").read_text())["risk"]
        mine = rows[rows.statement.str.startswith(f"try {number}:")]
        mine = mine.set_index(mine.statement.str.contains("advantage"))
        assert (
            mine.loc[False, "ours"] == reading["tpr"][1]
            and mine.loc[True, "ours"] == reading["advantage"]
        )
        assert mine.loc[False, "source_value"] == pytest.approx(math.e * 0.01 + 1e-6, rel=1e-12)
        assert mine.loc[True, "source_value"] == pytest.approx(
            (math.e - 1 + 2e-6) / (math.e + 1), rel=1e-12
        )
        assert set(mine.verdict) == {verdict}
    assert set(rows[rows.statement.str.startswith(("try 3", "try 4"))].verdict) == {
        "not checkable here"
    }


def test_index_lists_each_runs_epsilon_with_its_risk(runs, tmp_path):
    """results/index.md's runs table: each run's ε and, beside it, its summary's TPR at FPR 0.01 and
    advantage (or the reason it has none)."""
    import shutil

    from dplab.commands.figures import run_risks

    runs, _ = runs
    for name in ("by_risk", "individual"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        shutil.copy(runs / name / "summary.json", tmp_path / "runs" / name / "summary.json")
    lines = {
        line.split(" | ")[0].strip("| "): line
        for line in run_risks(tmp_path)
        if line.startswith("| ")
    }
    reading = json.loads((runs / "by_risk" / "summary.json").read_text())["risk"]
    assert f"| {reading['tpr'][1]:.4g} | {reading['advantage']:.4g} |" in lines["by_risk"]
    assert (
        "pld" in lines["by_risk"] and "no risk: pld" in lines["individual"]
    )  # the individual run claims rdp only


@pytest.mark.pipeline
def test_built_dag_draws_individual_privacy_and_carries_risk_columns(built):
    """The small DAG: try3_dp_sgd writes every record's individual ε (none above its rdp ε), the
    figure is drawn from it, and the sweep's pld rows carry a risk where rdp's say why not."""
    results = built / "results"
    summary = json.loads((results / "runs" / "try3_dp_sgd" / "summary.json").read_text())
    records = pd.read_csv(results / "runs" / "try3_dp_sgd" / "individual_epsilon.csv")
    assert (
        len(records) == summary["dataset_size"]
        and (records.individual_epsilon <= summary["epsilon"]["rdp"]).all()
    )
    table = pd.read_csv(results / "tables" / "individual_privacy.csv")
    assert (
        table["records"].sum() == len(records)
        and (results / "figures" / "individual_privacy.png").stat().st_size
    )
    sweep = pd.read_csv(results / "accounting" / "dp_sgd.csv")
    assert sweep[sweep.accountant == "pld"].advantage.notna().all()
    assert (
        sweep[sweep.accountant == "rdp"]
        .risk_note.str.contains("no privacy-loss distribution")
        .all()
    )
    assert (
        pd.read_csv(results / "runs" / "dp_sgd" / "individual_epsilon.csv").columns
        == list(loop.INDIVIDUAL_COLUMNS)
    ).all()
