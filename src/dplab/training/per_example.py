"""Per-example gradients and clipping: the one boundary a faster method (ghost clipping) replaces.

:func:`clipped_grad_sum` returns Σ_i clip_C(∇ℓ(θ; x_i)) and the per-example norms
||∇ℓ(θ; x_i)||, computed with ``torch.func`` (``grad`` of the one-example loss, ``vmap`` over the
batch).  Clipping factor: min(1, C / (||g_i|| + 1e-6)), Opacus's formula, so a clipped gradient's
norm never exceeds C.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch.func import grad_and_value, vmap

#: added to the norm in the clipping factor (Opacus 1.6 uses the same constant)
CLIP_EPS = 1e-6


@dataclass
class ClippedGrads:
    grad_sum: dict[str, torch.Tensor]  # Σ clip(g_i), one tensor per parameter
    norms: torch.Tensor  # (B,) unclipped per-example gradient norms
    loss_sum: torch.Tensor  # Σ ℓ(θ; x_i) over the batch (a scalar)


def clipped_grad_sum(
    loss: Callable, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, clip: float | None
) -> ClippedGrads:
    """Σ_i clip(∇ℓ(θ; x_i)) over the batch (``clip=None``: no clipping).  An empty batch gives zeros."""
    if len(x) == 0:
        zeros = {k: torch.zeros_like(p) for k, p in params.items()}
        empty = torch.zeros(0, device=x.device)
        return ClippedGrads(zeros, empty, torch.zeros((), device=x.device))
    grads, losses = vmap(grad_and_value(loss), in_dims=(None, 0, 0))(params, x, y)
    flat = torch.cat([g.reshape(len(x), -1) for g in grads.values()], dim=1)
    norms = flat.norm(dim=1)
    if clip is None:
        factor = torch.ones_like(norms)
    else:
        factor = (clip / (norms + CLIP_EPS)).clamp(max=1.0)
    summed = {k: torch.einsum("b,b...->...", factor, g) for k, g in grads.items()}
    return ClippedGrads(summed, norms, losses.sum())
