"""``pabi``: privacy amplification by iteration for DP-SGD on fixed disjoint batches, last
iterate only (000 §VI.A, Alg. 2; Thm VI.1 after Feldman et al. 2018)."""

from __future__ import annotations

import numpy as np

from dplab import units
from dplab.accounting import rdp_conversion
from dplab.accounting.setting import Setting
from dplab.schemes import Neighbouring, Sampling


def worst_shift_cost(steps, batches: int, reshuffle: bool = False) -> np.ndarray:
    """max over participation patterns of min Σ a_t², in units of (2ηL/B)², for K = ``steps``.

    Thm VI.1 leaves the a_t free subject to z_t = Σ_{i≤t}(s_i − a_i) ≥ 0 and z_K = 0, with
    s_t = 1 at the steps whose batch holds the differing record (0 elsewhere).  The best a_t for
    one pattern are the slopes of the greatest convex minorant of t ↦ Σ_{i≤t} s_i, and the cost
    grows as the visits move later, so the worst pattern puts every visit as late as allowed:

    - fixed order (000 Alg. 2, ``reshuffle`` false): the record's batch κ is visited every Q
      steps; the worst κ puts a visit at step K, so with m = ⌈K/Q⌉ visits the slopes are 1/Q
      between visits and 1 on the last step: 1 + (m − 1)/Q;
    - a new partition every epoch (``reshuffle``): one visit anywhere in each epoch; the worst
      puts it at the end of every full epoch and at step K in the last one, r = K − (m − 1)Q
      steps into it, so the last two visits are only r apart: 1 + (m − 2)/Q + 1/r (m ≥ 2; 1
      for m = 1).  At r = 1 (visits at the end of one epoch and the start of the next) two
      consecutive visits compose with no amplification; at K = mQ both orders give the same.

    The maximum over every pattern, with the minimum over a_t solved numerically, is checked
    against these closed forms by brute force in tests/test_pabi_reshuffle.py.
    """
    k = np.asarray(steps, dtype=float)
    visits = np.ceil(k / batches)
    if not reshuffle:
        return 1 + (visits - 1) / batches
    into_last = k - (visits - 1) * batches  # r ∈ [1, Q]
    return np.where(visits >= 2, 1 + (visits - 2) / batches + 1 / into_last, 1.0)


def pabi_rdp(alpha, steps, batches: int, sigma: float, reshuffle: bool = False) -> np.ndarray:
    """000 §VI.A: ε_α after K steps of Alg. 2 with Q = n/B batches, σ = σ₀₀₀.

    Thm VI.1 with s_t = 2ηL/B at the visits of the batch holding the differing record (0
    elsewhere) and noise std 2σηL/B gives ε_α = α/(2σ²)·:func:`worst_shift_cost`.  With the
    source paper's a_t schedule for a fixed order (2ηL/(BQ) from the first visit to the last one,
    the last visit's 2ηL/B spread over the K − t_last + 1 steps left) this is α/(2σ²)·[(m − 1)/Q +
    1/(K − t_last + 1)], worst κ: α/(2σ²)·[1 + (⌈K/Q⌉ − 1)/Q]; at K = QT, α/(2σ²)·[(T − 1)/Q + 1].
    (000 prints 1/Q² also on the last term and ends with αK/(2σ²Q²), which is below its own a_t sum;
    see docs/hidden_state.md.)
    """
    return alpha / (2 * sigma**2) * worst_shift_cost(steps, batches, reshuffle)


class PabiAccountant(rdp_conversion.RdpBound):
    """Fixed-batch DP-SGD (000 Alg. 2): convex, β-smooth, L-Lipschitz loss, no active clipping,
    lr ≤ 2/β (gradient steps are contractions), disjoint batches (``shuffle``) cycled in one
    order or redrawn every epoch (``reshuffle``, :func:`worst_shift_cost`), replace-one
    neighbours.  σ₀₀₀ = units.pabi_sigma(σ, C, L) = σC/(2L).  RDP → (ε, δ) by rdp_conversion.

    The permutations are data-independent, so the bound for the worst pattern of visits bounds
    their mixture (Rényi divergence is jointly quasi-convex); the secrecy of the order is not used.
    """

    name = "pabi"
    source = "000 §VI.A, Alg. 2, Thm VI.1 (Feldman et al. 2018)"
    release = "last_iterate"
    samplings = (Sampling.SHUFFLE,)
    neighbourings = (Neighbouring.REPLACE_ONE,)
    requires = (
        "noise_multiplier",
        "steps",
        "batch_size",
        "dataset_size",
        "clip",
        "lr",
        "smoothness",
        "lipschitz",
    )
    excludes = ("regularization",)
    assumptions = (
        "only the last iterate is released (hidden state)",
        (
            "loss convex, β-smooth and L-Lipschitz; clip >= lipschitz so clipping is inactive (000"
            " §VI.A); no weight decay (regularization unset)"
        ),
        "lr <= 2/smoothness: each gradient step is a contraction (000 §VI.A)",
        (
            "disjoint batches of size batch_size: one order cycled (000 Alg. 2), or redrawn every"
            " epoch (reshuffle: bound of the worst visit pattern, docs/hidden_state.md)"
        ),
        "dataset_size divisible by batch_size; replace-one neighbours",
    )

    def check_setting(self, setting: Setting) -> None:
        bound = 2.0 / setting.smoothness
        if not setting.lr <= bound:
            raise self.fail(
                "lr",
                f"must lie in (0, 2/smoothness] = (0, {bound:g}] for contraction; got {setting.lr}",
            )
        self.check_clipping_inactive(setting)
        if setting.dataset_size % setting.batch_size:
            raise self.fail(
                "batch_size",
                f"must divide dataset_size ({setting.dataset_size}) into equal batches",
            )

    def _rdp(self, setting: Setting, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        orders = rdp_conversion.orders_for(setting.alpha)
        sigma = units.pabi_sigma(setting.noise_multiplier, setting.clip, setting.lipschitz)
        batches = setting.dataset_size // setting.batch_size
        reshuffle = bool(setting.reshuffle)
        return orders, rdp_conversion.rdp_table(
            lambda a: pabi_rdp(a, steps, batches, sigma, reshuffle), orders
        )
