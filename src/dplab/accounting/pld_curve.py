"""ε(T) of dp_accounting's PLD accountant for many T at once, sharing the work across T.

dp_accounting (Doroshenko et al. 2022) answers one T per call: it discretizes the one-step
privacy-loss distribution (PLD) of the Poisson-subsampled Gaussian, self-composes it T times by
one FFT (``self_convolve``: window from Chernoff bounds with tail mass 1e-15, ``rfft``, T-th power,
inverse), composes the result with the identity PLD (truncating tails of mass ≤ 1e-15, the left
one onto the first bin, the right one to infinity) and reads ε(δ) off the composed PMF.

:class:`ComposedPmf` repeats exactly those steps for a list of T, with the one-step PLD built
once, the Chernoff moments computed once, the FFT of the one-step PMF computed once per FFT size
(sizes rounded up to a ladder of ratio 2^(1/8)) and T-th powers as exp(T·log φ).  ε is read off
by a vectorized form of dp_accounting's ``_get_epsilon_for_delta`` after one inverse FFT or, when
φ^T is negligible (< e^-60) outside a narrow band of low frequencies (large T), straight from those
few Fourier coefficients (:func:`_band_epsilon`: the tail sums that rule needs are geometric sums
in the Fourier domain, so no inverse FFT is taken).  For an add/remove pair the second PMF is
only asked whether its ε exceeds the first's (one δ evaluation where it does not).  The values
agree with dp_accounting's to FFT rounding (tests: 1e-7 relative; measured ≤ 3e-9 at ε ≤ 10, up
to 9e-7 at ε ≈ 27–57 with δ = 1e-8, i.e. 2e-5 absolute, below the 1e-4 discretization).
These values are not certified (the FFT's rounding is absolute: at δ = 1e-12 they fall below the
true ε): the ``pld`` accountant only tilts its certified read-off (:mod:`pld_tilted`) at them.

:func:`monotone_curve` serves every T of a long grid from exact values on a sub-grid: ε is
non-decreasing in T (composing one more step cannot decrease the hockey-stick divergence), so the
value at the next sub-grid point ≥ T is an upper bound on ε(T).  The sub-grid is refined until the
ratio of consecutive exact values is ≤ 1 + ``excess``, which bounds the relative excess of every
reported value over the exact ε(T) by ``excess`` (default 1%).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

import numpy as np
from scipy import fft, special

from dplab.accounting.roots import multisection

if TYPE_CHECKING:
    from dp_accounting.pld import pld_pmf

#: dp_accounting's default tail-mass truncation of self_compose and compose
TAIL = 1e-15
#: default bound on the relative excess of a value read from the next sub-grid point
EXCESS = 0.01
#: grids with at most this many steps are evaluated exactly at every step
EXACT_UP_TO = 64
#: Fourier coefficients with |φ^T| < e^BAND_LOG are dropped by the band read-off
BAND_LOG = -60.0
#: the band read-off is used when the band holds fewer than 1/BAND_RATIO of the FFT's frequencies
BAND_RATIO = 32
#: (tail starts tried per round of the band read-off's bisection) × (band width)
POINTS = 16384


class ComposedPmf:
    """T-fold self-compositions of one dp_accounting PMF, sharing the one-step work across T.

    ``epsilons(steps, delta)`` is what ``pmf.self_compose(T)`` composed with the identity PLD
    and read by ``get_epsilon_for_delta(delta)`` gives, for each T; the log-MGFs of the Chernoff
    window and the spectra of each FFT length are computed once per object."""

    def __init__(self, pmf: pld_pmf.DensePLDPmf):
        self.probs = np.asarray(pmf._probs, dtype=float)  # noqa: SLF001 (dp_accounting's own state; tests/test_dependencies.py)
        self.lower0, self.inf0, self.disc = pmf._lower_loss, pmf._infinity_mass, pmf._discretization  # noqa: SLF001
        n = len(self.probs)
        self.orders = np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / n
        self.log_mgfs = np.array(
            [special.logsumexp(np.arange(n) * order, b=self.probs) for order in self.orders]
        )
        self.spectra: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def spectrum(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """log φ of the one-step PMF zero-padded to ``size``, and −max_{j ≥ k} Re log φ_j
        (non-decreasing: the band |φ^T| ≥ e^BAND_LOG lies below the first k where it exceeds
        −BAND_LOG/T)."""
        if size not in self.spectra:
            log_phi = np.log(fft.rfft(self.probs, size).astype(complex))
            self.spectra[size] = log_phi, -np.maximum.accumulate(log_phi.real[::-1])[::-1]
        return self.spectra[size]

    def epsilons(
        self, steps: np.ndarray, delta: float, floor: np.ndarray | None = None
    ) -> np.ndarray:
        """ε(δ) for each T of ``steps``; with ``floor`` (e.g. the other PMF's ε of an add/remove
        pair), max(ε(δ), floor) per T, which costs one δ evaluation where ε(δ) ≤ floor."""
        n, lower0, disc = len(self.probs), self.lower0, self.disc
        out = np.empty(len(steps))
        floors = np.full(len(steps), -np.inf) if floor is None else np.asarray(floor, dtype=float)
        for j, t in enumerate(np.asarray(steps, dtype=int)):
            lo, hi = _chernoff_window(n, int(t), self.log_mgfs, self.orders)
            length = hi - lo + 1
            size = _ladder(max(length, n))
            log_phi, envelope = self.spectrum(size)
            inf_t = TAIL - math.expm1(t * math.log1p(-self.inf0))
            band_end = int(np.searchsorted(envelope, -BAND_LOG / t, side="left"))
            eps = None
            if BAND_RATIO * band_end < size:
                band = np.flatnonzero(t * log_phi.real[:band_end] > BAND_LOG)
                eps = _band_epsilon(
                    np.exp(t * log_phi[band]),
                    band,
                    size,
                    lo % size,
                    length,
                    lower0 * t + lo,
                    disc,
                    inf_t,
                    delta,
                    floors[j],
                )
            if eps is None:
                spectrum = np.zeros(len(log_phi), dtype=complex)
                spectrum[:band_end] = np.exp(t * log_phi[:band_end])
                conv = fft.irfft(spectrum, size)
                start = lo % size
                window = conv[start : start + length]
                if len(window) < length:  # the window wraps around the circular convolution
                    window = np.concatenate((window, conv[: length - len(window)]))
                offset, window, right = _truncate_tails(window)
                losses_from = lower0 * t + lo + offset
                if (
                    floors[j] > 0
                    and _delta_at(inf_t + right, losses_from, window, disc, floors[j]) <= delta
                ):
                    eps = floors[j]
                else:
                    eps = epsilon_for_delta(inf_t + right, losses_from, window, disc, delta)
            out[j] = max(eps, floors[j])
        return out


def _delta_at(
    infinity_mass: float, lower_loss: int, probs: np.ndarray, disc: float, epsilon: float
) -> float:
    """δ(ε) = p(∞) + Σ_{ℓ>ε} p(ℓ)(1 − e^{ε−ℓ}) of a dense PMF (losses (lower_loss + i)·disc)."""
    first = max(0, math.floor(epsilon / disc) - lower_loss + 1)
    losses = (lower_loss + first + np.arange(len(probs) - first)) * disc
    tail = probs[first:]
    keep = losses > epsilon
    return infinity_mass + float((tail[keep] * -np.expm1(epsilon - losses[keep])).sum())


def _band_epsilon(
    spectrum, freqs, size, start, length, lower_loss, disc, infinity_mass, delta, floor=-math.inf
):
    """ε(δ) read off a composed PMF given by its few non-negligible Fourier coefficients, without
    the inverse FFT: for T ≫ 1 the T-th power of the one-step spectrum is negligible (< e^-60)
    outside a narrow band of frequencies.

    The PMF is p_n = c[(start + n) mod size], n < length, losses ℓ_n = (lower_loss + n)·disc, c
    the inverse real DFT of ``spectrum`` on ``freqs``.  Sums over a tail n ≥ s,
    A(s) = Σ p_n and E(s) = Σ p_n e^{-(n-s)·disc}, are closed-form geometric sums in the Fourier
    domain (Parseval).  The cell s of dp_accounting's ``_get_epsilon_for_delta`` is the largest s
    with δ(ℓ_{s-1}) = p(∞) + A(s) − e^{-disc}·E(s) > δ, found by a vectorized multi-point bisection;
    there ε = ℓ_s + log((p(∞) + A(s) − δ)/E(s)), dp_accounting's closed form in that cell.  Tail
    truncation (≤ 1e-15 of mass) is not applied; it moves δ by ≤ 1e-15.  Returns None when ε
    falls below the first positive loss (the caller then uses the inverse FFT).  With ``floor`` >
    0, returns ``floor`` when δ(floor) ≤ δ (ε ≤ floor) and otherwise searches above it."""
    weight = np.where((freqs == 0) | (2 * freqs == size), 1.0, 2.0) / size
    coef = weight * spectrum * np.exp(2j * np.pi * ((freqs * start) % size) / size)
    half_theta = np.pi * freqs / size
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # 1 − z = −2i·sin(θ/2)·e^{iθ/2}; k = 0 apart
        plain = np.where(freqs == 0, 0, coef / (-2j * np.sin(half_theta) * np.exp(1j * half_theta)))
    damped = coef / -np.expm1(-disc + 2j * half_theta)  # coef / (1 − e^{-disc}·z)
    z_end = np.exp(2j * np.pi * ((freqs * length) % size) / size)  # z^length
    plain_end, damped_end = (plain * z_end).sum().real, (damped * z_end).sum().real
    dc = coef[0].real if freqs[0] == 0 else 0.0

    def delta_at(first: int, step: int, count: int):
        """Tail starts s = first + j·step (j < count, all ≤ length) and (A(s), E(s)) there:
        A = Re Σ_k c_k (z^s − z^L)/(1 − z) (+ c_0·(L − s)), E = Re Σ_k c_k
        (z^s − e^{-disc(L−s)} z^L)/(1 − e^{-disc} z); z^s = z^first·(z^step)^j by running
        products (K exponentials per call, not K·count)."""
        s = first + step * np.arange(count)
        powers = np.empty((len(freqs), count), dtype=complex)
        powers[:, 0] = np.exp(2j * np.pi * ((freqs * first) % size) / size)
        powers[:, 1:] = np.exp(2j * np.pi * ((freqs * step) % size) / size)[:, None]
        zs = np.cumprod(powers, axis=1)
        # einsum, not BLAS's threaded product: K × count is small, and OpenBLAS's threads made each
        # product ~7 ms of CPU on the loaded 2-core machine (5 µs in one thread), with bits
        # depending on their number
        tail_a = np.einsum("k,kj->j", plain, zs).real - plain_end + dc * (length - s)
        tail_e = np.einsum("k,kj->j", damped, zs).real - np.exp(-disc * (length - s)) * damped_end
        return s, tail_a, tail_e

    below, above = max(1, 1 - lower_loss), length  # δ(ℓ_{below−1}) > δ ≥ δ(ℓ_{above−1}) sought
    if (
        floor > 0
    ):  # the tail n ≥ s holds the losses above floor: δ(floor) = p(∞) + A(s) − e^{floor−ℓ_s}·E(s)
        s_floor = math.floor(floor / disc) - lower_loss + 1
        if s_floor >= length:
            return floor if infinity_mass <= delta else None
        if s_floor > below:
            _, a, e = delta_at(s_floor, 1, 1)
            if (
                infinity_mass + a[0] - math.exp(floor - (lower_loss + s_floor) * disc) * e[0]
                <= delta
            ):
                return floor
            below = s_floor  # δ(ℓ_{s−1}) ≥ δ(floor) > δ
    if below >= above:
        return None
    points = int(
        np.clip(POINTS // len(freqs), 8, 1024)
    )  # numpy's call overhead dominates small bands

    def over_at(first: int, step: int, count: int):
        _, a, e = delta_at(first, step, count)
        return infinity_mass + a - math.exp(-disc) * e > delta, (a, e)

    found = multisection(over_at, below, above, points)
    if found is None:
        return None  # ε is below the first positive loss
    below, (a, e) = found
    if not e > 0:
        return None
    return (lower_loss + below) * disc + math.log((infinity_mass + a - delta) / e)


def _chernoff_window(n: int, t: int, log_mgfs: np.ndarray, orders: np.ndarray) -> tuple[int, int]:
    """dp_accounting's ``compute_self_convolve_bounds`` with precomputed log-MGFs."""
    with np.errstate(invalid="ignore", over="ignore"):
        bounds = (t * log_mgfs + math.log(2 / TAIL)) / orders
    ok = np.isfinite(bounds)
    up, down = bounds[ok & (orders > 0)], bounds[ok & (orders < 0)]
    upper = min((n - 1) * t, math.ceil(up.min())) if up.size else (n - 1) * t
    lower = max(0, math.floor(down.max())) if down.size else 0
    return lower, upper


