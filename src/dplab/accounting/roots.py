"""The one scalar root search of the accountants: bracket, then Brent's method, then the safe side.

Every calibration here solves ``gap(x) = 0`` for a monotone ``gap`` where ``gap(x) <= 0`` means
x meets the target (e.g. ε(σ) ≤ ε) and ``gap(x) > 0`` that it misses it.  :func:`expand` walks
from a start (x ← 2x, x + 2, …) to the first x that meets the target, or reports the cap;
:func:`safe_root` runs Brent's method (``scipy.optimize.brentq``) on a bracket and then steps
the answer towards the meeting side until it meets the target, so a returned σ, ε or δ is never
on the side that misses it (conservative for an upper bound).
"""

from __future__ import annotations

from typing import Callable

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
