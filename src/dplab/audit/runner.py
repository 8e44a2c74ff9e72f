"""Many runs of the engine's training loop in lockstep, on the engine's own pieces.

R runs of one resolved run config are stepped together: every run keeps its own
``torch.Generator(seed_r)``, its own sampler (:func:`dplab.training.samplers.build`) and draws
its own noise (:class:`dplab.training.noise.GaussianNoise`) in the same order as
:func:`dplab.training.loop.train` (batch, then noise).  The clipped sums come from the engine's
:func:`dplab.training.per_example.clipped_grad_sum`, ``torch.func.vmap``-ed over the runs whose
(Poisson) batches have the same size, on parameters stacked along a leading run axis.
The update and projection are those of ``loop.train`` (``loop.project`` on each run's view);
``tests/test_audit_runner.py`` checks that a stacked run ends at the same parameters as
``loop.train`` with the same config and seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from dplab.errors import DPLabError
from dplab.training import models, samplers
from dplab.training.loop import project
from dplab.training.methods import METHODS
from dplab.training.noise import GaussianNoise
from dplab.training.per_example import clipped_grad_sum


def clipped_sums(loss, params: dict, xs: list[torch.Tensor], ys: list[torch.Tensor], clip: float) -> dict:
    """Σ clip(∇ℓ) of every run r (params[k][r], batch xs[r], ys[r]) with the engine's
    :func:`clipped_grad_sum`, vmapped over the runs whose batches have the same size."""
    out = {k: torch.zeros_like(p) for k, p in params.items()}
    groups: dict[int, list[int]] = {}
    for r, xr in enumerate(xs):
        groups.setdefault(len(xr), []).append(r)
    one_run = lambda p, x, y: clipped_grad_sum(loss, p, x, y, clip, ghost=False).grad_sum  # noqa: E731
    for rs in groups.values():
        index = torch.tensor(rs)
        sums = torch.func.vmap(one_run)({k: p[index] for k, p in params.items()},
                                        torch.stack([xs[r] for r in rs]), torch.stack([ys[r] for r in rs]))
        for k in out:
            out[k][index] = sums[k]
    return out


@dataclass
class Lockstep:
    """Last iterates at the recorded steps and, per run, the canary scores (see :func:`train_many`)."""

    steps: list[int]
    last_iterate: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R,) score
    trajectory: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R,) score
    params: dict[str, torch.Tensor] | None = None  # final stacked parameters (R, ...)


def train_many(
    cfg: dict,
    x: torch.Tensor,
    y: torch.Tensor,
    seeds: list[int],
    record: list[int],
    classes: int,
    probes: tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> Lockstep:
    """Train ``len(seeds)`` runs of the resolved run ``cfg``; run r on data ``x[r], y[r]``
    (shape (R, n, ...), (R, n)) with seed ``seeds[r]``, for max(``record``) steps.

    ``classes``: the number of labels (the model's output size).  ``probes`` = ((x_in, y_in), (x_out, y_out)), the two records that differ between the
    neighbouring datasets: at every step in ``record`` the last-iterate score
    ℓ(θ_t; x_out) − ℓ(θ_t; x_in) is stored, and a trajectory score accumulates over steps the
    log-likelihood ratio of each update under "the slot holds x_in" versus "x_out"
    (Gaussian noise of std ησC/b, slot sampled with probability q, other examples ignored).
    """
    method = METHODS[cfg["method"]]
    if not method.private:
        raise DPLabError("method", "the audit needs a private method")
    runs, n = len(seeds), x.shape[1]
    b = n if cfg["sampling"] == "full_batch" else cfg["batch_size"]
    input_shape = list(x.shape[2:])
    per_run = []
    for seed in seeds:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = models.build(cfg, input_shape, classes)
        per_run.append({k: v.detach().clone() for k, v in model.named_parameters()})
    params = {k: torch.stack([p[k] for p in per_run]) for k in per_run[0]}
    views = [{k: params[k][r] for k in params} for r in range(runs)]
    for view in views:
        project(view, cfg["diameter"])
    one = models.example_loss(model, cfg["l2"])
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    sampler_list = [samplers.build(cfg["sampling"], n, b, cfg["reshuffle"]) for _ in seeds]
    noise = GaussianNoise(cfg["noise_multiplier"] * cfg["clip"])
    lam, lr, q = cfg["regularization"] or 0.0, cfg["lr"], b / n
    s = lr * cfg["noise_multiplier"] * cfg["clip"] / b  # parameter-space noise std
    out = Lockstep(sorted(set(record)))
    traj = torch.zeros(runs, dtype=torch.float64)
    if probes is not None:
        (x_in, y_in), (x_out, y_out) = probes
        probe_in, probe_out = [x_in[None]] * runs, [x_out[None]] * runs
        yy_in, yy_out = [y_in.reshape(1)] * runs, [y_out.reshape(1)] * runs
    for step in range(1, max(record) + 1):
        batches = [sampler_list[r].sample(step, gens[r]) for r in range(runs)]
        grads = clipped_sums(one, params, [x[r][idx] for r, idx in enumerate(batches)],
                             [y[r][idx] for r, idx in enumerate(batches)], cfg["clip"])
        if probes is not None:
            g_in = clipped_sums(one, params, probe_in, yy_in, cfg["clip"])
            g_out = clipped_sums(one, params, probe_out, yy_out, cfg["clip"])
            before = {k: p.clone() for k, p in params.items()}
        denoms = []
        for r in range(runs):
            denom = b if cfg["normalize"] == "expected" else max(len(batches[r]), 1)
            denoms.append(denom)
            z = noise.sample(step, views[r], gens[r])
            for k, p in views[r].items():
                direction = grads[k][r] / denom + z[k] / b
                if lam:
                    p.mul_(1.0 - lam)
                p.sub_(lr * direction)
            project(views[r], cfg["diameter"])
        if not all(bool(torch.isfinite(p).all()) for p in params.values()):
            raise DPLabError("lr", f"the parameters became NaN/inf at step {step}; lower lr (or clip)")
        if probes is not None:
            m = torch.tensor(denoms, dtype=params[next(iter(params))].dtype)
            a = torch.zeros(runs, dtype=torch.float64)
            for k, p in params.items():
                shape = (runs,) + (1,) * (p.dim() - 1)
                v = lr * (g_in[k] - g_out[k]) / m.view(shape)  # update(out) − update(in)
                mid = p - ((1.0 - lam) * before[k] - lr * (g_in[k] + g_out[k]) / (2 * m.view(shape)))
                a += (-(mid * v)).flatten(1).sum(1).double() / s**2
            traj += a if q >= 1.0 else torch.logaddexp(torch.full_like(a, math.log1p(-q)), math.log(q) + a)
        if step in out.steps and probes is not None:
            with torch.no_grad():
                scores = [float(one(views[r], x_out, y_out) - one(views[r], x_in, y_in)) for r in range(runs)]
            out.last_iterate[step] = torch.tensor(scores, dtype=torch.float64)
            out.trajectory[step] = traj.clone()
    out.params = params
    return out
