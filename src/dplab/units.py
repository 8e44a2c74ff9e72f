"""Every conversion between the canonical parameters (docs/units.md) and the
source papers' notations.

Canonical: the noise multiplier σ is the std of the Gaussian noise added to the **sum** of
clipped per-example gradients, divided by the clipping norm C.  The neighbouring relation
decides the sensitivity of that sum (C for add/remove, 2C for replace-one), so σ itself never
changes with the relation; the accountants read the relation from the setting.

Each function names the source paper and equation whose notation it converts to or from.  The docs
page ``docs/units.md`` repeats every formula with a worked example that can be checked by hand.
"""

from __future__ import annotations

import math

from dplab.errors import DPLabError
from dplab.schemes import Neighbouring
from dplab.validate import positive


def sampling_rate(batch_size: int, dataset_size: int) -> float:
    """q = b / n (001 calls it p)."""
    if not (1 <= batch_size <= dataset_size):
        raise DPLabError(
            "batch_size", f"must lie in [1, dataset_size={dataset_size}]; got {batch_size}"
        )
    return batch_size / dataset_size


def sum_sensitivity(clip: float, neighbouring: str) -> float:
    """L2 sensitivity of the clipped gradient sum: C (add_remove) or 2C (replace_one)."""
    clip = positive("clip", clip)
    if neighbouring in tuple(Neighbouring):
        return Neighbouring(neighbouring).sensitivity * clip
    raise DPLabError("neighbouring", f"must be add_remove or replace_one; got {neighbouring!r}")


def noise_std_on_sum(noise_multiplier: float, clip: float) -> float:
    """Std of the noise added to the clipped sum: σ·C."""
    return positive("noise_multiplier", noise_multiplier) * positive("clip", clip)


def effective_noise_multiplier(noise_multiplier: float, neighbouring: str) -> float:
    """Noise std divided by the sensitivity of the sum: σ (add_remove) or σ/2 (replace_one)."""
    return noise_multiplier * 1.0 / sum_sensitivity(1.0, neighbouring)


# ------------------------------------------------------------------ 001 (Asoodeh & Diaz)
def asoodeh_sigma(noise_multiplier: float, lr: float, clip: float, batch_size: float) -> float:
    """001's σ (our ``σ_A``): std of the parameter-space noise, σ_A = η·σ·C / b.

    001 eq. (1) adds σ_A·Z to w − (η/|B|)·Σ clip(g); our update adds η·σ·C·Z/b
    (:func:`dplab.training.step.update`), the same σ_A at every step whatever |B| is; the
    gradient sum is divided by the realized |B| under ``normalize: realized``
    (:func:`dplab.training.step.denominator`), as in 001 eq. (12).
    """
    return (
        positive("lr", lr)
        * noise_std_on_sum(noise_multiplier, clip)
        / positive("batch_size", batch_size)
    )


def noise_multiplier_from_asoodeh(
    sigma_a: float, lr: float, clip: float, batch_size: float
) -> float:
    """Inverse of :func:`asoodeh_sigma`: σ = σ_A·b / (η·C)."""
    return (
        positive("sigma_a", sigma_a)
        * positive("batch_size", batch_size)
        / (positive("lr", lr) * positive("clip", clip))
    )


# ------------------------------------------------------ 002 (Chourasia, Ye & Shokri)
def langevin_sigma(noise_multiplier: float, clip: float, lr: float, dataset_size: int) -> float:
    """002's σ (noise std of Alg. 1, θ ← θ − (η/n)·g + √(2η)·N(0, σ²)).

    Matching the parameter-space noise of our full-batch step, (η/n)·σ·C = √(2η)·σ₀₀₂, gives
    σ₀₀₂² = η·σ²·C² / (2n²): 000 eq. (6) with S_g·σ₀₀₀ = σ·C.
    """
    n = positive("dataset_size", dataset_size)
    return noise_std_on_sum(noise_multiplier, clip) * math.sqrt(positive("lr", lr) / 2.0) / n


