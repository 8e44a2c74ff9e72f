"""Certified δ(ε) and ε(δ) of a T-fold composed discretized PLD, by exponential tilting.

dp_accounting (and :mod:`dplab.accounting.pld_curve`, which repeats its steps) composes the
one-step PMF by one FFT of the whole composed support.  Its rounding error is absolute, of
order T·u times the PMF's peak, and spread over every bin; summed over the tail it moves δ by
~1e-14 at T = 1000, which at δ = 1e-12 lowers ε by ~0.04 (σ = 2, q = 0.5: 91.056 printed, true
ε ≥ 91.09): the printed ε was below the truth (issue 23, point 2).

Here the composition is computed where δ(ε) is decided, with relative rather than absolute
error.  For λ ≥ 0 the tilted one-step PMF w_i = p_i e^{λi}/M(λ) (M the moment-generating
function over the bin index i) composes to the tilted composed PMF,
p^{*T}_k = M(λ)^T e^{-λk} w^{*T}_k (exponential tilting, as in the saddle-point methods of
Koskela, Jälkö & Honkela 2020, "Computing tight differential privacy guarantees using FFT");
λ is chosen so that w^{*T} has its mean at the ε asked about, where the FFT of w^{*T} is
accurate to u relative to its peak.  What is left out is accounted for, pessimistically:

- the composed mass above the window is bounded by Chernoff, min_{η>λ} M(η)^T e^{-η·hi}, and
  counted at infinite loss;
- mass outside the window wraps around the circular FFT onto the window: it only adds mass, so
  δ can only grow;
- the FFT's rounding (Higham 2002, "Accuracy and Stability of Numerical Algorithms", Thm 24.2:
  ‖error‖₂ ≤ c·log₂N·u·‖x‖₂ per transform, here with c = :data:`FFT_C`, and T-th powers that
  multiply a spectral error by ≤ T) is an absolute error η per tilted bin; untilted, the bins
  above ε carry at most η·Σ_{k>k_ε} M^T e^{-λk}, added to δ(ε);
- the one-step infinity mass m composes to 1 − (1 − m)^T.

The one-step PMF is dp_accounting's pessimistic (connect-the-dots) discretization: the T-fold
composition of a pessimistic PMF bounds the composed mechanism from above (Doroshenko, Ghazi,
Kamath, Kumar & Manurangsi 2022, "Connect the Dots", Thm 3.2 with composition, §2), so the values
here are upper bounds on the true δ(ε) and ε(δ).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft, optimize

from dplab.accounting.pld_curve import _delta_at, epsilon_for_delta

#: unit roundoff of float64
U = np.finfo(float).eps / 2
#: constant of the FFT rounding bound (Higham Thm 24.2 gives c ≈ 1 for a radix-2 FFT with exact twiddles;
#: 8 leaves room for pocketfft's mixed radices and computed twiddle factors)
FFT_C = 8.0
#: window half-widths below the tilted mean, in standard deviations of the tilted composition
WIDTH_BELOW = 14.0
#: the window extends above the tilted mean until the Chernoff bound on the mass beyond it is below
#: e^ABOVE_LOG times the composed PMF's scale at the mean
ABOVE_LOG = -60.0
#: the most bins one window may hold (dp_accounting_adapters.PLD_BINS): a wider one is not computed —
#: δ is then bounded by 1 and ε by ∞, which the accountant reports as a refusal (σ = 20, q = 1e-4,
#: T = 3e8 asked for a 9e8-bin window: 200 s and ~14 GB)
WINDOW_MAX = 2**22


class _TooWide(Exception):
    """A window beyond :data:`WINDOW_MAX` bins."""


class TiltedPmf:
    """One dense one-step PMF (dp_accounting's ``DensePLDPmf`` fields) and its T-fold compositions,
    read off with certified error bounds (module docstring)."""

    def __init__(self, probs: np.ndarray, lower: int, infinity_mass: float, disc: float):
        probs = np.asarray(probs, dtype=float)
        keep = probs > 0
        self.index = np.flatnonzero(keep).astype(float)
        self.log_p = np.log(probs[keep])
        self.lower, self.inf, self.disc = int(lower), float(infinity_mass), float(disc)
        self.top = int(self.index[-1])
        self._tilts: dict[float, float] = {}
        self._moment_cache: dict[float, tuple[float, float, np.ndarray]] = {}

    def log_mgf(self, lam: float) -> float:
        """log M(λ) = log Σ_i p_i e^{λi} over the finite bins."""
        z = lam * self.index + self.log_p
        top = float(z.max())
        return top + math.log(float(np.exp(z - top).sum()))

    def _moments(self, lam: float) -> tuple[float, float, np.ndarray]:
        """(mean, variance, PMF) of the one-step PMF tilted by λ (the last few kept)."""
        if lam not in self._moment_cache:
            w = np.exp(lam * self.index + self.log_p - self.log_mgf(lam))
            w /= w.sum()
            mean = float(np.sum(w * self.index))  # numpy's pairwise sum: the same bits whatever BLAS's threads
            if len(self._moment_cache) > 4:
                self._moment_cache.clear()
            self._moment_cache[lam] = mean, float(np.sum(w * (self.index - mean) ** 2)), w
        return self._moment_cache[lam]

    def tilt(self, target: float) -> float:
        """λ ≥ 0 whose tilted one-step mean is ``target`` (a bin index); 0 below the untilted mean,
        and the mean just below the top bin above it (Newton's method on the mean, whose derivative
        in λ is the tilted variance, safeguarded by a bracket); memoized."""
        if target not in self._tilts:
            self._tilts[target] = self._solve_tilt(target)
        return self._tilts[target]

    def _solve_tilt(self, target: float) -> float:
        mean, var, _ = self._moments(0.0)
        if mean >= target:
            return 0.0
        target = min(target, self.top - 1e-3)
        lo, hi, lam = 0.0, math.inf, 0.0
        for _ in range(200):
            if mean < target:
                lo = lam
            else:
                hi = lam
            if abs(mean - target) <= 1e-9 * max(1.0, abs(target)) or (math.isfinite(hi) and hi - lo <= 1e-15 * hi):
                break
            step = lam + (target - mean) / max(var, 1e-300)
            lam = step if lo < step < hi else (lo + hi) / 2 if math.isfinite(hi) else 2 * lo + 1e-6
            mean, var, _ = self._moments(lam)
        return lam

    def composed_infinity(self, t: int) -> float:
        """The infinity mass of the T-fold composition, 1 − (1 − m)^T."""
        return -math.expm1(t * math.log1p(-self.inf)) if self.inf < 1 else 1.0

    def window(self, t: int, loss: float, below: float | None = None):
        """The T-fold composition near ``loss``: (first bin's loss index, untilted PMF on the
        window, extra mass at infinity, rounding allowance ``r(ε)``), with the window reaching
        down to ``below`` (a loss) when given."""
        target = (loss / self.disc - t * self.lower) / t
        lam = self.tilt(target)
        mean, var, w = self._moments(lam)
        lm = self.log_mgf(lam)
        center, spread = t * mean, math.sqrt(t * var) + 1.0
        scale = t * lm - lam * center  # log of the untilted PMF's scale at the tilted mean
        last = t * self.top
        hi = min(last, math.ceil(center + 8 * spread))
        above = self._above(t, lam, hi) if hi < last else -math.inf  # log of the mass above the window
        while above > scale + ABOVE_LOG:
            hi = min(last, math.ceil(hi + 8 * spread))
            above = self._above(t, lam, hi) if hi < last else -math.inf
        lo = max(0, math.floor(center - WIDTH_BELOW * spread))
        if below == -math.inf:
            lo = 0
        elif below is not None:
            lo = max(0, min(lo, math.floor(below / self.disc - t * self.lower) - 1))
        if hi - lo + 1 > WINDOW_MAX:
            raise _TooWide
        size = fft.next_fast_len(hi - lo + 1, real=True)
        folded = np.bincount(self.index.astype(np.int64) % size, weights=w, minlength=size)
        if t > 1:
            folded = fft.irfft(np.exp(t * np.log(fft.rfft(folded).astype(complex))), size)
        k = np.arange(lo, hi + 1)
        tilted = np.maximum(folded[k % size], 0.0)
        exponent = t * lm - lam * k  # log of the untilting factor M^T e^{-λk}
        with np.errstate(under="ignore"):
            probs = np.exp(np.minimum(exponent, 700.0)) * tilted
        # a probability is ≤ 1: rounding noise far below the mean, amplified by e^{-λk}, is capped there
        probs = np.where((exponent > 700.0) & (tilted > 0), 1.0, np.minimum(probs, 1.0))
        extra = math.exp(above) + size * np.finfo(float).tiny
        eta = FFT_C * (t + 2) * math.ceil(math.log2(size)) * U * max(1.0, math.sqrt(size * float(np.sum(w * w)))) if t > 1 else 0.0

        def rounding(epsilon: float) -> float:
            """η·Σ_{k_ε < k ≤ hi} M^T e^{-λk}: what rounding may hide in the bins above ``epsilon``."""
            first = max(lo, math.floor(epsilon / self.disc - t * self.lower) + 1)
            count = hi - first + 1
            if count <= 0:
                return 0.0
            if lam == 0:
                return eta * math.exp(t * lm) * count
            return eta * math.exp(t * lm - lam * first - math.log(-math.expm1(-lam)) + math.log1p(-math.exp(-lam * count)))

        return t * self.lower + lo, probs, extra, rounding

    def _above(self, t: int, lam: float, edge: int) -> float:
        """log of the Chernoff bound M(η)^T e^{-η·edge} on the composed mass above bin ``edge``, at
        the η > λ that minimizes it (any η gives a bound; the exponent is unimodal in log(η − λ))."""
        def bound(x: float) -> float:
            eta = lam + math.exp(x)
            return t * self.log_mgf(eta) - eta * edge
        best = optimize.minimize_scalar(bound, bounds=(math.log(1e-12), math.log(50.0)), method="bounded",
                                        options={"xatol": 1e-3})
        return float(min(best.fun, bound(math.log(50.0))))

    def delta(self, t: int, epsilon: float) -> float:
        """An upper bound on δ(ε) of the T-fold composition."""
        inf_t = self.composed_infinity(t)
        if epsilon / self.disc >= t * (self.lower + self.top):
            return inf_t
        try:
            first, probs, extra, rounding = self.window(t, epsilon, below=epsilon)
        except _TooWide:
            return 1.0
        return min(1.0, _delta_at(inf_t + extra, first, probs, self.disc, epsilon) + rounding(epsilon))

    def epsilon(self, t: int, delta: float, guess: float) -> float:
        """An upper bound on ε(δ) of the T-fold composition, tilted at ``guess`` (an estimate of ε:
        re-tilted at the answer while the answer leaves the window's accurate part)."""
        inf_t = self.composed_infinity(t)
        if inf_t >= delta:
            return math.inf
        loss, below = guess, None
        for attempt in range(6):
            if attempt == 5:  # the whole composed support below the window: always inside
                below = -math.inf
            try:
                first, probs, extra, rounding = self.window(t, loss, below)
            except _TooWide:
                return math.inf
            eps = epsilon_for_delta(inf_t + extra, first, probs, self.disc, delta)
            if math.isfinite(eps):  # δ(ε) + r(ε) ≤ δ: r decreases in ε, and the second read is ≥ the first
                eps = epsilon_for_delta(inf_t + extra + rounding(eps), first, probs, self.disc, delta)
            inside = first == t * self.lower or eps >= (first + 1) * self.disc
            if inside and (below is not None or abs(eps - loss) <= 4 * self._spread(t, loss)):
                return eps
            if not inside:
                below = min(eps, loss) - 16 * self._spread(t, loss)
            loss = eps if math.isfinite(eps) else loss
        return eps

    def _spread(self, t: int, loss: float) -> float:
        """Standard deviation (in loss) of the composition tilted to its mean at ``loss``."""
        lam = self.tilt((loss / self.disc - t * self.lower) / t)
        return math.sqrt(t * self._moments(lam)[1]) * self.disc
