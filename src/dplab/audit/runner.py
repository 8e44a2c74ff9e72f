"""Many runs of the engine's training loop in lockstep, on the engine's own pieces.

R runs of one resolved run config are stepped together: every run keeps its own
``torch.Generator(seed_r)``, its own sampler (:func:`dplab.training.samplers.build`) and draws
its own noise (:class:`dplab.training.noise.GaussianNoise`) in the same order as
:func:`dplab.training.loop.train` (batch, then noise), so run r is the run ``loop.train`` makes
with seed r.  The clipped sums come from the engine's
:func:`dplab.training.per_example.clipped_grad_sum` (torch.func path), ``torch.func.vmap``-ed over
the runs on parameters stacked along a leading run axis, each run's batch padded to the largest
one with mask 0.  The update (÷ b or ÷ |B|, (1 − λ) shrink) and the projection onto the ball
are those of ``loop.train``, on the stacked tensors.  ``tests/test_audit.py`` checks that a
stacked run ends at the parameters of ``loop.train`` with the same config and seed.

With a :class:`~dplab.audit.canary.Canary`, the runner also scores each run (module
:mod:`dplab.audit.canary` for the observation v = W[:, P]·x̂):

- trajectory: Σ_t log [(1−q)φ(Δ_t) + qφ(Δ_t − μ_in,t)] / [(1−q)φ(Δ_t) + qφ(Δ_t − μ_out,t)],
  Δ_t = v_t − (1−λ)v_{t−1}, μ_·,t = −η/b·(the canary's clipped gradient at θ_{t−1} from
  ``clipped_grad_sum``, restricted to v), φ the density of N(0, (ησC/b)² I): the likelihood
  ratio of the released increments of v, exact for dp_sgd (÷ b, no projection); for ÷ |B| it
  uses b and for projected runs it ignores the projection (still a valid test, less powerful);
- last iterate: ⟨v_T − (1−λ)^T v_0, u⟩ with u the unit vector along
  clip(g_out)|_v − clip(g_in)|_v at θ_T (the drift of the in-world points along −clip(g_in)):
  a function of the released θ_T (and of the data-independent θ_0) only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from dplab.audit.canary import Canary, block
from dplab.errors import DPLabError
from dplab.training import models, samplers
from dplab.training.methods import METHODS
from dplab.training.noise import GaussianNoise
from dplab.training.per_example import clipped_grad_sum


def clipped_sums(loss, params: dict, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, clip: float) -> dict:
    """Σ mask·clip(∇ℓ) of every run r (params[k][r], padded batch x[r], y[r], mask[r]) with the
    engine's :func:`clipped_grad_sum`, vmapped over the runs."""
    one_run = lambda p, x, y, m: clipped_grad_sum(loss, p, x, y, clip, ghost=False, mask=m).grad_sum  # noqa: E731
    return torch.func.vmap(one_run)(params, x, y, mask)


def project_stacked(params: dict[str, torch.Tensor], diameter: float | None) -> None:
    """In place, per run: ``loop.project`` (onto the ball of radius D/2) on stacked parameters."""
    if diameter is None:
        return
    norm = torch.sqrt(sum((p * p).flatten(1).sum(1) for p in params.values()))
    scale = torch.where(norm > diameter / 2.0, (diameter / 2.0) / norm, torch.ones_like(norm))
    for p in params.values():
        p.mul_(scale.view((-1,) + (1,) * (p.dim() - 1)))


@dataclass
class Lockstep:
    """Per recorded step, the canary scores of every run (see the module docstring)."""

    steps: list[int]
    last_iterate: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R,) score
    trajectory: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R,) score
    params: dict[str, torch.Tensor] | None = None  # final stacked parameters (R, ...)