def noise_multiplier_from_langevin(
    sigma_002: float, clip: float, lr: float, dataset_size: int
) -> float:
    """Inverse of :func:`langevin_sigma`: σ = σ₀₀₂·n·√(2/η) / C."""
    n = positive("dataset_size", dataset_size)
    return (
        positive("sigma", sigma_002)
        * n
        * math.sqrt(2.0 / positive("lr", lr))
        / positive("clip", clip)
    )


# ---------------------------------------------------------------- 000 (Boninsegna)
def noise_multiplier_from_boninsegna(sigma_000: float) -> float:
    """000 Alg. 1 adds N(0, 4σ₀₀₀²C²) to the clipped sum: our σ = 2·σ₀₀₀ (std 2σ₀₀₀·C).

    000 states its bounds for replace-one neighbours (sensitivity 2C), so σ₀₀₀ is the std
    divided by the sensitivity: the effective multiplier of :func:`effective_noise_multiplier`.
    """
    return 2.0 * positive("sigma", sigma_000)


def boninsegna_sigma(noise_multiplier: float) -> float:
    """Inverse of :func:`noise_multiplier_from_boninsegna`: σ₀₀₀ = σ / 2."""
    return positive("noise_multiplier", noise_multiplier) / 2.0


# ------------------------------------------------------------- 003 (short note)
def noise_multiplier_from_note(sigma_003: float, batch_size: float) -> float:
    """003 Alg. 2 adds N(0, σ₀₀₃²C²) to the *average* of b clipped gradients: σ = b·σ₀₀₃.

    Caution: 003 §3's calibrations (σ_naive, σ_strong) treat σ as std over a sensitivity-C
    query, i.e. our σ on the sum (add_remove), not the σ₀₀₃ of its Alg. 2.
    """
    return positive("sigma", sigma_003) * positive("batch_size", batch_size)


def note_sigma(noise_multiplier: float, batch_size: float) -> float:
    """Inverse of :func:`noise_multiplier_from_note`: σ₀₀₃ = σ / b."""
    return positive("noise_multiplier", noise_multiplier) / positive("batch_size", batch_size)


# ---------------------------------------------------------------- 004 (blog post)
def noise_multiplier_from_blog(sigma_004: float) -> float:
    """004 §3.1 adds N(0, 4σ₀₀₄²C²/N²) to the average of N clipped gradients (replace-one):
    std on the sum is 2σ₀₀₄·C, so σ = 2·σ₀₀₄."""
    return 2.0 * positive("sigma", sigma_004)


def blog_sigma(noise_multiplier: float) -> float:
    """Inverse of :func:`noise_multiplier_from_blog`: σ₀₀₄ = σ / 2."""
    return positive("noise_multiplier", noise_multiplier) / 2.0


def gaussian_noise_std(noise_multiplier: float, sensitivity: float) -> float:
    """Absolute std of a single Gaussian release: σ·Δ (004 §2's salary example: Δ = B/n)."""
    return positive("noise_multiplier", noise_multiplier) * positive("sensitivity", sensitivity)


def noise_multiplier_from_gaussian_std(noise_std: float, sensitivity: float) -> float:
    """Inverse of :func:`gaussian_noise_std`: σ = std / Δ."""
    return positive("noise_std", noise_std) / positive("sensitivity", sensitivity)


# ------------------------------------------------- 000 §VI.A (amplification by iteration)
def pabi_sigma(noise_multiplier: float, clip: float, lipschitz: float) -> float:
    """000 Alg. 2's σ: its noise N(0, 4σ²L²) on the (unclipped) gradient sum of an L-Lipschitz
    loss, so 2σ₀₀₀·L = σ·C and σ₀₀₀ = σ·C / (2L) (= σ/2 when C = L, cf. boninsegna_sigma)."""
    return noise_std_on_sum(noise_multiplier, clip) / (2.0 * positive("lipschitz", lipschitz))


# ------------------------------------------------- 000 §VII.B (Ye & Shokri recursion)
def ye_shokri_sigma(noise_multiplier: float, neighbouring: str) -> float:
    """000 Thm VII.2's σ (eq. (6) with n ↦ b): noise std on the batch-gradient sum divided by
    the sum's sensitivity S_g, i.e. σ·C / S_g = :func:`effective_noise_multiplier`."""
    return effective_noise_multiplier(positive("noise_multiplier", noise_multiplier), neighbouring)
