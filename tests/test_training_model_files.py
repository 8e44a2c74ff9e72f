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


CHECKED = """
import sys
import torch
from torch import nn
from torch.nn import functional as F


class Base(nn.Module):
    def __init__(self, input_shape, classes):
        super().__init__()
        self.fc = nn.Linear(input_shape[0], 8)
        self.out = nn.Linear(8, classes)


class BatchMean(Base):  # normalises by the batch's statistics, by hand
    def forward(self, x):
        h = self.fc(x)
        if len(h) > 1:
            h = (h - h.mean(0)) / (h.std(0) + 1e-5)
        return self.out(torch.tanh(h))


class FunctionalNorm(Base):  # batch statistics through F.batch_norm, no BatchNorm module
    def forward(self, x):
        h = self.fc(x)
        return self.out(F.batch_norm(h, None, None, training=True) if len(h) > 1 else h)


class RunningMean(Base):  # a buffer updated from every batch
    def __init__(self, input_shape, classes):
        super().__init__(input_shape, classes)
        self.register_buffer("mu", torch.zeros(input_shape[0]))

    def forward(self, x):
        self.mu.mul_(0.9).add_(0.1 * x.mean(0))
        return self.out(self.fc(x - self.mu))


class RunningMax(Base):  # a buffer that the check's 0/1 inputs leave as it is
    def __init__(self, input_shape, classes):
        super().__init__(input_shape, classes)
        self.register_buffer("scale", torch.ones(()))

    def forward(self, x):
        self.scale.copy_(torch.maximum(self.scale, x.detach().abs().max()))
        return self.out(self.fc(x / self.scale))


class AttributeMax(Base):  # the same running maximum in a plain attribute
    def __init__(self, input_shape, classes):
        super().__init__(input_shape, classes)
        self.scale = 1.0

    def forward(self, x):
        self.scale = max(self.scale, float(x.detach().abs().max()))
        return self.out(self.fc(x / self.scale))


class NumpyRead(Base):  # reads its input through numpy: no vmap, no torch.func
    def forward(self, x):
        import numpy as np

        scale = 2.0 if np.abs(x.detach().numpy()).max() > 1e3 else 1.0
        return self.out(torch.tanh(self.fc(x))) * scale


class BigBatchCentre(Base):  # mixes the examples only in batches larger than the check's
    def forward(self, x):
        if len(x) > 4:
            x = x - x.mean(0)
        return self.out(torch.tanh(self.fc(x)))


class Dropout(Base):
    def forward(self, x):
        return self.out(F.dropout(self.fc(x), 0.5, self.training))


class OneExampleOnly(Base):
    def forward(self, x):
        if len(x) > 1:
            raise ValueError("boom")
        return self.out(self.fc(x))


class BatchMeanOut(Base):  # (1, K) for any batch
    def forward(self, x):
        return self.out(self.fc(x)).mean(0, keepdim=True)


class Frozen(Base):
    def __init__(self, input_shape, classes):
        super().__init__(input_shape, classes)
        self.out.bias.requires_grad_(False)

    def forward(self, x):
        return self.out(self.fc(x))


class NoParameters(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classes = classes

    def forward(self, x):
        return torch.zeros(len(x), self.classes)


class Fine(Base):  # a constant buffer and a value read in the forward pass: accepted
    def __init__(self, input_shape, classes):
        super().__init__(input_shape, classes)
        self.register_buffer("shift", torch.ones(input_shape[0]))

    def forward(self, x):
        scale = 2.0 if float(x.abs().max()) > 1e3 else 1.0
        return self.out(torch.tanh(self.fc(x - self.shift))) * scale


class Embedded(nn.Module):  # features as token ids (docs/training.md, Layers): accepted
    def __init__(self, input_shape, classes):
        super().__init__()
        self.embed = nn.Embedding(10, 2)
        self.out = nn.Linear(2 * input_shape[0], classes)

    def forward(self, x):
        return self.out(self.embed(x.long()).flatten(1))


class Tied(nn.Module):  # one weight in two Linear layers
    def __init__(self, input_shape, classes):
        super().__init__()
        self.first = nn.Linear(input_shape[0], input_shape[0])
        self.second = nn.Linear(input_shape[0], input_shape[0], bias=False)
        self.second.weight = self.first.weight
        self.out = nn.Linear(input_shape[0], classes)

    def forward(self, x):
        return self.out(torch.tanh(self.second(torch.tanh(self.first(x)))))


class TrainingOnly(Base):  # a deterministic term while training only
    def forward(self, x):
        out = self.out(self.fc(x))
        return out + 100.0 * F.one_hot(torch.zeros(len(x), dtype=torch.long), out.shape[1]) * (
            self.training
        )
"""


