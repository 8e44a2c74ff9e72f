"""``rdp_closed_form``: the 2q²α/σ² bound of Mironov, Talwar & Zhang (000 Thm A.1).

000 Thm A.1: if q ≤ 1/5, σ ≥ 4 and

    1 < α ≤ ½σ²L − 2 log σ,
    α ≤ (½σ²L² − log 5 − 2 log σ) / (L + log(qα) + 1/(2σ²)),   L = log(1 + 1/(q(α − 1))),

then the sampled Gaussian mechanism (Poisson, sensitivity 1) is (α, 2q²α/σ²)-RDP.  T steps
compose to T·2q²α/σ² (000 Prop. V.1) and convert to (ε, δ) with 000 Prop. V.2:
ε = T·2q²α/σ² + log(1/δ)/(α − 1).

With ``alpha`` in the setting that single order is used (refused outside the region);
otherwise ε is minimized over the valid orders: the conditions are evaluated on a dense
log-spaced grid of α − 1 ∈ [1e-4, 1e7], the edges of the region are solved exactly
(:func:`region_edges`; the optimum often lies on the upper edge), and the unconstrained
minimizer α* = 1 + √(σ² log(1/δ)/(2Tq²)) is added; only valid orders are candidates.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from dplab.accounting.amplification import SHUFFLE_REFUSAL
from dplab.accounting.base import Accountant
from dplab.accounting.roots import bisect
from dplab.schemes import Neighbouring, Sampling

_GRID = 1.0 + np.geomspace(1e-4, 1e7, 4000)


def _margins(q: float, sigma: float, alpha) -> tuple[np.ndarray, np.ndarray]:
    """How far α is inside each α condition of 000 Thm A.1 (both ≥ 0 inside the region).

    The second condition is multiplied out by its denominator L + log(qα) + 1/(2σ²), which is
    positive: L + log(qα) = log(qα + α/(α − 1)) > 0.
    """
    alpha = np.asarray(alpha, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        big_l = np.log1p(1.0 / (q * (alpha - 1)))
        first = 0.5 * sigma**2 * big_l - 2 * math.log(sigma) - alpha
        second = (
            0.5 * sigma**2 * big_l**2
            - math.log(5)
            - 2 * math.log(sigma)
            - alpha * (big_l + np.log(q * alpha) + 1 / (2 * sigma**2))
        )
    return first, second


def valid_orders(q: float, sigma: float, alpha) -> np.ndarray:
    """Mask: which orders satisfy the two α conditions of 000 Thm A.1 (given q ≤ 1/5, σ ≥ 4)."""
    first, second = _margins(q, sigma, alpha)
    return (np.asarray(alpha, float) > 1) & (first >= 0) & (second >= 0)


def region_edges(q: float, sigma: float) -> np.ndarray:
    """The orders where the valid region of 000 Thm A.1 begins or ends, solved exactly.

    Each change of validity between neighbouring points of the grid is bisected (120 halvings)
    on the boundary condition, keeping the valid end, so every edge returned is a valid order
    (at q = 0.01, σ = 5 the region ends at α = 19.8166, where ½σ²L − 2 log σ = α).
    """
    ok = valid_orders(q, sigma, _GRID)
    edges = []
    for i in np.flatnonzero(ok[:-1] != ok[1:]):
        good, bad = (_GRID[i], _GRID[i + 1]) if ok[i] else (_GRID[i + 1], _GRID[i])
        edges.append(float(bisect(lambda a: valid_orders(q, sigma, a), good, bad, steps=120)[0]))
    return np.array(edges)


@lru_cache(maxsize=256)
def _region_orders(q: float, sigma: float) -> np.ndarray:
    """The valid orders of the grid and the exact edges (computed once per q, σ)."""
    orders = np.concatenate([_GRID[valid_orders(q, sigma, _GRID)], region_edges(q, sigma)])
    orders.setflags(write=False)
    return orders


def rdp_bound(q: float, sigma: float, alpha):
    """2q²α/σ² (000 Thm A.1), the RDP of one step at order α (inside the region only)."""
    return 2 * q**2 * np.asarray(alpha, float) / sigma**2


class RdpClosedForm(Accountant):
    """RDP of the sampled Gaussian by 000 Thm A.1 (Mironov et al. 2019), only inside its region."""

    name = "rdp_closed_form"
    source = "000 Thm A.1 (Mironov, Talwar & Zhang 2019): 2q²α/σ², with 000 Prop. V.1–V.2"
    samplings = (Sampling.POISSON, Sampling.SHUFFLE)
    neighbourings = (Neighbouring.ADD_REMOVE,)
    reads = (*Accountant.reads, "alpha")  # a fixed order instead of the search over orders
    assumptions = (
        "every intermediate iterate may be released (composition)",
        "Poisson sampling, add_remove (the sampled Gaussian mechanism of sensitivity 1)",
        "q ≤ 1/5, σ ≥ 4 and α inside the two conditions of Thm A.1",
        SHUFFLE_REFUSAL,
    )

    def check_setting(self, setting):
        if setting.sampling == Sampling.SHUFFLE:
            raise self.fail("sampling", SHUFFLE_REFUSAL)
        q, sigma = setting.sampling_rate, setting.noise_multiplier
        if q > 0.2:
            raise self.fail("sampling_rate", f"Thm A.1 needs q <= 1/5; got {q}")
        if sigma < 4:
            raise self.fail("noise_multiplier", f"Thm A.1 needs σ >= 4; got {sigma}")
        if setting.alpha is not None and not valid_orders(q, sigma, setting.alpha):
            raise self.fail(
                "alpha",
                f"α = {setting.alpha} is outside the validity region of Thm A.1 at q = {q}, σ ="
                f" {sigma} (valid orders here: 1 < α <= {self.max_valid_order(q, sigma):.6g})",
            )
        if setting.alpha is None and not valid_orders(q, sigma, _GRID).any():
            raise self.fail("alpha", f"no order α satisfies Thm A.1 at q = {q}, σ = {sigma}")

    @staticmethod
    def max_valid_order(q: float, sigma: float) -> float:
        """The largest valid order (for messages): the last edge, or the grid's end."""
        ok = valid_orders(q, sigma, _GRID)
        if not ok.any():
            return float("nan")
        return float(_GRID[-1]) if ok[-1] else float(region_edges(q, sigma).max())

    def _candidates(self, setting, best: float) -> np.ndarray:
        """The valid orders of the grid, the exact edges of the region, and ``best`` (the
        unconstrained optimum) if valid: the objective is convex in α, so its minimum over
        the region is ``best`` or an edge."""
        q, sigma = setting.sampling_rate, setting.noise_multiplier
        if setting.alpha is not None:
            return np.array([float(setting.alpha)])
        orders = _region_orders(q, sigma)
        return np.append(orders, best) if valid_orders(q, sigma, best) else orders

    def _epsilon_curve(self, setting, delta, steps):
        c = rdp_bound(setting.sampling_rate, setting.noise_multiplier, 1.0)  # ρ(α) = cα
        out = []
        for t in steps:
            # argmin of Tcα + log(1/δ)/(α − 1)
            a = self._candidates(setting, 1 + math.sqrt(math.log(1 / delta) / (t * c)))
            out.append(np.min(t * c * a + math.log(1 / delta) / (a - 1)))
        return np.array(out)

    def _delta_curve(self, setting, epsilon, steps):
        c = rdp_bound(setting.sampling_rate, setting.noise_multiplier, 1.0)
        out = []
        for t in steps:
            # δ = exp(−(α − 1)(ε − Tcα)) from 000 Prop. V.2; argmin α = (ε/(Tc) + 1)/2
            a = self._candidates(setting, max(0.5 * (epsilon / (t * c) + 1), 1 + 1e-9))
            log_delta = -(a - 1) * (epsilon - t * c * a)
            out.append(math.exp(min(0.0, float(np.min(log_delta)))))
        return np.array(out)
