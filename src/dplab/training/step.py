"""One DP update, the same for every run of the one step loop (:func:`dplab.training.loop.steps`:
one run, or R runs in lockstep with parameters stacked along a leading run axis,
:class:`dplab.training.stacked.StackedRuns`) and ``benchmarks/dp_step.py``:

    w ← Π( (1 − λ)·w − η·( g / m + Z / b ) )

g the clipped sum of the batch's per-example gradients (:func:`dplab.training.per_example.clipped_grad_sum`),
Z the noise draw (i.i.d. or dp_mf's correlated one, :mod:`dplab.training.noise`), m the
normalizer (:func:`denominator`), λ the ``regularization`` (001 eq. 17), Π the projection onto
the centred ball of diameter D (001 eq. 1; the identity without one).  The module docstring of
:mod:`dplab.training.loop` states the conventions.
"""

from __future__ import annotations

import torch


def denominator(normalize: str, b: int, size):
    """m of the update: b for ``normalize: expected``; else the realized batch size |B| (at least
    1: an empty batch has no gradient term), an int, or per run a tensor of sizes."""
    if normalize == "expected":
        return b
    return size.clamp(min=1) if isinstance(size, torch.Tensor) else max(size, 1)


def update(params: dict[str, torch.Tensor], grad_sum: dict[str, torch.Tensor], noise: dict[str, torch.Tensor] | None,
           *, lr: float, denom, b: int, regularization: float) -> None:
    """In place, without parameter-sized temporaries: w ← (1 − λ)·w − η·g/m − η·Z/b (no Π).

    ``denom``: m as a number, or (stacked parameters) a tensor of one m per run."""
    for k, p in params.items():
        if regularization:
            p.mul_(1.0 - regularization)
        if isinstance(denom, torch.Tensor):  # one m per run: each run's slice, the arithmetic of one run
            for r, m in enumerate(denom.tolist()):
                _add_scaled(p[r], grad_sum[k][r], -lr / m)
        else:
            _add_scaled(p, grad_sum[k], -lr / denom)
        if noise is not None:
            _add_scaled(p, noise[k], -lr / b)


def _add_scaled(p: torch.Tensor, t: torch.Tensor, alpha: float) -> None:
    """p += alpha·t in place.  An ``alpha`` beyond p's dtype (lr = 1e250 in float32), which
    ``add_`` refuses with a RuntimeError, makes p inf/NaN instead: the divergence the loops'
    NaN/inf guard reports with its step."""
    if abs(alpha) <= torch.finfo(p.dtype).max:
        p.add_(t, alpha=alpha)
    else:
        p.add_(t.double().mul(alpha).to(p.dtype))


def project(params: dict[str, torch.Tensor], diameter: float | None, stacked: bool = False) -> torch.Tensor | None:
    """In place: Euclidean projection of the whole parameter vector (``stacked``: of each run's,
    along the leading axis) onto the ball of radius D/2; returns where the norm exceeded D/2 (a
    tensor, read without a host sync only when the caller asks), ``None`` without a diameter."""
    if diameter is None:
        return None
    start = 1 if stacked else 0
    norm = torch.sqrt(sum((p * p).flatten(start).sum(-1) for p in params.values()))
    scale = (diameter / 2.0 / norm).clamp(max=1.0)  # 1 inside the ball (x·1 = x exactly); no host sync
    for p in params.values():
        p.mul_(scale.view(scale.shape + (1,) * (p.dim() - scale.dim())))
    return norm > diameter / 2.0


def apply(params: dict[str, torch.Tensor], grad_sum: dict[str, torch.Tensor], noise: dict[str, torch.Tensor] | None,
          *, lr: float, denom, b: int, regularization: float = 0.0, diameter: float | None = None,
          stacked: bool = False) -> torch.Tensor | None:
    """The step after the clipped sum: :func:`update`, then :func:`project` (``stacked``: per run);
    returns where the projection moved the parameters (``None`` without a diameter)."""
    update(params, grad_sum, noise, lr=lr, denom=denom, b=b, regularization=regularization)
    return project(params, diameter, stacked=stacked)

