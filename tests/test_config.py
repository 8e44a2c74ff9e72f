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
        (lambda c: c["training_resources"].update(gpus=-1), "training_resources.gpus"),
        (lambda c: c["training_resources"].update(runtime=0), "training_resources.runtime"),
        (lambda c: c["training_resources"].update(gpu=1), "training_resources.gpu"),
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


@pytest.mark.parametrize(
    "gpus, device, where",
    [
        (0, "cuda", ("runs", "dp_sgd")),
        (1, "cpu", ("runs", "dp_sgd")),
        (0, "cuda", ("grids", "mf_vs_dpsgd", "variants", "dp_mf")),
        (1, "cpu", ("grids", "mf_vs_dpsgd", "base")),
    ],
)
def test_a_run_device_must_agree_with_the_gpus_training_jobs_ask_for(tmp_path, gpus, device, where):
    """training_resources.gpus decides for every training job: device cuda needs it >= 1 (or the
    job gets no GPU on a cluster), device cpu needs 0 (or the job holds GPUs it never uses)."""
    import yaml

    config = copy.deepcopy(DEFAULT)
    config["training_resources"]["gpus"] = gpus
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    load_config(path)  # every run says device auto (the default): fine with either
    entry = config
    for key in where:
        entry = entry[key]
    entry["device"] = device
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(DPLabError) as err:
        load_config(path)
    assert err.value.key == ".".join(where) + ".device" and "training_resources.gpus" in str(err.value)
    entry["device"] = "auto" if device == "cpu" else "cuda"
    config["training_resources"]["gpus"] = 1
    path.write_text(yaml.safe_dump(config))
    load_config(path)


def test_snakemake_refuses_a_bad_config_before_any_job(project):
    config = project / "config" / "config.yaml"
    config.write_text(config.read_text().replace("lr: 0.5", "lr: -0.5", 1))
    proc = run(["snakemake", "--cores", "1"], cwd=project, check=False)
    assert proc.returncode != 0
    assert "lr" in proc.stderr + proc.stdout
    assert not (project / "results").exists()
