"""``ye_shokri``: recursive RDP of DP-SGD with sampling without replacement on strongly convex
smooth losses, last iterate only (000 Thm VII.2, after Ye & Shokri 2022)."""

from __future__ import annotations

import numpy as np

from dplab import units
from dplab.accounting import rdp_conversion
from dplab.accounting.base import EPSILON_MAX
from dplab.accounting.setting import Setting
from dplab.schemes import Neighbouring, Sampling

#: the most steps of the recursion that are run (about 5 µs each: 5 s); a
#: longer T needs its fixed point
RECURSION_MAX = 10**6


def recursion_rdp(
    orders, steps, sampling_rate: float, sigma: float, lr: float, strong_convexity: float
) -> np.ndarray:
    """000 Thm VII.2: ε_α ≤ log(S)/(α−1) with, one step at a time (p = b/n, c = 1 − ηλ),

        S ← p·exp((α−1)α/(2σ²))·S + (1 − p)·S^(c²),   S = 1 before the first step,

    σ in 000's units (noise std on the batch-gradient sum / its sensitivity S_g).  Run in log S;
    returns shape (len(steps), len(orders)).  K epochs of n/b steps are the theorem's S_K^0;
    stopping mid-epoch is the same per-step recursion stopped earlier.

    Bounded work: at most :data:`RECURSION_MAX` steps are run.  A longer T is answered only if by
    then every order has reached its fixed point (one step left its log S unchanged in float64:
    every later step gives the same value) or is hopeless (ε_α above :data:`EPSILON_MAX`: S only
    grows, so ε from that order would be above it too; +∞); otherwise None (the caller refuses).
    """
    orders = np.asarray(orders, dtype=float)
    steps = np.asarray(steps, dtype=int)
    jump = np.log(sampling_rate) + (orders - 1) * orders / (2 * sigma**2)
    stay = np.log1p(-sampling_rate) if sampling_rate < 1 else -np.inf
    contraction = (1 - lr * strong_convexity) ** 2
    log_s = last = np.zeros_like(orders)
    out = np.empty((len(steps), len(orders)))
    k = 0
    for t in range(1, min(int(steps.max()), RECURSION_MAX) + 1):
        last, log_s = log_s, np.logaddexp(jump + log_s, stay + contraction * log_s)
        while k < len(steps) and steps[k] == t:
            out[k] = log_s / (orders - 1)
            k += 1
    if k < len(steps):
        fixed, hopeless = log_s == last, log_s > EPSILON_MAX * (orders - 1)
        if not np.all(fixed | hopeless):
            return None
        out[k:] = np.where(fixed, log_s / (orders - 1), np.inf)
    return out


class YeShokriAccountant(rdp_conversion.RdpBound):
    """DP-SGD with fixed-size batches sampled without replacement, λ-strongly convex β-smooth
    loss, η < 2/(λ+β): 000 Thm VII.2 (the recursion of :func:`recursion_rdp`), σ₀₀₀ =
    units.ye_shokri_sigma (= σ/2: the sum of a fixed-size batch has sensitivity 2C under the
    replace-one neighbours the theorem uses).  RDP → (ε, δ) by rdp_conversion.

    The recursion is for the loss's own gradient step, which the clipped update is only when
    clipping never acts: ``clip`` and ``lipschitz`` are required, with L ≤ C (without L the
    contraction 1 − ηλ of the update is unknown and the bound is refused)."""

    name = "ye_shokri"
    source = "000 Thm VII.2 (Ye & Shokri 2022)"
    release = "last_iterate"
    samplings = (Sampling.WITHOUT_REPLACEMENT,)
    neighbourings = (Neighbouring.REPLACE_ONE,)
    requires = (
        "noise_multiplier",
        "steps",
        "batch_size",
        "dataset_size",
        "clip",
        "lr",
        "strong_convexity",
        "smoothness",
        "lipschitz",
    )
    excludes = ("regularization",)
    assumptions = (
        "only the last iterate is released (hidden state)",
        (
            "loss λ-strongly convex, β-smooth and L-Lipschitz, λ ≤ β, L = lipschitz <= clip so that"
            " clipping is inactive; no weight decay (regularization unset)"
        ),
        "lr < 2/(strong_convexity + smoothness) (000 Thm VII.2)",
        "fixed-size batches sampled without replacement, replace-one neighbours",
    )
    # Orders above ~10⁴ overflow nothing here (log space) but never help: cap for speed.
    max_order = 1e4

    def check_setting(self, setting: Setting) -> None:
        lam, beta = setting.strong_convexity, setting.smoothness
        if lam > beta:
            raise self.fail("strong_convexity", f"must be <= smoothness ({beta}); got {lam}")
        bound = 2.0 / (lam + beta)
        if not setting.lr < bound:
            raise self.fail(
                "lr",
                f"must lie in (0, 2/(strong_convexity+smoothness)) = (0, {bound:g}); got"
                f" {setting.lr}",
            )
        self.check_clipping_inactive(setting)

    def _rdp(self, setting: Setting, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        orders = rdp_conversion.orders_for(setting.alpha)
        if setting.alpha is None:
            orders = orders[orders <= self.max_order]
        sigma = units.ye_shokri_sigma(setting.noise_multiplier, setting.neighbouring)
        rdp = recursion_rdp(
            orders, steps, setting.sampling_rate, sigma, setting.lr, setting.strong_convexity
        )
        if rdp is None:
            raise self.too_far(
                "steps",
                f"the recursion of Thm VII.2 has not reached its fixed point after "
                f"{RECURSION_MAX} steps (RECURSION_MAX): T = {int(np.max(steps))} is beyond "
                f"what ye_shokri resolves at this setting",
            )
        return orders, rdp
