"""Certified LOWER bounds on ε: ``shuffle_lower`` (shuffled batches) and ``balls_in_bins_lower``.

The construction of Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha & Zhang, "How Private are
DP-SGD Implementations?" (ICML 2024), extended to many epochs as in their "Scalable DP-SGD:
Shuffling vs. Poisson Subsampling" (NeurIPS 2024, Thms 3.5 and 3.8: persistent and dynamic
shuffling).  Linear queries in one dimension; each pair below exists under the stated relation
for the sampler as :mod:`dplab.schemes` runs it, with the layout as random as the
sampler makes it:

- shuffle, either relation: D has n − 1 records at −C and x at +C; D' has x removed (add_remove)
  or set to −C (replace_one).  Every batch of D' sums to −bC; in D the batch holding x sums to
  −bC + 2C.  Shifted by bC and divided by C, D' releases N(0, σ²I) each epoch and D releases, with
  probability w = t·b/n (:func:`dplab.accounting.epochs.participation_rate`), N(2e_j, σ²I) at a
  uniform unseen step j, else N(0, σ²I);
- balls_in_bins, every other record's clipped gradient 0 (at −C the random batch sizes would
  show in the sums): add_remove removes x, so D' releases N(0, σ²I) and D releases N(e_j, σ²I) at
  a uniform step j (shift 1, w = 1); replace_one sets x from +C to −C in the same random step, so D
  releases N(e_j, σ²I) and D' releases N(−e_j, σ²I) with the SAME uniform j: a mixture against a
  mixture ("symmetric"), not against N(0, σ²I) (that pair, the shuffle one with shift 2, does not
  exist for balls-in-bins: it printed 4.59 at σ = 1, t = T = 20, δ = 1e-3, where this pair's ε is
  about 1.3 by Monte Carlo (4·10⁵ draws) and its binned maximum certifies 0.79).  x set to 0 instead
  is the add_remove pair, also a replace-one pair; the larger of the two bounds is reported.

Under add_remove the neighbour D' holds n − 1 records all alike (−C, resp. 0), so it releases
N(0, σ²I) whatever its layout, even where its ⌊(n − 1)/b⌋ differs from t; the pair exists for
every n > b (:func:`dplab.accounting.epochs.check_lower`).

Any post-processing of the release gives a lower bound on its hockey-stick divergence, hence on
ε.  We use, per epoch, the maximum over its steps, binned into :data:`BINS` intervals (the "cube"
events of Chua et al. 2024, refined to a partition); its law under either dataset is exact
(:func:`epoch_pair`: Gaussian CDFs below the median, survival functions above it, so that no bin
mass is the difference of two numbers near 1, and beyond 38 noise stds, where 1 − Φ underflows in
1 − Φ^t, the log of the summed tails (:func:`_log_sf`); under the symmetric pair each mixture has
its own law).  Privacy losses are rounded DOWN to multiples of :data:`DISCRETIZATION`, and outcomes
whose loss falls below :data:`LOSS_FLOOR` or whose mass is below :data:`TINY` at either end are
dropped, each of which can only lower the computed δ(ε) = E_P[(1 − e^{ε − L})_+]; composition
over epochs is an exact convolution of non-negative masses (no FFT), and ε is solved from
δ(ε) in logs (losses above 745, where e^{−L} underflows, are kept).  Refining to 400 cuts and a
1e-3 grid moves ε by < 0.1% (measured at n = 1437, b = 64, σ = 1, 20 epochs: 29.109 → 29.125).  Both
orders of the pair are bounded and the larger value is kept.

Epochs: T steps are ⌊T/t⌋ whole epochs and a partial one of r = T mod t observed steps (the
record lands among them with probability w·r/t).  Shuffled batches may be redrawn every epoch
("dynamic": epochs independent, their pairs composed) or drawn once and cycled ("persistent": x
sits at the same step every epoch, so the per-step sums over the ⌊T/t⌋ whole epochs are one epoch
with shift 2⌊T/t⌋ and noise σ√⌊T/t⌋); each is a lower bound only for its own sampler, and the
Setting says which: ``shuffle_lower`` reports the persistent value where ``reshuffle`` is unset
or false (the sampler's one partition, cycled), the dynamic one where it is true.  It reported
the smaller of the two, the dynamic one, for cycled runs too: 1.539 where the persistent pair
gives 10.21 (n = 1000, b = 50, T = 500, σ = 4, replace-one, δ = 1e-5; fixed_batches' upper
bound 13.21).  ε of a run never decreases with T, so
each dynamic value is raised to the largest after fewer whole epochs (the rounding of every
epoch's losses can otherwise lower it as epochs are added), and each value to the largest one at
a shorter T of the same grid.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import log_ndtr, ndtri

from dplab.accounting import epochs
from dplab.accounting.base import Accountant
from dplab.accounting.setting import Setting
from dplab.schemes import Neighbouring, Sampling

#: cut points of the binned per-epoch maximum
BINS = 250
#: privacy losses are rounded down to multiples of this
DISCRETIZATION = 2e-3
#: outcomes with a cumulative privacy loss below this are dropped (their loss set to −∞)
LOSS_FLOOR = -30.0
#: losses whose mass falls below this are dropped at the ends of the composed distribution
TINY = 1e-30
#: below this sum of tails the log survival function of a maximum is the log of that sum
SF_SWITCH = 1e-20
#: the most multiply-adds the convolutions of one curve may take (about 1 ns each: ~5 s)
CONVOLUTION_MAX = 5e9
#: the most bins a loss distribution may hold (8 bytes each: 128 MB)
PMF_BINS_MAX = 2**24


class Unresolved(Exception):
    """Work or memory beyond :data:`CONVOLUTION_MAX` or :data:`PMF_BINS_MAX`, or a pair float64
    cannot resolve: the accountant refuses with this message and ``key``."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


