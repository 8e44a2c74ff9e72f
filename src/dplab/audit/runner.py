"""The audit's R runs: the engine's runs in lockstep, with canaries and their scores.

R runs of one resolved run config are :class:`dplab.training.stacked.StackedRuns` stepped by the
one step loop, :func:`dplab.training.loop.steps`: run r is the run ``loop.train`` makes with seed
r (``tests/test_audit.py`` checks that a stacked run ends at the parameters of ``loop.train`` with
the same config and seed).  The audit adds only its canaries: a gradient canary's part of the
clipped sum (through the runs' ``extra`` hook, before the update) and the scores read from every
run's parameters before and after each step.

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
from dplab.errors import DPLabError
from dplab.schemes import Neighbouring
from dplab.training.loop import steps
from dplab.training.settings import RunSettings
from dplab.training.stacked import StackedRuns, clipped_sums


@dataclass
class Lockstep:
    """Per recorded step, the canary scores of every run (see the module docstring)."""

    steps: list[int]
    last_iterate: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R, k) score
    trajectory: dict[int, torch.Tensor] = field(default_factory=dict)  # step -> (R, k) score
    params: dict[str, torch.Tensor] | None = None  # final stacked parameters (R, ...)
    projections: int = 0  # (run, step) pairs where the projection moved the parameters


def _canary_grads(loss, params, canary: Canary, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """clip(∇ℓ) of the canary and of its mirror at every run's θ, restricted
    to v: (R, rows) each."""
    first = next(iter(params.values()))
    runs = first.shape[0]
    one = torch.ones(runs, 1, device=first.device)
    y = canary.label.reshape(1, 1).expand(runs, 1)
    out = []
    for xc in (canary.x_in, canary.x_out):
        g = clipped_sums(loss, params, xc[None, None].expand(runs, 1, *xc.shape), y, one, clip)
        out.append(block(canary, g.grad_sum))
    return out[0], out[1]


def increment_llr(
    delta: torch.Tensor, mu_in: torch.Tensor, mu_out: torch.Tensor, std: float, q: float
) -> torch.Tensor:
    """log [(1−q)φ(Δ) + qφ(Δ − μ_in)] / [(1−q)φ(Δ) + qφ(Δ − μ_out)] of one released increment Δ
    (…, rows), φ the density of N(0, std² I) over the last axis (q = 1: no mixture)."""
    a = [((delta * mu).sum(-1) - (mu * mu).sum(-1) / 2) / std**2 for mu in (mu_in, mu_out)]
    if q >= 1.0:
        return a[0] - a[1]
    mix = lambda t: torch.logaddexp(torch.full_like(t, math.log1p(-q)), math.log(q) + t)  # noqa: E731
    return mix(a[0]) - mix(a[1])


def add_canary_gradients(
    grads: dict,
    params: dict,
    canaries: GradientCanaries,
    signs: torch.Tensor,
    clip: float,
    l2: float,
) -> None:
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


class _GradientScores:
    """Gradient canaries in slots n_data … n_data+k−1 of every run (module docstring): their part of
    the clipped sums (:meth:`add`, the runs' ``extra`` hook) and their scores (:meth:`score`)."""

    def __init__(self, runs: StackedRuns, canaries: GradientCanaries, members: torch.Tensor):
        self.canaries, self.runs = canaries.to(runs.device), runs
        s = runs.settings
        members = members.to(runs.device, runs.dtype)
        self.present = (
            members if canaries.neighbouring == Neighbouring.ADD_REMOVE else members * 2 - 1
        )
        self.v0 = self.coordinates()
        self.mu_in = torch.full(
            (len(members), canaries.count, 1),
            -s.lr * canaries.norm / runs.b,
            dtype=torch.float64,
            device=runs.device,
        )
        self.mu_out = (
            -self.mu_in
            if canaries.neighbouring == Neighbouring.REPLACE_ONE
            else torch.zeros_like(self.mu_in)
        )
        self.traj = torch.zeros_like(self.mu_in[..., 0])

    def coordinates(self) -> torch.Tensor:
        return self.runs.params[self.canaries.weight].flatten(1)[:, self.canaries.coords]

    def add(self, runs: StackedRuns, batch, grad_sum: dict) -> None:
        drawn = torch.zeros(self.present.shape, dtype=self.present.dtype)  # on the CPU, as drawn
        for r, idx in enumerate(batch.drawn):
            drawn[r, idx[idx >= runs.n_data] - runs.n_data] = 1.0
        add_canary_gradients(
            grad_sum,
            runs.params,
            self.canaries,
            drawn.to(runs.device) * self.present,
            runs.settings.clip,
            runs.settings.l2,
        )
        self.v_before = self.coordinates()

    def score(self, step: int, out: Lockstep, std: float, q: float) -> None:
        s = self.runs.settings
        delta = (self.coordinates() - (1.0 - s.shrink) * self.v_before).double()
        self.traj += increment_llr(delta[..., None], self.mu_in, self.mu_out, std, q)
        if step in out.steps:
            c = (1.0 - s.shrink) * (1.0 - s.lr * s.l2)
            out.last_iterate[step] = -(self.coordinates() - c**step * self.v0).double()
            out.trajectory[step] = self.traj.clone()


class _InputScores:
    """The input canary in the data's last slot (module docstring): its scores (:meth:`score`)
    from its clipped gradient and its mirror's, read before each update (:meth:`add`)."""

    def __init__(self, runs: StackedRuns, canary: Canary):
        self.canary, self.runs = canary.to(runs.device), runs
        self.v0 = block(self.canary, runs.params)
        self.traj = torch.zeros(len(runs.generators), 1, dtype=torch.float64, device=runs.device)

    def add(self, runs: StackedRuns, batch, grad_sum: dict) -> None:
        self.g_in, self.g_out = _canary_grads(
            runs.loss, runs.params, self.canary, runs.settings.clip
        )
        self.v_before = block(self.canary, runs.params)

    def score(self, step: int, out: Lockstep, std: float, q: float) -> None:
        runs, s = self.runs, self.runs.settings
        lam = s.shrink
        delta = (block(self.canary, runs.params) - (1.0 - lam) * self.v_before).double()
        mu_in, mu_out = (-s.lr * g.double() / runs.b for g in (self.g_in, self.g_out))
        self.traj += increment_llr(delta, mu_in, mu_out, std, q)[:, None]
        if step in out.steps:
            g_in, g_out = _canary_grads(runs.loss, runs.params, self.canary, s.clip)
            u = (g_out - g_in).double()
            u = u / u.norm(dim=1, keepdim=True).clamp(min=1e-30)
            v = (block(self.canary, runs.params) - (1.0 - lam) ** step * self.v0).double()
            out.last_iterate[step] = (v * u).sum(1)[:, None]
            out.trajectory[step] = self.traj.clone()


def train_many(
    run: RunSettings,
    x: torch.Tensor,
    y: torch.Tensor,
    seeds: list[int],
    record: list[int],
    classes: int,
    canary: Canary | None = None,
    gradient: GradientCanaries | None = None,
    members: torch.Tensor | None = None,
    on_step: Callable[[int], None] | None = None,
) -> Lockstep:
    """Train ``len(seeds)`` runs of the resolved run ``run``; run r on data ``x[r], y[r]``
    (shape (R, n_real, ...), (R, n_real)) with seed ``seeds[r]``, for max(``record``) steps;
    ``classes``: the number of labels.  With ``canary`` (in the data's last slot) or with
    ``gradient`` canaries (k slots after the data; ``members`` (R, k) True where canary j of run
    r is in), the scores at every step of ``record``; ``on_step(step)`` after
    every step (progress)."""
    if gradient is not None and gradient.norm > run.clip:
        raise DPLabError(
            "canary_norm",
            f"a gradient canary must have norm <= clip ({run.clip}); got {gradient.norm}",
        )
    runs = StackedRuns(
        run, x, y, seeds, classes, slots=gradient.count if gradient is not None else 0
    )
    scores = (
        _GradientScores(runs, gradient, members)
        if gradient is not None
        else (_InputScores(runs, canary) if canary is not None else None)
    )
    runs.extra = scores.add if scores is not None else None
    out = Lockstep(sorted(set(record)))
    out.projections += _count(runs.moved)
    std = run.lr * run.noise_multiplier * run.clip / runs.b  # noise std on each parameter
    q = runs.b / runs.n
    for done in steps(runs, 1, max(record)):
        out.projections += _count(done.moved)
        if on_step is not None:
            on_step(done.step)
        if scores is not None:
            scores.score(done.step, out, std, q)
    _check_finite(out, run, std)
    out.params = runs.params
    return out


def _check_finite(out: Lockstep, run: RunSettings, std: float) -> None:
    """The scores are finite, or a DPLabError naming ``noise_multiplier``: a noise std so small
    that the likelihood ratio of one increment (its square in a denominator) leaves float64."""
    for kind in (out.trajectory, out.last_iterate):
        if not all(bool(torch.isfinite(v).all()) for v in kind.values()):
            raise DPLabError(
                "noise_multiplier",
                f"the audit's likelihood-ratio scores leave float64 at σ = "
                f"{run.noise_multiplier:g}: the noise std on a parameter, lr·σ·C/b = {std:.3g}, "
                "is too small against the canary's step; raise noise_multiplier",
            )


def _count(moved: torch.Tensor | None) -> int:
    """How many runs a projection moved."""
    return 0 if moved is None else int(moved.sum())
