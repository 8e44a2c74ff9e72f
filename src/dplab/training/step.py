"""One DP update, the same for every run of the one step loop (:func:`dplab.training.loop.steps`:
one run, or R runs in lockstep with parameters stacked along a leading run axis,
:class:`dplab.training.stacked.StackedRuns`) and ``benchmarks/dp_step.py``:

    w ← Π( (1 − λ)·w − η·( g / m + Z / b ) )

g the clipped sum of the batch's per-example gradients
(:func:`dplab.training.per_example.clipped_grad_sum`), Z the noise draw (i.i.d. or
dp_mf's correlated one, :mod:`dplab.training.noise`), m the normalizer
(:func:`denominator`), λ the ``regularization`` (001 eq. 17), Π the projection onto the
centred ball of diameter D (001 eq. 1; the identity without one).  The module docstring
of :mod:`dplab.training.loop` states the conventions.

With another optimizer than plain SGD (:class:`~dplab.training.optimizers.OptimizerOptions`),
the same privatized gradient ĝ = g/m + Z/b is what the optimizer reads (torch.optim's
arithmetic: Polyak's heavy ball as ``torch.optim.SGD(momentum=μ)``; Kingma & Ba, "Adam: A Method
for Stochastic Optimization", ICLR 2015, Alg. 1; Loshchilov & Hutter, "Decoupled Weight Decay
Regularization", ICLR 2019, Alg. 2), its state (moments) kept per parameter in ``state``:

    w ← Π( opt((1 − λ)·w, ĝ) )
"""

from __future__ import annotations

import math

import torch

from dplab.training.optimizers import SGD, OptimizerOptions


def denominator(normalize: str, b: int, size):
    """m of the update: b for ``normalize: expected``; else the realized batch size |B| (at least
    1: an empty batch has no gradient term), an int, or per run a tensor of sizes."""
    if normalize == "expected":
        return b
    return size.clamp(min=1) if isinstance(size, torch.Tensor) else max(size, 1)


def update(
    params: dict[str, torch.Tensor],
    grad_sum: dict[str, torch.Tensor],
    noise: dict[str, torch.Tensor] | None,
    *,
    lr: float,
    denom,
    b: int,
    regularization: float,
) -> None:
    """In place, without parameter-sized temporaries: w ← (1 − λ)·w − η·g/m − η·Z/b (no Π).

    ``denom``: m as a number, or (stacked parameters) a tensor of one m per run.  With one m,
    each term is one ``torch._foreach_*`` call over all parameters (the same per-tensor
    arithmetic, in fewer calls)."""
    if not isinstance(denom, torch.Tensor):
        tensors = list(params.values())
        if regularization:
            torch._foreach_mul_(tensors, 1.0 - regularization)
        _add_all(tensors, [grad_sum[k] for k in params], -lr / denom)
        if noise is not None:
            _add_all(tensors, [noise[k] for k in params], -lr / b)
        return
    for k, p in params.items():
        if regularization:
            p.mul_(1.0 - regularization)
        for r, m in enumerate(denom.tolist()):  # one m per run: the arithmetic of one run
            _add_scaled(p[r], grad_sum[k][r], -lr / m)
        if noise is not None:
            _add_scaled(p, noise[k], -lr / b)


def _add_all(tensors: list[torch.Tensor], terms: list[torch.Tensor], alpha: float) -> None:
    """:func:`_add_scaled` of each pair: one ``_foreach_add_`` where ``alpha`` fits every dtype."""
    if all(abs(alpha) <= torch.finfo(p.dtype).max for p in tensors):
        torch._foreach_add_(tensors, terms, alpha=alpha)
    else:
        for p, t in zip(tensors, terms):
            _add_scaled(p, t, alpha)


def _add_scaled(p: torch.Tensor, t: torch.Tensor, alpha: float) -> None:
    """p += alpha·t in place.  An ``alpha`` beyond p's dtype (lr = 1e250 in float32), which
    ``add_`` refuses with a RuntimeError, makes p inf/NaN instead: the divergence the loops'
    NaN/inf guard reports with its step."""
    if abs(alpha) <= torch.finfo(p.dtype).max:
        p.add_(t, alpha=alpha)
    else:
        p.add_(t.double().mul(alpha).to(p.dtype))


