"""The worked example (config/examples/own_experiment.yaml, docs/own_experiment.md) end to end
through Snakemake in a copy of the repository, and a variant with another dataset kind and model
file: what each table claims is checked against its runs."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from conftest import copy_project, run

pytestmark = pytest.mark.pipeline
EXAMPLE = "config/examples/own_experiment.yaml"


def _snakemake(project, configfile: str) -> None:
    run(["snakemake", "--cores", "2", "--configfile", configfile], cwd=project, timeout=1800)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("example") / "project")
    _snakemake(project, EXAMPLE)
    return project


def test_the_example_draws_its_figures_from_its_own_data_and_model(example):
    for figure in ("privacy_utility", "accountants_vs_pld", "risk_calibration"):
        assert (example / "results" / "figures" / f"{figure}.png").stat().st_size > 0
    record = yaml.safe_load((example / "results" / "provenance.json").read_text())  # JSON is YAML
    for path in ("config/examples/data/loans.csv", "config/examples/models/net.py"):
        assert record["inputs"][path]["sha256"] == hashlib.sha256((example / path).read_bytes()).hexdigest()


def test_the_example_grid_meets_its_targets_and_prices_the_selection(example):
    table = pd.read_csv(example / "results" / "tables" / "privacy_utility.csv")
    private = table.dropna(subset=["epsilon"])
    assert set(private.variant) == {"dp_sgd", "dp_gd"} and set(private.epsilon) == {1.0, 4.0}
    assert (private.epsilon_claimed_max <= private.epsilon * (1 + 1e-5)).all()
    assert (private.selection_epsilon > private.epsilon).all()  # picking the best costs privacy
    assert (private.seeds == 2).all() and private.model.eq("config/examples/models/net.py:Net").all()
    assert (table.accuracy_mean > 0.6).all()  # the majority class is 0.58


def test_a_variant_with_an_image_folder_and_another_model_file(example):
    """The example with scikit-learn's digits as PNG files (image_folder) and the CNN of cnn.py:
    only the data and model entries change."""
    subprocess.run([sys.executable, "config/examples/make_data.py", "images", "data/digits_png"], cwd=example,
                   check=True, timeout=300)
    config = yaml.safe_load((example / EXAMPLE).read_text())
    config["datasets"] = {"digits_png": {"kind": "image_folder", "path": "data/digits_png", "size": [8, 8],
                                         "channels": 1}}
    cnn = "config/examples/models/cnn.py:SmallCNN"
    for grid in config["grids"].values():
        grid["base"].update(dataset="digits_png", model=cnn, model_args={"channels": 8}, steps=40)
        grid["seeds"] = [0]
    config["grids"]["own_dp"]["target_epsilon"] = [2.0]
    config["grids"]["own_dp"]["variants"].pop("dp_gd")
    run = {**config["runs"]["own_by_epsilon"], "dataset": "digits_png", "model": cnn, "model_args": {"channels": 8},
           "steps": 40}
    config["runs"] = {"own_by_epsilon": run}  # a pipeline has one run at least
    config.pop("sweeps")
    config["figures"] = {"privacy_utility": config["figures"]["privacy_utility"]}
    (example / "variant.yaml").write_text(yaml.safe_dump(config))
    _snakemake(example, "variant.yaml")
    table = pd.read_csv(example / "results" / "tables" / "privacy_utility.csv")
    assert set(table.model) == {cnn} and set(table.dataset) == {"digits_png"}
    private = table.dropna(subset=["epsilon"]).iloc[0]
    assert private.epsilon_claimed_max <= 2.0 * (1 + 1e-5) and private.accuracy_mean > 0.1  # 10 classes
