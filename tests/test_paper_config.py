"""config/paper.yaml: self-contained, every figure at the source papers' settings,
nothing trained that no figure draws; and its whole DAG end to end at reduced scale
(config/paper-smoke.yaml) on MNIST-format files written where the loader reads them."""

from __future__ import annotations

import copy
import functools
import json
import re

import pytest
import yaml

import background
from conftest import ROOT, copy_project, run, write_mnist
from dplab import entries, jobs, layout
from dplab.config import check_config
from dplab.schemas import load_schema, validate
from dplab.figures import FIGURES, input_files

SMOKE = ["--configfile", "config/paper.yaml", "config/paper-smoke.yaml"]
#: runs no figure draws: Tramèr & Boneh's Fashion-MNIST benchmark, whose
#: summary the claims table reads
BENCHMARKS = ("fmnist_tanh_cnn",)


def load(*names: str) -> dict:
    """The config Snakemake builds from ``--configfile`` files (merged in order,
    key by key), validated (a copy of :func:`_load`'s: each test may change its own)."""
    return copy.deepcopy(_load(*names))


@functools.cache
def _load(*names: str) -> dict:
    """:func:`load`, validated and checked once per session (a few seconds each)."""
    from snakemake.utils import update_config

    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((ROOT / "config" / name).read_text()))
    config = validate(config, load_schema("config"), "")
    check_config(config)
    return config


def test_paper_config_draws_every_figure_and_trains_nothing_else():
    config = load("paper.yaml")
    assert set(config["figures"]) == set(FIGURES)
    plan = jobs.plan(config)
    drawn = {path for job in plan.of("figure_table").values() for path in input_files(job.inputs)}
    drawn |= {
        layout.run_files(entry["run"])["summary"] for entry in config["sweeps"].values()
    }  # sweeps read runs
    drawn |= {
        path for job in plan.runs.values() for path in job.input_files if path.endswith(".npz")
    }  # dp_mf's C (every run: alone or in a grid cell's job)
    needless = [
        p
        for p in plan.results
        if p.endswith(("summary.json", ".npz", ".csv"))
        and not p.startswith(("results/tables/", "results/runs/", "results/grids/"))
        and p not in drawn
    ]
    needless += [
        f"results/runs/{r}"
        for r in config["runs"]
        if layout.run_files(r)["summary"] not in drawn
        and layout.run_files(r)["metrics"] not in drawn
        and r not in BENCHMARKS
    ]
    for grid in config["grids"]:
        needless += [s for s in entries.grid_summaries(config, grid) if s not in drawn]
    assert needless == []
    # the source papers' settings: 004's 5000 MNIST images, its tries at (ε = 1,
    # δ = 1e-6), C = 30, MLP 128
    assert config["datasets"]["mnist"]["train_size"] == 5000
    for name in (
        "mnist_try1_dp_gd_advanced",
        "mnist_try2_dp_gd_rdp",
        "mnist_try3_dp_sgd",
        "mnist_try4_dp_mf",
    ):
        entry = config["runs"][name]
        assert (entry["target_epsilon"], entry["delta"], entry["clip"], entry["hidden"]) == (
            1.0,
            1e-6,
            30.0,
            128,
        )
    assert entries.grid_runs(config, "mf_vs_dpsgd")["mnist/mlp/dp_mf/eps1/seed0"]["run"].keys() >= {
        "strategy"
    }
    assert (
        "bands" not in config["grids"]["mf_vs_dpsgd"]["variants"]["dp_mf"]
    )  # nothing leaked from config.yaml


