"""A training setting in the canonical vocabulary of docs/units.md.

Every accountant reads the same :class:`Setting`; fields an accountant does not need stay
``None``.  Generic range checks (δ ∈ (0,1), σ > 0, q ∈ (0,1], …) live here so that every
accountant refuses the same bad input with the same message.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from dplab.errors import DPLabError
from dplab.schemes import Neighbouring, Sampling
from dplab.validate import integer, number, positive

#: the samplings a Setting takes (dp_mf's samplers are accounted by their own event)
SAMPLINGS = tuple(s for s in Sampling if s.accounted)
NEIGHBOURINGS = tuple(Neighbouring)


@dataclass(frozen=True)
class Setting:
    """One private-training (or one-release) setting, canonical names and units."""

    noise_multiplier: float | None = None  # σ: noise std on the clipped *sum* / C
    sampling_rate: float | None = None  # q = b / n
    steps: int | None = None  # T
    sampling: str = Sampling.POISSON
    neighbouring: str = Neighbouring.ADD_REMOVE
    dataset_size: int | None = None  # n
    batch_size: int | None = None  # b
    clip: float | None = None  # C
    lr: float | None = None  # η
    diameter: float | None = None  # D
    regularization: float | None = None  # λ of 001 eq. (17)
    strong_convexity: float | None = None  # λ of 000 §VII / 002
    smoothness: float | None = None  # β
    lipschitz: float | None = None  # L
    dimension: int | None = None  # d
    alpha: float | None = None  # Rényi order
    sensitivity: float | None = None  # Δ of a single Gaussian release
    reshuffle: bool | None = (
        None  # shuffle only: a new partition every epoch (None/False: one fixed order cycled)
    )

    def __post_init__(self) -> None:
        for key in SETTING_NUMBERS:  # a number read from a file may be text, a list, a bool
            if getattr(self, key) is not None:
                number(key, getattr(self, key))
        _check_positive(self, "noise_multiplier")
        _check_positive(self, "clip")
        _check_positive(self, "lr")
        _check_positive(self, "diameter")
        _check_positive(self, "sensitivity")
        _check_positive(self, "strong_convexity")
        _check_positive(self, "smoothness")
        _check_positive(self, "lipschitz")
        if self.sampling not in SAMPLINGS:
            raise DPLabError(
                "sampling", f"must be one of {', '.join(SAMPLINGS)}; got {self.sampling!r}"
            )
        if self.neighbouring not in NEIGHBOURINGS:
            raise DPLabError(
                "neighbouring",
                f"must be one of {', '.join(NEIGHBOURINGS)}; got {self.neighbouring!r}",
            )
        for key in ("steps", "dataset_size", "batch_size", "dimension"):
            value = getattr(self, key)
            if value is not None:
                integer(key, value)
        if self.sampling_rate is not None and not (0.0 < self.sampling_rate <= 1.0):
            raise DPLabError("sampling_rate", f"must lie in (0, 1]; got {self.sampling_rate}")
        if self.regularization is not None and not (0.0 <= self.regularization < 1.0):
            raise DPLabError("regularization", f"must lie in [0, 1); got {self.regularization}")
        if self.reshuffle not in (None, False, True):
            raise DPLabError("reshuffle", f"must be true or false; got {self.reshuffle!r}")
        if self.reshuffle and self.sampling != Sampling.SHUFFLE:
            raise DPLabError(
                "reshuffle", f"only applies to sampling shuffle; got sampling {self.sampling!r}"
            )
        if self.alpha is not None and not self.alpha > 1.0:
            raise DPLabError("alpha", f"must be > 1; got {self.alpha}")
        if self.batch_size is not None and self.dataset_size is not None:
            if self.batch_size > self.dataset_size:
                raise DPLabError(
                    "batch_size",
                    f"must be <= dataset_size ({self.dataset_size}); got {self.batch_size}",
                )
            q = self.batch_size / self.dataset_size
            if self.sampling_rate is None:
                object.__setattr__(self, "sampling_rate", q)
            elif not math.isclose(self.sampling_rate, q, rel_tol=1e-9):
                raise DPLabError(
                    "sampling_rate",
                    f"{self.sampling_rate} contradicts batch_size/dataset_size = {q}",
                )
        if self.sampling == Sampling.FULL_BATCH:
            if self.sampling_rate is None:
                object.__setattr__(self, "sampling_rate", 1.0)
            elif self.sampling_rate != 1.0:
                raise DPLabError(
                    "sampling_rate", f"must be 1 for full_batch sampling; got {self.sampling_rate}"
                )

    def replace(self, **changes) -> "Setting":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        """The fields that are set, in canonical names."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


#: the numeric fields of a Setting, in canonical order (docs/units.md): what
#: an accountant reads or not
SETTING_NUMBERS = tuple(
    f.name
    for f in dataclasses.fields(Setting)
    if f.name not in ("sampling", "neighbouring", "reshuffle")
)


def _check_positive(setting: Setting, key: str) -> None:
    if getattr(setting, key) is not None:
        positive(key, getattr(setting, key))


def check_delta(delta: float) -> float:
    """δ must lie in (0, 1)."""
    if not (0.0 < delta < 1.0):
        raise DPLabError("delta", f"must lie in (0, 1); got {delta}")
    return float(delta)


def check_epsilon(epsilon: float) -> float:
    """ε must be a finite number > 0."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise DPLabError("epsilon", f"must be a finite number > 0; got {epsilon}")
    return float(epsilon)
