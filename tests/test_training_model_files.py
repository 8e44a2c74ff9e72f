"""Models as plug-ins and model files (docs/training.md, "Models"): the registry and the run
schema name the same built-ins; a class in a file of the project is built with ``model_args``
and the data's shape, is an input of its training jobs (Snakemake, DVC) and is hashed by the
provenance record; a file that does not import, a missing class, arguments its constructor does
not take and an output of the wrong size are refused naming the key."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from dplab import dvc_yaml, jobs, layout
from dplab.config import read_config
from dplab.errors import DPLabError
from dplab.provenance import record
from dplab.schemas import load_schema
from dplab.training import models, preflight
from dplab.training.models.base import Model
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

NET = """
import math
from torch import nn


class Net(nn.Module):
    def __init__(self, input_shape, classes, width=4):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), width),
                                  nn.LayerNorm(width), nn.Tanh(), nn.Linear(width, classes))

    def forward(self, x):
        return self.body(x)


class Three(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(64, 3)

    def forward(self, x):
        return self.out(x.flatten(1))
"""
DIGITS = {"kind": "digits", "test_fraction": 0.2}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder (the working directory) with models/net.py."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text(NET)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(**keys) -> RunSettings:
    return RunSettings.of(resolve_run({"method": "sgd", **keys}))


def test_the_schema_names_exactly_the_registered_built_in_models():
    [enum] = [
        branch["enum"]
        for branch in load_schema("run")["properties"]["model"]["anyOf"]
        if "enum" in branch
    ]
    assert enum == sorted(models.MODELS)
    assert all(isinstance(m, Model) and m.display and m.source for m in models.MODELS.values())


@pytest.mark.parametrize(
    "model,keys,shape,classes",
    [
        ("logreg", {}, [1, 8, 8], 10),
        ("logreg", {}, [7], 3),
        ("mlp", {"hidden": 5}, [2, 3, 4], 7),
        ("cnn", {"channels": 3}, [2, 9, 5], 4),
        ("tanh_cnn", {}, [3, 28, 28], 6),
        ("cnn", {}, [1, 3, 8], 2),  # refused: H < 4
        ("tanh_cnn", {}, [1, 8, 8], 10),  # refused: not 28×28
    ],
)
def test_a_built_in_models_parameters_are_counted_without_building_it(model, keys, shape, classes):
    """A plan counts a built-in network's parameters by its model's formula (no torch): the count
    of the network ``build`` makes, and the same refusal where ``build`` refuses the shape."""
    settings = _run(model=model, **keys)
    try:
        built = models.build(settings, shape, classes)
    except DPLabError as refused:
        with pytest.raises(DPLabError) as counted:
            models.parameters(settings, shape, classes)
        assert str(counted.value) == str(refused)
        return
    models.check_output(built, shape, classes)  # what the plan takes to hold by construction
    assert models.parameters(settings, shape, classes) == sum(p.numel() for p in built.parameters())


def test_a_model_file_is_built_with_its_arguments_and_the_datas_shape(project):
    model = models.build(_run(model="models/net.py:Net", model_args={"width": 6}), [1, 8, 8], 10)
    assert [tuple(p.shape) for p in model.parameters()] == [
        (6, 64),
        (6,),
        (6,),
        (6,),
        (10, 6),
        (10,),
    ]
    (project / "models" / "net.py").write_text(
        NET.replace("width=4", "width=5")
    )  # an edit is imported afresh
    assert models.build(_run(model="models/net.py:Net"), [3], 2).body[1].out_features == 5


@pytest.mark.parametrize(
    "source,keys,key,words",
    [
        (None, {"model": "models/none.py:Net"}, "model", "no model file models/none.py"),
        (
            "import torch\nraise ValueError('broken')\n",
            {"model": "models/bad.py:Net"},
            "model",
            "does not import: ValueError: broken",
        ),
        ("def Net(:\n", {"model": "models/bad.py:Net"}, "model", "does not import: SyntaxError"),
        (
            NET,
            {"model": "models/bad.py:Nett"},
            "model",
            "defines no nn.Module class 'Nett'; it defines Net, Three",
        ),
        (
            NET,
            {"model": "models/bad.py:Net", "model_args": {"depth": 2}},
            "model_args",
            "does not take ['depth']",
        ),
        (
            None,
            {"model": "mlp", "model_args": {"width": 2}},
            "model_args",
            "only applies to a model file",
        ),
        (None, {"model": "resnet"}, "model", "is not valid"),
    ],
)
def test_a_bad_model_is_refused_when_the_run_is_resolved(project, source, keys, key, words):
    if source is not None:
        (project / "models" / "bad.py").write_text(source)
    with pytest.raises(DPLabError) as err:
        resolve_run({"method": "sgd", **keys})
    assert err.value.key == key and words in err.value.message


def test_an_output_of_another_size_than_the_classes_is_refused_at_planning(project):
    with pytest.raises(
        DPLabError, match=r"one logit per class, shape \[1, 10\] .* got \[1, 3\]"
    ) as err:
        preflight.check_run(_run(model="models/net.py:Three"), DIGITS)
    assert err.value.key == "model"
    preflight.check_run(_run(model="models/net.py:Net"), DIGITS)


def test_a_model_file_is_an_input_of_its_jobs_and_in_the_provenance_record(project):
    config_file = project / "config.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "datasets": {"digits": DIGITS},
                "runs": {
                    "own": {
                        "method": "sgd",
                        "model": "models/net.py:Net",
                        "steps": 2,
                        "dataset": "digits",
                    }
                },
                "grids": {
                    "g": {
                        "seeds": [0],
                        "base": {"method": "sgd", "model": "models/net.py:Net", "steps": 2},
                        "variants": {"sgd": {}},
                    }
                },
            }
        )
    )
    config = read_config(config_file)
    plan = jobs.plan(config)
    trains = plan.of("train")
    assert set(trains) == {"runs/own", "grids/g/digits/net.Net/sgd/nonprivate/seed0"}
    assert all(job.inputs["model_file"] == "models/net.py" for job in trains.values())
    stages = dvc_yaml.stages(plan)
    assert all(
        "models/net.py" in stages[dvc_yaml.stage_name("train", name.removeprefix("runs/"))]["deps"]
        for name in trains
    )
    assert plan.job("provenance").inputs["models"] == ["models/net.py"]
    rec = record(config, [], project, inputs=plan.job("provenance").inputs["models"])
    assert rec["inputs"]["models/net.py"]["sha256"] == hashlib.sha256(NET.encode()).hexdigest()
    assert layout.model_folder("a/b/c.py:Net") == "c.Net" and layout.model_folder("mlp") == "mlp"


def test_the_checkpoint_fingerprint_covers_the_model_file(project):
    from dplab.training.start import initial

    settings = _run(model="models/net.py:Net", batch_size=4)
    before = initial(settings, 10, [3], 2, 0).code
    (project / "models" / "net.py").write_text(NET + "\n# edited\n")
    assert (
        initial(settings, 10, [3], 2, 0).code
        != before
        == {"models/net.py": hashlib.sha256(NET.encode()).hexdigest()}
    )


@pytest.mark.parametrize(
    "model,shape",
    [
        ("config/examples/models/net.py:Net", [5]),
        ("config/examples/models/net.py:Net", [1, 8, 8]),
        ("config/examples/models/cnn.py:SmallCNN", [3, 8, 8]),
    ],
)
def test_the_example_model_files_build_for_their_data(model, shape, monkeypatch):
    from conftest import ROOT

    monkeypatch.chdir(ROOT)
    built = models.build(_run(model=model), shape, 4)
    models.check_output(built, shape, 4)


def test_the_provenance_inputs_hold_the_model_files_of_runs_grids_and_audits():
    from dplab.entries import model_files

    config = {
        "seed": 0,
        "runs": {"a": {"model": "m/a.py:A"}, "b": {"model": "mlp"}},
        "grids": {"g": {"seeds": [0], "base": {"model": "m/g.py:G"}, "variants": {"v": {}}}},
        "audits": {"x": {"run": {"model": "m/x.py:X"}}, "y": {"run": {}}},
    }
    assert model_files(config) == ["m/a.py", "m/g.py", "m/x.py"]
