"""The one scalar root search of the accountants: bracket, then Brent's method, then the safe side.

Every calibration here solves ``gap(x) = 0`` for a monotone ``gap`` where ``gap(x) <= 0`` means
x meets the target (e.g. ε(σ) ≤ ε) and ``gap(x) > 0`` that it misses it.  :func:`expand` walks
from a start (x ← 2x, x + 2, …) to the first x that meets the target, or reports the cap;
:func:`brent` is Brent's method, step for step as SciPy's ``brentq`` takes it (without importing
scipy.optimize: 0.1 s of every calibrating job's start-up); :func:`safe_root` runs it on a
bracket and then steps the answer towards the meeting side until it meets the target, so a
returned σ, ε or δ is never on the side that misses it (conservative for an upper bound);
:func:`bracket` steps outward from a start, in widening steps, to a bracket of the target (the σ
searches, whose start is a good guess); :func:`doubling` brackets a target met from some x > 0 on
by doubling from a start (the ε searches whose scale is unknown); :func:`bisect` halves brackets
of a monotone predicate, element-wise on arrays (the vectorized ε(δ) inversions, validity
edges); :func:`multisection` searches an integer lattice a batch of points at a time (the PLD's
tail cell, whose evaluations share work along a lattice).
"""

from __future__ import annotations

import math
import sys
from typing import Callable

import numpy as np


def expand(
    misses: Callable[[float], bool],
    x: float,
    move: Callable[[float], float],
    within: Callable[[float], bool] = lambda x: True,
) -> float | None:
    """The first of x, move(x), move(move(x)), … that does not miss the target, searched while
    ``within`` holds; ``None`` when the search left ``within`` (the caller's cap: its refusal)."""
    while within(x) and misses(x):
        x = move(x)
    return x if within(x) else None


def doubling(
    misses: Callable[[float], bool], start: float, cap: float = math.inf
) -> tuple[float, float] | None:
    """A bracket (lo, hi) of a target met from some x > 0 on: hi the first of start, 2·start,
    4·start, … (≤ ``cap``) that does not miss it (:func:`expand`), lo = hi/2, or 0 when ``start``
    itself meets it (nothing below it was tried); None when the search passed ``cap``."""
    hi = expand(misses, start, lambda x: 2 * x, within=lambda x: x <= cap)
    if hi is None:
        return None
    return (hi / 2 if hi > start else 0.0), hi


def bracket(
    meets: Callable[[float], bool],
    x: float,
    lowest: float,
    highest: float,
    width: float = 0.02,
    grow: float = 4.0,
) -> tuple[float | None, float | None]:
    """A bracket (lo, hi) of a monotone target (``meets`` false at lo, true at hi, hi − lo > 0):
    from ``x``, step down while x meets it (up while it does not), by ``width``, widening ×``grow``
    each step, never past [``lowest``, ``highest``].  ``(None, lowest)``: even ``lowest`` meets it;
    ``(highest, None)``: not even ``highest`` does."""
    met = meets(x)
    while True:
        if x <= lowest and met:
            return None, lowest
        if x >= highest and not met:
            return highest, None
        y = max(x - width, lowest) if met else min(x + width, highest)
        if meets(y) != met:
            return (y, x) if met else (x, y)
        x, width = y, grow * width


#: the least relative tolerance Brent's method accepts (SciPy's ``brentq``: 4 × machine ε)
RTOL_MIN = 4 * sys.float_info.epsilon


