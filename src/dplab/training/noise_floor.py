"""The δ that floating-point noise adds to an accountant's, and the runs it is too large for.

Every accountant analyses real Gaussian noise.  A generator's float draws stop at a largest
|z| = c: Box–Muller √(−2 ln u₁)·cos 2πu₂ from uniforms u₁ ≥ u_min gives c = √(−2 ln u_min).
A record whose clipped gradient lies along one coordinate then moves that coordinate of the noisy
sum by Δ = C (add/remove; 2C replace-one) in a step it is in, into a band of width Δ beyond
c·σC that the neighbouring dataset never reaches: an output of probability
p = Φ(c) − Φ(c − Δ/(σC)) per step (the Gaussian's mass there), so over T steps at rate q the
run's δ is at least 1 − (1 − q·p)^T at every ε, whatever the accountant says (of the released
trajectory; of the last iterate alone, whose noise is the steps' sum, the floor may be
smaller: a run that claims only last-iterate bounds is not checked).  A run is refused where
that floor reaches its δ (its (ε, δ) would be false at every ε); where it exceeds
:data:`NOTE_SHARE` of δ, summary.json's ``note`` states it; a run in phases, of its phases
together (:func:`floor`).  dp_mf's
correlated noise has its own exposure (:class:`Exposure`).

The cuts (:data:`CUTS`): the CPU's default stream (:class:`dplab.philox.CpuGenerator`) draws
24-bit uniforms whose smallest takes 16 more bits, u_min = 2⁻⁴⁰, c = 7.446 (with 24 bits alone,
as torch's float32 ``randn``, 5.768); ``noise_rng: portable`` (:class:`dplab.philox.
PortableGenerator`) 53-bit ones, u_min = 2⁻⁵⁴, c = 8.652; torch's generator on CUDA is taken to be
curand's Box–Muller from 32-bit uniforms, u_min = 2⁻³³, c = 6.764 (curand's documentation; not
measured here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.special import ndtr

from dplab import units
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError

#: the largest |z| of each noise source (module docstring)
CUTS = {
    "cpu": math.sqrt(-2 * math.log(2.0**-40)),
    "cuda": math.sqrt(-2 * math.log(2.0**-33)),
    "portable": math.sqrt(-2 * math.log(2.0**-54)),
}
#: the share of a run's δ above which its summary states the float noise's floor
NOTE_SHARE = 0.01


def source(noise_rng: str, device_type: str) -> str:
    """The key of :data:`CUTS` a run's noise comes from."""
    return "portable" if noise_rng == "portable" else device_type


@dataclass(frozen=True)
class Exposure:
    """How a record meets the noise: each time it is drawn (``count`` chances, each with
    probability ``rate``) it moves one noise coordinate by ``shift`` noise stds.  Independent
    noise: Δ/σ, q, T (:meth:`of_setting`).  dp_mf: C y = C x + Z releases the noise Z directly,
    and a participation at step s moves coordinate (s, j) by C[s, s]·Δ/σ: the smallest diagonal
    entry of C, over the ⌊T/b⌋ steps of the record's partition that every partition has, each
    with rate p (cyclic Poisson) or 1 (min separation)."""

    shift: float
    rate: float
    count: int
    sigma: float

    @classmethod
    def of_setting(cls, setting: Setting) -> "Exposure":
        """Independent noise on the clipped sum: q = b/n where batches are not Poisson (a record
        is in T·b/n steps)."""
        q = setting.sampling_rate
        if q is None:
            q = setting.batch_size / setting.dataset_size if setting.batch_size else 1.0
        sigma = setting.noise_multiplier
        shift = units.sum_sensitivity(1.0, setting.neighbouring) / sigma
        return cls(shift=shift, rate=q, count=setting.steps, sigma=sigma)

    def floor(self, cut: float) -> float:
        """1 − (1 − rate·p)^count, p = Φ(c) − Φ(c − shift) (module docstring)."""
        p = float(ndtr(cut) - ndtr(cut - self.shift))
        return -math.expm1(self.count * math.log1p(-self.rate * p))


def delta_floor(setting: Setting, cut: float) -> float:
    """The δ floor of independent noise at ``cut`` (:meth:`Exposure.floor`)."""
    return Exposure.of_setting(setting).floor(cut)


def floor(exposures: Sequence[Exposure], cut: float) -> float:
    """The floor of independent parts (a run's phases): 1 − Π(1 − floorᵢ)."""
    return -math.expm1(sum(math.log1p(-e.floor(cut)) for e in exposures))


def check(exposures: Sequence[Exposure], delta: float, noise_rng: str, device_type: str) -> None:
    """Refuse a run whose noise's δ floor reaches ``delta``, naming a remedy."""
    here = source(noise_rng, device_type)
    found = floor(exposures, CUTS[here])
    if found < delta:
        return
    portable = floor(exposures, CUTS["portable"])
    remedy = (
        f"noise_rng: portable draws to |z| ≤ {CUTS['portable']:.3f} (floor {portable:.2g})"
        if here != "portable" and portable < NOTE_SHARE * delta
        else f"noise_rng: portable's |z| ≤ {CUTS['portable']:.3f} leaves {portable:.2g}: a"
        " larger σ (a smaller target ε) or fewer steps"
    )
    sigmas = " → ".join(f"{e.sigma:.4g}" for e in exposures)
    raise DPLabError(
        "noise_rng",
        f"the {here} noise stops at |z| ≤ {CUTS[here]:.3f}: at σ = {sigmas}, a record drawn up to"
        f" {sum(e.count for e in exposures)} times reaches outputs its neighbour never does, so δ"
        f" is at least {found:.2g} at every ε, not {delta:g} (docs/training.md, The CPU's"
        f" noise); {remedy}",
    )


def note(exposures: Sequence[Exposure], delta: float, noise_rng: str, device_type: str) -> str:
    """The sentence summary.json's ``note`` adds where the floor exceeds :data:`NOTE_SHARE` of
    ``delta`` ("" elsewhere)."""
    here = source(noise_rng, device_type)
    found = floor(exposures, CUTS[here])
    if found <= NOTE_SHARE * delta:
        return ""
    return (
        f"; the {here} noise stops at |z| ≤ {CUTS[here]:.3f}, so the float noise's δ is at least"
        f" {found:.2g} at every ε ({found / delta:.0%} of δ = {delta:g}; noise_rng: portable:"
        f" {floor(exposures, CUTS['portable']):.2g}; docs/training.md, The CPU's noise)"
    )
