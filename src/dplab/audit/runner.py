"""Many runs of the engine's training loop in lockstep, on the engine's own pieces.

R runs of one resolved run config are stepped together: every run starts as
:func:`dplab.training.loop.train` does (:func:`dplab.training.start.initial` with its seed), keeps its own
``torch.Generator(seed_r)``, its own sampler (the method's, :meth:`dplab.training.methods.base.Method.sampler`) and draws
its own noise (:class:`dplab.training.noise.GaussianNoise`) in the same order as
:func:`dplab.training.loop.train` (batch, then noise), so run r is the run ``loop.train`` makes
with seed r.  The clipped sums come from the engine's
:func:`dplab.training.per_example.clipped_grad_sum` (torch.func path), ``torch.func.vmap``-ed over
the runs on parameters stacked along a leading run axis, each run's batch padded to the largest
one with mask 0.  The update (÷ b or ÷ |B|, (1 − λ) shrink) and the projection onto the ball
are :mod:`dplab.training.step`'s, the functions ``loop.train`` calls, on the stacked tensors.  ``tests/test_audit.py`` checks that a
stacked run ends at the parameters of ``loop.train`` with the same config and seed.

Canaries (module :mod:`dplab.audit.canary`); every score is oriented "higher ⇒ in" and comes per
run and canary, shape (R, k):

- input canary (:class:`~dplab.audit.canary.Canary`, k = 1, in the data's last slot), on the
  block v = W[:, P]·x̂:
  trajectory: Σ_t log [(1−q)φ(Δ_t) + qφ(Δ_t − μ_in,t)] / [(1−q)φ(Δ_t) + qφ(Δ_t − μ_out,t)],
  Δ_t = v_t − (1−λ)v_{t−1}, μ_·,t = −η/b·(the canary's clipped gradient at θ_{t−1} from
  ``clipped_grad_sum``, restricted to v), φ the density of N(0, (ησC/b)² I): the likelihood
  ratio of the released increments of v, exact for dp_sgd (÷ b, no projection); for ÷ |B| it
  uses b and for projected runs it ignores the projection (still a valid test, less powerful);
  last iterate: ⟨v_T − (1−λ)^T v_0, u⟩ with u the unit vector along
  clip(g_out)|_v − clip(g_in)|_v at θ_T (the drift of the in-world points along −clip(g_in)):
  a function of the released θ_T (and of the data-independent θ_0) only.
- gradient canaries (:class:`~dplab.audit.canary.GradientCanaries`, slots n_real … n_real+k−1
  after the real records): when drawn by the run's sampler, canary j adds clip(s_j·e_j + l2·θ)
  to the clipped sum (s_j = ±norm, or nothing when absent; with l2 = 0 just s_j·e_j), and
  never enters the per-example gradient.  Trajectory score: the same mixture likelihood ratio
  per coordinate with μ_in = −η·norm/b and μ_out = 0 (absent) or +η·norm/b (mirror), the
  optimal test of every released increment of that coordinate (Neyman–Pearson) for dp_sgd.
  Last-iterate score: −(v_T − c^T v_0), c = (1−λ)(1 − η·l2): the in-world pushes v along −e_j by
  non-negative amounts, so the likelihood ratio of v_T is increasing in this score, and a
  threshold on it is the optimal last-iterate test of that coordinate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from dplab.audit.canary import Canary, GradientCanaries, block
from dplab.errors import Diverged, DPLabError
from dplab.training.settings import RunSettings
from dplab.training.start import initial
from dplab.training.methods import METHODS
from dplab.training.noise import GaussianNoise
from dplab.training.per_example import clipped_grad_sum
from dplab.training.step import denominator, project, update


def clipped_sums(loss, params: dict, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, clip: float) -> dict:
    """Σ mask·clip(∇ℓ) of every run r (params[k][r], padded batch x[r], y[r], mask[r]) with the
    engine's :func:`clipped_grad_sum`, vmapped over the runs."""
    one_run = lambda p, x, y, m: clipped_grad_sum(loss, p, x, y, clip, ghost=False, mask=m).grad_sum  # noqa: E731
    return torch.func.vmap(one_run)(params, x, y, mask)


