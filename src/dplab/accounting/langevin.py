"""``langevin``: noisy GD on strongly convex smooth losses, last iterate only (002; 000 §VII).

Plain functions in 002's own units (Alg. 1: θ ← Π(θ − (η/n)·g(θ; D) + √(2η)·N(0, σ²I)), S_g the
L2 sensitivity of the total gradient g, K the number of steps) return the RDP curve ε_α(K) for
every K of a grid in one call; :class:`LangevinAccountant` maps a canonical Setting onto them
(σ₀₀₂ = units.langevin_sigma, S_g = units.sum_sensitivity(clip, neighbouring)).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import lambertw

from dplab import units
from dplab.accounting import rdp_conversion
from dplab.accounting.setting import Setting
from dplab.schemes import Neighbouring, Sampling

#: y > 0 solving y/2 = 1 − e^(−y), i.e. y = 2 + W₀(−2e⁻²) ≈ 1.5936: where a Thm 2 bound
#: (α S_g²/(2cσ⁴n²))(1 − e^(−uηK)), u = σ²c, meets the App. E baseline α S_g² ηK/(4σ²n²).
CROSSING_Y = float(2.0 + lambertw(-2.0 * math.exp(-2.0), 0).real)


def _steps(steps) -> np.ndarray:
    return np.asarray(steps, dtype=float)


def thm2_rdp(alpha, steps, lr, sigma, n, sensitivity, lsi_constant) -> np.ndarray:
    """002 Thm 2, eq. (16): ε = α S_g²/(2cσ⁴n²)·(1 − exp(−σ²cηK)) under c-LSI throughout."""
    c = lsi_constant
    return (
        alpha
        * sensitivity**2
        / (2 * c * sigma**4 * n**2)
        * -np.expm1(-(sigma**2) * c * lr * _steps(steps))
    )


def cor1_rdp(alpha, steps, lr, sigma, n, sensitivity, strong_convexity) -> np.ndarray:
    """002 Cor. 1 (= 000 Thm VII.1 after eq. (6)): ε = α S_g²/(λσ²n²)·(1 − exp(−ληK/2)),
    λ-strongly convex β-smooth loss, η < 1/β (Thm 2 with c = λ/(2σ²))."""
    lam = strong_convexity
    return (
        alpha * sensitivity**2 / (lam * sigma**2 * n**2) * -np.expm1(-lam * lr * _steps(steps) / 2)
    )


def cor2_rdp(alpha, steps, lr, sigma, n, sensitivity) -> np.ndarray:
    """002 Cor. 2, eq. (18)/(72): ℓ(θ; x) = ½‖θ − x‖², ε = α S_g²/((2−η)σ²n²)·(1 − exp(−(2−η)ηK/2))
    (Thm 2 with c = (2−η)/(2σ²))."""
    return (
        alpha
        * sensitivity**2
        / ((2 - lr) * sigma**2 * n**2)
        * -np.expm1(-(2 - lr) * lr * _steps(steps) / 2)
    )


def thm3_exact_rdp(alpha, steps, lr, sigma, n, sensitivity) -> np.ndarray:
    """002 Thm 3 proof (App. E): the exact Rényi divergence of noisy GD on the ℓ2-squared loss
    for the worst pair of datasets, α S_g²/(4σ²n²)·(2−η)(1−(1−η)^K)/(1+(1−η)^K), η < 1."""
    decay = np.exp(_steps(steps) * math.log1p(-lr))
    return alpha * sensitivity**2 / (4 * sigma**2 * n**2) * (2 - lr) * (1 - decay) / (1 + decay)


def thm3_lower_bound(alpha, steps, lr, sigma, n, sensitivity) -> np.ndarray:
    """002 Thm 3, eq. (17)/(70): the simplified lower bound α S_g²/(4σ²n²)·(1 − exp(−ηK))."""
    return alpha * sensitivity**2 / (4 * sigma**2 * n**2) * -np.expm1(-lr * _steps(steps))


def composition_rdp(alpha, steps, lr, sigma, n, sensitivity) -> np.ndarray:
    """002 App. E baseline (moments accountant, Figs. 1–2): ε = α S_g²/(4n²σ²)·ηK."""
    return alpha * sensitivity**2 / (4 * n**2 * sigma**2) * lr * _steps(steps)


def crossing_steps(lr: float, strong_convexity: float | None = None) -> float:
    """K where Cor. 1 (given λ) or Cor. 2 (λ = None) equals the App. E baseline, in closed form.

    Both are Thm 2 bounds with u = σ²c = λ/2 (Cor. 1) or (2−η)/2 (Cor. 2); equating with the
    baseline gives y/2 = 1 − e^(−y) for y = uηK, so K* = y/(uη) = :data:`CROSSING_Y`/(uη),
    independent of α, σ, n and S_g.  Below K* the baseline is smaller, above it the bound is.
    """
    u = (2 - lr) / 2 if strong_convexity is None else strong_convexity / 2
    return CROSSING_Y / (u * lr)


class LangevinAccountant(rdp_conversion.RdpBound):
    """Noisy full-batch GD, last iterate released: 002 Cor. 1 (Thm 2 with LSI constant
    λ/(2σ²)); 000 Thm VII.1.  RDP → (ε, δ) by :mod:`dplab.accounting.rdp_conversion`.

    Units: σ₀₀₂ = units.langevin_sigma(σ, C, η, n) (002 Alg. 1 noise; 000 eq. (6)) and
    S_g = units.sum_sensitivity(C, neighbouring) — C for add_remove, 2C for replace_one.
    ``lipschitz`` (L) is required and must not exceed ``clip``: 002 analyses GD on the loss itself,
    which the clipped update is only when clipping never acts (C ≥ L); without L that is unknown
    and the bound is refused.  L is not used for S_g (002's S_g ≤ 2L ≤ 2C).

    replace_one is 002's own relation (datasets of the same size n, its Appendix's definition
    of neighbours).  add_remove (:meth:`constants`): the neighbour holds n − 1 or n + 1 records
    and its update is divided by the same public n (the engine divides by the size of the data
    it is given, which is that n).  Its averaged loss (1/n)Σ_{x∈D'} ℓ(θ; x) then has Hessian
    eigenvalues in [λ(n−1)/n, β(n+1)/n], not [λ, β].  002 uses the loss constants only in
    Lemma 5 (the map T_s is (1 − ηλ)-Lipschitz when both averaged losses have Hessians in
    [λ, β] and η < 1/β, hence c = λ/(2σ²)-LSI throughout), and the relation only in Lemma 4
    (‖V_t − V'_t‖ ≤ S_g/n, S_g the sensitivity of the total gradient).  So Cor. 1 holds with
    λ' = λ(n−1)/n in place of λ, under η < 1/β', β' = β(n+1)/n, and S_g = C:
    ε_α = αC²/(λ'σ²n²)·(1 − e^(−λ'ηK/2)).  n ≥ 2 (the empty dataset is not strongly convex).
    """

    name = "langevin"
    source = (
        "002 Cor. 1 / Thm 2 (000 Thm VII.1); add_remove: Cor. 1 with λ(n−1)/n, β(n+1)/n (docstring)"
    )
    release = "last_iterate"
    samplings = (Sampling.FULL_BATCH,)
    neighbourings = (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE)
    requires = (
        "noise_multiplier",
        "steps",
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
        "full-batch noisy GD (002 Alg. 1), update normalized by the public n",
        (
            "loss λ-strongly convex and β-smooth on a closed convex set, λ ≤ β, for every"
            " neighbouring dataset"
        ),
        (
            "loss L-Lipschitz with L = lipschitz <= clip, so clipping is inactive; no weight decay"
            " (regularization unset)"
        ),
        (
            "lr < 1/smoothness (002 Cor. 1); add_remove: lr < n/((n+1)·smoothness), λ(n−1)/n in the"
            " bound, n >= 2"
        ),
        (
            "θ₀ data-independent and λ/(2σ₀₀₂²)-LSI (002 Lemma 5 base step): 002's Π_C(N(0,"
            " 2σ₀₀₂²/λ·I)), or a fixed point such as dplab's logreg start θ₀ = 0"
            " (docs/hidden_state.md)"
        ),
    )

    @staticmethod
    def constants(setting: Setting) -> tuple[float, float]:
        """(λ', β'): the extreme Hessian eigenvalues of the averaged loss of any dataset the bound
        compares — (λ, β) under replace_one, (λ(n−1)/n, β(n+1)/n) under add_remove (class doc)."""
        lam, beta, n = setting.strong_convexity, setting.smoothness, setting.dataset_size
        if setting.neighbouring == Neighbouring.ADD_REMOVE:
            return lam * (n - 1) / n, beta * (n + 1) / n
        return lam, beta

    def check_setting(self, setting: Setting) -> None:
        if setting.strong_convexity > setting.smoothness:
            raise self.fail(
                "strong_convexity",
                f"must be <= smoothness ({setting.smoothness}); got {setting.strong_convexity}",
            )
        if setting.neighbouring == Neighbouring.ADD_REMOVE and setting.dataset_size < 2:
            raise self.fail(
                "dataset_size",
                f"must be >= 2 under add_remove (the neighbour of one record is empty); "
                f"got {setting.dataset_size}",
            )
        _, beta = self.constants(setting)
        if not setting.lr < 1.0 / beta:
            which = (
                "smoothness"
                if setting.neighbouring == Neighbouring.REPLACE_ONE
                else "smoothness·(n+1)/n (add_remove)"
            )
            raise self.fail(
                "lr",
                f"must lie in (0, 1/{which}) = (0, {1.0 / beta:g}) (002 Cor. 1); got {setting.lr}",
            )
        self.check_clipping_inactive(setting)

    @classmethod
    def order_rdp(cls, setting: Setting, alpha: float, steps) -> np.ndarray:
        """ε_α(T) of Cor. 1 at one order α for a canonical setting (already checked), λ' of
        :meth:`constants`.  (The whole run's curve over the orders is the base class's
        ``rdp_curve(setting)``, which private selection reads.)"""
        sigma = units.langevin_sigma(
            setting.noise_multiplier, setting.clip, setting.lr, setting.dataset_size
        )
        s_g = units.sum_sensitivity(setting.clip, setting.neighbouring)
        lam, _ = cls.constants(setting)
        return cor1_rdp(alpha, steps, setting.lr, sigma, setting.dataset_size, s_g, lam)

    def _rdp(self, setting: Setting, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        orders = rdp_conversion.orders_for(setting.alpha)
        return orders, rdp_conversion.rdp_table(lambda a: self.order_rdp(setting, a, steps), orders)
