"""The worked example (config/examples/own_experiment.yaml, docs/own_experiment.md) end to end
through Snakemake in a copy of the repository, and a variant with another dataset kind and model
file: what each table claims is checked against its runs."""

from __future__ import annotations

import hashlib
import shutil
import sys

import pandas as pd
import pytest
import yaml

import background
from conftest import copy_project, run

pytestmark = pytest.mark.pipeline
EXAMPLE = "config/examples/own_experiment.yaml"
CNN = "config/examples/models/cnn.py:SmallCNN"


def _snakemake(project, configfile: str) -> None:
    run(
        ["snakemake", "--cores", "2", "--configfile", configfile],
        cwd=project,
        timeout=background.LIMIT_S,
    )


def build_example(factory):
    project = copy_project(factory.mktemp("example") / "project")
    _snakemake(project, EXAMPLE)
    return project


def build_variant(factory):
    """The example with scikit-learn's digits as PNG files (image_folder) and the CNN of cnn.py:
    only the data and model entries change, in a copy of the built example."""
    project = factory.mktemp("variant") / "project"
    shutil.copytree(background.get("example", factory), project, symlinks=True)
    run(
        [sys.executable, "config/examples/make_data.py", "images", "data/digits_png"],
        cwd=project,
        timeout=300,
    )
    config = yaml.safe_load((project / EXAMPLE).read_text())
    config["datasets"] = {
        "digits_png": {
            "kind": "image_folder",
            "path": "data/digits_png",
            "size": [8, 8],
            "channels": 1,
        }
    }
    for grid in config["grids"].values():
        grid["base"].update(dataset="digits_png", model=CNN, model_args={"channels": 8}, steps=40)
        grid["seeds"] = [0]
    config["grids"]["own_dp"]["target_epsilon"] = [2.0]
    config["grids"]["own_dp"]["variants"].pop("dp_gd")
    entry = {
        **config["runs"]["own_by_epsilon"],
        "dataset": "digits_png",
        "model": CNN,
        "model_args": {"channels": 8},
        "steps": 40,
    }
    config["runs"] = {"own_by_epsilon": entry}  # a pipeline has one run at least
    config.pop("sweeps")
    config["figures"] = {"privacy_utility": config["figures"]["privacy_utility"]}
    (project / "variant.yaml").write_text(yaml.safe_dump(config))
    _snakemake(project, "variant.yaml")
    return project


background.register("example", build_example)
background.register("variant", build_variant)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The worked example built (in the background: background.py)."""
    return background.get("example", tmp_path_factory)


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    return background.get("variant", tmp_path_factory)


def test_the_example_draws_its_figures_from_its_own_data_and_model(example):
    for figure in ("privacy_utility", "accountants_vs_pld", "risk_calibration"):
        assert (example / "results" / "figures" / f"{figure}.png").stat().st_size > 0
    record = yaml.safe_load((example / "results" / "provenance.json").read_text())  # JSON is YAML
    for path in ("config/examples/data/loans.csv", "config/examples/models/net.py"):
        assert (
            record["inputs"][path]["sha256"]
            == hashlib.sha256((example / path).read_bytes()).hexdigest()
        )


def test_a_run_on_an_encoding_fitted_to_its_records_says_so_beside_its_epsilon(example):
    """loans.csv's numeric and categorical columns are encoded from the training split (no
    `encoding` given): outside ε, said by prepare-data alone before, now in each run's note."""
    summary = yaml.safe_load((example / "results/runs/own_by_epsilon/summary.json").read_text())
    assert "was fitted on the training split, outside ε" in summary["note"]


def test_the_example_grid_meets_its_targets_and_prices_the_selection(example):
    table = pd.read_csv(example / "results" / "tables" / "privacy_utility.csv")
    private = table.dropna(subset=["epsilon"])
    assert set(private.variant) == {"dp_sgd", "dp_gd"} and set(private.epsilon) == {1.0, 4.0}
    assert (private.epsilon_claimed_max <= private.epsilon * (1 + 1e-5)).all()
    assert (private.selection_epsilon > private.epsilon).all()  # picking the best costs privacy
    assert (private.grid_epsilon > private.epsilon).all()  # 2 methods × 2 seeds composed
    assert (private.seeds == 2).all() and private.model.eq(
        "config/examples/models/net.py:Net"
    ).all()
    assert (table.accuracy_mean > 0.6).all()  # the majority class is 0.58


def test_a_variant_with_an_image_folder_and_another_model_file(variant):
    """The example with the digits as an image folder and the CNN of cnn.py (build_variant)."""
    table = pd.read_csv(variant / "results" / "tables" / "privacy_utility.csv")
    assert set(table.model) == {CNN} and set(table.dataset) == {"digits_png"}
    private = table.dropna(subset=["epsilon"]).iloc[0]
    assert (
        private.epsilon_claimed_max <= 2.0 * (1 + 1e-5) and private.accuracy_mean > 0.1
    )  # 10 classes
