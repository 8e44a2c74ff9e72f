"""Model ``logreg``: multinomial logistic regression, started at θ = 0 (001 eq. 16's W̃₀ = 0; the
loss is convex, so nothing is lost)."""

from __future__ import annotations

import math

from dplab.training.models.base import Model


def build(run, input_shape: list[int], classes: int):
    from torch import nn

    model = nn.Sequential(nn.Flatten(), nn.Linear(int(math.prod(input_shape)), classes))
    nn.init.zeros_(model[1].weight)
    nn.init.zeros_(model[1].bias)
    return model


def parameters(run, input_shape: list[int], classes: int) -> int:
    """W (classes × d) and c (classes)."""
    return (math.prod(input_shape) + 1) * classes


MODEL = Model(
    name="logreg",
    display="logistic regression",
    source="001 eq. 16",
    network="Flatten, Linear; θ₀ = 0 (001 eq. 16)",
    build=build,
    parameters=parameters,
)
