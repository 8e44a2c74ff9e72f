"""Certified δ(ε) and ε(δ) of a T-fold composed discretized PLD, by exponential tilting.

dp_accounting (and :mod:`dplab.accounting.pld_curve`, which repeats its steps) composes the
one-step PMF by one FFT of the whole composed support.  Its rounding error is absolute, of
order T·u times the PMF's peak, and spread over every bin; summed over the tail it moves δ by
~1e-14 at T = 1000, which at δ = 1e-12 lowers ε by ~0.04 (σ = 2, q = 0.5: 91.056 printed, true
ε ≥ 91.09): the printed ε was below the truth.

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
  δ can only grow.  Mass from above lands on the window's first bins, where untilting scales it
  up by e^{λ·size}: where that (bounded by Chernoff) may exceed 1e-6 of δ, the careful window
  (below) reaches up (within :data:`WINDOW_MAX`) until it is negligible.  With the first window
  alone, σ = 0.5, q = 1.5e-4, T = 5, δ = 3e-7 read ε = 0.832 where dp_accounting's is 0.409,
  and σ = 0.82, q = 7.4e-5, T = 614 read 0.704 at δ = 1e-10 but 0.247 at δ = 1e-11;
- the FFT's rounding is bounded in the 2-norm (:func:`rounding_bound`, derived below)
  and enters δ(ε) by Cauchy–Schwarz: untilted, the bins above ε carry at most
  ‖error‖₂·‖(M^T e^{-λk})_{k>k_ε}‖₂;
- the rounding of the tilted one-step PMF and of the untilting factor (relative, a few u per
  entry; positive convolution turns it into at most T times that per composed bin) scales the
  window's probabilities up by e^{T·ρ};
- the one-step infinity mass m composes to 1 − (1 − m)^T.

**The careful window.**  Where the first window's wrapped mass or rounding allowance may move δ
by more than 1e-6 of it (or it gives no finite ε), δ(ε) (or ε(δ)) is read again on a careful
window: reaching up until the wrapped mass is negligible, where that may move δ; composed in x87
long double (u = 2^-64, so a rounding allowance 2^11 times smaller; pocketfft computes its twiddle
factors in the type itself when it is wider than double), where the allowance may (a wider window
alone has a larger allowance: the two reads keep each cost where it buys something).  Both reads
are upper bounds; the smaller is kept.  The rounding allowance dominates where the tilt cannot
bring the mass near ε up to the tilted composition's peak (a few Poisson-sampled steps' losses far
apart, tiny δ): in float64 alone, σ = 0.82, q = 7.4e-5, T = 614 read ε = 0.743 at δ = 1e-12 and
0.337 at 4.7e-12, where dp_accounting's are 0.2954 and 0.2276 (careful: 0.2939 and 0.2273, on
pld's finer interval), and at σ = 1 no finite ε at δ = 1e-12 (careful: 0.0636).  Where long double
is no wider than double the careful window is a float64 one (its allowance is computed from the
type's own u, so it stays valid, only no tighter).

**The rounding bound** (:func:`rounding_bound`).  w is the tilted one-step PMF folded to N bins
(Σw = 1), y = F⁻¹((Fw)^T) its exact T-fold circular self-convolution (F the unnormalized DFT, so
‖Fx‖₂ = √N‖x‖₂ and ‖F⁻¹x‖₂ = ‖x‖₂/√N), and γ = FFT_C·⌈log₂N⌉·u.  Assumptions: float64
(u = 2^-53); scipy's pocketfft, a mixed-radix (2, 3, 4, 5: every length here is
``next_fast_len(real=True)``) Cooley–Tukey FFT with accurately computed twiddle factors, whose
forward and inverse transforms satisfy Higham's bound ‖fl(Fx) − Fx‖₂ ≤ γ‖Fx‖₂ (Higham 2002,
"Accuracy and Stability of Numerical Algorithms", Thm 24.2: ⌈log₂N⌉·η/(1 − ⌈log₂N⌉·η) with
η = μ + γ₄(√2 + μ) ≈ 6.7u for radix 2 with twiddle error μ ≈ u; FFT_C = 8 covers that constant,
and a radix-3/5 stage counts as log₂3 or log₂5 ≥ 1.58 levels of it); the careful window the same
in long double.  Then, with ‖w‖₂ ≤ 1:

1. the forward transform's error e has ‖e‖₂ ≤ γ√N‖w‖₂ =: a, so every |e_k| ≤ a;
2. the T-th power: |Fw_k| ≤ Σw = 1, so |(Fw_k + e_k)^T − (Fw_k)^T| ≤ T(1 + a)^{T−1}|e_k|, in
   the 2-norm ≤ √N·e₁ with e₁ = T(1 + a)^{T−1}γ‖w‖₂;
3. z^T by repeated squaring (⌊log₂T⌋ squarings and at most as many other products): each
   complex product is the exact one times (1 + δ) with |δ| ≤ η = √2·γ₂ (Higham 2002, Lemma 3.5),
   and a product of computed values carrying m_a − 1 and m_b − 1 such factors carries
   m_a + m_b − 1, so z^T carries T − 1: per frequency ≤ ((1 + η)^{T−1} − 1)|z|^T, in the 2-norm
   ≤ √N·e₂ with e₂ = ((1 + η)^{T−1} − 1)(‖w‖₂ + e₁) (‖(Fw)^T‖₂ = √N‖y‖₂ ≤ √N‖w‖₂ by Young's
   inequality), plus what underflow may lose: ≤ 16 times the smallest normal float64 per product
   (Higham's model with gradual underflow, eq. (2.8), in both parts, carried through later factors
   of modulus ≤ (1 + a)(1 + η));
4. the inverse transform maps these to ≤ e₁ + e₂ and adds (γ + u)(‖w‖₂ +
   e₁ + e₂) (the 1/N scaling: u).

So ‖computed − y‖₂ ≤ (1 + γ + u)(e₁ + e₂) + (γ + u)‖w‖₂ ≈ (T + 1)·γ·‖w‖₂ + √2·2u·T‖w‖₂: an
absolute error of order T·log₂N·u·‖w‖₂ (tests/test_pld_rounding.py compares it with the error
observed against an exactly composed PMF).

**Phases** (:class:`Composition`): T₁ steps of PMF 1, then T₂ of PMF 2, … on one discretization
interval.  Every PMF is tilted by the same λ (Σᵢ Tᵢ times its tilted mean at ε), the tilted
spectra multiply, Π_i (F w_i)^{T_i}, and the untilting factor is
Π_i M_i(λ)^{T_i} e^{-λk}; Chernoff, infinity mass (1 − Πᵢ(1 − mᵢ)^{Tᵢ}) and relative rounding
(Σᵢ Tᵢ ρᵢ) are summed over the phases.  The rounding bound holds with T = Σᵢ Tᵢ and ‖w‖₂ the
largest of the PMFs' norms: a product of T factors of modulus ≤ 1, each perturbed by ≤ a, moves
by at most (1 + a)^{T−1} times the sum of the perturbations (step 2), the product's 2-norm is at
most any factor's, and the n − 1 products of the phases' powers are among step 3's T − 1.  One PMF
composed T times is the composition of one phase (:meth:`TiltedPmf.composed`).

The one-step PMF is dp_accounting's pessimistic (connect-the-dots) discretization: the T-fold
composition of a pessimistic PMF bounds the composed mechanism from above (Doroshenko, Ghazi,
Kamath, Kumar & Manurangsi 2022, "Connect the Dots", Thm 3.2 with composition, §2), so the values
here are upper bounds on the true δ(ε) and ε(δ); of phases likewise, each phase's pessimistic PMF
dominating its step and composition preserving the dominance (ibid., §2).
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np
from scipy import fft

from dplab.accounting.pld_curve import _delta_at, epsilon_for_delta

#: unit roundoff of float64
U = np.finfo(float).eps / 2
#: constant of the FFT rounding bound ‖fl(Fx) − Fx‖₂ ≤ FFT_C·⌈log₂N⌉·u·‖Fx‖₂ (Higham 2002, Thm 24.2:
#: ≈ 6.7 for radix 2 with twiddle factors accurate to u; module docstring)
FFT_C = 8.0
#: the smallest normal float64: what underflow may lose, per operation
TINY = float(np.finfo(float).tiny)
#: window half-widths below the tilted mean, in standard deviations of the tilted composition
WIDTH_BELOW = 14.0
#: the window extends above the tilted mean until the Chernoff bound on the mass beyond it is below
#: e^ABOVE_LOG times the composed PMF's scale at the mean
ABOVE_LOG = -60.0
#: the careful window is read only where the mass wrapped onto the first (then wide) or its rounding
#: allowance (then in long double) may exceed e^NEGLIGIBLE_LOG times δ
NEGLIGIBLE_LOG = math.log(1e-6)
#: the most bins one window may hold: a wider one is not computed (:class:`TooWide`, which the
#: accountant reports as a refusal); 2^23 bins take ~6 s and ~0.5 GB (σ = 0.8, q = 0.1,
#: T = 1e4, δ = 1e-12: 4.7e6), ~1 GB in long double (σ = 0.9, q = 1e-5, T = 1e5, δ = 1e-12)
WINDOW_MAX = 2**23


class TooWide(Exception):
    """A window beyond :data:`WINDOW_MAX` bins: ``bins``, the number asked for."""

    def __init__(self, bins: int):
        super().__init__(bins)
        self.bins = bins


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
        self._compositions: dict[int, Composition] = {}
        self._moment_cache: dict[float, tuple[float, float, np.ndarray]] = {}

    def log_mgf(self, lam: float) -> float:
        """log M(λ) = log Σ_i p_i e^{λi} over the finite bins."""
        z = lam * self.index + self.log_p
        top = float(z.max())
        return top + math.log(float(np.exp(z - top).sum()))

    def _moments(self, lam: float) -> tuple[float, float, np.ndarray, float, float]:
        """(mean, variance, PMF w, log M, ρ) of the one-step PMF tilted by λ (the last few kept):
        w = p e^{λi}/M with M the normalizer actually used (so untilting by M^T is consistent), and
        ρ a bound on the relative rounding of each w_i (exponent, exp and normalization)."""
        if lam not in self._moment_cache:
            lm = self.log_mgf(lam)
            z = lam * self.index + self.log_p - lm
            w = np.exp(z)
            total = float(w.sum())  # numpy's pairwise sum: the same bits whatever BLAS's threads
            w /= total
            rho = (
                2 * U * (3 + float(np.max(np.abs(lam * self.index) + np.abs(self.log_p))) + abs(lm))
            )
            mean = float(np.sum(w * self.index))
            if len(self._moment_cache) > 4:
                self._moment_cache.clear()
            self._moment_cache[lam] = (
                mean,
                float(np.sum(w * (self.index - mean) ** 2)),
                w,
                lm + math.log(total),
                rho,
            )
        return self._moment_cache[lam]

    def composed(self, t: int) -> Composition:
        """The T-fold self-composition (memoized)."""
        if t not in self._compositions:
            self._compositions[t] = Composition([(self, t)])
        return self._compositions[t]

    def delta(self, t: int, epsilon: float) -> float:
        """:meth:`Composition.delta` of the T-fold self-composition."""
        return self.composed(t).delta(epsilon)

    def epsilon(self, t: int, delta: float, guess: float) -> float:
        """:meth:`Composition.epsilon` of the T-fold self-composition."""
        return self.composed(t).epsilon(delta, guess)


class Composition:
    """The composition of T₁ steps of one-step PMF 1, T₂ of PMF 2, … (one discretization interval;
    the phases of a run, or one PMF self-composed), read off with certified error bounds (module
    docstring): every PMF is tilted by the same λ, the tilted PMFs compose to the tilted
    composition, p^{*}_k = Π_i M_i(λ)^{T_i} e^{-λk} (w_1^{*T_1} * w_2^{*T_2} * …)_k, and what is
    left out or rounded is bounded as for one PMF, summed over the phases."""

    def __init__(self, parts: list[tuple[TiltedPmf, int]]):
        if len({p.disc for p, _ in parts}) != 1:
            raise ValueError("the PMFs of a composition share one discretization interval")
        if any(t < 1 for _, t in parts):
            raise ValueError("every PMF of a composition is composed at least once")
        self.parts = [(p, int(t)) for p, t in parts]
        self.t = sum(t for _, t in self.parts)
        self.disc = self.parts[0][0].disc
        self.lower = sum(t * p.lower for p, t in self.parts)  # loss index of the first bin
        self.top = sum(t * p.top for p, t in self.parts)  # last finite bin, from the first
        self.weights = [t / self.t for _, t in self.parts]  # each PMF's share of the steps
        self._tilts: dict[float, float] = {}

    def _mean(self, lam: float) -> tuple[float, float]:
        """(mean, variance) per step of the composition tilted by λ (its T-th part)."""
        moments = [p._moments(lam) for p, _ in self.parts]
        return (
            _sum(w * m[0] for w, m in zip(self.weights, moments)),
            _sum(w * m[1] for w, m in zip(self.weights, moments)),
        )

    def _total(self, lam: float) -> tuple[float, float, float, float, float]:
        """(mean, variance, log Π M_i^{T_i}, Σ T_i|log M_i|, Σ T_i ρ_i) of the
        composition tilted by λ."""
        moments = [(t, p._moments(lam)) for p, t in self.parts]
        return (
            _sum(t * m[0] for t, m in moments),
            _sum(t * m[1] for t, m in moments),
            _sum(t * m[3] for t, m in moments),
            _sum(t * abs(m[3]) for t, m in moments),
            _sum(t * m[4] for t, m in moments),
        )

    def tilt(self, target: float) -> float:
        """λ ≥ 0 whose tilted mean per step is ``target`` (a bin index); 0 below the untilted mean,
        and the mean just below the top bin above it (Newton's method on the mean, whose derivative
        in λ is the tilted variance, safeguarded by a bracket); memoized."""
        if target not in self._tilts:
            self._tilts[target] = self._solve_tilt(target)
        return self._tilts[target]

    def _solve_tilt(self, target: float) -> float:
        mean, var = self._mean(0.0)
        if mean >= target:
            return 0.0
        target = min(target, _sum(w * p.top for w, (p, _) in zip(self.weights, self.parts)) - 1e-3)
        lo, hi, lam = 0.0, math.inf, 0.0
        for _ in range(200):
            if mean < target:
                lo = lam
            else:
                hi = lam
            if abs(mean - target) <= 1e-9 * max(1.0, abs(target)) or (
                math.isfinite(hi) and hi - lo <= 1e-15 * hi
            ):
                break
            step = lam + (target - mean) / max(var, 1e-300)
            lam = step if lo < step < hi else (lo + hi) / 2 if math.isfinite(hi) else 2 * lo + 1e-6
            mean, var = self._mean(lam)
        return lam

    def infinity(self) -> float:
        """The infinity mass of the composition, 1 − Π_i (1 − m_i)^{T_i}."""
        if any(p.inf >= 1 for p, _ in self.parts):
            return 1.0
        return -math.expm1(_sum(t * math.log1p(-p.inf) for p, t in self.parts))

    def window(
        self, loss: float, below: float | None = None, wide: bool = False, precise: bool = False
    ):
        """The composition near ``loss``: (first bin's loss index, untilted PMF on the window, extra
        mass at infinity, rounding allowance ``r(ε)``, log of a bound on the mass that wraps around
        onto the window), with the window reaching down to ``below`` (a loss) when given; ``wide``:
        reaching up until the wrapped mass is negligible, where :data:`WINDOW_MAX` allows;
        ``precise``: composed in long double (:func:`fft_compose`)."""
        t = self.t
        lam = self.tilt((loss / self.disc - self.lower) / t)
        center, var, lm, labs, rho = self._total(lam)
        spread = math.sqrt(var) + 1.0
        scale = lm - lam * center  # log of the untilted PMF's scale at the tilted mean
        lo = max(0, math.floor(center - WIDTH_BELOW * spread))
        if below == -math.inf:
            lo = 0
        elif below is not None:
            lo = max(0, min(lo, math.floor(below / self.disc - self.lower) - 1))
        last = self.top
        step = math.ceil(8 * spread)
        # log of the mass above the window (Chernoff), at each edge tried
        mass_above = functools.cache(
            lambda edge: self._above(lam, edge) if edge < last else -math.inf
        )
        hi = _first_edge(
            min(last, math.ceil(center + 8 * spread)),
            step,
            last,
            lambda edge: mass_above(edge) <= scale + ABOVE_LOG,
        )
        if hi - lo + 1 > WINDOW_MAX:
            raise TooWide(hi - lo + 1)
        # the mass above the window wraps around onto it, where untilting scales mass from bin k
        # landing on bin j ≥ lo by e^{λ(k − j)} ≤ e^{λ(k − lo)}: by Chernoff, at most e^{wrapped}
        # in all; ``wide`` reaches up until that is negligible too (within WINDOW_MAX)
        if wide:
            hi = _first_edge(
                hi,
                step,
                min(last, lo + WINDOW_MAX - 1),
                lambda edge: mass_above(edge) + lam * (edge - lo) <= scale + ABOVE_LOG,
            )
        above = mass_above(hi)
        wrapped = above + lam * (hi - lo)
        size = fft.next_fast_len(hi - lo + 1, real=True)
        folded = [
            np.bincount(p.index.astype(np.int64) % size, weights=p._moments(lam)[2], minlength=size)
            for p, _ in self.parts
        ]
        composed, error = fft_compose(folded, [t for _, t in self.parts], precise)
        k = np.arange(lo, hi + 1)
        tilted = np.maximum(composed[k % size], 0.0)
        exponent = lm - lam * k  # log of the untilting factor Π M_i^{T_i} e^{-λk}
        # relative rounding of the tilted bins (≤ Σ T_i ρ_i; ``precise``: and their rounding to
        # float64) and of the untilting factor's exponent (a sum over the phases) and exp
        grow = rho + max(2, len(self.parts)) * U * (2 + labs + lam * hi) + (U if precise else 0.0)
        with np.errstate(under="ignore"):
            probs = np.exp(np.minimum(exponent + grow, 700.0)) * tilted
        # a probability is ≤ 1: rounding noise far below the mean, amplified by
        # e^{-λk}, is capped there
        probs = np.where((exponent > 700.0) & (tilted > 0), 1.0, np.minimum(probs, 1.0))
        extra = math.exp(above) + size * np.finfo(float).tiny

        def rounding(epsilon: float) -> float:
            """‖error‖₂·‖(Π M_i^{T_i} e^{-λk})_{k_ε < k ≤ hi}‖₂ (Cauchy–Schwarz): what rounding may
            hide in the bins above ``epsilon``."""
            first = max(lo, math.floor(epsilon / self.disc - self.lower) + 1)
            count = hi - first + 1
            if count <= 0 or error == 0:
                return 0.0
            if lam == 0:
                return error * math.exp(lm + grow + 0.5 * math.log(count))
            return error * math.exp(
                lm
                + grow
                - lam * first
                + 0.5 * (math.log1p(-math.exp(-2 * lam * count)) - math.log(-math.expm1(-2 * lam)))
            )

        return self.lower + lo, probs, extra, rounding, wrapped

    def _above(self, lam: float, edge: int) -> float:
        """log of the Chernoff bound Π_i M_i(η)^{T_i} e^{-η·edge} on the composed mass above bin
        ``edge``, at the η > λ that minimizes it (any η gives a bound; the exponent is unimodal in
        log(η − λ))."""

        def bound(x: float) -> float:
            eta = lam + math.exp(x)
            return _sum(t * p.log_mgf(eta) for p, t in self.parts) - eta * edge

        from scipy import optimize  # where a bound is read: planning imports this module

        best = optimize.minimize_scalar(
            bound,
            bounds=(math.log(1e-12), math.log(50.0)),
            method="bounded",
            options={"xatol": 1e-3},
        )
        return float(min(best.fun, bound(math.log(50.0))))

    def delta(self, epsilon: float) -> float:
        """An upper bound on δ(ε) of the composition (:class:`TooWide` where its window would be):
        the smaller of the first window's and, where its wrapped mass or rounding allowance may move
        δ, the careful window's (:meth:`window`: wide where mass wraps, in long double where the
        rounding allowance may move δ)."""
        if epsilon / self.disc >= self.lower + self.top:
            return self.infinity()
        value, wrapped, allowance = self._delta(epsilon, wide=False, precise=False)
        wide, precise = _careful(wrapped, allowance, value)
        if not (wide or precise):
            return value
        return min(value, self._delta(epsilon, wide, precise)[0])

    def _delta(self, epsilon: float, wide: bool, precise: bool) -> tuple[float, float, float]:
        """(:meth:`delta` read on one window of the kind ``wide`` and ``precise`` ask for, its log
        bound on the mass wrapped onto it, its rounding allowance at ``epsilon``)."""
        first, probs, extra, rounding, wrapped = self.window(epsilon, epsilon, wide, precise)
        value = _delta_at(self.infinity() + extra, first, probs, self.disc, epsilon)
        allowance = rounding(epsilon)
        return min(1.0, value + allowance), wrapped, allowance

    def epsilon(self, delta: float, guess: float) -> float:
        """An upper bound on ε(δ) of the composition, tilted at ``guess`` (an estimate of ε:
        re-tilted at the answer while the answer leaves the window's accurate part): the smaller of
        the first windows' and, where they give no finite ε or their wrapped mass or rounding
        allowance may move δ, the careful windows' (:meth:`delta`); :class:`TooWide` where a window
        would exceed :data:`WINDOW_MAX`."""
        eps, wrapped, allowance = self._epsilon(delta, guess, wide=False, precise=False)
        wide, precise = _careful(wrapped, allowance, delta)
        if math.isfinite(eps) and not (wide or precise):
            return eps
        return min(eps, self._epsilon(delta, guess, wide, precise or math.isinf(eps))[0])

    def _epsilon(
        self, delta: float, guess: float, wide: bool, precise: bool
    ) -> tuple[float, float, float]:
        """(:meth:`epsilon` read on windows of one kind, the last window's log bound on the mass
        wrapped onto it and its rounding allowance at the answer)."""
        inf_t = self.infinity()
        if inf_t >= delta:
            return math.inf, -math.inf, 0.0
        loss, below = guess, None
        for attempt in range(6):
            if attempt == 5:  # the whole composed support below the window: always inside
                below = -math.inf
            first, probs, extra, rounding, wrapped = self.window(loss, below, wide, precise)
            eps = epsilon_for_delta(inf_t + extra, first, probs, self.disc, delta)
            allowance = 0.0
            if math.isfinite(eps):  # δ(ε) + r(ε) ≤ δ: r decreases in ε, and this read is ≥ the last
                allowance = rounding(eps)
                eps = epsilon_for_delta(inf_t + extra + allowance, first, probs, self.disc, delta)
            inside = first == self.lower or eps >= (first + 1) * self.disc
            if inside and (below is not None or abs(eps - loss) <= 4 * self._spread(loss)):
                return eps, wrapped, allowance
            if not inside:
                below = min(eps, loss) - 16 * self._spread(loss)
            loss = eps if math.isfinite(eps) else loss
        return eps, wrapped, allowance

    def _spread(self, loss: float) -> float:
        """Standard deviation (in loss) of the composition tilted to its mean at ``loss``."""
        lam = self.tilt((loss / self.disc - self.lower) / self.t)
        return math.sqrt(self._total(lam)[1]) * self.disc


def _first_edge(start: int, step: int, last: int, enough) -> int:
    """The first edge of start, start + step, start + 2·step, … (capped at ``last``) where
    ``enough`` holds, or ``last``: by doubling, then bisection, so a window that must reach far
    past the tilted mean (small q: rare large losses, a spread of a few bins) is found in
    O(log) Chernoff bounds, not one per step (σ = 0.5, q = 1e-10, T = 8 took hours).  ``enough``
    (a Chernoff bound on the mass above, falling with the edge) changes from false to true once."""

    def edge(m: int) -> int:
        return min(last, start + m * step)

    def done(m: int) -> bool:
        return edge(m) >= last or enough(edge(m))

    if done(0):
        return edge(0)
    good = 1
    while not done(good):
        good *= 2
    bad = good // 2
    while good - bad > 1:
        mid = (bad + good) // 2
        bad, good = (bad, mid) if done(mid) else (mid, good)
    return edge(good)


def _careful(wrapped: float, allowance: float, delta: float) -> tuple[bool, bool]:
    """(wide, precise): the careful window a first one calls for, given its log bound on the mass
    wrapped onto it and its rounding allowance, where either may move a δ of ``delta`` by more than
    e^NEGLIGIBLE_LOG of it (a δ of 0 already: both only add to δ, so no other window can lower
    it)."""
    if delta == 0:
        return False, False
    limit = math.log(delta) + NEGLIGIBLE_LOG
    return wrapped > limit, allowance > 0 and math.log(allowance) > limit


def _sum(values) -> float:
    """The sum of ``values`` from the first (one value is itself, bit for bit: no 0 + x)."""
    return functools.reduce(operator.add, values)


def rounding_bound(size: int, counts: list[int], norms: list[float], unit: float) -> float:
    """A bound on ‖computed − exact‖₂ of :func:`fft_compose` for PMFs of 2-norms ``norms`` folded to
    ``size`` bins and composed ``counts`` times each, in arithmetic of unit roundoff ``unit``
    (module docstring, steps 1–4, with T = Σ counts and ‖w‖₂ the largest norm: a product of T
    spectra of modulus ≤ 1 moves by ≤ (1 + a)^{T−1} times the sum of the T factors' errors); ∞
    where (1 + a)^{T−1} is not close to 1."""
    t, norm = sum(counts), max(norms)
    if t == 1:
        return 0.0
    gamma = FFT_C * math.ceil(math.log2(size)) * unit
    a = gamma * math.sqrt(size) * norm
    if (t - 1) * a > 1:
        return math.inf
    e1 = t * math.exp((t - 1) * math.log1p(a)) * gamma * norm
    # T − 1 complex products, each within √2·γ₂ relative (Higham 2002, Lemma 3.5); near underflow
    # each of the ≤ 2 per bit of T_i (and one per phase) may lose 16 times the smallest normal
    eta = math.sqrt(2) * 2 * unit / (1 - 2 * unit)
    products = sum(2 * c.bit_length() for c in counts) + len(counts)
    e2 = math.expm1((t - 1) * math.log1p(eta)) * (norm + e1) + 16 * products * TINY
    return (1 + gamma + unit) * (e1 + e2) + (gamma + unit) * norm


def fft_compose(
    ws: list[np.ndarray], counts: list[int], precise: bool = False
) -> tuple[np.ndarray, float]:
    """The circular convolution of each ``ws[i]`` (≥ 0, Σ = 1, one length) composed ``counts[i]``
    times, as irfft(Π_i rfft(w_i)^{T_i}) with the powers by repeated squaring, and
    :func:`rounding_bound` on its 2-norm error; ``precise``: in x87 long double (u = 2^-64, where
    the platform has it), returned rounded to float64 (the caller counts that ulp as relative)."""
    if sum(counts) == 1:
        return ws[0].copy(), 0.0
    dtype = np.longdouble if precise else np.float64
    size = len(ws[0])
    spectrum = functools.reduce(
        operator.mul, (_power(fft.rfft(w.astype(dtype)), t) for w, t in zip(ws, counts))
    )
    out = fft.irfft(spectrum, size).astype(float)
    norms = [math.sqrt(float(np.sum(w * w))) for w in ws]
    return out, rounding_bound(size, counts, norms, float(np.finfo(dtype).eps) / 2)


def _power(z: np.ndarray, t: int) -> np.ndarray:
    """z^t elementwise by repeated squaring (t ≥ 1): ⌊log₂t⌋ squarings and at most as many other
    products, so z^t carries the relative errors of t − 1 products (:func:`rounding_bound`)."""
    result = None
    while True:
        if t & 1:
            result = z if result is None else result * z
        t >>= 1
        if not t:
            return result
        z = z * z