def project(
    params: dict[str, torch.Tensor], diameter: float | None, stacked: bool = False
) -> torch.Tensor | None:
    """In place: Euclidean projection of the whole parameter vector (``stacked``: of each run's,
    along the leading axis) onto the ball of radius D/2; returns where the norm exceeded D/2 (a
    tensor, read without a host sync only when the caller asks), ``None`` without a diameter."""
    if diameter is None:
        return None
    start = 1 if stacked else 0
    norm = torch.sqrt(sum((p * p).flatten(start).sum(-1) for p in params.values()))
    scale = (diameter / 2.0 / norm).clamp(
        max=1.0
    )  # 1 inside the ball (x·1 = x exactly); no host sync
    for p in params.values():
        p.mul_(scale.view(scale.shape + (1,) * (p.dim() - scale.dim())))
    return norm > diameter / 2.0


def optimize(
    params: dict[str, torch.Tensor],
    grad_sum: dict[str, torch.Tensor],
    noise: dict[str, torch.Tensor] | None,
    *,
    lr: float,
    denom,
    b: int,
    regularization: float,
    optimizer: OptimizerOptions,
    state: dict,
    step: int,
) -> None:
    """In place: w ← opt((1 − λ)·w, ĝ) with ĝ = g/m + Z/b (module docstring), at step t = ``step``
    (Adam's bias correction); ``state``: parameter name -> its moments, filled on first use."""
    o = optimizer
    for k, p in params.items():
        if regularization:
            p.mul_(1.0 - regularization)
        grad = _privatized(grad_sum[k], None if noise is None else noise[k], denom, b)
        if o.weight_decay and o.name != "adamw":  # coupled: the decay is part of the gradient
            _add_scaled(grad, p, o.weight_decay)  # grad is a new tensor (:func:`_privatized`)
        if o.weight_decay and o.name == "adamw":
            p.mul_(1.0 - lr * o.weight_decay)  # decoupled (Loshchilov & Hutter, Alg. 2 line 12)
        moments = state.setdefault(k, {})
        if o.name == SGD:
            _add_scaled(p, grad, -lr)
        elif o.name == "momentum":
            if "momentum_buffer" in moments:
                grad = moments["momentum_buffer"].mul_(o.momentum).add_(grad)
            moments["momentum_buffer"] = grad
            _add_scaled(p, grad, -lr)
        else:
            (beta1, beta2), first = o.betas, moments.get("exp_avg")
            second = moments.get("exp_avg_sq")
            if first is None:
                first = moments["exp_avg"] = torch.zeros_like(p)
                second = moments["exp_avg_sq"] = torch.zeros_like(p)
            first.lerp_(grad, 1.0 - beta1)
            second.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            scale = (second.sqrt() / math.sqrt(1.0 - beta2**step)).add_(o.eps)
            value = -lr / (1.0 - beta1**step)
            if abs(value) <= torch.finfo(p.dtype).max:
                p.addcdiv_(first, scale, value=value)
            else:  # addcdiv_ refuses it, as add_ does: inf/NaN, reported as divergence
                _add_scaled(p, first / scale, value)


def _privatized(grad_sum: torch.Tensor, noise: torch.Tensor | None, denom, b: int) -> torch.Tensor:
    """ĝ = g/m + Z/b (``denom`` a tensor: one m per run along the leading axis)."""
    if isinstance(denom, torch.Tensor):
        denom = denom.to(grad_sum.dtype).view(-1, *([1] * (grad_sum.dim() - 1)))
    grad = grad_sum / denom
    return grad if noise is None else grad.add_(noise, alpha=1.0 / b)


def apply(
    params: dict[str, torch.Tensor],
    grad_sum: dict[str, torch.Tensor],
    noise: dict[str, torch.Tensor] | None,
    *,
    lr: float,
    denom,
    b: int,
    regularization: float = 0.0,
    diameter: float | None = None,
    stacked: bool = False,
    optimizer: OptimizerOptions | None = None,
    state: dict | None = None,
    step: int = 1,
) -> torch.Tensor | None:
    """The step after the clipped sum at η = ``lr`` (the schedule's η_t): :func:`update` (plain
    SGD) or :func:`optimize` (``optimizer`` with its ``state``, at step ``step``), then
    :func:`project` (``stacked``: per run); returns where the projection moved the parameters
    (``None`` without a diameter)."""
    if optimizer is None or optimizer.plain:
        update(params, grad_sum, noise, lr=lr, denom=denom, b=b, regularization=regularization)
    else:
        optimize(
            params,
            grad_sum,
            noise,
            lr=lr,
            denom=denom,
            b=b,
            regularization=regularization,
            optimizer=optimizer,
            state=state,
            step=step,
        )
    return project(params, diameter, stacked=stacked)
