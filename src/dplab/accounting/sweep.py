"""ε-vs-T sweeps: one tidy table row per (accountant, T), as the accounting rules write them.

Each accountant whose ε the run reports (:func:`dplab.accounting.eligibility.exclusion`, from the
setting and the update recorded in its summary.json) is asked once for its whole curve
(``epsilon_curve``); any other contributes one row with an empty ε and the reason, so a table
never silently drops a bound.  Every row's ``bound`` says what its ε is: only ``upper`` rows are
the run's claims; ``lower`` and ``comparison`` rows are the reference values its summary.json
reports beside them (``epsilon_lower``, ``epsilon_comparison``), never a guarantee.  Every row
carries the attack risk at its T (:data:`dplab.accounting.risk.COLUMNS`) where its accountant has a
privacy-loss distribution, else empty risk values and ``risk_note`` saying why.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab.accounting import risk
from dplab.accounting.eligibility import Update, exclusion
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError
from dplab.progress import Progress
from dplab.validate import at_least, integer

#: columns of every sweep table, in order
COLUMNS = [
    "accountant",
    "steps",
    "epsilon",
    "delta",
    "neighbouring",
    "sampling",
    "release",
    "bound",
    "noise_multiplier",
    "sampling_rate",
    "reason",
    *risk.COLUMNS,
]


#: the most T values of a sweep (``dplab sweep --points``, config ``sweeps.*.points``): each is one
#: ε per accountant; np.geomspace would allocate 8 bytes a point before the grid is deduplicated
POINTS_MAX = 10_000


def steps_grid(max_steps: int, points: int) -> np.ndarray:
    """About ``points`` log-spaced integers from 1 to ``max_steps`` (both included)."""
    at_least("steps", max_steps, 1)
    integer("points", points, 2, POINTS_MAX, "POINTS_MAX")
    grid = np.unique(np.round(np.geomspace(1, max_steps, points)).astype(int))
    return grid


def sweep(
    setting: Setting | None,
    delta: float | None,
    accountants: list[str],
    steps: np.ndarray,
    update: Update = Update(),
) -> pd.DataFrame:
    """ε(T) for every accountant the run reports (its ``bound`` in each row) and every T in
    ``steps`` at fixed δ, as a tidy table; one row with an empty ε and the reason for every other
    accountant (progress: one accountant at a time, :mod:`dplab.progress`)."""
    rows = []
    progress = Progress("sweep", len(accountants), unit="accountant")
    where = (
        f"δ={delta:g}, {setting.neighbouring}, {setting.sampling} sampling"
        if setting
        else "no setting"
    )
    for done, name in enumerate(accountants, 1):
        accountant = get(name)  # unknown name: DPLabError listing the valid ones
        why = exclusion(name, setting, update)
        common = {
            "accountant": name,
            "delta": delta,
            "neighbouring": setting.neighbouring if setting else None,
            "sampling": setting.sampling if setting else None,
            "release": accountant.release,
            "bound": accountant.bound,
            "noise_multiplier": setting.noise_multiplier if setting else None,
            "sampling_rate": setting.sampling_rate if setting else None,
        }
        if why is None:
            try:
                eps = accountant.epsilon_curve(setting, delta, steps)
            except AssumptionError as err:
                why = str(err)
        if why is not None:
            rows.append(
                {
                    **common,
                    "steps": np.nan,
                    "epsilon": np.nan,
                    "reason": why,
                    **risk.columns(name, None),
                    "risk_note": "no risk: no ε (see reason)",
                }
            )
            progress.update(done, f"{name}: excluded ({why})")
            continue
        rows += [
            {
                **common,
                "steps": int(t),
                "epsilon": float(e),
                "reason": "",
                **risk.columns(name, setting.replace(steps=int(t))),
            }
            for t, e in zip(steps, eps)
        ]
        progress.update(
            done,
            f"{name}: ε at T={int(steps[-1])} = {float(eps[-1]):.4g} ({accountant.bound} bound,"
            f" {where})",
        )
    progress.close()
    return pd.DataFrame(rows, columns=COLUMNS)
