"""``pabi``: privacy amplification by iteration for DP-SGD on fixed disjoint batches, last
iterate only (000 §VI.A, Alg. 2; Thm VI.1 after Feldman et al. 2018)."""

from __future__ import annotations

import numpy as np

from dplab import units
from dplab.accounting import rdp_conversion
from dplab.accounting.registry import register
from dplab.accounting.setting import Setting


def pabi_rdp(alpha, steps, batches: int, sigma: float) -> np.ndarray:
    """000 §VI.A: ε_α after K steps of Alg. 2 with Q = n/B batches cycled, σ = σ₀₀₀.

    Thm VI.1 with s_t = 2ηL/B at the visits t ≡ κ (mod Q) of the batch holding the differing
    record (0 elsewhere), noise std 2σηL/B, and the seed's a_t schedule: 2ηL/(BQ) from the
    first visit to the last one, the last visit's 2ηL/B spread over the K − t_last + 1 steps left:

        ε_α = α/(2σ²)·[(m − 1)/Q + 1/(K − t_last + 1)],   m = number of visits.

    The worst position κ puts a visit at step K, so ε_α = α/(2σ²)·[1 + (⌈K/Q⌉ − 1)/Q]; at K = QT
    this is α/(2σ²)·[(T − 1)/Q + 1].  (000 prints 1/Q² also on the last term and ends with
    αK/(2σ²Q²), which is below its own a_t sum; see docs/hidden_state.md.)
    """
    visits = np.ceil(np.asarray(steps, dtype=float) / batches)
    return alpha / (2 * sigma**2) * (1 + (visits - 1) / batches)


@register
class PabiAccountant(rdp_conversion.RdpBound):
    """Fixed-batch DP-SGD (000 Alg. 2): convex, β-smooth, L-Lipschitz loss, no active clipping,
    lr ≤ 2/β (gradient steps are contractions), batches fixed and cycled (``shuffle``),
    replace-one neighbours.  σ₀₀₀ = units.pabi_sigma(σ, C, L) = σC/(2L).  RDP → (ε, δ) by
    rdp_conversion."""

    name = "pabi"
    source = "000 §VI.A, Alg. 2, Thm VI.1 (Feldman et al. 2018)"
    release = "last_iterate"
    samplings = ("shuffle",)
    neighbourings = ("replace_one",)
    requires = ("noise_multiplier", "steps", "batch_size", "dataset_size", "clip", "lr", "smoothness", "lipschitz")
    assumptions = (
        "only the last iterate is released (hidden state)",
        "loss convex, β-smooth and L-Lipschitz; clip >= lipschitz so clipping is inactive (000 §VI.A)",
        "lr <= 2/smoothness: each gradient step is a contraction (000 §VI.A)",
        "fixed disjoint batches of size batch_size, cycled in the same order (000 Alg. 2)",
        "dataset_size divisible by batch_size; replace-one neighbours",
    )

    def check_setting(self, setting: Setting) -> None:
        bound = 2.0 / setting.smoothness
        if not setting.lr <= bound:
            raise self.fail("lr", f"must lie in (0, 2/smoothness] = (0, {bound:g}] for contraction; got {setting.lr}")
        if setting.clip < setting.lipschitz:
            raise self.fail("clip", f"must be >= lipschitz ({setting.lipschitz}): clipping breaks convexity; got {setting.clip}")
        if setting.dataset_size % setting.batch_size:
            raise self.fail("batch_size", f"must divide dataset_size ({setting.dataset_size}) into equal batches")

    def _rdp(self, setting: Setting, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        orders = rdp_conversion.orders_for(setting.alpha)
        sigma = units.pabi_sigma(setting.noise_multiplier, setting.clip, setting.lipschitz)
        batches = setting.dataset_size // setting.batch_size
        return orders, rdp_conversion.rdp_table(lambda a: pabi_rdp(a, steps, batches, sigma), orders)
