"""Models (docs/training.md): logistic regression, the 2-layer MLP of 004 §3.2, a small CNN, and
the end-to-end tanh CNN of Tramèr & Boneh ("Differentially Private Learning Needs Better Features
(or Much More Data)", ICLR 2021: their MNIST and Fashion-MNIST network, after Papernot et
al.'s tempered-sigmoid network, 26 010 parameters on 28×28 inputs).

No batch-dependent layers (no batch norm), so per-example gradients are well defined.
Logistic regression starts at θ = 0 (001 eq. 16's W̃₀ = 0; the loss is convex, so nothing is
lost); the MLP and the CNN use torch's default initialisation drawn from the run's seed.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from dplab.errors import DPLabError
from dplab.training.settings import RunSettings


def build(run: RunSettings, input_shape: list[int], classes: int) -> nn.Module:
    """The model of run ``run`` (its ``model``, ``hidden``, ``channels``) for inputs of ``input_shape`` (without batch dimension)."""
    d = int(math.prod(input_shape))
    kind = run.model
    if kind == "logreg":
        model = nn.Sequential(nn.Flatten(), nn.Linear(d, classes))
        nn.init.zeros_(model[1].weight)
        nn.init.zeros_(model[1].bias)
        return model
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(d, run.hidden), nn.ReLU(), nn.Linear(run.hidden, classes))
    if kind == "cnn":
        if len(input_shape) != 3 or min(input_shape[1:]) < 4:
            raise DPLabError("model", f"cnn needs image inputs (channels, H>=4, W>=4); the data has shape {input_shape}")
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
    if kind == "tanh_cnn":
        if input_shape[1:] != [28, 28]:
            raise DPLabError("model", f"tanh_cnn is Tramèr & Boneh's network for 28×28 images; the data has shape {input_shape}")
        # conv 8×8 stride 2 pad 2 (28 → 13), max-pool 2 stride 1 (→ 12), conv 4×4 stride 2 (→ 5), pool (→ 4)
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
    raise DPLabError("model", f"must be logreg, mlp, cnn or tanh_cnn; got {kind!r}")


def example_loss(model: nn.Module, l2: float):
    """ℓ(θ; x, y) for ONE example: cross-entropy + (l2/2)·||θ||² (the penalty is part of every
    example's loss, so its gradient is clipped with the rest).  ``loss.model`` and ``loss.l2``
    let :func:`dplab.training.per_example.clipped_grad_sum` take its ghost-clipping path."""

    def loss(params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = torch.func.functional_call(model, params, (x.unsqueeze(0),))
        value = nn.functional.cross_entropy(logits, y.unsqueeze(0))
        if l2:
            value = value + 0.5 * l2 * sum((p * p).sum() for p in params.values())
        return value

    loss.model, loss.l2 = model, l2
    return loss
