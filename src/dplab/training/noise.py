"""Noise sources for the clipped gradient SUM (canonical units, docs/units.md).

A noise source returns, for step t, one tensor per parameter that the loop adds to
Σ clip(g_i) before dividing by the batch size.  The loop only calls :meth:`sample`, so a
correlated, streaming source (the matrix-factorization mechanism, 004 §4.3, whose noise at step
t mixes the Z's of earlier steps: :class:`dplab.training.mf_noise.MFNoise`) replaces
:class:`GaussianNoise` without touching the loop; it keeps whatever it must remember in
``state_dict`` so checkpoints resume it exactly.
"""

from __future__ import annotations

import torch

from dplab.philox import normal


class NoiseSource:
    """Interface: ``sample(step, like, generator)`` → noise shaped like each tensor of ``like``."""

    def sample(
        self, step: int, like: dict[str, torch.Tensor], generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class GaussianNoise(NoiseSource):
    """i.i.d. N(0, (σC)²) per coordinate, drawn on the generator's device (the loop passes one
    on the parameters' device, :func:`dplab.training.loop.streams`: no copy; a torch.Generator
    or a :class:`~dplab.philox.PortableGenerator`) and moved to the parameters' device if that
    differs.  One draw per tensor, in ``like``'s order (the numbers :func:`fill` puts in
    consecutive slices of one flat buffer), all scaled by σC in one ``_foreach_mul_``."""

    def __init__(self, std: float):
        self.std = float(std)

    def sample(self, step, like, generator):
        noise = [normal(p.shape, generator, p.dtype) for p in like.values()]
        torch._foreach_mul_(noise, self.std)
        return {k: z.to(p.device) for (k, p), z in zip(like.items(), noise)}


def fill(flat: torch.Tensor, sizes: list[int], generator) -> tuple[torch.Tensor, ...]:
    """Fill the 1-D ``flat`` with one N(0, 1) draw per tensor of ``sizes`` numbers, in order, into
    consecutive slices: the unscaled numbers of :meth:`GaussianNoise.sample`; returns the slices."""
    parts = flat.split(sizes)
    for part in parts:
        normal(part.shape, generator, flat.dtype, out=part)
    return parts


class NoNoise(NoiseSource):
    """Zero noise (the non-private ``sgd``)."""

    def sample(self, step, like, generator):
        return {k: torch.zeros_like(p) for k, p in like.items()}
