"""(ε, δ) of the matrix-factorization mechanism, and the samplers it is valid for (004 §4.3).

The privacy analysis holds only for the sampler it assumes (004 §4.3: "You cannot just plug
the Poisson subsampling"), so the sampler is an object: training draws its batches from it
(:meth:`batch`) and the accounting functions take it and check it against the factorization.

Partitions (both samplers): once per run every record is put in one of b partitions, drawn
independently and uniformly (:func:`assignment`, balls-in-bins), so a record's partition depends
on its own draw only and adding or removing a record moves no other record.  Step t uses
partition t mod b: a record enters at most k = ⌈T/b⌉ steps, any two b apart.  (A split of one
permutation, ``order[i::b]``, would move the others: an added record shifts them between
batches, and Δ₁ = 1 would not hold.)

- :class:`MinSeparation` — (k, b)-participation (Choquette-Choo et al. 2023, "Multi-Epoch MF"):
  batch t = partition t mod b, no amplification.  Conditioned on every partition, the release
  C·G + Z is one Gaussian mechanism of L2 sensitivity sens(C; k, b)·Δ₁ (Δ₁ = 1 add/remove,
  2 replace-one, in clip units: the replaced record keeps its slot's partition); the mixture
  over the added record's partition j (the other records' batches are the same for every j) is
  no less private, by joint convexity of the hockey-stick divergence (docs/matrix_factorization.md,
  "Why Δ₁ = 1 holds under add/remove").  So: a ``GaussianDpEvent`` with noise multiplier
  σ / (sens·Δ₁), accounted exactly (the Gaussian profile, 000 §II; Balle & Wang 2018, Thm 8).
- :class:`CyclicPoisson` — batch t = the members of partition t mod b each kept independently
  with probability p = batch_size·b/n (n the run's dataset size, fixed at planning like DP-SGD's
  q = b/n).  Choquette-Choo et al. 2023, "(Amplified) Banded Matrix Factorization", Thm 4 (the
  reference 004 cites as choquette2024amplifiedMF): if C is lower-triangular with at most b
  bands, a record of partition j makes the release as private as ≤ k = ⌈T/b⌉ compositions of
  the Poisson-subsampled Gaussian with rate p and noise multiplier σ/ζ, ζ = max column norm of
  C (its steps j, j+b, … have columns of disjoint supports, so the rows of C·G split into
  independent blocks, each a sampled Gaussian in that record); the mixture over j is again no
  less private.  Conditions checked: C lower-triangular, b-banded (C[i, j] = 0 for
  i − j ≥ b), add/remove neighbours (the theorem's relation).  Accounted with the ``pld``
  accountant (dp_accounting's PLD, and its limits); at p = 1 exactly.
- :class:`PoissonGroups` — the same amplified event given by its rate, for accounting only: it
  assumes groups formed as above (each record's group its own, fixed for the run, independent
  of the other records).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dp_accounting.dp_event

from dplab.accounting.base import EPSILON_MAX, ResolutionError
from dplab.accounting.events import MatrixFactorizationDpEvent
from dplab.accounting.matrix_factorization import MatrixFactorizationAccountant
from dplab.accounting.registry import get
from dplab.accounting.setting import check_delta, check_epsilon
from dplab.errors import AssumptionError, DPLabError
from dplab.mf.factorizations import Factorization
from dplab.mf.sensitivity import max_participations
from dplab.schemes import Neighbouring, Sampling
from dplab.units import sum_sensitivity
from dplab.validate import integer

if TYPE_CHECKING:  # torch draws the batches (training): the specs and their checks need none
    import torch

NAME = "mf"


def assignment(dataset_size: int, parts: int, generator: torch.Generator) -> torch.Tensor:
    """Each record's partition in 0..parts−1, drawn independently and uniformly (record i's is the
    i-th draw: with one seed, a dataset of n + 1 records assigns its first n as one of n does)."""
    import torch

    return torch.randint(parts, (dataset_size,), generator=generator)


def _partitions(dataset_size: int, parts: int, generator: torch.Generator) -> list[torch.Tensor]:
    """The records of each partition of :func:`assignment`, in increasing order (sizes vary:
    Binomial(n, 1/parts), empty ones included)."""
    where = assignment(dataset_size, parts, generator)
    order = where.argsort(stable=True)
    return list(order.split(where.bincount(minlength=parts).tolist()))


@dataclass(frozen=True)
class MinSeparation:
    """(k, b)-participation: b partitions (:func:`assignment`) used cyclically as the batches
    (module docstring)."""

    min_separation: int  # b: number of partitions (steps per epoch)
    steps: int
    dataset_size: int | None = None  # needed only to draw batches

    def __post_init__(self):
        integer("steps", self.steps)
        integer("min_separation", self.min_separation)
        if (
            self.dataset_size is not None
            and integer("dataset_size", self.dataset_size) < self.min_separation
        ):
            raise DPLabError(
                "min_separation",
                f"must be <= dataset_size={self.dataset_size}; got {self.min_separation}",
            )

    @classmethod
    def from_batch_size(cls, dataset_size: int, batch_size: int, steps: int) -> "MinSeparation":
        """b = ⌊n / batch_size⌋ partitions (expected size n/b ≥ batch_size)."""
        if not (1 <= batch_size <= dataset_size):
            raise DPLabError(
                "batch_size", f"must lie in [1, dataset_size={dataset_size}]; got {batch_size}"
            )
        return cls(dataset_size // batch_size, steps, dataset_size)

    @property
    def participations(self) -> int:
        """k = ⌈T/b⌉."""
        return max_participations(self.steps, self.steps, self.min_separation)

    def partitions(self, generator: torch.Generator) -> list[torch.Tensor]:
        """The b partitions (drawn once per run from ``generator``, :func:`assignment`)."""
        if self.dataset_size is None:
            raise DPLabError("dataset_size", "is required to draw batches")
        return _partitions(self.dataset_size, self.min_separation, generator)

    def batch(
        self, step: int, partitions: list[torch.Tensor], generator: torch.Generator
    ) -> torch.Tensor:
        return partitions[step % self.min_separation]


@dataclass(frozen=True)
class CyclicPoisson:
    """Cyclic Poisson sampling over b partitions (:func:`assignment`; module docstring)."""

    dataset_size: int
    batch_size: float  # expected batch size
    partitions_count: int  # b
    steps: int

    def __post_init__(self):
        integer("dataset_size", self.dataset_size)
        integer("steps", self.steps)
        integer("partitions", self.partitions_count)
        if not (0 < self.batch_size and self.sampling_rate <= 1):
            raise DPLabError(
                "batch_size",
                "must lie in (0, dataset_size/partitions ="
                f" {self.dataset_size / self.partitions_count}]; got {self.batch_size}",
            )

    @property
    def sampling_rate(self) -> float:
        """p = batch_size·b/n (a partition holds n/b records in expectation)."""
        return self.batch_size * self.partitions_count / self.dataset_size

    @property
    def compositions(self) -> int:
        """k = ⌈T/b⌉: how often partition 0 is visited."""
        return max_participations(self.steps, self.steps, self.partitions_count)

    def partitions(self, generator: torch.Generator) -> list[torch.Tensor]:
        return _partitions(self.dataset_size, self.partitions_count, generator)

    def batch(
        self, step: int, partitions: list[torch.Tensor], generator: torch.Generator
    ) -> torch.Tensor:
        import torch

        part = partitions[step % self.partitions_count]
        keep = torch.rand(len(part), generator=generator) < self.sampling_rate
        return part[keep]


@dataclass(frozen=True)
class PoissonGroups:
    """The amplified-BandMF sampler given by its rate (accounting only, draws no batches): the data
    split into b groups, group t mod b Poisson-sampled with rate q at step t (jax_privacy's
    ``amplified_bandmf_event``: b = the number of bands).  Assumes each record's group is fixed
    for the run and independent of the other records (as :func:`assignment` draws them), so that
    adding or removing a record moves no other; groups cut from one permutation do not qualify."""

    sampling_rate: float
    partitions_count: int  # b
    steps: int

    def __post_init__(self):
        integer("steps", self.steps)
        integer("partitions", self.partitions_count)
        if not (0 < self.sampling_rate <= 1):
            raise DPLabError("sampling_rate", f"must lie in (0, 1]; got {self.sampling_rate}")

    @property
    def compositions(self) -> int:
        """k = ⌈T/b⌉."""
        return max_participations(self.steps, self.steps, self.partitions_count)


def _fail(key: str, message: str) -> AssumptionError:
    return AssumptionError(NAME, key, message)


def check_amplified_neighbouring(neighbouring: str) -> None:
    """Amplified banded MF (cyclic Poisson, Poisson groups) is proved for add_remove only."""
    if neighbouring != Neighbouring.ADD_REMOVE:
        raise _fail(
            "neighbouring",
            f"amplified banded MF is proved for add_remove only; got {neighbouring!r}",
        )


def check_amplified(neighbouring: str, partitions: int, within_bands: bool, got: str = "") -> None:
    """Amplified banded MF's conditions besides C lower-triangular (Choquette-Choo et al. 2023,
    Thm 4): add_remove neighbours and a C with at most b = ``partitions`` bands (``within_bands``:
    C[i, j] = 0 whenever i − j >= b; ``got``: what C has, for the message).  :func:`event` asks
    them of the factorization; :func:`dplab.training.methods.dp_mf.sampler_spec` of the run's
    strategy before anything is factorized (``dplab check-config``)."""
    check_amplified_neighbouring(neighbouring)
    if not within_bands:
        raise _fail(
            "bands",
            f"cyclic Poisson over b={partitions} partitions needs a C with at most b bands{got}",
        )


def event(
    factorization: Factorization,
    sampler,
    noise_multiplier: float,
    neighbouring: str = Neighbouring.ADD_REMOVE,
) -> MatrixFactorizationDpEvent:
    """The :class:`MatrixFactorizationDpEvent` of the whole T-step release under ``sampler``
    (module docstring), refused where its conditions fail."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise DPLabError("noise_multiplier", f"must be a finite number > 0; got {noise_multiplier}")
    if not isinstance(sampler, (MinSeparation, CyclicPoisson, PoissonGroups)):
        raise _fail(
            "sampler",
            f"must be MinSeparation, CyclicPoisson or PoissonGroups; got {type(sampler).__name__}",
        )
    if sampler.steps != factorization.steps:
        raise _fail(
            "steps", f"sampler has {sampler.steps} steps, factorization {factorization.steps}"
        )
    if not factorization.lower_triangular:
        raise _fail("encoder", "C must be lower-triangular (noise of step t may only use Z[0..t])")
    common = {
        "strategy": factorization.strategy,
        "noise_multiplier": noise_multiplier,
        "steps": sampler.steps,
        "neighbouring": neighbouring,
    }
    if isinstance(sampler, MinSeparation):
        sens = factorization.sensitivity(sampler.participations, sampler.min_separation).value
        return MatrixFactorizationDpEvent(
            **common,
            participations=sampler.participations,
            separation=sampler.min_separation,
            sampler=Sampling.MIN_SEPARATION,
            scale=sens * sum_sensitivity(1.0, neighbouring),
        )
    # CyclicPoisson, PoissonGroups
    b = sampler.partitions_count
    check_amplified(neighbouring, b, factorization.within_bands(b))
    return MatrixFactorizationDpEvent(
        **common,
        participations=sampler.compositions,
        separation=b,
        sampler=Sampling.CYCLIC_POISSON,
        scale=factorization.max_column_norm,
        sampling_rate=sampler.sampling_rate,
    )


