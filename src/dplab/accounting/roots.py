"""The one scalar root search of the accountants: bracket, then Brent's method, then the safe side.

Every calibration here solves ``gap(x) = 0`` for a monotone ``gap`` where ``gap(x) <= 0`` means
x meets the target (e.g. ε(σ) ≤ ε) and ``gap(x) > 0`` that it misses it.  :func:`expand` walks
from a start (x ← 2x, x + 2, …) to the first x that meets the target, or reports the cap;
:func:`safe_root` runs Brent's method (``scipy.optimize.brentq``) on a bracket and then steps
the answer towards the meeting side until it meets the target, so a returned σ, ε or δ is never
on the side that misses it (conservative for an upper bound); :func:`bracket` steps outward
from a start, in widening steps, to a bracket of the target (the σ searches, whose start is a
good guess); :func:`doubling` brackets a target met from some x > 0 on by doubling from a
start (the ε searches whose scale is unknown); :func:`bisect` halves brackets of a monotone
predicate, element-wise on arrays (the vectorized ε(δ) inversions, validity edges);
:func:`multisection` searches an integer lattice a batch of points at a time (the PLD's tail cell,
whose evaluations share work along a lattice).
"""

from __future__ import annotations

import math
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
    """Brent's method on ``gap`` over the bracket [lo, hi] (``gap`` of opposite signs at the
    ends) to ``xtol``/``rtol``; the root mapped by ``answer`` (e.g. ``math.exp`` of a log σ), then
    ``nudge``-d while ``misses(answer)`` (default ``gap(answer) > 0``): the side meeting the target.
    ``nudge=None``: Brent's answer as it is (either side, within the tolerance)."""
    from scipy.optimize import brentq

    value = answer(brentq(gap, lo, hi, xtol=xtol, rtol=rtol))
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
