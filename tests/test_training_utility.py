"""Utility on the default data (digits test split, δ = 1e-5).  One seed each;
hyper-parameters tuned by a small sweep (docs/training.md)."""

import pytest

from dplab.training import data, loop
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    out = tmp_path_factory.mktemp("digits")
    data.write(out, *data.prepare(data.resolve_dataset({"kind": "digits"}, "digits"), "digits"))
    return data.load(out)


@pytest.mark.slow
@pytest.mark.parametrize(
    "run,floor",
    [
        ({"method": "sgd", "steps": 300, "batch_size": 64, "lr": 0.5}, 0.93),
        (
            {"method": "dp_sgd", "target_epsilon": 8.0, "steps": 300, "batch_size": 128, "lr": 2.0},
            0.92,
        ),
        (
            {"method": "dp_sgd", "target_epsilon": 1.0, "steps": 200, "batch_size": 128, "lr": 1.0},
            0.85,
        ),
        (
            {
                "method": "dp_sgd",
                "model": "mlp",
                "target_epsilon": 1.0,
                "steps": 200,
                "batch_size": 128,
                "lr": 0.5,
            },
            0.80,
        ),
    ],
)
def test_accuracy_floor(run, floor, digits, tmp_path):
    extra = {"accountants": ["rdp"]} if run["method"] != "sgd" else {}
    cfg = resolve_run({"log_every": 1000, "checkpoint_every": 0, "device": "cpu", **extra, **run})
    summary = loop.train(RunSettings.of(cfg), digits, tmp_path).as_dict()
    assert summary["final"]["test_accuracy"] >= floor
    if "target_epsilon" in run:
        assert summary["epsilon"]["rdp"] <= run["target_epsilon"]
