"""ε-vs-T sweeps: one tidy table row per (accountant, T), as the accounting rules write them.

Each accountant is asked once for its whole curve (``epsilon_curve``); an accountant whose
assumptions the setting violates contributes one row with an empty ε and the reason, so a
table never silently drops a bound.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError, DPLabError

#: columns of every sweep table, in order
COLUMNS = [
    "accountant", "steps", "epsilon", "delta", "neighbouring", "sampling", "release", "bound",
    "noise_multiplier", "sampling_rate", "reason",
]


def steps_grid(max_steps: int, points: int) -> np.ndarray:
    """About ``points`` log-spaced integers from 1 to ``max_steps`` (both included)."""
    if max_steps < 1:
        raise DPLabError("steps", f"must be >= 1; got {max_steps}")
    if points < 2:
        raise DPLabError("points", f"must be >= 2; got {points}")
    grid = np.unique(np.round(np.geomspace(1, max_steps, points)).astype(int))
    return grid


def setting_from_summary(summary: dict) -> tuple[Setting, float]:
    """The canonical setting and δ recorded in a run's summary.json."""
    fields = {f.name for f in dataclasses.fields(Setting)}
    setting = Setting(**{k: v for k, v in summary["setting"].items() if k in fields})
    return setting, float(summary["delta"])


def sweep(setting: Setting, delta: float, accountants: list[str], steps: np.ndarray) -> pd.DataFrame:
    """ε(T) for every accountant and every T in ``steps`` at fixed δ, as a tidy table."""
    rows = []
    for name in accountants:
        accountant = get(name)
        common = {
            "accountant": name,
            "delta": delta,
            "neighbouring": setting.neighbouring,
            "sampling": setting.sampling,
            "release": accountant.release,
            "bound": accountant.bound,
            "noise_multiplier": setting.noise_multiplier,
            "sampling_rate": setting.sampling_rate,
        }
        try:
            eps = accountant.epsilon_curve(setting, delta, steps)
        except AssumptionError as err:
            rows.append({**common, "steps": np.nan, "epsilon": np.nan, "reason": str(err)})
            continue
        rows += [{**common, "steps": int(t), "epsilon": float(e), "reason": ""} for t, e in zip(steps, eps)]
    return pd.DataFrame(rows, columns=COLUMNS)
