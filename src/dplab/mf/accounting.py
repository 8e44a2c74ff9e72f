"""(ε, δ) of the matrix-factorization mechanism, and the samplers it is valid for (004 §4.3).

The privacy analysis holds only for the sampler it assumes (004 §4.3: "You cannot just plug
the Poisson subsampling"), so the sampler is an object: training draws its batches from it
(:meth:`batch`) and the accounting functions take it and check it against the factorization.

- :class:`MinSeparation` — every example participates in at most k steps, any two at least b
  apart (Choquette-Choo et al. 2023, "Multi-Epoch MF", (k, b)-participation).  Realized by
  splitting the data once into b fixed batches used cyclically (one epoch = b steps), so
  k = ⌈T/b⌉.  No amplification: the release C·G + Z is one Gaussian mechanism with L2
  sensitivity sens(C; k, b)·Δ₁ (Δ₁ = 1 add/remove, 2 replace-one, in clip units), i.e. a
  ``GaussianDpEvent`` with noise multiplier σ / (sens·Δ₁), accounted with PLD (exact for one
  Gaussian up to the discretization).
- :class:`CyclicPoisson` — data split once into b partitions; step t uses partition t mod b,
  each of its examples included independently with probability p = batch_size·b/n.
  Choquette-Choo et al. 2023, "(Amplified) Banded Matrix Factorization", Thm 4 (the
  reference 004 cites as choquette2024amplifiedMF): if C is lower-triangular with at most b
  bands, the mechanism is as private as the k = ⌈T/b⌉-fold composition of the Poisson-
  subsampled Gaussian with rate p and noise multiplier σ/ζ, ζ = max column norm of C.
  Reason: an example lives in one partition, so it enters only steps i, i+b, …, whose
  columns of a b-banded C have disjoint supports; rows of C·G then split into independent
  blocks, each a sampled Gaussian in that example.  Conditions checked: C lower-triangular,
  b-banded (C[i, j] = 0 for i − j ≥ b), add/remove neighbours (the theorem's relation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
import numpy as np
import torch
from dp_accounting.pld import pld_privacy_accountant

from dplab.accounting.base import DELTA_FLOOR, SIGMA_RTOL
from dplab.accounting.setting import check_delta, check_epsilon
from dplab.errors import AssumptionError, DPLabError
from dplab.mf.factorizations import Factorization
from dplab.mf.sensitivity import max_participations
from dplab.units import sum_sensitivity

NAME = "mf"
#: PLD discretization (dp_accounting's default)
VALUE_DISCRETIZATION_INTERVAL = 1e-4


def _int(key: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or int(value) != value or value < low:
        raise DPLabError(key, f"must be an integer >= {low}; got {value!r}")
    return int(value)


def _partitions(dataset_size: int, parts: int, generator: torch.Generator) -> list[torch.Tensor]:
    order = torch.randperm(dataset_size, generator=generator)
    return [order[i::parts] for i in range(parts)]


@dataclass(frozen=True)
class MinSeparation:
    """(k, b)-participation realized by b fixed batches used cyclically (see module docstring)."""

    min_separation: int  # b: number of fixed batches (steps per epoch)
    steps: int
    dataset_size: int | None = None  # needed only to draw batches

    def __post_init__(self):
        _int("steps", self.steps)
        _int("min_separation", self.min_separation)
        if self.dataset_size is not None and _int("dataset_size", self.dataset_size) < self.min_separation:
            raise DPLabError("min_separation", f"must be <= dataset_size={self.dataset_size}; got {self.min_separation}")

    @classmethod
    def from_batch_size(cls, dataset_size: int, batch_size: int, steps: int) -> "MinSeparation":
        """b = ⌊n / batch_size⌋ fixed batches (each of ≥ batch_size examples)."""
        if not (1 <= batch_size <= dataset_size):
            raise DPLabError("batch_size", f"must lie in [1, dataset_size={dataset_size}]; got {batch_size}")
        return cls(dataset_size // batch_size, steps, dataset_size)

    @property
    def participations(self) -> int:
        """k = ⌈T/b⌉."""
        return max_participations(self.steps, self.steps, self.min_separation)

    def partitions(self, generator: torch.Generator) -> list[torch.Tensor]:
        """The b fixed batches (drawn once per run from ``generator``)."""
        if self.dataset_size is None:
            raise DPLabError("dataset_size", "is required to draw batches")
        return _partitions(self.dataset_size, self.min_separation, generator)

    def batch(self, step: int, partitions: list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        return partitions[step % self.min_separation]


@dataclass(frozen=True)
class CyclicPoisson:
    """Cyclic Poisson sampling over b partitions (see module docstring)."""

    dataset_size: int
    batch_size: float  # expected batch size
    partitions_count: int  # b
    steps: int

    def __post_init__(self):
        _int("dataset_size", self.dataset_size)
        _int("steps", self.steps)
        _int("partitions", self.partitions_count)
        if not (0 < self.batch_size and self.sampling_rate <= 1):
            raise DPLabError(
                "batch_size",
                f"must lie in (0, dataset_size/partitions = {self.dataset_size / self.partitions_count}]; got {self.batch_size}",
            )

    @property
    def sampling_rate(self) -> float:
        """p = batch_size·b/n (each partition holds n/b examples; the last ones may hold one fewer)."""
        return self.batch_size * self.partitions_count / self.dataset_size

    @property
    def compositions(self) -> int:
        """k = ⌈T/b⌉: how often partition 0 is visited."""
        return -(-self.steps // self.partitions_count)

    def partitions(self, generator: torch.Generator) -> list[torch.Tensor]:
        return _partitions(self.dataset_size, self.partitions_count, generator)

    def batch(self, step: int, partitions: list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        part = partitions[step % self.partitions_count]
        keep = torch.rand(len(part), generator=generator) < self.sampling_rate
        return part[keep]


def _fail(key: str, message: str) -> AssumptionError:
    return AssumptionError(NAME, key, message)


def dp_event(
    factorization: Factorization, sampler, noise_multiplier: float, neighbouring: str = "add_remove"
) -> dp_accounting.DpEvent:
    """The ``DpEvent`` of the whole T-step release under ``sampler`` (module docstring)."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise DPLabError("noise_multiplier", f"must be a finite number > 0; got {noise_multiplier}")
    if not isinstance(sampler, (MinSeparation, CyclicPoisson)):
        raise _fail("sampler", f"must be MinSeparation or CyclicPoisson; got {type(sampler).__name__}")
    if sampler.steps != factorization.steps:
        raise _fail("steps", f"sampler has {sampler.steps} steps, factorization {factorization.steps}")
    C = factorization.encoder
    if np.any(np.triu(C, 1) != 0):
        raise _fail("encoder", "C must be lower-triangular (noise of step t may only use Z[0..t])")
    if isinstance(sampler, MinSeparation):
        sens = factorization.sensitivity(sampler.participations, sampler.min_separation).value
        return dp_accounting.GaussianDpEvent(noise_multiplier / (sens * sum_sensitivity(1.0, neighbouring)))
    # CyclicPoisson
    if neighbouring != "add_remove":
        raise _fail("neighbouring", f"amplified banded MF is proved for add_remove only; got {neighbouring!r}")
    b = sampler.partitions_count
    lag = np.subtract.outer(np.arange(C.shape[0]), np.arange(C.shape[1]))
    if np.any(C[lag >= b] != 0):
        raise _fail("bands", f"cyclic Poisson over b={b} partitions needs a C with at most b bands")
    zeta = math.sqrt(np.max(np.sum(C**2, axis=0)))
    gaussian = dp_accounting.GaussianDpEvent(noise_multiplier / zeta)
    step = gaussian if sampler.sampling_rate == 1 else dp_accounting.PoissonSampledDpEvent(sampler.sampling_rate, gaussian)
    return dp_accounting.SelfComposedDpEvent(step, sampler.compositions)