def _ladder(size: int) -> int:
    """An FFT length ≥ size from a ladder of ratio 2^(1/8) (so spectra are shared across T)."""
    return fft.next_fast_len(int(math.ceil(2 ** (math.ceil(8 * math.log2(size)) / 8))))


def _truncate_tails(probs: np.ndarray) -> tuple[int, np.ndarray, float]:
    """dp_accounting's pessimistic ``_truncate_tails`` (tail mass 1e-15), vectorized."""
    left = _prefix_within(probs, TAIL / 2)
    right = len(probs) - _prefix_within(probs[::-1], TAIL / 2)
    right = max(right, left + 1)
    kept = probs[left:right].copy()
    kept[0] += probs[:left].sum()
    return left, kept, float(probs[right:].sum())


def _prefix_within(probs: np.ndarray, threshold: float) -> int:
    """Length of the longest prefix whose running sum stays ≤ threshold (looked at in chunks)."""
    total, start, chunk = 0.0, 0, 256
    while start < len(probs):
        part = total + np.cumsum(probs[start : start + chunk])
        over = np.flatnonzero(part > threshold)
        if over.size:
            return start + int(over[0])
        total, start, chunk = float(part[-1]), start + chunk, chunk * 4
    return len(probs)


def epsilon_for_delta(
    infinity_mass: float, lower_loss: int, probs: np.ndarray, disc: float, delta: float
) -> float:
    """dp_accounting's ``_get_epsilon_for_delta`` on a dense PMF (losses (lower_loss + i)·disc),
    vectorized: the smallest ε with Σ_{ℓ>ε} p(ℓ)(1 − e^{ε−ℓ}) + p(∞) ≤ δ."""
    if infinity_mass > delta:
        return math.inf
    rev = probs[::-1]
    top = (lower_loss + len(probs) - 1) * disc
    mu, ml, start, chunk = infinity_mass, 0.0, 0, 4096
    while start < len(rev):  # scan down from the largest loss, in growing chunks
        p = rev[start : start + chunk]
        losses = top - (start + np.arange(len(p))) * disc
        upper = mu + np.concatenate(([0.0], np.cumsum(p)))  # mass before each item
        lower = ml + np.concatenate(([0.0], np.cumsum(np.exp(-losses) * p)))
        # a ratio over a tiny e^{−ℓ}-weighted mass may overflow to inf: its log exceeds any loss
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            stop = (
                (upper[:-1] > delta)
                & (lower[:-1] > 0)
                & (np.log((upper[:-1] - delta) / lower[:-1]) >= losses)
            )
        zero_lower = (upper[1:] >= delta) & (lower[1:] == 0)  # exp(−ℓ) underflowed
        end = int(np.argmax(stop)) if stop.any() else len(p)
        if zero_lower[:end].any():
            return max(0.0, float(losses[int(np.argmax(zero_lower))]))
        mu, ml = float(upper[end]), float(lower[end])
        if stop.any():
            break
        start, chunk = start + chunk, chunk * 2
    if mu <= ml + delta:
        return 0.0
    return math.log((mu - delta) / ml)


