"""Canaries on dead features: coordinates of the first layer that no training record's gradient
touches, so that they see the canary's gradient and the noise, nothing else.

Some input features are 0 in every training record (digits: pixels 0, 32 and 39 of the 8×8
image, in all 1797 images; many more in a small subset).  In the first layer W (logreg: the only
one; MLP: the hidden layer), ∇_W ℓ(θ; x) = δ(θ; x)·xᵀ, so the columns W[:, P] of the dead
features P receive no record's gradient.

Input canary (threat model ``input_canary``, :class:`Canary`): x_c puts s/√|P| on each dead
pixel p ∈ P and 0 elsewhere (‖x_c‖ = ``canary_norm`` s); its replace-one neighbour is the mirror
−x_c, same label.  The observation is the block

    v(θ) = W[:, P]·x̂   (x̂ = x_c/‖x_c‖, one value per output unit of the layer),

on which each step adds −η/b·clip(g_c)|_v (when the slot is sampled) plus N(0, (ησC/b)²) per
coordinate: a mixture-of-Gaussians problem whose mean shift is the canary's clipped gradient,
close to the worst case 2C between the two worlds when s is large enough that most of the
clipped norm falls on W[:, P].

Gradient canaries (threat models ``white_box`` and ``last_iterate``, :class:`GradientCanaries`):
Dirac canaries (Nasr et al. 2023): canary j is a record whose gradient, when the sampler draws
it, is the fixed vector s·e_j (s ≤ C, so clipping leaves it) on its own dead coordinate j, one
entry W[r, p] with p ∈ P.  Coordinates of different canaries never mix: each is a
one-dimensional audit of its canary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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

    def to(self, device: torch.device) -> Canary:
        """The canary with its tensors on ``device``."""
        moved = {k: v.to(device) for k, v in vars(self).items() if isinstance(v, torch.Tensor)}
        return replace(self, **moved)


def dead_features(x: torch.Tensor) -> torch.Tensor:
    """Flat indices of the features that are 0 in every record of ``x`` (N, ...)."""
    return torch.nonzero((x.reshape(len(x), -1) != 0).sum(0) == 0).flatten()


def build(
    x_train: torch.Tensor, norm: float, label: int, params: dict[str, torch.Tensor]
) -> Canary:
    """The canary on the features dead in ``x_train`` (N, ...), for a model whose parameters are
    ``params`` (one run); its first layer must act on the flattened input (logreg, mlp)."""
    pixels = dead_features(x_train)
    if len(pixels) == 0:
        raise DPLabError(
            "dataset",
            "the dead-feature canary needs an input feature that is 0 in every training record;"
            " none is",
        )
    d = x_train[0].numel()
    weight = first_layer(params, d)
    direction = torch.full((len(pixels),), len(pixels) ** -0.5, dtype=x_train.dtype)
    flat = torch.zeros(d, dtype=x_train.dtype)
    flat[pixels] = norm * direction
    x_in = flat.reshape(x_train.shape[1:])
    return Canary(x_in, -x_in, torch.tensor(label, dtype=torch.int64), pixels, direction, weight)


@dataclass(frozen=True)
class GradientCanaries:
    """k Dirac gradient canaries on dead coordinates of the first-layer weight ``weight``: canary
    j moves ``weight.flatten()[coords[j]]`` by its gradient ``norm`` (in) or, out of the dataset,
    by nothing (add_remove) or by −``norm`` (replace_one: its mirror)."""

    weight: str
    coords: torch.Tensor  # (k,) flat indices into the weight
    norm: float
    neighbouring: str

    @property
    def count(self) -> int:
        return len(self.coords)

    def to(self, device: torch.device) -> GradientCanaries:
        """The canaries with their coordinates on ``device``."""
        return replace(self, coords=self.coords.to(device))


def first_layer(params: dict[str, torch.Tensor], features: int) -> str:
    """Name of the weight (rows × ``features``) that acts on the flattened input."""
    weight = next((k for k, p in params.items() if p.dim() == 2 and p.shape[1] == features), None)
    if weight is None:
        raise DPLabError(
            "model",
            "dead-feature canaries need a first layer acting on the flattened input (logreg, mlp)",
        )
    return weight


def gradient_canaries(
    x_real: torch.Tensor,
    params: dict[str, torch.Tensor],
    count: int,
    norm: float,
    neighbouring: str,
) -> GradientCanaries:
    """``count`` gradient canaries on the first-layer entries W[r, p] with p a feature that is 0 in
    every record of ``x_real`` (N, ...), taken row by row."""
    d = x_real[0].numel()
    weight = first_layer(params, d)
    pixels = dead_features(x_real)
    rows = params[weight].shape[0]
    coords = (torch.arange(rows)[:, None] * d + pixels[None, :]).flatten()
    if count > len(coords):
        raise DPLabError(
            "canaries",
            f"must be <= {len(coords)} (first-layer rows × features that are 0 in every "
            f"training record: {rows} × {len(pixels)}); got {count}",
        )
    return GradientCanaries(weight, coords[:count], float(norm), neighbouring)


def block(canary: Canary, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """v = W[:, P]·x̂ of every run: (R, rows) from the stacked first-layer tensor (R, rows, d)."""
    return tensors[canary.weight][:, :, canary.pixels] @ canary.direction.to(
        tensors[canary.weight].dtype
    )