def _pld(event, interval: float = VALUE_DISCRETIZATION_INTERVAL) -> pld_privacy_accountant.PLDAccountant:
    """PLD accountant holding ``event``; add/remove relation (replace-one is folded into Δ₁)."""
    acc = pld_privacy_accountant.PLDAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        value_discretization_interval=interval,
    )
    return acc.compose(event)


def epsilon(factorization, sampler, noise_multiplier: float, delta: float, neighbouring: str = "add_remove") -> float:
    """ε(σ) at δ (PLD)."""
    delta = check_delta(delta)
    return float(_pld(dp_event(factorization, sampler, noise_multiplier, neighbouring)).get_epsilon(delta))


def delta(factorization, sampler, noise_multiplier: float, epsilon_: float, neighbouring: str = "add_remove") -> float:
    """δ(σ) at ε (PLD), never below :data:`DELTA_FLOOR` (an exact δ that rounds to 0 is not 0)."""
    epsilon_ = check_epsilon(epsilon_)
    pld = _pld(dp_event(factorization, sampler, noise_multiplier, neighbouring))
    return max(float(pld.get_delta(epsilon_)), DELTA_FLOOR)


def calibrate(factorization, sampler, epsilon_: float, delta_: float, neighbouring: str = "add_remove") -> float:
    """Smallest σ with ε(σ) ≤ ``epsilon_`` at ``delta_``: bisection in log σ to ``SIGMA_RTOL``.

    First to 1e-3 with a PLD 10× coarser (fast), then at full resolution inside ±1 % of it.
    """
    epsilon_, delta_ = check_epsilon(epsilon_), check_delta(delta_)
    rough = _bisect(factorization, sampler, epsilon_, delta_, neighbouring, math.log(0.05), math.log(1.0), 1e-3, 10)
    return _bisect(factorization, sampler, epsilon_, delta_, neighbouring, math.log(rough) - 0.01, math.log(rough) + 0.01, SIGMA_RTOL, 1)


def _bisect(factorization, sampler, epsilon_, delta_, neighbouring, lo, hi, rtol, coarsen) -> float:
    def meets(log_sigma: float) -> bool:
        event = dp_event(factorization, sampler, math.exp(log_sigma), neighbouring)
        return _pld(event, VALUE_DISCRETIZATION_INTERVAL * coarsen).get_epsilon(delta_) <= epsilon_

    while not meets(hi):
        lo, hi = hi, hi + math.log(4.0)
        if hi > math.log(1e6):
            raise _fail("epsilon", f"no σ <= 1e6 reaches ε = {epsilon_} at δ = {delta_}")
    while meets(lo):
        hi, lo = lo, lo - math.log(4.0)
        if lo < math.log(1e-4):
            return math.exp(hi)
    while hi - lo > rtol / 4:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return math.exp(hi)
