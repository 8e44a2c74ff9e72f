"""The dead-feature canary: an input that only it uses, so that the weights attached to it see
no gradient but the canary's.

Some input features are 0 in every training record (digits: pixels 0, 32 and 39 of the 8×8
image, in all 1797 images).  The canary x_c puts s/√|P| on each such pixel p ∈ P and 0 elsewhere
(‖x_c‖ = ``canary_norm`` s); its replace-one neighbour is the mirror −x_c, same label.  In the
first layer W (logreg: the only one; MLP: the hidden layer), ∇_W ℓ(θ; x) = δ(θ; x)·xᵀ, so the
columns W[:, P] receive the canary's clipped gradient and the noise, nothing else.  The
observation is the block

    v(θ) = W[:, P]·x̂   (x̂ = x_c/‖x_c‖, one value per output unit of the layer),

on which each step adds −η/b·clip(g_c)|_v (when the slot is sampled) plus N(0, (ησC/b)²) per
coordinate: a mixture-of-Gaussians problem whose mean shift is the canary's clipped gradient,
close to the worst case 2C between the two worlds when s is large enough that most of the
clipped norm falls on W[:, P].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dplab.errors import DPLabError


@dataclass(frozen=True)
class Canary:
    x_in: torch.Tensor  # the canary input (one record, the data's input shape)
    x_out: torch.Tensor  # its mirror −x_c
    label: torch.Tensor  # shared label (0-d int64)
    pixels: torch.Tensor  # P: flat indices of the dead features
    direction: torch.Tensor  # x̂ restricted to P (|P|,)
    weight: str  # name of the first layer's weight (rows × input features)


def dead_features(x: torch.Tensor) -> torch.Tensor:
    """Flat indices of the features that are 0 in every record of ``x`` (N, ...)."""
    return torch.nonzero((x.reshape(len(x), -1) != 0).sum(0) == 0).flatten()


def build(x_train: torch.Tensor, norm: float, label: int, params: dict[str, torch.Tensor]) -> Canary:
    """The canary on the features dead in ``x_train`` (N, ...), for a model whose parameters are
    ``params`` (one run); its first layer must act on the flattened input (logreg, mlp)."""
    pixels = dead_features(x_train)
    if len(pixels) == 0:
        raise DPLabError("dataset", "the dead-feature canary needs an input feature that is 0 in every training record; none is")
    d = x_train[0].numel()
    weight = next((k for k, p in params.items() if p.dim() == 2 and p.shape[1] == d), None)
    if weight is None:
        raise DPLabError("model", "the dead-feature canary needs a first layer acting on the flattened input (logreg, mlp)")
    direction = torch.full((len(pixels),), len(pixels) ** -0.5, dtype=x_train.dtype)
    flat = torch.zeros(d, dtype=x_train.dtype)
    flat[pixels] = norm * direction
    x_in = flat.reshape(x_train.shape[1:])
    return Canary(x_in, -x_in, torch.tensor(label, dtype=torch.int64), pixels, direction, weight)


def block(canary: Canary, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """v = W[:, P]·x̂ of every run: (R, rows) from the stacked first-layer tensor (R, rows, d)."""
    return tensors[canary.weight][:, :, canary.pixels] @ canary.direction.to(tensors[canary.weight].dtype)
