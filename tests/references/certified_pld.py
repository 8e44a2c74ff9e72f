"""Certified brackets [ε_low, ε_up] of the true ε of T Poisson-subsampled Gaussian steps, for
tests/test_certified_pld_rdp.py.  Independent of dplab and of dp_accounting: numpy and scipy only.

Usage: python tests/references/certified_pld.py [ROW ...] > tests/references/certified_pld.json
(ROW: indices into SETTINGS, default all; the guesses of ε are pld's values)
(2026-11-25, on 2 cores shared with other jobs: rows 0–1 ran 248 s and 219 s with the grid's x range
±(40σ + 4), rows 2–5 114 s, 29 s, 123 s and 354 s with ±(15σ + 2), row 6 199 s: the cells
beyond the range reach ±∞ either way, so the range only moves the truncation, not the validity;
each row's time is stored.)

One step's privacy-loss pair (σ = std/C of the clipped sum, Gaussian of mean 0 or ±1):
- add_remove, "remove": P = (1−q)N(0,σ²) + qN(1,σ²) against Q = N(0,σ²); "add": P and Q swapped;
- replace_one: P = (1−q)N(0,σ²) + qN(1,σ²) against Q = (1−q)N(0,σ²) + qN(−1,σ²).
The privacy loss L(x) = log p(x)/q(x) is monotone in x, so the P-mass of L on a grid of width d
follows from normal CDFs at the grid's inverse images ("privacy buckets", Meiser & Mohammadi 2018).
Rounding every loss up (the mass above the grid's top at +∞) gives PMFs whose T-fold composition
has δ(ε) = E[(1 − e^{ε−ΣL})₊] at least the true one; rounding down (mass below the grid dropped,
i.e. put at −∞) at most: a coupling of each step's loss with its rounded value (ΣL̃ ≤ ΣL ≤ ΣL̂).
So ε_up (from δ_up) ≥ true ε ≥ ε_low.  δ of add_remove is the larger of its two directions.

The T-fold composition of each PMF is computed by an FFT of the exponentially tilted PMF
w_k ∝ p_k e^{λk} with λ ≥ 0 putting the tilted mean at ε (p^{*T}_k = M(λ)^T e^{−λk} w^{*T}_k): the
FFT's rounding is then relative to the composed PMF near ε.  Its size covers ±WIDTH tilted standard
deviations; the composed mass above the window is bounded by Chernoff (added to δ_up); mass wrapping
around the circular FFT only adds to the window (δ_up) and is bounded by Chernoff on both sides for
δ_low (subtracted); the FFT rounding is bounded per bin by 8(T+2)·log₂N·u·√N·‖w‖₂ (Higham 2002, Thm
24.2, with a margin) and added to δ_up, subtracted from δ_low.
"""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
from scipy import fft, optimize, special, stats

U = np.finfo(float).eps / 2
WIDTH = 16.0


def log_mass(a: np.ndarray, b: np.ndarray, mean: float, sigma: float) -> np.ndarray:
    """log P(a < X ≤ b) for X ~ N(mean, σ²), accurate in both tails."""
    za, zb = (a - mean) / sigma, (b - mean) / sigma
    upper = za > 0  # use survival functions in the upper tail
    la = np.where(upper, special.log_ndtr(-za), special.log_ndtr(zb))
    lb = np.where(upper, special.log_ndtr(-zb), special.log_ndtr(za))
    with np.errstate(divide="ignore", invalid="ignore"):
        return la + np.log(-np.expm1(lb - la))


def loss_pair(sigma: float, q: float, direction: str):
    """(privacy loss L(x), P's mixture components [(weight, mean)], L increasing in x?)."""

    def log_mix(x, parts):
        return special.logsumexp(
            [math.log(w) + stats.norm.logpdf(x, m, sigma) for w, m in parts], axis=0
        )

    mixture = [(1 - q, 0.0), (q, 1.0)] if q < 1 else [(1.0, 1.0)]
    if direction == "remove":
        p, qq = mixture, [(1.0, 0.0)]
    elif direction == "add":
        p, qq = [(1.0, 0.0)], mixture
    else:
        p, qq = mixture, ([(1 - q, 0.0), (q, -1.0)] if q < 1 else [(1.0, -1.0)])
    return (lambda x: log_mix(x, p) - log_mix(x, qq)), p, direction != "add"


