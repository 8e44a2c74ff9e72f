"""``balls_in_bins``: an upper bound on ε for balls-in-bins sampling, by exact Rényi divergences.

Balls-in-bins (Chua et al. 2025, "Balls-and-Bins Sampling for DP-SGD"; random allocation of one
step out of t, Feldman & Shenfeld 2025, "Privacy amplification by random allocation") places each
example in one of the t = ⌊n/b⌋ steps of every epoch, uniformly and independently.  Under
add_remove one epoch is dominated by the pair (Choquette-Choo et al. 2024, "Near Exact Privacy
Amplification for Matrix Mechanisms", Lemma 3.2; Feldman & Shenfeld 2025, §3)

    P = (1/t) Σ_j N(e_j, σ²I_t),   Q = N(0, σ²I_t),

whose likelihood ratio is M = P/Q = (1/t) Σ_j W_j with W_j = exp((x_j − ½)/σ²) i.i.d. under Q:
log-normal with log-mean −μ²/2, log-variance μ², mean 1 (μ = 1/σ).  Rényi divergences of order α:

- remove, D_α(P‖Q) = log E_Q[M^α]/(α − 1): for integer α exactly, by the multinomial theorem,
  E[(Σ_j W_j)^α] = α!·[z^α] (Σ_i E[W^i] z^i/i!)^t with E[W^i] = exp(μ² i(i−1)/2) (all terms
  positive, computed in log space; cf. the direct RDP bounds of Feldman & Shenfeld 2025, Thm 4.8);
- add, D_α(Q‖P) = log E_Q[M^{1−α}]/(α − 1), with E[S^{−β}] = Γ(β)⁻¹ ∫₀^∞ u^{β−1} ψ(u)^t du,
  S = Σ_j W_j, ψ(u) = E[e^{−uW}] (an identity for S > 0): two one-dimensional integrals by the
  trapezoid rule on fine grids (relative error < 1e-8 in tests), then enlarged by :data:`MARGIN`.

Epochs are independent, so T steps compose k = ⌈T/t⌉ epochs (a partial epoch is a post-processing
of a whole one) by adding Rényi divergences, each order of the pair separately; each is converted
to (ε, δ) by dp_accounting's conversion (``rdp_conversion``) and the larger ε is kept.  The bound
is also never worse than ``fixed_batches`` (no amplification), which is valid too: the smaller of
the two is returned.  replace_one is refused (no amplification proved here): use ``fixed_batches``.
So is n mod b ∈ {0, b − 1}, where adding or removing a record changes t
(:func:`dplab.accounting.epochs.check`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln, logsumexp

from dplab.accounting import epochs, rdp_conversion
from dplab.accounting.base import SIGMA_MAX, Accountant
from dplab.accounting.fixed_batches import FixedBatches
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError
from dplab.schemes import Neighbouring, Sampling

#: Rényi orders (integers, for the exact remove direction)
ORDERS = np.concatenate([np.arange(2, 65), [80, 96, 128, 160, 192, 256]]).astype(float)
#: relative enlargement of the add direction's numerical moment E[M^{1−α}]
MARGIN = 1e-6
#: trapezoid steps per width of the integrands' narrowest feature
_POINTS_PER_WIDTH = 5
#: the add direction is computed at the orders whose integrand peaks at s = log u ≤ this ((α−1)μ²/t)
_ADD_REACH = 40.0
#: integrand values held at once (rows of s × the y grid): 32 MB
_CHUNK = 2**22
#: the most integrand points the add direction may evaluate (:func:`add_work`; ~30 ns each: ~10 s)
ADD_POINTS_MAX = 3e8


def log_sum_moments(mu: float, t: int, top: int) -> np.ndarray:
    """log E[(W_1 + … + W_t)^k] for k = 0..top (exact, by powers of the
    moment generating series)."""
    i = np.arange(top + 1)
    series = mu**2 * i * (i - 1) / 2 - gammaln(i + 1)  # log E[W^i]/i!

    lag = i[:, None] - i[None, :]  # lag[k, j] = k − j: the term a_j·b_{k−j} of coefficient k

    def times(a, b):
        terms = np.where(lag >= 0, a[None, :] + b[np.maximum(lag, 0)], -np.inf)
        return logsumexp(terms, axis=1)

    power = np.full(top + 1, -np.inf)
    power[0] = 0.0
    base, n = series, t
    while n:
        if n & 1:
            power = times(power, base)
        n >>= 1
        if n:
            base = times(base, base)
    return power + gammaln(i + 1)


def remove_rdp(mu: float, t: int, orders: np.ndarray = ORDERS) -> np.ndarray:
    """D_α(P‖Q) of one epoch at every (integer) order."""
    a = orders.astype(int)
    return (log_sum_moments(mu, t, int(a.max()))[a] - a * math.log(t)) / (a - 1)


def _window(mu: float, t: int, betas: np.ndarray, density: int) -> tuple[float, float, int]:
    """The s range scanned and the number of y points of :func:`log_negative_moments`."""
    s_lo = math.log(betas.min() / t) - 45.0
    s_hi = math.log(betas.max() / t) + betas.max() * mu**2 / t + 10.0 + 10.0 * mu / math.sqrt(t)
    return s_lo, s_hi, int((s_hi + 24.0 * mu) * density / min(mu, 1.0)) + 1


def _add_betas(mu: float, t: int, orders: np.ndarray) -> np.ndarray:
    """The β = α − 1 whose add direction is computed (integrand peak within :data:`_ADD_REACH`)."""
    beta = orders - 1.0
    return (beta * mu**2 / t <= _ADD_REACH) | (beta == 1.0)


def add_work(
    mu: float, t: int, orders: np.ndarray = ORDERS, density: int = _POINTS_PER_WIDTH
) -> float:
    """Integrand points the add direction evaluates at most: its y points times its coarse and fine
    s points (:func:`log_negative_moments`); 0 for t = 1 (closed form)."""
    if t == 1:
        return 0.0
    betas = (orders - 1.0)[_add_betas(mu, t, orders)]
    s_lo, s_hi, y_count = _window(mu, t, betas, density)
    width = min(1.0 / math.sqrt(betas.max()), mu / math.sqrt(t), 1.0)
    return float(y_count) * ((s_hi - s_lo) / 0.05 + (s_hi - s_lo) * density / width + 2)


def log_negative_moments(
    mu: float, t: int, betas: np.ndarray, density: int = _POINTS_PER_WIDTH
) -> np.ndarray:
    """log E[S^{−β}], S = W_1 + … + W_t, for every β > 0 (module docstring;
    ``density`` sets the grids).

    The outer integral in s = log u runs over the window where some β's integrand lies within 40
    nats of its maximum on a coarse scan (0.05 apart), in steps of w/``density`` with w the
    narrowest peak width, min(1/√β, μ/√t, 1); the inner one over y = log W covers every y where
    e^{−u e^y} differs from 1 in that window and 12 log-standard deviations beyond the mean, in
    steps of min(μ, 1)/``density``.
    """
    m = -(mu**2) / 2
    s_lo, s_hi, y_count = _window(mu, t, betas, density)
    y = np.linspace(m - s_hi - 12.0 * mu, m + 12.0 * mu, y_count)
    log_weight = (
        -0.5 * ((y - m) / mu) ** 2 - math.log(mu * math.sqrt(2 * math.pi)) + math.log(y[1] - y[0])
    )

    rows = max(1, _CHUNK // len(y))

    def integrand(s: np.ndarray) -> np.ndarray:
        log_psi = np.concatenate(
            [
                logsumexp(-np.exp(s[i : i + rows, None] + y[None, :]) + log_weight[None, :], axis=1)
                for i in range(0, len(s), rows)
            ]
        )
        return betas[:, None] * s[None, :] + t * log_psi[None, :]

    coarse = np.arange(s_lo, s_hi, 0.05)
    values = integrand(coarse)
    inside = np.nonzero(np.any(values >= values.max(axis=1, keepdims=True) - 40.0, axis=0))[0]
    lo, hi = coarse[max(inside[0] - 2, 0)], coarse[min(inside[-1] + 2, len(coarse) - 1)]
    width = min(1.0 / math.sqrt(betas.max()), mu / math.sqrt(t), 1.0)
    s = np.linspace(lo, hi, int((hi - lo) * density / width) + 2)
    return logsumexp(integrand(s), axis=1) + math.log(s[1] - s[0]) - gammaln(betas)


def add_rdp(
    mu: float, t: int, orders: np.ndarray = ORDERS, density: int = _POINTS_PER_WIDTH
) -> np.ndarray:
    """D_α(Q‖P) of one epoch (numerical, enlarged by :data:`MARGIN`; exact αμ²/2 for t = 1); +∞ at
    the orders beyond :data:`_ADD_REACH`, which the conversion then does not use."""
    if t == 1:
        return orders * mu**2 / 2
    beta = orders - 1.0
    out = np.full(len(orders), np.inf)
    used = _add_betas(mu, t, orders)
    log_moment = (
        log_negative_moments(mu, t, beta[used], density)
        + beta[used] * math.log(t)
        + math.log1p(MARGIN)
    )
    out[used] = log_moment / beta[used]
    return out


@functools.lru_cache(maxsize=256)
def epoch_rdp(mu: float, t: int) -> tuple[np.ndarray, np.ndarray]:
    """(remove, add) Rényi divergences of one epoch at :data:`ORDERS`."""
    return remove_rdp(mu, t), add_rdp(mu, t)


def fits_quadrature(sigma: float, t: int) -> bool:
    """Whether the add direction's quadrature at σ and t steps per epoch fits
    :data:`ADD_POINTS_MAX` points (about 10 s); the points grow with σ and t."""
    return add_work(1.0 / sigma, t) <= ADD_POINTS_MAX


@functools.lru_cache(maxsize=256)
def widest(t: int) -> float | None:
    """σ*: the largest σ ≥ 1 whose add-direction quadrature at t steps per epoch fits
    :data:`ADD_POINTS_MAX` (bisection in log σ over [1, SIGMA_MAX] to 1e-3, keeping the side
    that fits); None where σ = 1 does not fit."""
    fits = lambda x: fits_quadrature(math.exp(x), t)  # noqa: E731
    if not fits(0.0):
        return None
    lo, hi = 0.0, math.log(SIGMA_MAX)
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return math.exp(lo)


class BallsInBins(Accountant):
    """Balls-in-bins sampling, add_remove: exact epoch RDP of the dominating pair, composed over
    ⌈T/t⌉ epochs, converted per order of the pair; never above ``fixed_batches``."""

    name = "balls_in_bins"
    source = (
        "Chua et al. 2025 'Balls-and-Bins Sampling for DP-SGD'; dominating pair: Choquette-Choo et"
        " al. 2024, Lemma 3.2; exact epoch RDP (cf. Feldman & Shenfeld 2025 'Privacy amplification"
        " by random allocation', Thm 4.8)"
    )
    samplings = (Sampling.BALLS_IN_BINS,)
    neighbourings = (Neighbouring.ADD_REMOVE,)
    requires = ("noise_multiplier", "steps", "batch_size", "dataset_size")
    assumptions = (
        "every intermediate iterate may be released (composition)",
        (
            "each example in one uniformly random step of every epoch of t ="
            " ⌊dataset_size/batch_size⌋ steps, independently of the others and of the other epochs"
        ),
        "add_remove only (replace_one: use fixed_batches); a partial epoch counts whole",
        (
            "dataset_size mod batch_size in [1, batch_size − 2]: adding or removing a record keeps"
            " t = ⌊n/b⌋"
        ),
        (
            "add direction by numerical quadrature (error < 1e-8 relative, enlarged by 1e-6); where"
            " it would need more than ADD_POINTS_MAX points (large σ), the bound at the largest σ"
            " that fits (more noise is post-processing)"
        ),
    )

    def check_setting(self, setting: Setting) -> None:
        epochs.check(self.name, setting)

    @staticmethod
    def amplifies(setting: Setting) -> bool:
        """:func:`fits_quadrature` at the setting's σ and t."""
        return fits_quadrature(setting.noise_multiplier, epochs.steps_per_epoch(setting))

    def amplified_at(self, setting: Setting) -> Setting | None:
        """The setting whose amplified bound this σ gets: ``setting`` up to σ* = :func:`widest`
        (its t), the same at σ* above it (more noise is a post-processing of less, so σ*'s bound
        holds there too, and ε stays non-increasing in σ); None where even σ = 1 does not fit
        (then fixed_batches' bound alone).  It refused beyond the quadrature's limit, where the
        amplified bound's orders (≤ 256) already hold it near its ε floor (0.0195 at δ = 1e-5)
        and fixed_batches' bound falls below it: n = 1001, b = 10, T = 100, ε = 0.05,
        δ = 1e-10 gets σ = 105.97 from fixed_batches, and balls_in_bins refused every σ ≳ 50."""
        top = widest(epochs.steps_per_epoch(setting))
        if top is None and setting.noise_multiplier > 1.0:
            return None
        if top is None or setting.noise_multiplier <= top:
            return setting if self.amplifies(setting) else None
        return setting.replace(noise_multiplier=top)

    def _rdp(self, setting: Setting, steps) -> list[np.ndarray]:
        k = epochs.participations(setting, steps).astype(float)[:, None]
        return [
            k * one[None, :]
            for one in epoch_rdp(1.0 / setting.noise_multiplier, epochs.steps_per_epoch(setting))
        ]

    def _curve(self, setting, steps, plain: np.ndarray, convert) -> np.ndarray:
        """min(the amplified bound, ``plain`` = fixed_batches'), the amplified one converted from
        each direction's RDP by ``convert`` (the larger kept); ``plain`` alone where
        :meth:`amplified_at` finds no σ to compute it at."""
        at = self.amplified_at(setting)
        if at is None:
            return plain
        amplified = np.max([convert(r) for r in self._rdp(at, steps)], axis=0)
        return np.minimum(amplified, plain)

    def _epsilon_curve(self, setting, delta, steps):
        plain = gaussian_epsilon(delta, FixedBatches.mu(setting, steps))
        return self._curve(
            setting, steps, plain, lambda r: rdp_conversion.epsilon_from_rdp(r, ORDERS, delta)
        )

    def _delta_curve(self, setting, epsilon, steps):
        plain = gaussian_delta(epsilon, FixedBatches.mu(setting, steps))
        return self._curve(
            setting, steps, plain, lambda r: rdp_conversion.delta_from_rdp(r, ORDERS, epsilon)
        )

    def _sigma_start(self, setting, epsilon, delta):
        """The rdp σ of Poisson sampling at q = b/n (close: random allocation ≈ Poisson); where rdp
        finds none, fixed_batches' σ, which meets the target here too (never above it).  rdp's
        refusal was reported as this accountant's, naming rdp."""
        try:
            return get("rdp").sigma(setting.replace(sampling=Sampling.POISSON), epsilon, delta)
        except AssumptionError:
            return FixedBatches()._sigma_start(setting, epsilon, delta)
