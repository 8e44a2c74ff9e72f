"""Batch samplers: each is exactly the sampling scheme its accountants assume (docs/units.md).

Every draw comes from the run's CPU ``torch.Generator`` (:func:`dplab.training.loop.streams`;
on the CPU it also draws the noise, on an accelerator it draws batches only, ahead of the steps
that use them).  ``state_dict``/``load_state_dict`` carry what a checkpoint
needs beyond the generator.
"""

from __future__ import annotations

import torch

from dplab.errors import DPLabError


class Sampler:
    name: str

    def __init__(self, n: int, b: int):
        if not 1 <= b <= n:
            raise DPLabError("batch_size", f"must lie in [1, dataset_size={n}]; got {b}")
        self.n, self.b = n, b

    def sample(self, step: int, generator: torch.Generator) -> torch.Tensor:
        """Indices of the batch of ``step`` (1-based)."""
        raise NotImplementedError

    def epoch(self, step: int) -> float:
        """Passes over the data after ``step`` steps (expected, for Poisson)."""
        return step * self.b / self.n

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class PoissonSampler(Sampler):
    """Each example joins independently with probability q = b/n: the batch size is
    Binomial(n, q), empty batches included (000 Alg. 1; 001 eq. 13)."""

    name = "poisson"

    def sample(self, step, generator):
        return torch.nonzero(torch.rand(self.n, generator=generator) < self.b / self.n).flatten()


class WithoutReplacementSampler(Sampler):
    """A fresh uniformly random subset of exactly b examples each step (001 eq. 15)."""

    name = "without_replacement"

    def sample(self, step, generator):
        return torch.randperm(self.n, generator=generator)[: self.b].sort().values


class ShuffleSampler(Sampler):
    """Q = ⌊n/b⌋ disjoint batches of size b from one seeded permutation, cycled in order
    (000 Alg. 2; the n − Q·b left-over examples are never used).  ``reshuffle``: a new
    permutation at the start of every epoch."""

    name = "shuffle"

    def __init__(self, n: int, b: int, reshuffle: bool = False):
        super().__init__(n, b)
        self.batches, self.reshuffle, self.perm = n // b, reshuffle, None

    def sample(self, step, generator):
        position = (step - 1) % self.batches
        if self.perm is None or (self.reshuffle and position == 0):
            self.perm = torch.randperm(self.n, generator=generator)
        return self.perm[position * self.b : (position + 1) * self.b].sort().values

    def epoch(self, step):
        return step / self.batches

    def state_dict(self):
        return {"perm": self.perm}

    def load_state_dict(self, state):
        self.perm = state["perm"]


class BallsInBinsSampler(Sampler):
    """Balls-in-bins (Chua et al. 2025, "Balls-and-Bins Sampling for DP-SGD"): epochs of
    t = ⌊n/b⌋ steps; at the start of each epoch every example is placed in one of its t steps
    uniformly at random, independently, and the batch of a step is the examples placed in it
    (size Binomial(n, 1/t), mean n/t ≥ b).  Every example enters exactly one step per epoch."""

    name = "balls_in_bins"

    def __init__(self, n: int, b: int):
        super().__init__(n, b)
        self.steps_per_epoch, self.bins = n // b, None

    def sample(self, step, generator):
        position = (step - 1) % self.steps_per_epoch
        if self.bins is None or position == 0:
            self.bins = torch.randint(self.steps_per_epoch, (self.n,), generator=generator)
        return torch.nonzero(self.bins == position).flatten()

    def epoch(self, step):
        return step / self.steps_per_epoch

    def state_dict(self):
        return {"bins": self.bins}

    def load_state_dict(self, state):
        self.bins = state["bins"]


class FullBatchSampler(Sampler):
    """Every example, every step (b = n)."""

    name = "full_batch"

    def sample(self, step, generator):
        return torch.arange(self.n)


def build(sampling: str, n: int, b: int, reshuffle: bool = False) -> Sampler:
    if sampling == "poisson":
        return PoissonSampler(n, b)
    if sampling == "without_replacement":
        return WithoutReplacementSampler(n, b)
    if sampling == "shuffle":
        return ShuffleSampler(n, b, reshuffle)
    if sampling == "balls_in_bins":
        return BallsInBinsSampler(n, b)
    if sampling == "full_batch":
        return FullBatchSampler(n, n)
    raise DPLabError("sampling", f"unknown sampling {sampling!r}")
