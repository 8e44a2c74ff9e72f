"""The sampling schemes and neighbouring relations, as types (docs/units.md).

A run's ``sampling`` and ``neighbouring`` are :class:`Sampling` and :class:`Neighbouring`
members: ``str`` enums whose values are the config's names, so a member equals, hashes, prints
and writes to JSON as its name.  Each member holds every fact about itself: a relation its
sensitivity factor and display form; a scheme its batch sampler, its display name, whether its
batches have exactly b examples, whether it is an epoch sampler, the relation under which
amplification by subsampling is proved for it, and whether the accountants' :class:`Setting`
takes it (dp_mf's samplers are accounted by their own event).  The schemas' lists of them are
generated from these types (``python -m dplab.registries``).  A new scheme is one sampler class
and one member here, and its tests (docs/architecture.md).

Every draw of a sampler comes from the run's CPU ``torch.Generator``
(:func:`dplab.training.loop.streams`); ``state_dict``/``load_state_dict`` carry what a checkpoint
needs beyond the generator.  torch is imported by the samplers' draws, not with this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dplab.errors import DPLabError


class _Named(StrEnum):
    """A ``str`` enum that is its value everywhere: hash, ``repr`` and ``format`` included."""

    __hash__ = str.__hash__

    def __new__(cls, value: str, facts=None):
        member = str.__new__(cls, value)
        member._value_ = value
        member.facts = facts
        return member

    def __repr__(self) -> str:
        return str.__repr__(self)


@dataclass(frozen=True)
class Relation:
    """A neighbouring relation's facts."""

    sensitivity: float  # L2 sensitivity of the clipped gradient sum, in units of C
    display: str


class Neighbouring(_Named):
    """Which datasets are neighbours: one record added or removed, or one record replaced."""

    ADD_REMOVE = "add_remove", Relation(1.0, "add/remove")
    REPLACE_ONE = "replace_one", Relation(2.0, "replace-one")

    @property
    def sensitivity(self) -> float:
        """The clipped sum's sensitivity in units of C: 1 (add/remove) or 2 (replace-one)."""
        return self.facts.sensitivity

    @property
    def display(self) -> str:
        return self.facts.display


class Sampler:
    """A batch sampler on n examples with (expected) batch size b."""

    name: str

    def __init__(self, n: int, b: int):
        if not 1 <= b <= n:
            raise DPLabError("batch_size", f"must lie in [1, dataset_size={n}]; got {b}")
        self.n, self.b = n, b

    def sample(self, step: int, generator):
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
        import torch

        return torch.nonzero(torch.rand(self.n, generator=generator) < self.b / self.n).flatten()


class WithoutReplacementSampler(Sampler):
    """A fresh uniformly random subset of exactly b examples each step (001 eq. 15)."""

    name = "without_replacement"

    def sample(self, step, generator):
        import torch

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
        import torch

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
        import torch

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

    def __init__(self, n: int, b: int):
        super().__init__(n, n)

    def sample(self, step, generator):
        import torch

        return torch.arange(self.n)


@dataclass(frozen=True)
class Scheme:
    """A sampling scheme's facts.  ``sampler``: its batch sampler class (None: the method builds
    its own, dp_mf from its factorization); ``fixed_size``: every batch has exactly b examples;
    ``epochs``: an epoch sampler, every example in at most one step of each epoch of ⌊n/b⌋
    steps (balls-in-bins: exactly one); ``amplified``: the relation under which amplification
    by subsampling is proved for it (Balle, Barthe & Gaboardi 2018, "Privacy Amplification by
    Subsampling: Tight Analyses via Couplings and Divergences": Poisson with add/remove, without
    replacement with replace-one; None: none); ``accounted``: a
    :class:`dplab.accounting.Setting` takes it."""

    display: str
    sampler: type[Sampler] | None
    fixed_size: bool
    epochs: bool = False
    amplified: Neighbouring | None = None
    accounted: bool = True


class Sampling(_Named):
    """How a step's batch is drawn."""

    POISSON = (
        "poisson",
        Scheme(
            "Poisson sampling", PoissonSampler, fixed_size=False, amplified=Neighbouring.ADD_REMOVE
        ),
    )
    WITHOUT_REPLACEMENT = (
        "without_replacement",
        Scheme(
            "sampling without replacement",
            WithoutReplacementSampler,
            fixed_size=True,
            amplified=Neighbouring.REPLACE_ONE,
        ),
    )
    SHUFFLE = "shuffle", Scheme("shuffled batches", ShuffleSampler, fixed_size=True, epochs=True)
    FULL_BATCH = "full_batch", Scheme("full batch", FullBatchSampler, fixed_size=True)
    BALLS_IN_BINS = (
        "balls_in_bins",
        Scheme("balls-in-bins", BallsInBinsSampler, fixed_size=False, epochs=True),
    )
    MIN_SEPARATION = (
        "min_separation",
        Scheme("fixed partitions", None, fixed_size=True, accounted=False),
    )
    CYCLIC_POISSON = (
        "cyclic_poisson",
        Scheme("cyclic Poisson partitions", None, fixed_size=False, accounted=False),
    )

    @property
    def display(self) -> str:
        return self.facts.display

    @property
    def fixed_size(self) -> bool:
        return self.facts.fixed_size

    @property
    def epochs(self) -> bool:
        return self.facts.epochs

    @property
    def amplified(self) -> Neighbouring | None:
        return self.facts.amplified

    @property
    def accounted(self) -> bool:
        return self.facts.accounted

    def sampler(self, n: int, b: int, reshuffle: bool = False) -> Sampler:
        """This scheme's batch sampler on ``n`` examples, (expected) batch size ``b``."""
        if self.facts.sampler is None:
            raise DPLabError("sampling", f"{self} batches are drawn by dp_mf's own sampler")
        if reshuffle:
            return self.facts.sampler(n, b, reshuffle)
        return self.facts.sampler(n, b)
