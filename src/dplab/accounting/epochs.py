"""Epochs of the samplers that use each example about once per pass:
``shuffle`` and ``balls_in_bins``.

Both cut training into epochs of t = ⌊n/b⌋ steps (docs/sampling.md; the samplers of
:mod:`dplab.schemes`):

- ``shuffle``: a permutation of the n examples cut into t disjoint batches of b, one partition
  cycled or a new one per epoch; the n − t·b examples left over are not used in that epoch, so a
  given example enters an epoch with probability w = t·b/n, at a step it cannot see.
- ``balls_in_bins``: each example is placed in one of the t steps of the epoch uniformly at random,
  independently of the others (Chua et al. 2025, "Balls-and-Bins Sampling for DP-SGD"); w = 1.

T steps are ⌊T/t⌋ whole epochs and a partial one of T mod t steps, so an example enters at most
k = ⌈T/t⌉ steps: the partial epoch counts as a whole one (the worst case for it).

Shift of one participation (how far the step's clipped sum can move, in units of C):

- ``replace_one``: 2, for both samplers (the record keeps its step, its gradient changes).
- ``add_remove``, ``balls_in_bins``: 1 (the other examples' steps do not depend on the record).
- ``add_remove``, ``shuffle``: 2.  The batch size is fixed, so an added record x displaces one
  other record y from its batch: a uniform permutation of D ∪ {x} is a uniform permutation π of D
  with x put at a uniform position j and π(j) moved to the end; the batches then differ from those
  of D only where x replaced π(j), a change of g(x) − g(π(j)), up to 2C.  (The "zero-out" relation
  of Chua et al. 2024, a record replaced by one with zero gradient so that n stays fixed, has
  shift 1; it is not the relation of this sampler.)

Both couplings, and every upper bound built on them, need the neighbour's epochs to be the same
t steps: the samplers take t = ⌊n/b⌋ from the dataset they are given, so under ``add_remove``
⌊(n ± 1)/b⌋ = ⌊n/b⌋ must hold, i.e. n mod b ∉ {0, b − 1} (:func:`check`).  Otherwise adding or
removing one record changes the number of steps per epoch: every epoch boundary after the first
moves, the batches of the two runs are no longer one record apart, and records with distinct
gradients tell the layouts apart (``tests/test_certified_samplers.py`` finds, by brute force over
the layouts, pairs above what the one-record bound prints), so the upper bounds refuse.  A lower
bound needs only one pair that exists: its pair removes x from n records whose other gradients
do not reveal the layout (:func:`check_lower`), which holds for every n > b.
"""

from __future__ import annotations

import numpy as np

from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError
from dplab.schemes import Neighbouring, Sampling

#: samplers whose epochs this module describes
SAMPLINGS = tuple(s for s in Sampling if s.epochs)


def steps_per_epoch(setting: Setting) -> int:
    """t = ⌊n/b⌋."""
    return setting.dataset_size // setting.batch_size


def participations(setting: Setting, steps) -> np.ndarray:
    """k = ⌈T/t⌉: the most steps one example enters in T steps (a partial epoch counted whole)."""
    return -(-np.asarray(steps, dtype=np.int64) // steps_per_epoch(setting))


def participation_rate(setting: Setting) -> float:
    """w: the probability that a given example is used in an epoch (t·b/n for
    shuffle, 1 otherwise)."""
    if setting.sampling == Sampling.SHUFFLE:
        return steps_per_epoch(setting) * setting.batch_size / setting.dataset_size
    return 1.0


def shift(setting: Setting) -> float:
    """How far one participation can move the step's clipped sum, in units of C (see above)."""
    if (
        setting.neighbouring == Neighbouring.ADD_REMOVE
        and setting.sampling == Sampling.BALLS_IN_BINS
    ):
        return 1.0
    return 2.0


def check(accountant: str, setting: Setting) -> None:
    """Refuse add_remove where adding or removing a record changes t = ⌊n/b⌋ (module docstring):
    the upper bounds' one-record coupling needs n mod b in [1, b − 2]."""
    if setting.sampling in SAMPLINGS and setting.neighbouring == Neighbouring.ADD_REMOVE:
        from dplab.accounting.registry import get  # the registry imports this module

        n, b = setting.dataset_size, setting.batch_size
        if n % b in (0, b - 1):
            takes = Neighbouring.ADD_REMOVE in get(accountant).neighbourings
            raise AssumptionError(
                accountant,
                "batch_size",
                f"add_remove with {setting.sampling} needs ⌊(n±1)/b⌋ = ⌊n/b⌋, i.e. dataset_size mod"
                " batch_size in [1, batch_size − 2]: adding or removing one record must not change"
                f" the number of steps per epoch (got n = {n}, b = {b}, n mod b = {n % b}); use"
                " neighbouring = replace_one"
                + (" or another batch_size" if takes else f" ({accountant} takes no other)"),
            )


def check_lower(accountant: str, setting: Setting) -> None:
    """The lower bounds' add_remove pair removes a record from n: the sampler
    must accept n − 1 ≥ b."""
    if (
        setting.neighbouring == Neighbouring.ADD_REMOVE
        and setting.dataset_size <= setting.batch_size
    ):
        raise AssumptionError(
            accountant,
            "dataset_size",
            f"must exceed batch_size ({setting.batch_size}) under add_remove: the neighbour without"
            f" the record must still fill a batch; got {setting.dataset_size}",
        )
