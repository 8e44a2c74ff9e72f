"""dp_mf's noise source (:mod:`dplab.training.methods.dp_mf`, 004 §4.3): the streaming C⁻¹Z of
:func:`dplab.mf.noise.stream` as a :class:`~dplab.training.noise.NoiseSource` of the one loop.
A module of its own: the mf stack (scipy.linalg) is imported by a dp_mf run's training only,
neither by the other methods' runs nor by a plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dplab.mf.noise import stream
from dplab.training.noise import NoiseSource

if TYPE_CHECKING:
    from dplab.mf.factorizations import Factorization
    from dplab.mf.toeplitz import ToeplitzFactorization


class MFNoise(NoiseSource):
    """dp_mf's correlated noise C⁻¹Z over the flattened parameter vector (drawn and mixed on the
    generator's device, as :class:`~dplab.training.noise.GaussianNoise`, then moved to the
    parameters' device if that differs), streamed by :func:`dplab.mf.noise.stream`."""

    def __init__(self, factorization: Factorization | ToeplitzFactorization, std: float):
        self.stream = stream(factorization, std)

    def sample(self, step, like, generator):
        first = next(iter(like.values()))
        flat = torch.empty(
            sum(p.numel() for p in like.values()), dtype=first.dtype, device=generator.device
        )
        w = self.stream.sample(step - 1, flat, generator)  # the loop counts steps from 1
        out, start = {}, 0
        for k, p in like.items():
            out[k] = w[start : start + p.numel()].view(p.shape).to(p.device)
            start += p.numel()
        return out

    def state_dict(self):
        return self.stream.state_dict()

    def load_state_dict(self, state):
        self.stream.load_state_dict(state)