def _canary_grads(loss, params, canary: Canary, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """clip(∇ℓ) of the canary and of its mirror at every run's θ, restricted to v: (R, rows) each."""
    runs = next(iter(params.values())).shape[0]
    one = torch.ones(runs, 1)
    y = canary.label.reshape(1, 1).expand(runs, 1)
    out = []
    for xc in (canary.x_in, canary.x_out):
        g = clipped_sums(loss, params, xc[None, None].expand(runs, 1, *xc.shape), y, one, clip)
        out.append(block(canary, g))
    return out[0], out[1]


def train_many(cfg: dict, x: torch.Tensor, y: torch.Tensor, seeds: list[int], record: list[int], classes: int,
               canary: Canary | None = None, on_step: Callable[[int], None] | None = None) -> Lockstep:
    """Train ``len(seeds)`` runs of the resolved run ``cfg``; run r on data ``x[r], y[r]``
    (shape (R, n, ...), (R, n)) with seed ``seeds[r]``, for max(``record``) steps; ``classes``:
    the number of labels.  With ``canary``, the scores at every step of ``record``;
    ``on_step(step)`` after every step (progress)."""
    method = METHODS[cfg["method"]]
    if not method.private:
        raise DPLabError("method", "the audit needs a private method")
    runs, n = len(seeds), x.shape[1]
    b = n if cfg["sampling"] == "full_batch" else cfg["batch_size"]
    per_run = []
    for seed in seeds:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = models.build(cfg, list(x.shape[2:]), classes)
        per_run.append({k: v.detach().clone() for k, v in model.named_parameters()})
    params = {k: torch.stack([p[k] for p in per_run]) for k in per_run[0]}
    project_stacked(params, cfg["diameter"])
    one = models.example_loss(model, cfg["l2"])
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    sampler_list = [samplers.build(cfg["sampling"], n, b, cfg["reshuffle"]) for _ in seeds]
    noise = GaussianNoise(cfg["noise_multiplier"] * cfg["clip"])
    lam, lr, q = cfg["regularization"] or 0.0, cfg["lr"], b / n
    std = lr * cfg["noise_multiplier"] * cfg["clip"] / b  # noise std on each parameter
    out = Lockstep(sorted(set(record)))
    rows = torch.arange(runs)[:, None]
    traj = torch.zeros(runs, dtype=torch.float64)
    if canary is not None:
        v0 = block(canary, params)
    for step in range(1, max(record) + 1):
        batches = [sampler_list[r].sample(step, gens[r]) for r in range(runs)]
        sizes = torch.tensor([len(idx) for idx in batches])
        width = max(int(sizes.max()), 1)
        index = torch.zeros(runs, width, dtype=torch.long)
        mask = torch.arange(width)[None, :] < sizes[:, None]
        for r, idx in enumerate(batches):
            index[r, : len(idx)] = idx
        dtype = next(iter(params.values())).dtype
        grads = clipped_sums(one, params, x[rows, index], y[rows, index], mask.to(dtype), cfg["clip"])
        if canary is not None:
            g_in, g_out = _canary_grads(one, params, canary, cfg["clip"])
            v_before = block(canary, params)
        draws = [noise.sample(step, {k: p[r] for k, p in params.items()}, gens[r]) for r in range(runs)]
        denom = torch.full((runs,), float(b)) if cfg["normalize"] == "expected" else sizes.clamp(min=1).to(dtype)
        for k, p in params.items():
            z = torch.stack([d[k] for d in draws])
            direction = grads[k] / denom.view((-1,) + (1,) * (p.dim() - 1)) + z / b
            if lam:
                p.mul_(1.0 - lam)
            p.sub_(lr * direction)
        project_stacked(params, cfg["diameter"])
        if not all(bool(torch.isfinite(p).all()) for p in params.values()):
            raise DPLabError("lr", f"the parameters became NaN/inf at step {step}; lower lr (or clip)")
        if on_step is not None:
            on_step(step)
        if canary is None:
            continue
        delta = (block(canary, params) - (1.0 - lam) * v_before).double()
        a = []
        for g in (g_in, g_out):
            mu = -lr * g.double() / b
            a.append(((delta * mu).sum(1) - (mu * mu).sum(1) / 2) / std**2)
        if q >= 1.0:
            traj += a[0] - a[1]
        else:
            mix = lambda t: torch.logaddexp(torch.full_like(t, math.log1p(-q)), math.log(q) + t)  # noqa: E731
            traj += mix(a[0]) - mix(a[1])
        if step in out.steps:
            g_in, g_out = _canary_grads(one, params, canary, cfg["clip"])
            u = (g_out - g_in).double()
            u = u / u.norm(dim=1, keepdim=True).clamp(min=1e-30)
            v = (block(canary, params) - (1.0 - lam) ** step * v0).double()
            out.last_iterate[step] = (v * u).sum(1)
            out.trajectory[step] = traj.clone()
    out.params = params
    return out
