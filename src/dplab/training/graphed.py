"""One training step as a CUDA graph: captured once, replayed at every step.

On a GPU the engine's step is bound by the host, not the device: for the models of this project
a step's kernels take 5–15 % of its wall time, the rest is Python and kernel launches
(benchmarks/README.md, "GPU"), and the DP step launches ~3× the kernels of a plain one (per-layer
norms, clip factors, the weighted sum, one noise draw per tensor).  A CUDA graph (NVIDIA, "CUDA
C++ Programming Guide", §CUDA Graphs; ``torch.cuda.graph``) records those kernels once and
launches them all with one call, so the host cost of the DP step no longer grows with its kernels.

A graph replays fixed shapes and fixed addresses.  :class:`GraphedStep` keeps static buffers: the
indices of a batch padded to ``capacity`` rows and a 0/1 mask of its real rows.  A step copies
its indices in, sets the mask and replays the captured step of :func:`dplab.training.loop.steps`:

    Z ~ N(0, σ²C²) per coordinate (the run's noise generator)      (the noise)
    g = Σ_i mask_i · clip_C(∇ℓ(w; x_{idx_i}))                      (masked clipped sum)
    w ← Π((1 − λ)·w − η·(g / b + Z / b))                           (the update)

Padding rows have mask 0, so g is the clipped sum of the real batch — the same DP-SGD step, the
same σ, q, T and ε; only the rounding of the sums may differ from the eager step.  The noise
generator is registered with the graph: each replay draws the next numbers of the run's stream.
A Poisson batch larger than ``capacity`` (b + 6√b rows, probability below 1e-9 per step) takes
the eager step.

:func:`refusal` says which runs are graphed: on CUDA, plain SGD at a constant η with
``normalize: expected``, i.i.d. Gaussian noise from the device's generator (``noise_rng:
portable`` stays eager, bit-for-bit with the CPU), one run at a time, no individual ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from dplab.training.noise import GaussianNoise, NoiseSource
from dplab.training.per_example import ClippedGrads, clipped_grad_sum
from dplab.training.step import apply

#: padding above the expected batch size b, in standard deviations √b of a Poisson batch
SPREAD = 6
#: eager warm-up steps (on copies) before the capture: cuBLAS handles, autograd's caches
WARMUP = 2


def capacity(b: int, n: int) -> int:
    """Rows of the padded batch: b + 6√b rounded up to a multiple of 8, at most n."""
    return min(n, 8 * math.ceil((b + SPREAD * math.sqrt(b)) / 8))


def refusal(
    settings, device: torch.device, noise_source: NoiseSource | None, *, individual: bool
) -> str | None:
    """Why a run's steps are not graphed (None: they are), from its settings (module docstring)."""
    reasons = [
        (device.type != "cuda", "not on a CUDA device"),
        (not settings.optimizer.plain, f"optimizer {settings.optimizer.name}"),
        (settings.optimizer.schedule != "constant", f"lr_schedule {settings.optimizer.schedule}"),
        (settings.normalize != "expected", f"normalize {settings.normalize}"),
        (settings.noise_rng != "device", f"noise_rng {settings.noise_rng}"),
        (noise_source is not None and type(noise_source) is not GaussianNoise, "correlated noise"),
        (individual, "individual ε counts"),
        (
            not hasattr(torch.cuda.CUDAGraph, "register_generator_state"),
            f"torch {torch.__version__} cannot register a generator with a graph",
        ),
    ]
    return next((why for cond, why in reasons if cond), None)


def capture(
    warm_up: Callable[[], object], body: Callable[[], object], generator=None
) -> tuple[torch.cuda.CUDAGraph, object]:
    """PyTorch's capture recipe (``torch.cuda.graphs``): ``warm_up()`` once on a side stream,
    the device synchronized, then ``body()`` captured as a CUDA graph with ``generator`` (if any)
    registered with it, so that each replay draws its next numbers: (the graph, body's outputs)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        warm_up()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    if generator is not None:
        graph.register_generator_state(generator)
    with torch.cuda.graph(graph):
        out = body()
    return graph, out


@dataclass
class GraphedStep:
    """The captured step of one run (module docstring); :meth:`__call__` takes one step."""

    loss: Callable
    params: dict[str, torch.Tensor]
    x: torch.Tensor  # the training inputs on the device
    y: torch.Tensor
    clip: float | None
    noise: NoiseSource | None  # None: no noise (the non-private method)
    generator: torch.Generator | None
    lr: float
    b: int
    regularization: float
    diameter: float | None
    capacity: int

    def __post_init__(self):
        device = self.x.device
        self.idx = torch.zeros(self.capacity, dtype=torch.int64, device=device)
        self.rows = torch.arange(self.capacity, device=device)
        self.mask = torch.ones(self.capacity, dtype=self.x.dtype, device=device)
        self.graph = None

    def _body(
        self, params: dict[str, torch.Tensor], generator
    ) -> tuple[ClippedGrads, torch.Tensor | None]:
        """The step on the static buffers, as :func:`dplab.training.loop.steps` takes it."""
        noise = None if self.noise is None else self.noise.sample(0, params, generator)
        grads = clipped_grad_sum(
            self.loss, params, self.x[self.idx], self.y[self.idx], self.clip, mask=self.mask
        )
        moved = apply(
            params,
            grads.grad_sum,
            noise,
            lr=self.lr,
            denom=self.b,
            b=self.b,
            regularization=self.regularization,
            diameter=self.diameter,
        )
        return grads, moved

    def capture(self) -> None:
        """Warm up on copies (the run's parameters and generator untouched), then capture."""

        def warm_up():
            scratch = torch.Generator(device=self.x.device).manual_seed(0)
            copies = {k: p.clone() for k, p in self.params.items()}
            for _ in range(WARMUP):
                self._body(copies, scratch)

        self.graph, self.out = capture(
            warm_up,
            lambda: self._body(self.params, self.generator),
            self.generator if self.noise is not None else None,
        )

    def fits(self, idx: torch.Tensor) -> bool:
        return len(idx) <= self.capacity

    def stage(self, idx: torch.Tensor) -> None:
        """The batch ``idx`` into the static buffers: its indices first, the mask 1 on them.
        (Padding rows keep earlier indices: any record, weighted 0.)"""
        self.idx[: len(idx)].copy_(idx)
        torch.lt(self.rows, len(idx), out=self.mask)

    def __call__(self, idx: torch.Tensor) -> tuple[ClippedGrads, torch.Tensor | None]:
        """One step on the batch ``idx`` (indices on the device, at most ``capacity``): the
        clipped sum's outputs (norms of the real rows only) and where the projection moved."""
        if self.graph is None:
            self.capture()
        self.stage(idx)
        self.graph.replay()
        grads, moved = self.out
        return ClippedGrads(grads.grad_sum, grads.norms[: len(idx)], grads.loss_sum), moved