def one_step(sigma: float, q: float, direction: str, disc: float, up: bool):
    """(first grid index, PMF on the grid k·disc, mass at +∞) of one step's rounded privacy loss."""
    loss, parts, increasing = loss_pair(sigma, q, direction)
    span = 15 * sigma + 2  # the grid's x range; the cells beyond it reach ±∞
    xs = np.linspace(-span, span, 200001)
    ls = loss(xs)
    ok = np.isfinite(ls)
    lo_k, hi_k = math.floor(ls[ok].min() / disc) - 1, math.ceil(ls[ok].max() / disc) + 1
    grid = np.arange(lo_k, hi_k + 1) * disc

    def inverse(levels):  # x with L(x) = level, by vectorized bisection
        a, b = np.full(len(levels), -span), np.full(len(levels), span)
        for _ in range(64):
            m = (a + b) / 2
            below = (loss(m) < levels) if increasing else (loss(m) > levels)
            a, b = np.where(below, m, a), np.where(below, b, m)
        return (a + b) / 2

    cuts = inverse(grid)
    edges = (
        np.concatenate(([-np.inf], cuts, [np.inf]))
        if increasing
        else np.concatenate(([np.inf], cuts, [-np.inf]))
    )
    left, right = np.minimum(edges[:-1], edges[1:]), np.maximum(edges[:-1], edges[1:])
    # cell j holds the losses between grid[j-1] and grid[j] (cell 0: below
    # grid[0], last: above grid[-1])
    mass = np.zeros(len(edges) - 1)
    for w, m in parts:
        mass += w * np.exp(log_mass(left, right, m, sigma))
    probs = np.zeros(len(grid))
    if up:  # round up: cell j → grid[j]; the cell above the top → +∞
        probs += mass[:-1]
        inf = float(mass[-1])
    else:  # round down: cell j → grid[j-1]; the cell below the grid dropped (−∞)
        probs += mass[1:]
        inf = 0.0
    return lo_k, probs, inf


def composed_delta(
    first: int, probs: np.ndarray, inf: float, disc: float, t: int, epsilons: np.ndarray, up: bool
):
    """δ(ε) of the T-fold composition at each ε (sorted, close together): an upper bound when ``up``
    (the PMF rounded up), a lower bound otherwise, each with the error terms of
    the module docstring."""
    keep = probs > 0
    idx = np.flatnonzero(keep).astype(float)
    lp = np.log(probs[keep])

    def moments(lam):
        z = lam * idx + lp
        lm = special.logsumexp(z)
        w = np.exp(z - lm)
        mean = w @ idx
        return lm, mean, w @ (idx - mean) ** 2, w

    target = (epsilons.mean() / disc - t * first) / t
    lam = 0.0
    if moments(0.0)[1] < target:
        hi = 1e-6
        while moments(hi)[1] < target:
            hi *= 2
        lam = optimize.brentq(lambda x: moments(x)[1] - target, 0.0, hi, xtol=1e-15, rtol=1e-13)
    lm, mean, var, w = moments(lam)
    center, spread = t * mean, math.sqrt(t * var) + 1
    top = t * int(idx[-1])
    lo = max(0, math.floor(min(center - WIDTH * spread, epsilons.min() / disc - t * first - 1)))
    hi = min(top, math.ceil(max(center + WIDTH * spread, epsilons.max() / disc - t * first + 1)))

    def chernoff(edge, sign):  # log min_η M(η)^T e^{-η·edge}, η > λ above (sign +1), η < λ below
        def f(x):
            return (
                t * special.logsumexp((lam + sign * math.exp(x)) * idx + lp)
                - (lam + sign * math.exp(x)) * edge
            )  # noqa: E731

        r = optimize.minimize_scalar(f, bounds=(-30, math.log(50)), method="bounded")
        return min(r.fun, f(math.log(50)))

    above = chernoff(hi, +1) if hi < top else -math.inf  # untilted composed mass above the window
    below = chernoff(lo, -1) if lo > 0 else -math.inf
    size = fft.next_fast_len(hi - lo + 1, real=True)
    folded = np.bincount(idx.astype(np.int64) % size, weights=w, minlength=size)
    conv = fft.irfft(np.exp(t * np.log(fft.rfft(folded).astype(complex))), size)
    k = np.arange(lo, hi + 1)
    tilted = conv[k % size]
    eta = 8 * (t + 2) * math.ceil(math.log2(size)) * U * max(1.0, math.sqrt(size * (w @ w)))
    # mass wrapped onto the window, in tilted units (for the lower bound):
    # Chernoff of the tilted tails
    wrapped = (
        math.exp(above - t * lm + lam * hi) + math.exp(below - t * lm + lam * lo)
        if lam >= 0
        else 1.0
    )
    tilted = np.maximum(tilted, 0.0) + eta if up else np.maximum(tilted - eta - wrapped, 0.0)
    log_scale = t * lm - lam * k
    losses = (t * first + k) * disc
    inf_t = -math.expm1(t * math.log1p(-inf)) if inf < 1 else 1.0
    # δ(ε) = Σ_{ℓ_k > ε} p_k − e^ε Σ_{ℓ_k > ε} p_k e^{−ℓ_k}, by suffix sums from the first ε on
    start = int(np.searchsorted(losses, epsilons.min(), side="right"))
    scale = log_scale[start]
    r = tilted[start:] * np.exp(log_scale[start:] - scale)  # ≤ tilted: λ ≥ 0
    e = r * np.exp(-(losses[start:] - losses[start]))
    tail_r = np.concatenate((np.cumsum(r[::-1])[::-1], [0.0]))
    tail_e = np.concatenate((np.cumsum(e[::-1])[::-1], [0.0]))
    j = np.searchsorted(losses[start:], epsilons, side="right")
    finite = math.exp(scale) * np.maximum(
        tail_r[j] - np.exp(epsilons - losses[start]) * tail_e[j], 0.0
    )
    return finite + inf_t + (math.exp(above) if up else 0.0)