def brent(
    f: Callable[[float], float],
    a: float,
    b: float,
    *,
    xtol: float = 2e-12,
    rtol: float = RTOL_MIN,
    maxiter: int = 100,
) -> float:
    """A root of ``f`` in [a, b] (f(a), f(b) of opposite signs) by Brent's method (R. P. Brent,
    *Algorithms for Minimization without Derivatives*, 1973, ch. 4), in the form of SciPy's
    ``brentq``: inverse quadratic extrapolation or secant steps while they shrink fast enough,
    bisection otherwise, until half the bracket is below (xtol + rtol·|x|)/2.

    Every step is the same IEEE double operation in the same order as ``brentq``, so the iterates,
    and the root, are ``brentq``'s bit for bit (tests/test_accounting_roots.py compares them).
    ValueError on a bad tolerance, no sign change or a NaN value; RuntimeError after ``maxiter``
    steps without convergence, as ``brentq``."""
    if not xtol > 0:
        raise ValueError(f"xtol too small ({xtol:g} <= 0)")
    if not rtol >= RTOL_MIN:
        raise ValueError(f"rtol too small ({rtol:g} < {RTOL_MIN:g})")

    def value(x: float) -> float:
        y = float(f(x))
        if math.isnan(y):
            raise ValueError(f"the function value at x={x} is NaN; solver cannot continue")
        return y

    xpre, xcur = float(a), float(b)  # the previous and the current iterate
    fpre, fcur = value(xpre), value(xcur)
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise ValueError("f(a) and f(b) must have different signs")
    xblk = fblk = spre = scur = 0.0  # the contrapoint (the bracket's other end), the last steps
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):  # the current iterate is the end with the smaller |f|
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        bisect_step = True
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            try:
                if xpre == xblk:  # secant through the bracket's ends
                    stry = -fcur * (xcur - xpre) / (fcur - fpre)
                else:  # inverse quadratic through the three points
                    dpre = (fpre - fcur) / (xpre - xcur)
                    dblk = (fblk - fcur) / (xblk - xcur)
                    stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            except ZeroDivisionError:  # C's ±inf or NaN (an underflow): no short step, bisect
                stry = math.inf
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur, bisect_step = scur, stry, False
        if bisect_step:
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        if abs(scur) > delta:
            xcur += scur
        else:
            xcur += delta if sbis > 0 else -delta
        fcur = value(xcur)
    raise RuntimeError(f"Brent's method did not converge in {maxiter} steps, value is {xcur}")


def safe_root(
    gap: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    xtol: float,
    rtol: float,
    nudge: Callable[[float], float] | None,
    answer: Callable[[float], float] = lambda x: x,
    misses: Callable[[float], bool] | None = None,
) -> float:
    """Brent's method (:func:`brent`) on ``gap`` over the bracket [lo, hi] (``gap`` of opposite
    signs at the ends) to ``xtol``/``rtol``; the root mapped by ``answer`` (e.g. ``math.exp`` of a
    log σ), then ``nudge``-d while ``misses(answer)`` (default ``gap(answer) > 0``): the side
    meeting the target. ``nudge=None``: Brent's answer as it is (either side, within the
    tolerance)."""
    value = answer(brent(gap, lo, hi, xtol=xtol, rtol=rtol))
    if nudge is None:
        return value
    misses = misses or (lambda v: gap(v) > 0)
    while misses(value):
        value = nudge(value)
    return value


def bisect(below: Callable, lo, hi, *, steps: int, done: Callable | None = None):
    """Halve the bracket [lo, hi] of a monotone predicate ``steps`` times, or until ``done(lo, hi)``
    holds everywhere: ``lo`` moves to the midpoint where ``below(mid)`` holds, ``hi`` elsewhere
    (element-wise on arrays; lo may lie above hi).  Returns (lo, hi): the caller keeps the end on
    its safe side."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        go = below(mid)
        lo, hi = np.where(go, mid, lo), np.where(go, hi, mid)
        if done is not None and np.all(done(lo, hi)):
            break
    return lo, hi


def multisection(over_at: Callable, below: int, above: int, points: int):
    """The largest integer s in [below, above) where a predicate holds, for a predicate that holds
    up to some s and fails above it, evaluated ``points`` lattice points a round:
    ``over_at(first, step, count)`` returns (holds, values) at s = first + j·step (j < count), a
    boolean array and a tuple of arrays.  Returns (s, the values at s), or None when the first
    round finds no point where it holds."""
    step = -(-(above - below) // points)
    first, count, found = (
        below,
        -(-(above - below) // step),
        None,
    )  # the first round includes `below`
    while True:
        holds, values = over_at(first, step, count)
        tried = first + step * np.arange(count)
        if holds.any():
            k = int(np.flatnonzero(holds)[-1])
            below, found = int(tried[k]), tuple(v[k] for v in values)
        if (~holds).any():
            above = int(tried[~holds].min())
        if found is None:
            return None
        if above - below <= 1:
            return below, found
        step = -(-(above - below) // (points + 1))
        first, count = below + step, -(-(above - below) // step) - 1