def _log_cdf_max(
    z: np.ndarray, shift: float, steps: int, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """(log P(M ≤ z), log P(M > z)) for M the max of ``steps`` standard normals of which, with
    probability ``rate``, one (uniformly chosen) is shifted by ``shift``.  Each is a mixture of
    positive terms, so both are accurate to rounding relative to themselves, even where the other
    is within 1e-16 of 1 (a mixture's log CDF near 0 is not: it set the top bins' masses to
    rounding noise, 1e-17 where 1e-40 is true, and a lower bound of 38.7
    where 1.4 is the pair's)."""
    rest = steps * log_ndtr(z)
    hit = log_ndtr(z - shift) + (steps - 1) * log_ndtr(z)
    with np.errstate(divide="ignore"):
        rest_sf = _log_sf(rest, math.log(steps) + log_ndtr(-z))
        hit_sf = _log_sf(
            hit,
            np.logaddexp(log_ndtr(shift - z), math.log(steps - 1) + log_ndtr(-z))
            if steps > 1
            else log_ndtr(shift - z),
        )
    if rate <= 0.0:
        return rest, rest_sf
    if rate >= 1.0:
        return hit, hit_sf
    return (
        np.logaddexp(math.log(rate) + hit, math.log1p(-rate) + rest),
        np.logaddexp(math.log(rate) + hit_sf, math.log1p(-rate) + rest_sf),
    )


def _log_sf(log_cdf: np.ndarray, log_tails: np.ndarray) -> np.ndarray:
    """log(1 − F) for F = e^{log_cdf} a product of normal CDFs and ``log_tails`` the log of the sum
    of their tails S = Σ (1 − Φ(·)): log(−expm1(log F)) where S ≥ :data:`SF_SWITCH`, else log S,
    whose relative error is below S (1 − F lies in [S − S², S]).  log F alone underflows to −0
    where S < 1e-308 (beyond 38 noise stds), which set those bins' masses to 0 and dropped them:
    the persistent pair of shift 43 (n = 1512, b = 52, T = 1491, σ = 0.33) kept only the mass
    1 − w of its unshifted epochs and gave ε = log(1/(1 − w)) = 5.93, where it gives 1045.5 now
    (fixed_batches: 1068.7)."""
    return np.where(log_tails < math.log(SF_SWITCH), log_tails, np.log(-np.expm1(log_cdf)))


def _log_bin_masses(log_cdf: np.ndarray, log_sf: np.ndarray) -> np.ndarray:
    """log masses of (−∞, z₁], (z₁, z₂], …, (z_K, ∞) from the log CDF and log survival function at
    the cuts: each inner bin as a difference of whichever of the two is below 1/2 at its ends, so
    that no mass is the small difference of two numbers near 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        below = log_cdf[1:] + np.log(-np.expm1(log_cdf[:-1] - log_cdf[1:]))
        above = log_sf[:-1] + np.log(-np.expm1(log_sf[1:] - log_sf[:-1]))
    inner = np.where(log_cdf[1:] <= math.log(0.5), below, above)
    return np.concatenate([log_cdf[:1], inner, log_sf[-1:]])


@functools.lru_cache(maxsize=4096)
def epoch_pair(
    shift: float, steps: int, rate: float, symmetric: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """log masses (P, Q) of the binned maximum of one epoch's ``steps`` observed outputs (in units
    of the noise std): under P one output is shifted by ``shift`` with probability ``rate``; under Q
    none is, or (``symmetric``) one is shifted by −``shift`` with the same probability."""
    low = min(float(ndtri(1e-40 ** (1.0 / steps))), -1.0) - (shift if symmetric else 0.0)
    cuts = np.linspace(low, shift + 12.0, BINS)
    against = (
        _log_cdf_max(cuts, -shift, steps, rate)
        if symmetric
        else _log_cdf_max(cuts, 0.0, steps, 0.0)
    )
    return _log_bin_masses(*_log_cdf_max(cuts, shift, steps, rate)), _log_bin_masses(*against)


class LossPmf:
    """Masses on the loss grid k·:data:`DISCRETIZATION`, k = offset, offset + 1, …"""

    def __init__(self, offset: int = 0, probs: np.ndarray | None = None):
        self.offset, self.probs = offset, np.ones(1) if probs is None else probs

    @staticmethod
    def sparse(log_upper: np.ndarray, log_lower: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(loss indices rounded down, masses under the upper distribution) of one pair."""
        ok = np.isfinite(log_upper) & np.isfinite(log_lower)
        index = np.floor((log_upper[ok] - log_lower[ok]) / DISCRETIZATION).astype(np.int64)
        mass = np.exp(log_upper[ok])
        if not np.any(mass > 0):
            raise Unresolved(
                "noise_multiplier",
                "the pair's binned outcomes do not overlap in float64 (σ too small for the shift)",
            )
        return index[mass > 0], mass[mass > 0]

    def compose(self, index: np.ndarray, mass: np.ndarray) -> "LossPmf":
        """This PMF composed with one sparse pair: an exact convolution of non-negative masses."""
        lo = int(index.min())
        size = len(self.probs) + int(index.max()) - lo
        if size > PMF_BINS_MAX:
            raise Unresolved(
                "noise_multiplier",
                f"a loss distribution of {size:.3g} bins of {DISCRETIZATION:g} "
                f"(limit PMF_BINS_MAX = {PMF_BINS_MAX})",
            )
        out = np.zeros(size)
        for k, p in zip(index - lo, mass):
            out[k : k + len(self.probs)] += p * self.probs
        offset = self.offset + lo
        cut = max(0, math.ceil(LOSS_FLOOR / DISCRETIZATION) - offset)
        out = out[cut:]
        keep = np.nonzero(out > TINY)[0]
        if keep.size == 0:
            return LossPmf(0, np.zeros(1))
        return LossPmf(offset + cut + keep[0], out[keep[0] : keep[-1] + 1])

    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(len(self.probs))) * DISCRETIZATION

    def delta(self, epsilon: float) -> float:
        """Σ_{ℓ > ε} p (1 − e^{ε−ℓ}): the hockey-stick divergence of the discretized pair."""
        losses = self.losses()
        above = losses > epsilon
        return float(np.sum(self.probs[above] * -np.expm1(epsilon - losses[above])))

    def epsilon(self, delta: float) -> float:
        """The smallest ε ≥ 0 with :meth:`delta` (ε) ≤ δ (exact for this PMF)."""
        losses, probs = self.losses(), self.probs
        s1 = np.cumsum(probs[::-1])[::-1]  # Σ_{j ≥ i} p_j
        with np.errstate(divide="ignore"):  # log Σ_{j ≥ i} p_j e^{−ℓ_j}, in logs: e^{−ℓ} underflows
            log_s2 = np.logaddexp.accumulate((np.log(probs) - losses)[::-1])[::-1]
        left = np.concatenate([[-np.inf], losses[:-1]])  # on [ℓ_{i−1}, ℓ_i): δ(ε) = s1_i − e^ε s2_i
        above = s1 - np.exp(left + log_s2) > delta
        if not above.any():
            return 0.0
        i = int(np.nonzero(above)[0][-1])
        return max(math.log(s1[i] - delta) - float(log_s2[i]), 0.0)


