"""Config validation: schema (keys, types, ranges, defaults) and cross-references."""

from __future__ import annotations

import copy

import pytest

from conftest import ROOT, run
from dplab.config import load_config, load_yaml, validate
from dplab.errors import DPLabError

DEFAULT = load_yaml(ROOT / "config" / "config.yaml")


def test_default_config_is_valid_and_defaults_are_filled():
    config = validate(copy.deepcopy(DEFAULT))
    assert config["seed"] == DEFAULT.get("seed", 0)
    assert all("points" in entry for entry in config["sweeps"].values())


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c.update(bogus=1), "bogus"),
        (lambda c: c.update(seed=-1), "seed"),
        (lambda c: c.update(threads="two"), "threads"),
        (lambda c: c["sweeps"]["dp_sgd"].update(points=1), "sweeps.dp_sgd.points"),
        (lambda c: c["sweeps"]["dp_sgd"].update(accountants=[]), "sweeps.dp_sgd.accountants"),
        (lambda c: c["datasets"]["digits"].update(kind="cifar"), "datasets.digits.kind"),
        (lambda c: c["datasets"]["digits"].update(test_fraction=2), "datasets.digits.test_fraction"),
        (lambda c: c["datasets"]["digits"].update(train_size=10), "datasets.digits.train_size"),
        (lambda c: c["runs"]["dp_sgd"].update(lr=0), "runs.dp_sgd.lr"),
        (lambda c: c["runs"]["dp_sgd"].update(delta=1.5), "runs.dp_sgd.delta"),
        (lambda c: c["runs"]["dp_sgd"].update(method="adam"), "runs.dp_sgd.method"),
    ],
)
def test_schema_errors_name_the_key(mutate, key):
    config = copy.deepcopy(DEFAULT)
    mutate(config)
    with pytest.raises(DPLabError) as err:
        validate(config)
    assert err.value.key == key


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["sweeps"]["dp_sgd"].update(run="nope"), "sweeps.dp_sgd.run"),
        (lambda c: c["sweeps"]["dp_sgd"].update(accountants=["nope"]), "sweeps.dp_sgd.accountants"),
        (lambda c: c["runs"]["dp_sgd"].update(dataset="nope"), "runs.dp_sgd.dataset"),
    ],
)
def test_dangling_references_name_the_key(tmp_path, mutate, key):
    config = copy.deepcopy(DEFAULT)
    mutate(config)
    path = tmp_path / "c.yaml"
    import yaml

    path.write_text(yaml.safe_dump(config))
    with pytest.raises(DPLabError) as err:
        load_config(path)
    assert err.value.key == key


def test_snakemake_refuses_a_bad_config_before_any_job(project):
    config = project / "config" / "config.yaml"
    config.write_text(config.read_text().replace("lr: 0.5", "lr: -0.5", 1))
    proc = run(["snakemake", "--cores", "1"], cwd=project, check=False)
    assert proc.returncode != 0
    assert "lr" in proc.stderr + proc.stdout
    assert not (project / "results").exists()
