"""Model ``mlp``: the 2-layer ReLU MLP of 004 §3.2 (``hidden`` units; 004: 128), torch's default
initialisation."""

from __future__ import annotations

import math

from dplab.training.models.base import Model


def build(run, input_shape: list[int], classes: int):
    from torch import nn

    d = int(math.prod(input_shape))
    return nn.Sequential(
        nn.Flatten(), nn.Linear(d, run.hidden), nn.ReLU(), nn.Linear(run.hidden, classes)
    )


def parameters(run, input_shape: list[int], classes: int) -> int:
    """The two Linear layers' weights and biases."""
    return (math.prod(input_shape) + 1) * run.hidden + (run.hidden + 1) * classes


MODEL = Model(
    name="mlp",
    display="MLP",
    source="004 §3.2",
    network="Flatten, Linear(d, hidden), ReLU, Linear(hidden, classes) (004 §3.2)",
    build=build,
    parameters=parameters,
)