def _runs(
    shift: float,
    steps_per_epoch: int,
    rate: float,
    grid: np.ndarray,
    value,
    symmetric: bool = False,
) -> np.ndarray:
    """``value(pmf)`` of the composed epochs at every T of ``grid`` (epochs independent), the larger
    of the pair's two orders (:func:`epoch_pair` for ``symmetric``), raised to its largest after
    any smaller number of whole epochs: a run of T steps contains the run of c·t ≤ T steps, and the
    losses rounded down every epoch can lower the bound as epochs are added (at σ = 76, n = 6799,
    b = 195, δ = 6.1e-11 it fell from 0.030 at 29 epochs to 0 at 133, T = 4527)."""
    full = epoch_pair(shift, steps_per_epoch, rate, symmetric)
    out = np.zeros(len(grid))
    work = 0
    for order in (slice(None), slice(None, None, -1)):
        whole, done, best = LossPmf(), 0, 0.0
        step = LossPmf.sparse(*full[order])
        for i, t in enumerate(grid):
            count, rest = divmod(int(t), steps_per_epoch)
            for _ in range(count - done):
                work += len(step[0]) * len(whole.probs)
                if work > CONVOLUTION_MAX:
                    raise Unresolved(
                        "steps",
                        f"composing {count} epochs needs more than {CONVOLUTION_MAX:g} "
                        f"multiply-adds (CONVOLUTION_MAX, about 5 s)",
                    )
                whole = whole.compose(*step)
                best = max(best, value(whole))
            done = count
            partial = (
                epoch_pair(shift, rest, rate * rest / steps_per_epoch, symmetric) if rest else None
            )
            pmf = whole if not rest else whole.compose(*LossPmf.sparse(*partial[order]))
            out[i] = max(out[i], best, value(pmf)) if rest else max(out[i], best)
    return out


