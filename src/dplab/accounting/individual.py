"""Individual ε: each training record's privacy loss from its own clipped gradient norms.

Individual RDP accounting (Feldman & Zrnic, "Individual Privacy Accounting via a Rényi Filter",
NeurIPS 2021): at step t, record i enters the clipped sum with norm min(‖g_i,t‖, C), so its
sensitivity is s_i,t = min(‖g_i,t‖, C)/C ≤ 1 and the step is, for record i, the Poisson-sampled
(or full-batch) Gaussian mechanism with noise multiplier σ/s_i,t.  Its RDP at order α is the
``rdp`` accountant's one-step RDP at that noise multiplier (Mironov, Talwar & Zhang 2019), and
record i's RDP after T steps is the sum over t (RDP composition with adaptively chosen
parameters, Feldman & Zrnic 2021), converted to (ε, δ) as the ``rdp`` accountant converts.

- neighbouring relation: add/remove of record i, the other records fixed (an individual
  guarantee: D vs D without x_i).  g_i,t is record i's gradient at the iterate of step t, whether
  or not step t sampled it (the mixture (1 − q)N(0, σ²C²) + qN(clip(g_i,t), σ²C²) depends on it
  either way), so training computes every record's norm at every step.
- rounding: s_i,t is rounded up to a multiple of 1/:data:`LEVELS` (an upper bound: the RDP of the
  sampled Gaussian decreases with σ); a record with s = 1 at every step gets exactly the run's
  ``rdp`` ε, a record with s = 0 at every step gets 0 (the output does not depend on it).
- what it is not: a data-dependent figure (it reads the realised trajectory and the record's
  own gradients); it is a release guarantee only when a filter stops each record's participation
  at its budget.
- the filter (``individual_budget``, Feldman & Zrnic 2021's Rényi filter): at a fixed order α, a
  record enters step t only if its RDP spent so far plus the step's (at its sensitivity there)
  stays within B = ε_budget − ln(1/δ)/(α − 1); otherwise its gradient is left out of that step
  (sensitivity 0).  Every record's RDP at α then stays ≤ B, so each record's ε at δ is at most
  ε_budget (Mironov 2017, Prop. 3) whatever the data: a guarantee, not only a reading.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting.dp_accounting_adapters import RdpAccountant
from dplab.accounting.rdp_conversion import epsilon_from_rdp
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError
from dplab.schemes import Neighbouring, Sampling

#: sensitivities are rounded up to a multiple of 1/LEVELS (level k: s = k/LEVELS; one
#: rdp call a level, ~50 ms)
LEVELS = 64
#: the (sampling, neighbouring) pairs individual accounting is implemented for
#: (``rdp``'s Gaussian ones)
SUPPORTED = (
    (Sampling.POISSON, Neighbouring.ADD_REMOVE),
    (Sampling.FULL_BATCH, Neighbouring.ADD_REMOVE),
)
NEIGHBOURING = "add/remove of the record, every other record fixed"
METHOD = (
    "individual RDP (Feldman & Zrnic 2021): per step the rdp accountant's RDP at σ·C/min(‖g_i,t‖,"
    f" C), sensitivities rounded up to multiples of 1/{LEVELS}, summed over the T steps, converted"
    " like rdp"
)


def check(sampling: str, neighbouring: str) -> None:
    """DPLabError unless individual accounting is implemented for the pair."""
    if (sampling, neighbouring) not in SUPPORTED:
        raise DPLabError(
            "individual_epsilon",
            "individual ε is computed for "
            + ", ".join(f"{s} + {n}" for s, n in SUPPORTED)
            + f"; got {sampling} + {neighbouring}",
        )


def levels(norms, clip: float):
    """Level k = ⌈LEVELS·min(‖g‖, C)/C⌉ of each norm (a torch tensor; int64); a NaN norm is
    charged the top level, as C (it fell to level 0, i.e. ε = 0, through the integer cast)."""
    norms = norms.nan_to_num(nan=clip)
    return (norms.clamp(max=clip) / clip * LEVELS).ceil().long().clamp(0, LEVELS)


def one_step_rdp(setting: Setting, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(orders, table): row k the one-step RDP at sensitivity k/LEVELS for each k in ``used``
    (0 at k = 0), every other row 0."""
    orders = _level_rdp(setting, LEVELS)[0]
    table = np.zeros((LEVELS + 1, len(orders)))
    for k in used:
        if k > 0:
            table[k] = _level_rdp(setting, int(k))[1]
    return orders, table


@functools.lru_cache(maxsize=4 * (LEVELS + 1))
def _level_rdp(setting: Setting, level: int) -> tuple[np.ndarray, np.ndarray]:
    """rdp's (orders, one-step RDP) at sensitivity level/LEVELS (cached: the filter and the final
    accounting of a run ask the same levels)."""
    return RdpAccountant().one_step_rdp(
        setting.replace(noise_multiplier=setting.noise_multiplier * LEVELS / level)
    )


def filter_budget(epsilon: float, order: float, delta: float) -> float:
    """B = ε − ln(1/δ)/(α − 1): the RDP at order α whose (ε, δ) conversion (Mironov 2017, Prop. 3)
    is ε; a DPLabError if α is not one of dp_accounting's default orders or B ≤ 0."""
    if order not in rdp_privacy_accountant.DEFAULT_RDP_ORDERS:
        raise DPLabError(
            "individual_order",
            f"must be one of dp_accounting's default RDP orders (1.1 … 10.9 in steps "
            f"of 0.1, then 11 … 63, 128, 256, 512, 1024); got {order}",
        )
    budget = epsilon - math.log(1 / delta) / (order - 1)
    if budget <= 0:
        raise DPLabError(
            "individual_budget",
            f"ε = {epsilon} is at most ln(1/δ)/(α − 1) = "
            f"{math.log(1 / delta) / (order - 1):.6g} at order {order}: no RDP left "
            "(raise it, or the order)",
        )
    return budget


def order_rdp(setting: Setting, order: float) -> np.ndarray:
    """The one-step RDP at ``order`` of every sensitivity level (row k of :func:`one_step_rdp`)."""
    orders, table = one_step_rdp(setting, np.arange(LEVELS + 1))
    return table[:, list(orders).index(order)]


def epsilons(setting: Setting, counts: np.ndarray, delta: float) -> np.ndarray:
    """Individual ε at δ of every record; ``counts[i, k]``: the steps at which
    record i had level k."""
    check(setting.sampling, setting.neighbouring)
    counts = np.asarray(counts, dtype=float)
    orders, table = one_step_rdp(setting, np.flatnonzero(counts.sum(axis=0)))
    rdp = counts @ table
    out = np.zeros(len(counts))
    some = (
        rdp.max(axis=1) > 0
    )  # no RDP at any order: the output's law does not depend on the record
    if some.any():
        out[some] = epsilon_from_rdp(rdp[some], orders, delta)
    return out


def worst_case(setting: Setting, delta: float) -> float:
    """The ε of a record at sensitivity 1 at every step: the run's ``rdp`` ε."""
    counts = np.zeros((1, LEVELS + 1))
    counts[0, LEVELS] = setting.steps
    return float(epsilons(setting, counts, delta)[0])