def project_stacked(params: dict[str, torch.Tensor], diameter: float | None) -> int:
    """In place, per run: :func:`dplab.training.step.project` on stacked parameters; returns how
    many runs it moved."""
    moved = project(params, diameter, stacked=True)
    return 0 if moved is None else int(moved.sum())


@dataclass
class Lockstep:
    """Per recorded step, the canary scores of every run (see the module docstring)."""

    steps: list[int]
    last_iterate: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R, k) score
    trajectory: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R, k) score
    params: dict[str, torch.Tensor] | None = None  # final stacked parameters (R, ...)
    projections: int = 0  # (run, step) pairs where the projection moved the parameters


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


def increment_llr(delta: torch.Tensor, mu_in: torch.Tensor, mu_out: torch.Tensor, std: float, q: float) -> torch.Tensor:
    """log [(1−q)φ(Δ) + qφ(Δ − μ_in)] / [(1−q)φ(Δ) + qφ(Δ − μ_out)] of one released increment Δ
    (…, rows), φ the density of N(0, std² I) over the last axis (q = 1: no mixture)."""
    a = [((delta * mu).sum(-1) - (mu * mu).sum(-1) / 2) / std**2 for mu in (mu_in, mu_out)]
    if q >= 1.0:
        return a[0] - a[1]
    mix = lambda t: torch.logaddexp(torch.full_like(t, math.log1p(-q)), math.log(q) + t)  # noqa: E731
    return mix(a[0]) - mix(a[1])


def add_canary_gradients(grads: dict, params: dict, canaries: GradientCanaries, signs: torch.Tensor, clip: float,
                         l2: float) -> None:
    """In place: each canary with sign s ≠ 0 (``signs`` (R, k) ∈ {−1, 0, 1}: drawn and present)
    adds its clipped gradient clip(s·norm·e_j + l2·θ) to the clipped sums ``grads``."""
    w = grads[canaries.weight].view(len(signs), -1)
    step = signs * canaries.norm
    if l2:
        sq = sum((p * p).flatten(1).sum(1) for p in params.values())
        v = params[canaries.weight].flatten(1)[:, canaries.coords]
        norm = torch.sqrt(l2 * l2 * sq[:, None] + 2 * l2 * step * v + step * step)
        scale = torch.where(signs != 0, torch.clamp(clip / norm, max=1.0), torch.zeros_like(norm))
        shrink = l2 * scale.sum(1)
        for k, p in params.items():
            grads[k] += shrink.view((-1,) + (1,) * (p.dim() - 1)) * p
        step = step * scale
    w[:, canaries.coords] += step.to(w.dtype)