@pytest.fixture
def checked(project):
    (project / "models" / "checked.py").write_text(CHECKED)
    return project


def _start(name: str):
    from dplab.training.start import initial

    return initial(_run(model=f"models/checked.py:{name}", batch_size=4), 16, [5], 3, seed=0)


@pytest.mark.parametrize(
    "name,words",
    [
        ("BatchMean", "row 0 of a batch's output differs from example 0's output alone"),
        ("FunctionalNorm", "mixes the examples of a batch"),
        ("RunningMean", "changes the buffer 'mu'"),
        ("RunningMax", "changes the buffer 'scale'"),
        ("AttributeMax", "gradients differed after other inputs went through it"),
        ("Dropout", "two forward passes of the same batch differ"),
        ("OneExampleOnly", "a batch of 4 examples of shape [5] fails: ValueError: boom"),
        ("BatchMeanOut", "shape [4, 3] for a batch of 4; got [1, 3]"),
        ("Frozen", "parameter 'out.bias' is frozen"),
        ("NoParameters", "has no parameter"),
    ],
)
def test_a_model_file_that_breaks_per_example_clipping_is_refused_before_training(
    checked, name, words
):
    """Each of these passes the one-example output check; trained, its printed ε would not hold
    (one example moves the others' outputs or a buffer) or the run would fail mid-way."""
    with pytest.raises(DPLabError) as err:
        _start(name)
    assert err.value.key == "model" and words in err.value.message


def test_a_per_example_model_file_with_a_constant_buffer_and_a_value_read_starts(checked):
    assert sorted(_start("Embedded").params) == ["embed.weight", "out.bias", "out.weight"]
    start = _start("Fine")
    assert sorted(start.params) == ["fc.bias", "fc.weight", "out.bias", "out.weight"]
    # planning builds it on torch's meta device, where reading a value fails: counted on the CPU
    assert models.parameters(_run(model="models/checked.py:Fine"), [5], 3) == 5 * 8 + 8 + 8 * 3 + 3


def test_a_model_file_s_clipped_sum_moves_by_at_most_c_whatever_it_does_to_a_batch(checked):
    """DP-SGD's ε needs ||S(D ∪ {z}) − S(D)|| ≤ C for the clipped sum S.  BigBatchCentre passes the
    check (it centres only batches of more than 4) and, on ghost clipping's one batched pass,
    moved S by 3.7·C; a model file's gradients are now each example's alone (torch.func)."""
    import torch

    from dplab.training.per_example import clipped_grad_sum

    start = _start("BigBatchCentre")
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(64, 5, generator=g) * 3, torch.randint(3, (64,), generator=g)
    z = torch.randn(1, 5, generator=g) * 40
    clip = 0.5
    before = clipped_grad_sum(start.loss, start.params, x, y, clip).grad_sum
    after = clipped_grad_sum(
        start.loss, start.params, torch.cat([x, z]), torch.cat([y, y[:1]]), clip
    )
    moved = torch.sqrt(sum(((after.grad_sum[k] - before[k]) ** 2).sum() for k in before))
    assert float(moved) <= clip * (1 + 1e-5)


