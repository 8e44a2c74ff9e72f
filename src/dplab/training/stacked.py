"""R runs of one resolved run stepped together by the one step loop
(:func:`dplab.training.loop.steps`).

Run r is the run :func:`dplab.training.loop.train` makes with seed ``seeds[r]`` on the CPU, on
its own data ``x[r], y[r]``: it starts as every run does (:func:`dplab.training.start.initial`,
W₀ projected), keeps its own CPU generators for batches and noise
(:func:`dplab.training.loop.streams`), its own sampler (the method's,
:meth:`dplab.training.methods.base.Method.sampler`) and draws its noise (the numbers of
:class:`~dplab.training.noise.GaussianNoise`, N(0, σ²C²)) in the same order.  What differs is
only how the R clipped sums are computed: the engine's
:func:`~dplab.training.per_example.clipped_grad_sum` on its torch.func path,
``torch.func.vmap``-ed over parameters stacked along a leading run axis, each run's batch padded
to the largest one with mask 0.  The update and projection are
:func:`dplab.training.step.apply`'s on the stacked tensors.

On a GPU (the run's ``device``: ``auto`` or ``cuda``) the parameters, data and arithmetic are on
the device, while every run's generator, sampler and noise draws stay on the CPU: a GPU stack
draws the CPU runs' random numbers (one host→device copy of the R noise draws per step), so its
runs differ from the CPU's only by floating-point rounding.

A batch may draw ``slots`` indices beyond the data (n = n_data + slots): the sampler treats them
as records, they count in |B|, and ``extra`` adds whatever they contribute to the clipped sums
(the audit's gradient canaries, :func:`dplab.audit.runner.train_many`).
Methods with independent Gaussian noise only (dp_mf's correlated noise is one stream per run
that a stack does not hold).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch.nn.utils.rnn import pad_sequence

from dplab.errors import DPLabError
from dplab.training.loop import deterministic, resolve_device, streams
from dplab.training.methods import METHODS
from dplab.training.noise import fill
from dplab.training.per_example import ClippedGrads, clipped_grad_sum
from dplab.training.settings import RunSettings
from dplab.training.start import initial
from dplab.training.step import denominator, project


def clipped_sums(
    loss, params: dict, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, clip: float
) -> ClippedGrads:
    """Σ mask·clip(∇ℓ) of every run r (params[k][r], padded batch x[r], y[r], mask[r]) with the
    engine's :func:`clipped_grad_sum`, vmapped over the runs: sums (R, …),
    norms (R, W), losses (R,)."""

    def one_run(p, x, y, m):
        g = clipped_grad_sum(loss, p, x, y, clip, ghost=False, mask=m)
        return g.grad_sum, g.norms, g.loss_sum

    try:
        return ClippedGrads(*torch.func.vmap(one_run)(params, x, y, mask))
    except RuntimeError:
        if not getattr(loss, "one_by_one", False):  # vmap batched the network alone: not that
            raise
        raise DPLabError(
            "model",
            "the runs stepped together (an audit's) take their clipped sums in one vmap over the"
            " runs, which a network that vmap cannot batch (its forward pass reads a value:"
            " .item(), `if x.max() > …`, a mask's indices) cannot pass: compute it with tensor"
            " operations (torch.where) instead",
        ) from None


@dataclass
class Padded:
    """One step's batches of the R runs."""

    drawn: list[torch.Tensor]  # each run's batch: indices in 0..n−1, extra slots included
    index: torch.Tensor  # (R, W) the indices of the data records, padded with 0
    mask: torch.Tensor  # (R, W) 1.0 where ``index`` holds a record of the batch
    sizes: torch.Tensor  # (R,) |B| of each run, extra slots included


