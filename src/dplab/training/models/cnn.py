"""Model ``cnn``: a small CNN for (channels, H ≥ 4, W ≥ 4) images, two 3×3 convolutions
(``channels`` and twice as many), torch's default initialisation."""

from __future__ import annotations

from dplab.errors import DPLabError
from dplab.training.models.base import Model


def _check(input_shape: list[int]) -> None:
    if len(input_shape) != 3 or min(input_shape[1:]) < 4:
        raise DPLabError(
            "model",
            f"cnn needs image inputs (channels, H>=4, W>=4); the data has shape {input_shape}",
        )


def build(run, input_shape: list[int], classes: int):
    from torch import nn

    _check(input_shape)
    c = run.channels
    return nn.Sequential(
        nn.Conv2d(input_shape[0], c, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c, 2 * c, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * c, classes),
    )


def parameters(run, input_shape: list[int], classes: int) -> int:
    """The two 3×3 convolutions' and the Linear layer's weights and biases."""
    _check(input_shape)
    c = run.channels
    return (9 * input_shape[0] + 1) * c + (9 * c + 1) * 2 * c + (8 * c + 1) * classes


MODEL = Model(
    name="cnn",
    display="CNN",
    source="dplab",
    network="two 3×3 Conv2d (``channels``, 2·``channels``), ReLU, pooling, Linear",
    build=build,
    parameters=parameters,
)