def monotone_curve(
    exact: Callable[[np.ndarray], np.ndarray], steps: np.ndarray, excess: float | None = None
) -> np.ndarray:
    """Upper bounds on a non-decreasing f at every T in ``steps`` (sorted), from exact values
    ``exact(T_array)`` on a sub-grid of ``steps`` refined until consecutive values differ by a
    factor ≤ 1 + ``excess``; each T gets the value at the next sub-grid point ≥ T (its relative
    excess over f(T) is ≤ ``excess``).  Short grids are evaluated exactly."""
    excess = EXCESS if excess is None else excess
    steps = np.asarray(steps, dtype=int)
    uniq = np.unique(steps)
    if len(uniq) <= EXACT_UP_TO:
        values = dict(zip(uniq.tolist(), exact(uniq)))
        return np.array([values[t] for t in steps.tolist()])
    idx = np.unique(np.round(np.geomspace(1, len(uniq), 32)).astype(int) - 1)
    known = dict(zip(idx.tolist(), exact(uniq[idx])))
    while True:
        pos = np.array(sorted(known))
        vals = np.array([known[p] for p in pos])
        coarse = (vals[1:] > (1 + excess) * vals[:-1]) & (np.diff(pos) > 1)
        if not coarse.any():
            break
        new = []
        for a, b, va, vb in zip(
            pos[:-1][coarse], pos[1:][coarse], vals[:-1][coarse], vals[1:][coarse]
        ):
            # points spaced for a ratio ≈ 1 + excess if f is a local power law between a and b
            k = (
                2
                if not (va > 0 and math.isfinite(vb))
                else max(2, math.ceil(1.2 * math.log(vb / va) / math.log1p(excess)))
            )
            new += np.unique(
                np.round(np.geomspace(a + 1, b + 1, k + 1)[1:-1] - 1).astype(int)
            ).tolist()
        new = np.setdiff1d(np.array(new, dtype=int), pos)
        known.update(zip(new.tolist(), exact(uniq[new])))
    pos = np.array(sorted(known))
    vals = np.maximum.accumulate(np.array([known[p] for p in pos]))
    value_at = vals[np.searchsorted(pos, np.arange(len(uniq)))]
    return value_at[np.searchsorted(uniq, steps)]