def train_many(run: RunSettings, x: torch.Tensor, y: torch.Tensor, seeds: list[int], record: list[int], classes: int,
               canary: Canary | None = None, gradient: GradientCanaries | None = None,
               members: torch.Tensor | None = None, on_step: Callable[[int], None] | None = None) -> Lockstep:
    """Train ``len(seeds)`` runs of the resolved run ``run``; run r on data ``x[r], y[r]``
    (shape (R, n_real, ...), (R, n_real)) with seed ``seeds[r]``, for max(``record``) steps;
    ``classes``: the number of labels.  With ``canary`` (in the data's last slot) or with
    ``gradient`` canaries (k slots after the data; ``members`` (R, k) True where canary j of run
    r is in), the scores at every step of ``record``; ``on_step(step)`` after every step (progress)."""
    method = METHODS[run.method]
    if method.noise != "independent":
        raise DPLabError("method", "the audit needs a private method with independent Gaussian noise")
    if gradient is not None and gradient.norm > run.clip:
        raise DPLabError("canary_norm", f"a gradient canary must have norm <= clip ({run.clip}); got {gradient.norm}")
    runs, n_real = len(seeds), x.shape[1]
    k = gradient.count if gradient is not None else 0
    n = n_real + k
    starts = [initial(run, n, list(x.shape[2:]), classes, seed) for seed in seeds]
    params = {k: torch.stack([s.params[k] for s in starts]) for k in starts[0].params}
    b, one = starts[0].b, starts[0].loss
    out = Lockstep(sorted(set(record)))
    out.projections += project_stacked(params, run.diameter)
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    sampler_list = [method.sampler(run, n) for _ in seeds]
    noise = GaussianNoise(run.noise_multiplier * run.clip)
    lam, lr, q = run.shrink, run.lr, b / n
    std = lr * run.noise_multiplier * run.clip / b  # noise std on each parameter
    rows = torch.arange(runs)[:, None]
    dtype = next(iter(params.values())).dtype
    traj = torch.zeros(runs, max(k, 1), dtype=torch.float64)
    if gradient is not None:
        present = members.to(dtype) if gradient.neighbouring == "add_remove" else members.to(dtype) * 2 - 1
        coordinates = lambda: params[gradient.weight].flatten(1)[:, gradient.coords]  # noqa: E731
        v0 = coordinates()
        mu_in = torch.full((runs, k, 1), -lr * gradient.norm / b, dtype=torch.float64)
        mu_out = -mu_in if gradient.neighbouring == "replace_one" else torch.zeros_like(mu_in)
    elif canary is not None:
        v0 = block(canary, params)
    for step in range(1, max(record) + 1):
        batches = [sampler_list[r].sample(step, gens[r]) for r in range(runs)]
        sizes = torch.tensor([len(idx) for idx in batches])
        real = [idx[idx < n_real] for idx in batches]
        width = max(max(len(idx) for idx in real), 1)
        index = torch.zeros(runs, width, dtype=torch.long)
        mask = torch.arange(width)[None, :] < torch.tensor([len(idx) for idx in real])[:, None]
        for r, idx in enumerate(real):
            index[r, : len(idx)] = idx
        grads = clipped_sums(one, params, x[rows, index], y[rows, index], mask.to(dtype), run.clip)
        if gradient is not None:
            drawn = torch.zeros(runs, k, dtype=dtype)
            for r, idx in enumerate(batches):
                drawn[r, idx[idx >= n_real] - n_real] = 1.0
            add_canary_gradients(grads, params, gradient, drawn * present, run.clip, run.l2)
            v_before = coordinates()
        elif canary is not None:
            g_in, g_out = _canary_grads(one, params, canary, run.clip)
            v_before = block(canary, params)
        draws = [noise.sample(step, {k: p[r] for k, p in params.items()}, gens[r]) for r in range(runs)]
        z = {key: torch.stack([d[key] for d in draws]) for key in params}
        update(params, grads, z, lr=lr, denom=denominator(run.normalize, b, sizes), b=b, regularization=lam)
        out.projections += project_stacked(params, run.diameter)
        if not all(bool(torch.isfinite(p).all()) for p in params.values()):
            raise Diverged(f"at step {step}", lr)
        if on_step is not None:
            on_step(step)
        if gradient is not None:
            delta = (coordinates() - (1.0 - lam) * v_before).double()
            traj += increment_llr(delta[..., None], mu_in, mu_out, std, q)
            if step in out.steps:
                c = (1.0 - lam) * (1.0 - lr * run.l2)
                out.last_iterate[step] = -(coordinates() - c**step * v0).double()
                out.trajectory[step] = traj.clone()
        elif canary is not None:
            delta = (block(canary, params) - (1.0 - lam) * v_before).double()
            traj += increment_llr(delta, -lr * g_in.double() / b, -lr * g_out.double() / b, std, q)[:, None]
            if step in out.steps:
                g_in, g_out = _canary_grads(one, params, canary, run.clip)
                u = (g_out - g_in).double()
                u = u / u.norm(dim=1, keepdim=True).clamp(min=1e-30)
                v = (block(canary, params) - (1.0 - lam) ** step * v0).double()
                out.last_iterate[step] = (v * u).sum(1)[:, None]
                out.trajectory[step] = traj.clone()
    out.params = params
    return out