def _persistent(
    shift: float, steps_per_epoch: int, rate: float, grid: np.ndarray, value
) -> np.ndarray:
    """The same for one partition cycled: ⌊T/t⌋ whole epochs are one epoch of shift·√⌊T/t⌋ (the
    partial epoch is dropped, a post-processing); T < t is the partial epoch alone."""
    out = np.zeros(len(grid))
    for i, t in enumerate(grid):
        count, rest = divmod(int(t), steps_per_epoch)
        pair = (
            epoch_pair(shift * math.sqrt(count), steps_per_epoch, rate)
            if count
            else epoch_pair(shift, rest, rate * rest / steps_per_epoch)
        )
        out[i] = max(
            value(LossPmf().compose(*LossPmf.sparse(*pair[order])))
            for order in (slice(None), slice(None, None, -1))
        )
    return out


class _HiddenStepLower(Accountant):
    """A lower bound from the binned per-epoch maximum (module docstring)."""

    bound = "lower"
    requires = ("noise_multiplier", "steps", "batch_size", "dataset_size")
    #: whether one partition may be cycled (``reshuffle`` unset or false: the persistent pair)
    persistent: bool = False

    def check_setting(self, setting: Setting) -> None:
        epochs.check_lower(self.name, setting)

    def pairs(self, setting: Setting) -> list[tuple[float, bool]]:
        """(shift of the record's step in units of σC, whether the pair is symmetric) of each pair
        of the module docstring for this sampler and relation; the larger bound is reported."""
        return [(epochs.shift(setting) / setting.noise_multiplier, False)]

    def _curve(self, setting: Setting, steps: np.ndarray, value) -> np.ndarray:
        t, rate = epochs.steps_per_epoch(setting), epochs.participation_rate(setting)
        grid = np.asarray(steps)
        try:
            pairs = self.pairs(setting)
            if self.persistent and not setting.reshuffle:  # shuffle_lower, cycled: one pair
                out = _persistent(pairs[0][0], t, rate, grid, value)
            else:
                out = np.max(
                    [_runs(shift, t, rate, grid, value, symmetric) for shift, symmetric in pairs],
                    axis=0,
                )
        except Unresolved as err:
            raise self.too_far(
                err.key,
                f"{err} at σ = {setting.noise_multiplier:g}, T = {int(grid.max())}, "
                f"t = ⌊n/b⌋ = {t}: beyond what this lower bound resolves",
            ) from None
        return np.maximum.accumulate(out)  # ε and δ of a run never decrease with T

    def _epsilon_curve(self, setting, delta, steps):
        return self._curve(setting, steps, lambda pmf: pmf.epsilon(delta))

    def _delta_curve(self, setting, epsilon, steps):
        return self._curve(setting, steps, lambda pmf: pmf.delta(epsilon))