class StackedRuns:
    """R runs of ``settings`` on data ``x`` (R, n_data, …), labels ``y`` (R, n_data), with seeds
    ``seeds``; ``classes`` labels; ``slots`` extra indices per batch and ``extra(runs, batch,
    grad_sum)``, which adds their part to the clipped sums in place (module docstring).  Implements
    :class:`dplab.training.loop.Runs`; ``moved`` is where W₀'s projection moved a run (or None)."""

    stacked = True

    def __init__(
        self,
        settings: RunSettings,
        x: torch.Tensor,
        y: torch.Tensor,
        seeds: list[int],
        classes: int,
        slots: int = 0,
        extra: Callable[[StackedRuns, Padded, dict], None] | None = None,
    ):
        method = METHODS[settings.method]
        if method.noise != "independent":
            raise DPLabError(
                "method",
                f"runs in lockstep need a private method with independent Gaussian noise; "
                f"got {settings.method} ({method.noise} noise)",
            )
        self.device = resolve_device(settings.device)
        deterministic(self.device)
        self.settings, self.extra = settings, extra
        self.x, self.y = x.to(self.device), y.to(self.device)
        self.n_data = x.shape[1]
        self.n = n = self.n_data + slots  # what the samplers draw from: q = b/n
        starts = [initial(settings, n, list(x.shape[2:]), classes, seed) for seed in seeds]
        self.params = {
            k: torch.stack([s.params[k] for s in starts]).to(self.device) for k in starts[0].params
        }
        if len({p.dtype for p in self.params.values()}) > 1:
            raise DPLabError("model", "runs in lockstep need parameters of one dtype")
        self.b, self.loss = starts[0].b, starts[0].loss
        self.moved = project(self.params, settings.diameter, stacked=True)  # W₀ ∈ W (001 eq. 1)
        cpu = torch.device("cpu")
        self.generators, self.noise_generators = zip(
            *(streams(cpu, seed, settings.noise_rng) for seed in seeds)
        )  # noise_rng: portable was ignored here (the CPU stream, whatever the run said)
        self.samplers = [method.sampler(settings, n) for _ in seeds]
        self.std = settings.noise_multiplier * settings.clip
        self.rows = torch.arange(len(seeds), device=self.device)[:, None]
        self.optimizer_state: dict = {}  # the optimizer's moments, stacked like the parameters

    def batches(self, first: int, last: int) -> Iterator[tuple[int, Padded]]:
        for step in range(first, last + 1):
            drawn = [sampler.sample(step, g) for sampler, g in zip(self.samplers, self.generators)]
            real = drawn if self.n == self.n_data else [idx[idx < self.n_data] for idx in drawn]
            lengths = torch.tensor([len(idx) for idx in real])
            index = pad_sequence([idx.long() for idx in real], batch_first=True)  # 0 beyond |B|
            if index.shape[1] == 0:  # every batch empty: one masked slot
                index = torch.zeros(len(drawn), 1, dtype=torch.long)
            mask = torch.arange(index.shape[1])[None, :] < lengths[:, None]
            sizes = torch.tensor([len(idx) for idx in drawn])
            yield step, Padded(drawn, *(t.to(self.device) for t in (index, mask, sizes)))

    def noise(self, step: int) -> dict[str, torch.Tensor]:
        """Run r's draw in row r of one (R, P) buffer on the CPU, scaled by σC, then on the
        device."""
        sizes = [p[0].numel() for p in self.params.values()]
        flat = torch.empty(len(self.generators), sum(sizes), dtype=self.dtype)
        for row, g in zip(flat, self.noise_generators):
            fill(row, sizes, g)
        flat = flat.mul_(self.std).to(self.device)
        return {
            k: z.reshape(p.shape) for (k, p), z in zip(self.params.items(), flat.split(sizes, 1))
        }

    @property
    def dtype(self) -> torch.dtype:
        return next(iter(self.params.values())).dtype

    def gradients(self, step: int, batch: Padded) -> tuple[ClippedGrads, torch.Tensor]:
        """The clipped sums of every run's records, plus ``extra``'s part; m per run."""
        grads = clipped_sums(
            self.loss,
            self.params,
            self.x[self.rows, batch.index],
            self.y[self.rows, batch.index],
            batch.mask.to(self.dtype),
            self.settings.clip,
        )
        if self.extra is not None:
            self.extra(self, batch, grads.grad_sum)
        return grads, denominator(self.settings.normalize, self.b, batch.sizes)
