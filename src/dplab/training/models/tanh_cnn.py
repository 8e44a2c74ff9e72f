"""Model ``tanh_cnn``: the end-to-end tanh CNN of Tramèr & Boneh ("Differentially Private Learning
Needs Better Features (or Much More Data)", ICLR 2021: their MNIST and Fashion-MNIST network,
after Papernot et al.'s tempered-sigmoid network, 26 010 parameters on 28×28 inputs)."""

from __future__ import annotations

from dplab.errors import DPLabError
from dplab.training.models.base import Model


def _check(input_shape: list[int]) -> None:
    if input_shape[1:] != [28, 28]:
        raise DPLabError(
            "model",
            f"tanh_cnn is Tramèr & Boneh's network for 28×28 images; "
            f"the data has shape {input_shape}",
        )


def build(run, input_shape: list[int], classes: int):
    from torch import nn

    _check(input_shape)
    # conv 8×8 stride 2 pad 2 (28 → 13), max-pool 2 stride 1 (→ 12), conv 4×4 stride 2 (→ 5),
    # pool (→ 4)
    return nn.Sequential(
        nn.Conv2d(input_shape[0], 16, 8, stride=2, padding=2),
        nn.Tanh(),
        nn.MaxPool2d(2, stride=1),
        nn.Conv2d(16, 32, 4, stride=2),
        nn.Tanh(),
        nn.MaxPool2d(2, stride=1),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 32),
        nn.Tanh(),
        nn.Linear(32, classes),
    )


def parameters(run, input_shape: list[int], classes: int) -> int:
    """The 8×8 and 4×4 convolutions' (16 and 32 channels) and the two Linear layers' weights
    and biases."""
    _check(input_shape)
    return (64 * input_shape[0] + 1) * 16 + (16 * 16 + 1) * 32 + (512 + 1) * 32 + (32 + 1) * classes


MODEL = Model(
    name="tanh_cnn",
    display="tanh CNN (Tramèr & Boneh)",
    source="Tramèr & Boneh 2021",
    network=(
        "Tramèr & Boneh (ICLR 2021): Conv2d 8×8/2, tanh, pool, Conv2d 4×4/2, tanh, pool, 2 Linear"
    ),
    build=build,
    parameters=parameters,
)
