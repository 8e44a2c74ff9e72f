"""``fixed_batches``: the valid ε of epoch-based samplers without amplification, and
``as_if_poisson``: the Poisson ε such a run is often reported with, but does not earn.

``fixed_batches`` (upper bound).  Condition on the batches (a mixture over them is no less
private than its worst member, by joint convexity of the hockey-stick divergence): an example then
enters at most k = ⌈T/t⌉ steps (:func:`dplab.accounting.epochs.participations`), each a Gaussian
mechanism whose mean moves by at most s·C (s = :func:`dplab.accounting.epochs.shift`) under noise
std σC, adaptively.  k adaptive Gaussian mechanisms of μ = s/σ compose to exactly one Gaussian
mechanism of μ√k (Dong, Roth & Su 2022, "Gaussian Differential Privacy", Cor. 3.3), so

    δ(ε) = gaussian_delta(ε, s√k/σ)                        (000 §II; Balle & Wang 2018, Thm 8)

is the exact worst case when the order of the batches is known, and an upper bound for shuffled
or balls-in-bins batches, whose hidden order can only help.  Under add_remove it needs the
neighbour's epochs to keep t = ⌊n/b⌋ steps: n mod b ∈ {0, b − 1} is refused, for both samplers
(:func:`dplab.accounting.epochs.check`).  One epoch (k = 1) is one Gaussian
mechanism.  The PLD of the same composition (dp_accounting, ``tests/test_accounting_sampling.py``)
agrees to its discretization.

``as_if_poisson`` (comparison): the tight ``pld`` ε of Poisson sampling at q = b/n with the same
σ and T.  It is what the run would earn had it sampled by Poisson; it is printed next to the
valid bound as the claim the run does not earn, and is never used to calibrate σ.
"""

from __future__ import annotations

import numpy as np

from dplab.accounting import epochs
from dplab.accounting.base import Accountant
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon, sigma_analytic
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.schemes import Sampling

_REQUIRES = ("noise_multiplier", "steps", "batch_size", "dataset_size")


class FixedBatches(Accountant):
    """Disjoint batches (fixed or reshuffled) and balls-in-bins, no amplification: δ(ε) of one
    Gaussian mechanism of μ = s√⌈T/t⌉/σ (module docstring)."""

    name = "fixed_batches"
    source = (
        "each example enters one step per epoch: ⌈T/t⌉ Gaussian mechanisms composed exactly "
        "(Dong, Roth & Su 2022, Cor. 3.3); 000 §II exact Gaussian profile"
    )
    samplings = epochs.SAMPLINGS
    requires = _REQUIRES
    assumptions = (
        "every intermediate iterate may be released (composition); no amplification is claimed",
        (
            "epochs of t = ⌊dataset_size/batch_size⌋ steps; T steps = ⌈T/t⌉ participations (a"
            " partial epoch counts whole)"
        ),
        (
            "shift per participation: 2C (replace_one; add_remove with shuffle: an added record"
            " displaces another), C (add_remove with balls_in_bins)"
        ),
        (
            "add_remove: dataset_size mod batch_size in [1, batch_size − 2] (adding or removing a"
            " record keeps t = ⌊n/b⌋)"
        ),
    )

    def check_setting(self, setting: Setting) -> None:
        epochs.check(self.name, setting)

    @staticmethod
    def mu(setting: Setting, steps) -> np.ndarray:
        """μ of the whole run: s·√k/σ."""
        return (
            epochs.shift(setting)
            * np.sqrt(epochs.participations(setting, steps))
            / setting.noise_multiplier
        )

    def _epsilon_curve(self, setting, delta, steps):
        return gaussian_epsilon(delta, self.mu(setting, steps))

    def _delta_curve(self, setting, epsilon, steps):
        return gaussian_delta(epsilon, self.mu(setting, steps))

    def _sigma_start(self, setting, epsilon, delta):
        """The answer itself: σ = s√k·σ₁ with σ₁ the exact one-release calibration."""
        k = float(epochs.participations(setting, setting.steps))
        return epochs.shift(setting) * np.sqrt(k) * sigma_analytic(epsilon, delta)


class AsIfPoisson(Accountant):
    """``pld`` at q = b/n as if the batches had been Poisson samples: a
    comparison, not a guarantee."""

    name = "as_if_poisson"
    source = (
        "pld (dp_accounting) of Poisson sampling at q = b/n: the claim a shuffled or balls-in-bins"
        " run does not earn"
    )
    bound = "comparison"
    samplings = epochs.SAMPLINGS
    requires = _REQUIRES
    assumptions = (
        (
            "NOT a guarantee for this sampling: the ε Poisson sampling at the same σ, q = b/n and T"
            " would get"
        ),
        "printed next to the valid bound for comparison; refused for calibration",
    )

    @staticmethod
    def poisson(setting: Setting) -> Setting:
        return setting.replace(sampling=Sampling.POISSON)

    def _epsilon_curve(self, setting, delta, steps):
        return get("pld").epsilon_curve(self.poisson(setting), delta, steps)

    def _delta_curve(self, setting, epsilon, steps):
        return get("pld").delta_curve(self.poisson(setting), epsilon, steps)

    def _sigma_start(self, setting, epsilon, delta):
        return get("pld")._sigma_start(self.poisson(setting), epsilon, delta)

    def sigma_floor(self, setting):
        return get("pld").sigma_floor(self.poisson(setting))