class ShuffleLower(_HiddenStepLower):
    """Lower bound on the ε of shuffled fixed-size batches (Chua et al. 2024a/b)."""

    name = "shuffle_lower"
    source = (
        "LOWER bound: Chua et al. 2024, 'How Private are DP-SGD Implementations?' (ICML);"
        " multi-epoch: Chua et al. 2024, 'Scalable DP-SGD: Shuffling vs. Poisson Subsampling'"
        " (NeurIPS), Thms 3.5, 3.8"
    )
    samplings = (Sampling.SHUFFLE,)
    persistent = True
    assumptions = (
        "a LOWER bound on ε (not a guarantee): the true ε of a shuffled run is at least this",
        (
            "one partition cycled (reshuffle unset or false: the persistent pair) or redrawn every"
            " epoch (reshuffle: the epochs' pairs composed)"
        ),
        "pair: n − 1 records at −C, one at +C removed (add_remove) or set to −C (replace_one)",
        "add_remove: dataset_size > batch_size (the neighbour without the record fills a batch)",
    )


class BallsInBinsLower(_HiddenStepLower):
    """Lower bound on the ε of balls-in-bins sampling (the same construction, w = 1)."""

    name = "balls_in_bins_lower"
    source = (
        "LOWER bound: the construction of Chua et al. 2024 (ICML) applied to balls-in-bins "
        "(Chua et al. 2025, 'Balls-and-Bins Sampling for DP-SGD')"
    )
    samplings = (Sampling.BALLS_IN_BINS,)
    assumptions = (
        "a LOWER bound on ε (not a guarantee): the true ε of a balls-in-bins run is at least this",
        (
            "pair: the others' gradients 0; one record at +C removed (add_remove), or set to 0 or"
            " to −C in its same random step (replace_one; −C: a mixture against a mixture), the"
            " larger bound reported"
        ),
        "add_remove: dataset_size > batch_size (the neighbour without the record fills a batch)",
    )

    def pairs(self, setting):
        """N(e_j) against N(0) (x removed, or under replace_one set to 0); under replace_one also
        N(e_j) against N(−e_j), the same j (x set to −C)."""
        mu = 1.0 / setting.noise_multiplier
        return [(mu, False)] + (
            [(mu, True)] if setting.neighbouring == Neighbouring.REPLACE_ONE else []
        )