def _accountant() -> MatrixFactorizationAccountant:
    return get(NAME)


def dp_event(
    factorization: Factorization,
    sampler,
    noise_multiplier: float,
    neighbouring: str = Neighbouring.ADD_REMOVE,
) -> dp_accounting.dp_event.DpEvent:
    """The dp_accounting ``DpEvent`` of the whole T-step release under
    ``sampler`` (module docstring)."""
    return _accountant().dp_event(
        event(factorization, sampler, noise_multiplier, neighbouring), neighbouring
    )


def epsilon(
    factorization,
    sampler,
    noise_multiplier: float,
    delta: float,
    neighbouring: str = Neighbouring.ADD_REMOVE,
) -> float:
    """ε(σ) at δ (the ``mf`` accountant on the run's :func:`event`)."""
    delta = check_delta(delta)
    return _accountant().epsilon(
        event(factorization, sampler, noise_multiplier, neighbouring), delta, neighbouring
    )


def delta(
    factorization,
    sampler,
    noise_multiplier: float,
    epsilon_: float,
    neighbouring: str = Neighbouring.ADD_REMOVE,
) -> float:
    """δ(σ) at ε, never below DELTA_FLOOR (the ``mf`` accountant on the run's :func:`event`)."""
    epsilon_ = check_epsilon(epsilon_)
    return _accountant().event_delta(
        event(factorization, sampler, noise_multiplier, neighbouring), epsilon_, neighbouring
    )


def check_target(epsilon_: float, delta_: float) -> tuple[float, float]:
    """(ε, δ) of a calibration, refused outside (0, EPSILON_MAX] × (0, 1) (``dplab mf`` asks
    before it factorizes)."""
    epsilon_, delta_ = check_epsilon(epsilon_), check_delta(delta_)
    if not epsilon_ <= EPSILON_MAX:
        raise ResolutionError(
            NAME, "epsilon", f"must be <= {EPSILON_MAX:g} (EPSILON_MAX); got {epsilon_:g}"
        )
    return epsilon_, delta_


def calibrate(
    factorization,
    sampler,
    epsilon_: float,
    delta_: float,
    neighbouring: str = Neighbouring.ADD_REMOVE,
) -> float:
    """Smallest σ with ε(σ) ≤ ``epsilon_`` at ``delta_`` (the ``mf`` accountant's
    :meth:`~MatrixFactorizationAccountant.event_sigma`)."""
    epsilon_, delta_ = check_target(epsilon_, delta_)
    return _accountant().event_sigma(
        event(factorization, sampler, 1.0, neighbouring), epsilon_, delta_, neighbouring
    )
