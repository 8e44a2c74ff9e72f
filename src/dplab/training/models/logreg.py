"""Model ``logreg``: multinomial logistic regression, started at θ = 0 (001 eq. 16's W̃₀ = 0; the
loss is convex, so nothing is lost)."""

import math

from torch import nn

from dplab.training.models.base import Model


def build(run, input_shape: list[int], classes: int) -> nn.Module:
    model = nn.Sequential(nn.Flatten(), nn.Linear(int(math.prod(input_shape)), classes))
    nn.init.zeros_(model[1].weight)
    nn.init.zeros_(model[1].bias)
    return model


MODEL = Model(
    name="logreg",
    display="logistic regression",
    source="001 eq. 16",
    network="Flatten, Linear; θ₀ = 0 (001 eq. 16)",
    build=build,
)
