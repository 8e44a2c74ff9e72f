"""The (subsampled) Gaussian mechanism's discretized PLD: dp_accounting's, bit for bit, faster.

dp_accounting 0.6.0 builds a Gaussian PLD by connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar
and Manurangsi 2022, "Connect the Dots: Tighter Discrete Approximations of Privacy Loss
Distributions", §2.2): δ(ε) of the mechanism at every multiple of the discretization interval in
the privacy loss's range, tens of thousands of ε per PLD. Its ``get_delta_for_epsilon`` inverts
the privacy loss one ε at a time in Python (``inverse_privacy_loss``); for σ calibrations and
figure tables that ask for hundreds of PLDs that loop was most of the job's time.

:class:`ArrayGaussianPrivacyLoss` is dp_accounting's ``GaussianPrivacyLoss`` whose inverse
privacy loss is computed for all ε of one ``get_delta_for_epsilon`` call at once, on arrays, with
the same IEEE double operations in the same order as the scalar code (for the ADD and REMOVE
adjacencies, sampled or not):

- REMOVE: x(ε) = −Δ/2 − ℓ·σ²/Δ with ℓ = log(1 + (e^ε − 1)/q), computed as dp_accounting's
  ``log_a_times_exp_b_plus_c(1/q, ε, 1 − 1/q)``: d + log1p(−exp(log(1/q − 1) − d)),
  d = ε + log(1/q);
- ADD: x(ε) = Δ + (−Δ/2 − ℓ·σ²/Δ) with ℓ = −log(1 + (e^{−ε} − 1)/q), the same with −ε;
- q = 1: ℓ = ε.

Every ε where the scalar code takes another branch (ε at or past ±log(1 − q), ε = 0, a
``_log_sub`` that would refuse) is left to dp_accounting's own scalar ``inverse_privacy_loss``,
and the REPLACE adjacency to its ``get_delta_for_epsilon``. The connect-the-dots PMF and the PLD
are dp_accounting's code, unchanged: :func:`gaussian_pld` returns exactly
``from_gaussian_mechanism``'s PLD (tests/test_pld_gaussian.py compares the bytes) wherever that
answers.  Where the scalar code itself refuses (its ``_log_sub``: at q ≈ 1e-13 a grid ε within
rounding of ±log(1 − q)), the edge's own value is taken: x = ±∞, i.e. δ = 1 − e^ε (REMOVE) or 0
(ADD), what the scalar code gives just past the edge.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from dp_accounting.pld import privacy_loss_distribution, privacy_loss_mechanism

AdjacencyType = privacy_loss_mechanism.AdjacencyType
NeighborRel = privacy_loss_distribution.NeighborRel


class ArrayGaussianPrivacyLoss(privacy_loss_mechanism.GaussianPrivacyLoss):
    """dp_accounting's Gaussian privacy loss whose inverse is computed on arrays (module
    docstring)."""

    def get_delta_for_epsilon(self, epsilon):
        """dp_accounting's ``MonotonePrivacyLoss.get_delta_for_epsilon`` (the hockey-stick
        divergence μ_upper_cdf(x) − e^ε·μ_lower_cdf(x) at x = the inverse privacy loss of ε; 0 or
        1 − e^ε where the subsampled loss never reaches ε), step for step, with the inverses of
        :meth:`_inverse_losses`; REPLACE: dp_accounting's method itself."""
        if self.adjacency_type not in (AdjacencyType.ADD, AdjacencyType.REMOVE):
            return super().get_delta_for_epsilon(epsilon)
        is_scalar = isinstance(epsilon, numbers.Number)
        epsilons = np.array([epsilon]) if is_scalar else np.asarray(epsilon)
        deltas = np.zeros_like(epsilons, dtype=float)
        q = self.sampling_prob
        if q == 1.0:
            inverse = np.full_like(epsilons, True, dtype=bool)
        elif self.adjacency_type == AdjacencyType.ADD:
            inverse = epsilons < -math.log1p(-q)  # beyond: δ = 0
        else:
            inverse = epsilons > math.log1p(-q)
            deltas[~inverse] = -np.expm1(epsilons[~inverse])
        wanted = epsilons[inverse]
        x, done = self._inverse_losses(np.asarray(wanted, dtype=float))
        for i in np.flatnonzero(~done):  # the scalar code's other branches
            try:
                x[i] = self.inverse_privacy_loss(wanted[i])
            except ValueError as refused:  # ``_log_sub``: ε within rounding of ±log(1 − q)
                if "must be greater than" not in str(refused):
                    raise
                x[i] = math.inf if self.adjacency_type == AdjacencyType.REMOVE else -math.inf
        deltas[inverse] = self.mu_upper_cdf(x) - np.exp(wanted + self.mu_lower_log_cdf(x))
        deltas = np.clip(deltas, 0, 1)
        return float(deltas[0]) if is_scalar else deltas

    def _inverse_losses(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(x(ε), done) for ADD or REMOVE: the inverse privacy loss at each ε where the scalar
        code's main branch applies (``done``), the scalar code's operations on arrays; elsewhere
        undefined."""
        s, var = self.sensitivity, self._standard_deviation**2
        q = self.sampling_prob
        add = self.adjacency_type == AdjacencyType.ADD
        with np.errstate(all="ignore"):
            if q == 1.0:
                loss, done = epsilons, np.ones(len(epsilons), dtype=bool)
            else:
                edge = -math.log(1 - q) if add else math.log(1 - q)
                a, c = 1 / q, 1 - 1 / q
                b = -epsilons if add else epsilons
                d = b + np.log(a)
                floor = np.log(-c) if c < 0 else math.inf
                near = np.abs(epsilons - edge) <= 2e-9 * np.maximum(np.abs(epsilons), abs(edge))
                beyond = epsilons > edge if add else epsilons <= edge
                done = (c < 0) & ~near & ~beyond & (b != 0) & (floor < d)
                logged = d + np.log1p(-np.exp(floor - d))
                loss = -logged if add else logged
            x = -0.5 * s - loss * var / s
            return (s + x if add else x), done


def gaussian_pld(
    standard_deviation: float,
    value_discretization_interval: float,
    sampling_prob: float,
    neighboring_relation=NeighborRel.ADD_OR_REMOVE_ONE,
):
    """``privacy_loss_distribution.from_gaussian_mechanism`` with these arguments and its defaults
    (sensitivity 1, pessimistic, log mass truncation −50, connect-the-dots), built on
    :class:`ArrayGaussianPrivacyLoss`: the same PLD, bit for bit."""

    def single(adjacency_type):
        # dp_accounting's own PMF construction (private: tests/test_dependencies.py checks it)
        return privacy_loss_distribution._create_pld_pmf_from_monotone_privacy_loss(  # noqa: SLF001
            ArrayGaussianPrivacyLoss(
                standard_deviation,
                sensitivity=1,
                pessimistic_estimate=True,
                log_mass_truncation_bound=-50,
                sampling_prob=sampling_prob,
                adjacency_type=adjacency_type,
            ),
            pessimistic_estimate=True,
            value_discretization_interval=value_discretization_interval,
            use_connect_dots=True,
        )

    if neighboring_relation == NeighborRel.REPLACE_ONE:
        return privacy_loss_distribution.PrivacyLossDistribution(single(AdjacencyType.REPLACE))
    if neighboring_relation not in (NeighborRel.ADD_OR_REMOVE_ONE, NeighborRel.REPLACE_SPECIAL):
        raise ValueError(f"Unsupported neighboring relation: {neighboring_relation}")
    pmf_remove = single(AdjacencyType.REMOVE)
    if sampling_prob == 1.0:
        return privacy_loss_distribution.PrivacyLossDistribution(pmf_remove)
    return privacy_loss_distribution.PrivacyLossDistribution(pmf_remove, single(AdjacencyType.ADD))