def test_paper_config_holds_tramer_and_boneh_s_fashion_mnist_benchmark(capsys):
    """Their end-to-end tanh CNN on all of Fashion-MNIST at (ε = 3, δ = 1e-5), batch 2048, 40 epochs
    of ⌊60000/2048⌋ steps, C = 0.1; σ calibrated by the moments accountant is their 2.15, and the
    tighter rdp and pld accountants need less noise for the same ε (docs/training.md)."""
    from dplab.cli import main

    config = load("paper.yaml")
    entry, data = config["runs"]["fmnist_tanh_cnn"], config["datasets"]["fashion_mnist"]
    assert (data["kind"], data["train_size"], data["test_size"]) == ("fashion_mnist", None, None)
    assert (entry["model"], entry["method"], entry["batch_size"], entry["steps"]) == (
        "tanh_cnn",
        "dp_sgd",
        2048,
        40 * (60000 // 2048),
    )
    assert (entry["target_epsilon"], entry["delta"], entry["clip"], entry["accountant"]) == (
        3.0,
        1e-5,
        0.1,
        "moments",
    )
    setting = [
        "--delta",
        "1e-5",
        "--batch-size",
        "2048",
        "--dataset-size",
        "60000",
        "--steps",
        str(entry["steps"]),
    ]
    assert main(["sigma", "--accountant", "moments", "--epsilon", "3", *setting]) == 0
    sigma = json.loads(capsys.readouterr().out)["noise_multiplier"]
    assert round(sigma, 2) == 2.15  # Tramèr & Boneh's noise multiplier
    epsilon = {}
    for accountant in (
        "rdp",
        "pld",
    ):  # ε falls as σ grows: ε < 3 at 0.9·σ means σ < 0.9·2.15 meets ε = 3
        assert (
            main(
                [
                    "epsilon",
                    "--accountant",
                    accountant,
                    "--noise-multiplier",
                    str(0.9 * sigma),
                    *setting,
                ]
            )
            == 0
        )
        epsilon[accountant] = json.loads(capsys.readouterr().out)["epsilon"]
    assert epsilon["pld"] < epsilon["rdp"] < 3.0


def test_smoke_scale_keeps_every_rule_dataset_kind_and_figure_and_only_shrinks():
    paper, smoke = load("paper.yaml"), load("paper.yaml", "paper-smoke.yaml")
    assert set(smoke["figures"]) == set(FIGURES)
    kinds = {"digits", "mnist", "mnist5000", "synthetic", "fashion_mnist"}  # mnist5000: mf_regime's
    assert {d["kind"] for d in smoke["datasets"].values()} == kinds
    for key in ("runs", "grids", "sweeps", "audits", "datasets"):
        assert set(smoke[key]) == set(paper[key]), key
    for name, entry in smoke["runs"].items():  # same method, model, privacy target; fewer steps
        same = (
            "method",
            "model",
            "target_epsilon",
            "noise_multiplier",
            "delta",
            "clip",
            "accountant",
        )
        assert {k: entry.get(k) for k in same} == {k: paper["runs"][name].get(k) for k in same}, (
            name
        )
        assert entry["steps"] < paper["runs"][name]["steps"]
    for grid in smoke["grids"]:
        assert {r["variant"] for r in entries.grid_runs(smoke, grid).values()} == set(
            paper["grids"][grid]["variants"]
        )


def build_smoke(factory):
    """The paper DAG at smoke scale in a copy of the project, on MNIST-format files."""
    project = copy_project(factory.mktemp("paper_smoke") / "project")
    write_mnist(
        project / "data" / "mnist", 500, 120, gz=False
    )  # where datasets.mnist.path points; raw: unchecked
    write_mnist(
        project / "data" / "fashion-mnist", 500, 120
    )  # where paper-smoke.yaml's fashion_mnist.path points
    run(["snakemake", "--cores", "2", *SMOKE], cwd=project, timeout=background.LIMIT_S)
    return project


#: the longest build of the suite (98 jobs): a lane of its own, from the start of the session
background.register("paper_smoke", build_smoke, lane="paper")


@pytest.fixture(scope="module")
def paper_smoke(tmp_path_factory):
    """The paper DAG built at smoke scale (in the background: background.py)."""
    return background.get("paper_smoke", tmp_path_factory)


@pytest.mark.pipeline
@pytest.mark.slow
def test_paper_dag_at_smoke_scale_runs_end_to_end(paper_smoke):
    project = paper_smoke
    results = project / "results"
    for figure in FIGURES:
        for path in (f"tables/{figure}.csv", f"figures/{figure}.pdf", f"figures/{figure}.png"):
            assert (results / path).stat().st_size > 0, path
    kinds = {json.loads(p.read_text())["kind"] for p in (results / "data").glob("*/info.json")}
    assert kinds == {"digits", "mnist", "mnist5000", "synthetic", "fashion_mnist"}  # + mf_regime's
    info = json.loads((results / "data" / "mnist" / "info.json").read_text())
    assert (info["train_size"], info["test_size"], info["input_shape"]) == (400, 100, [1, 28, 28])
    smoke = load("paper.yaml", "paper-smoke.yaml")
    assert {p.name for p in (results / "runs").iterdir()} == set(
        smoke["runs"]
    )  # nothing of config/config.yaml
    listed = {
        line.split()[0]
        for line in run(["snakemake", "--list-rules", *SMOKE], cwd=project).stdout.splitlines()
        if line[:1].isalnum()
    }
    log = "".join(p.read_text() for p in (project / ".snakemake" / "log").glob("*.snakemake.log"))
    assert listed == set(re.findall(r"^(?:local)?rule (\w+):", log, re.MULTILINE))  # every rule ran
    progress = (project / "logs" / "runs" / "mnist_try3_dp_sgd.log").read_text()
    assert "dplab train mnist_try3_dp_sgd: starting at step 0/8" in progress
    last = re.search(
        r"step 8/8 \(100.0%\) \| train_loss=.* \| ε at step 8 \(δ=1e-06, add_remove, poisson "
        r"sampling\): kairouz=([\d.e+]+), rdp=([\d.e+]+), pld=([\d.e+]+) \| elapsed",
        progress,
    )
    kairouz, rdp, pld = map(float, last.groups())
    assert (
        rdp == 1.0 and pld <= rdp
    )  # σ calibrated to ε = 1 by rdp; the tight PLD bound is no larger