def epsilon_bracket(sigma, q, t, delta, relation, disc_up, disc_low, guess):
    """[ε_low, ε_up] around the true ε at δ."""
    directions = ("remove", "add") if relation == "add_remove" else ("replace",)
    result = []
    for up, disc in ((False, disc_low), (True, disc_up)):
        steps = [one_step(sigma, q, d, disc, up) for d in directions]

        def delta_at(eps_grid):
            return np.max(
                [composed_delta(f, p, i, disc, t, eps_grid, up) for f, p, i in steps], axis=0
            )

        grid = np.linspace(guess * 0.97, guess * 1.03, 6001)
        while True:  # one FFT per direction gives δ on the whole grid of ε
            over = delta_at(grid) > delta
            if over[0] and not over[-1]:
                break
            width = grid[-1] - grid[0]
            grid = grid + (width * 0.9 if over[-1] else -width * 0.9)
        j = int(np.argmin(over))  # first ε meeting δ
        lo, hi = grid[j - 1], grid[j]
        result.append(lo if not up else hi)
    return result


SETTINGS = [
    # σ, q, T, δ, relation, discretization (upper bound, lower bound), guess of ε
    (2.0, 0.5, 1000, 1e-12, "add_remove", 1e-4, 2e-5, 91.1),
    (3.0, 0.3, 3000, 1e-12, "add_remove", 1e-4, 1e-5, 54.84),
    (1.0, 0.3, 100, 1e-12, "replace_one", 1e-4, 5e-5, 56.6),
    (5.0, 0.99, 100, 1e-12, "add_remove", 1e-4, 5e-5, 15.47),
    (0.8, 0.05, 500, 1e-8, "replace_one", 1e-4, 5e-5, 22.46),
    (1.0, 0.01, 20000, 1e-12, "add_remove", 1e-4, 1e-5, 14.9),
    (0.8, 0.1, 10000, 1e-12, "add_remove", 1e-4, 1e-4, 270.2),  # pld refused it ("no finite ε")
]


if __name__ == "__main__":
    rows = []
    chosen = [int(a) for a in sys.argv[1:]] or range(len(SETTINGS))
    for sigma, q, t, delta, relation, d_up, d_low, guess in (SETTINGS[i] for i in chosen):
        start = time.time()
        low, up = epsilon_bracket(sigma, q, t, delta, relation, d_up, d_low, guess)
        rows.append(
            {
                "noise_multiplier": sigma,
                "sampling_rate": q,
                "steps": t,
                "delta": delta,
                "neighbouring": relation,
                "epsilon_low": low,
                "epsilon_up": up,
                "seconds": round(time.time() - start, 1),
            }
        )
        print(rows[-1], file=sys.stderr, flush=True)
    json.dump({"script": "tests/references/certified_pld.py", "rows": rows}, sys.stdout, indent=1)
    print()
