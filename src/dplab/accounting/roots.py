"""The one scalar root search of the accountants: bracket, then Brent's method, then the safe side.

Every calibration here solves ``gap(x) = 0`` for a monotone ``gap`` where ``gap(x) <= 0`` means
x meets the target (e.g. ε(σ) ≤ ε) and ``gap(x) > 0`` that it misses it.  :func:`expand` walks
from a start (x ← 2x, x + 2, …) to the first x that meets the target, or reports the cap;
:func:`safe_root` runs Brent's method (``scipy.optimize.brentq``) on a bracket and then steps
the answer towards the meeting side until it meets the target, so a returned σ, ε or δ is never
on the side that misses it (conservative for an upper bound); :func:`bisect` halves brackets of a
monotone predicate, element-wise on arrays (the vectorized ε(δ) inversions, validity edges).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.optimize import brentq


def expand(misses: Callable[[float], bool], x: float, move: Callable[[float], float],
           within: Callable[[float], bool] = lambda x: True) -> float | None:
    """The first of x, move(x), move(move(x)), … that does not miss the target, searched while
    ``within`` holds; ``None`` when the search left ``within`` (the caller's cap: its refusal)."""
    while within(x) and misses(x):
        x = move(x)
    return x if within(x) else None


def safe_root(gap: Callable[[float], float], lo: float, hi: float, *, xtol: float, rtol: float,
              nudge: Callable[[float], float] | None, answer: Callable[[float], float] = lambda x: x,
              misses: Callable[[float], bool] | None = None) -> float:
    """Brent's method on ``gap`` over the bracket [lo, hi] (``gap`` of opposite signs at the
    ends) to ``xtol``/``rtol``; the root mapped by ``answer`` (e.g. ``math.exp`` of a log σ), then
    ``nudge``-d while ``misses(answer)`` (default ``gap(answer) > 0``): the side meeting the target.
    ``nudge=None``: Brent's answer as it is (either side, within the tolerance)."""
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