@pytest.mark.parametrize("name", ["Fine", "NumpyRead"])
def test_a_network_that_reads_a_value_trains_one_example_at_a_time_but_not_stacked(checked, name):
    """``vmap`` cannot batch a value read (Fine's ``float(x.abs().max())``, NumpyRead's numpy):
    one run takes each example's gradient alone, one after another (autograd's per-example
    gradients; NumpyRead was refused by torch.func's one-example gradient too); runs stepped
    together (an audit's) are refused naming the key, not an internal error."""
    import torch

    from dplab.training.per_example import clipped_grad_sum
    from dplab.training.stacked import clipped_sums

    start = _start(name)
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(3))
    y = torch.tensor([0, 1, 2])
    got = clipped_grad_sum(start.loss, start.params, x, y, None).grad_sum
    for k in start.params:
        each = []
        for i in range(3):
            p = {n: v.clone().requires_grad_() for n, v in start.params.items()}
            logits = torch.func.functional_call(start.model, p, (x[i : i + 1],))
            loss = torch.nn.functional.cross_entropy(logits, y[i : i + 1])
            each.append(torch.autograd.grad(loss, p[k])[0])
        torch.testing.assert_close(got[k], sum(each), rtol=1e-5, atol=1e-6)
    stacked = {k: torch.stack([v, v]) for k, v in start.params.items()}
    with pytest.raises(DPLabError) as err:
        clipped_sums(
            start.loss, stacked, torch.stack([x, x]), torch.stack([y, y]), torch.ones(2, 3), 1.0
        )
    assert err.value.key == "model" and "reads a value" in err.value.message


def test_a_model_file_that_exits_at_import_is_refused(project):
    (project / "models" / "bad.py").write_text("import sys\nsys.exit(0)\n")
    with pytest.raises(DPLabError, match="does not import: SystemExit") as err:
        resolve_run({"method": "sgd", "model": "models/bad.py:Net"})
    assert err.value.key == "model"


def test_tied_weights_get_the_clipped_sum_of_their_summed_gradient(checked):
    """A weight shared by two layers: its per-example gradient is the sum of both layers' parts,
    its norm not the root of their squares; against autograd one example at a time."""
    import torch

    from dplab.training.per_example import clipped_grad_sum

    start = _start("Tied")
    assert sorted(start.params) == ["first.bias", "first.weight", "out.bias", "out.weight"]
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(1)) * 3
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    clip = 0.5
    got = clipped_grad_sum(start.loss, start.params, x, y, clip)
    want = {k: torch.zeros_like(v) for k, v in start.params.items()}
    norms = []
    for i in range(len(x)):
        p = {k: v.clone().requires_grad_() for k, v in start.params.items()}
        logits = torch.func.functional_call(start.model, p, (x[i : i + 1],))
        g = torch.autograd.grad(
            torch.nn.functional.cross_entropy(logits, y[i : i + 1]), list(p.values())
        )
        norm = float(torch.sqrt(sum((t * t).sum() for t in g)))
        norms.append(norm)
        for k, t in zip(p, g):
            want[k] += min(1.0, clip / (norm + 1e-6)) * t
    assert got.norms.tolist() == pytest.approx(norms, rel=1e-5)
    for k in want:
        torch.testing.assert_close(got.grad_sum[k], want[k], rtol=1e-5, atol=1e-6)


def test_evaluation_runs_the_model_in_eval_mode_and_training_resumes_in_train_mode(checked):
    import torch

    from dplab.training.loop import evaluate

    start = _start("TrainingOnly")
    x = torch.randn(50, 5, generator=torch.Generator().manual_seed(2))
    y = torch.full((50,), 2)
    with torch.no_grad():
        logits = start.model(x)  # in train mode: class 0 wins by 100
    start.model.eval()
    with torch.no_grad():
        plain = start.model(x)
    start.model.train()
    assert int((logits.argmax(1) == 0).sum()) == 50
    loss, accuracy = evaluate(start.model, start.params, x, y)
    assert accuracy == int((plain.argmax(1) == 2).sum()) / 50
    assert loss == pytest.approx(float(torch.nn.functional.cross_entropy(plain, y)), rel=1e-6)
    assert start.model.training
