"""σ(T) curves: the smallest noise multiplier meeting (ε, δ) for every T of a grid, per accountant.

Calibrating each T from scratch costs ~25 ε evaluations (the generic bisection of
:meth:`Accountant.sigma`), and one PLD evaluation takes 0.1–1 s.  Here each σ(T) starts from a
guess — the previous T's σ carried along a ``hint`` curve (another accountant's σ(T), whose
ratio to this one changes slowly), or along the log-log slope of the previous two points —
brackets the root by stepping ±2 % (widening ×4) from it, and finishes with Brent's method in
log σ, memoizing every evaluation: about 5–7 evaluations per T.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from dplab.accounting import Accountant, Setting
from dplab.errors import AssumptionError

#: relative tolerance of each σ: the returned σ meets (ε, δ); σ·(1 − RTOL) may not
RTOL = 1e-4
#: the σ range searched
SIGMA_MIN, SIGMA_MAX = 1e-4, 1e7


def _excess(accountant: Accountant, setting: Setting, epsilon: float, delta: float):
    """log σ ↦ ε(σ) − ε_target (memoized); +∞ where σ is outside the accountant's validity."""
    cache: dict[float, float] = {}

    def excess(log_sigma: float) -> float:
        if log_sigma not in cache:
            try:
                cache[log_sigma] = accountant.epsilon(setting.replace(noise_multiplier=math.exp(log_sigma)), delta) - epsilon
            except AssumptionError:  # outside the bound's validity: σ does not meet the target
                cache[log_sigma] = math.inf
        return cache[log_sigma]

    return excess


def _calibrate(accountant: Accountant, setting: Setting, epsilon: float, delta: float, guess: float) -> float:
    """The smallest σ meeting the target at ``setting.steps``, searched from ``guess``."""
    excess = _excess(accountant, setting, epsilon, delta)
    x = math.log(min(max(guess, SIGMA_MIN), SIGMA_MAX))
    width, meets = 0.02, excess(x) <= 0
    while True:
        y = x - width if meets else x + width
        if not math.log(SIGMA_MIN) <= y <= math.log(SIGMA_MAX):
            raise accountant.fail(
                "epsilon", f"no σ in [{SIGMA_MIN:g}, {SIGMA_MAX:g}] reaches ε = {epsilon} at δ = {delta}, "
                f"T = {setting.steps}" if not meets else f"σ = {SIGMA_MIN:g} already meets ε = {epsilon}")
        if (excess(y) <= 0) != meets:
            break
        x, width = y, 4 * width
    lo, hi = (y, x) if meets else (x, y)
    root = brentq(lambda v: min(excess(v), 1e6), lo, hi, xtol=RTOL / 4, rtol=1e-12)
    sigma = math.exp(root)
    while excess(math.log(sigma)) > 0:  # return the side that meets the target
        sigma *= 1 + RTOL / 4
    return sigma


def sigma_curve(accountant: Accountant, setting: Setting, epsilon: float, delta: float, steps,
                hint=None) -> np.ndarray:
    """σ(T) for every T of the increasing grid ``steps``: each meets ε at δ, within :data:`RTOL`
    of the smallest σ that does.  ``hint``: an optional σ(T) of another accountant on the same
    grid, used only to guess where to start.

    Raises :class:`AssumptionError` if the setting violates the accountant's assumptions or no
    σ in [:data:`SIGMA_MIN`, :data:`SIGMA_MAX`] meets the target.
    """
    steps = [int(t) for t in steps]
    try:  # assumptions that no σ can fix are reported at once; σ's own range is searched
        accountant.check(setting.replace(noise_multiplier=1.0, steps=max(steps)))
    except AssumptionError as err:
        if err.key != "noise_multiplier":
            raise
    out: list[float] = []
    for i, t in enumerate(steps):
        if hint is not None:
            guess = hint[i] * (out[-1] / hint[i - 1] if out else 1.0)
        elif len(out) >= 2:
            slope = math.log(out[-1] / out[-2]) / math.log(steps[i - 1] / steps[i - 2])
            guess = out[-1] * (t / steps[i - 1]) ** slope
        elif out:
            guess = out[-1] * math.sqrt(t / steps[i - 1])
        else:
            guess = 1.0
        out.append(_calibrate(accountant, setting.replace(steps=t), epsilon, delta, guess))
    return np.array(out)
