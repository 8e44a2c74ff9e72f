"""gaussian_sigma (004 §2): the noise a single Gaussian release needs, per calibration, vs ε.

004's salary example: the mean of n salaries bounded by B, sensitivity Δ = B/n (replace-one),
released as mean + N(0, s²).  Plotted: the noise std s = σ·Δ (in the data's units, dollars)
for the calibrations ``gaussian_classic`` (only ε < 1, where its theorem holds),
``gaussian_simple``, ``gaussian_pei`` and ``gaussian_analytic`` (:mod:`dplab.accounting.gaussian`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab import units
from dplab.accounting import Setting, get
from dplab.errors import AssumptionError
from dplab.figures import Inputs, style
from dplab.figures.params import in_unit_interval, positive
from dplab.schemes import Neighbouring

TITLE = "Gaussian mechanism: noise std vs ε for the salary mean, per calibration (004 §2)"
SOURCE = "004 §2 (salary example, three_sigma figure)"
CAPTION = (
    "reproduces 004 §2's comparison of Gaussian-mechanism calibrations on the salary example: the"
    " noise standard deviation (σ·Δ, in dollars) that one release of the mean of n = 10,000"
    " salaries bounded by B = $1,000,000 (sensitivity Δ = B/n = 100, replace-one) needs for (ε, δ ="
    " 10⁻⁶)-DP, as a function of ε: classic Dwork–Roth (dashed, only for ε < 1 where its theorem"
    " holds), 004's simple bound, Pei's refinement, and the analytic Gaussian mechanism of Balle &"
    " Wang (exact). The dot at ε = 0.5 is 004's quoted point (σ ≈ 806 analytic, ≈ 1026 Pei)."
)
INPUTS: dict[str, type] = {}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "004 §2 salary example (σ vs ε per Gaussian calibration); defaults are 004's values"
    ),
    "properties": {
        "dataset_size": {"type": "integer", "minimum": 1, "default": 10000, "description": "n"},
        "bound": positive(1000000, "B, the salary bound (sensitivity of the mean Δ = B/n)"),
        "delta": in_unit_interval(1e-06, "δ"),
        "epsilon_min": positive(0.05, "smallest ε"),
        "epsilon_max": positive(10.0, "largest ε"),
        "points": {
            "type": "integer",
            "minimum": 2,
            "maximum": 2000,
            "default": 60,
            "description": "number of log-spaced ε values",
        },
        "marked_epsilons": {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0},
            "default": [0.5],
            "description": "ε values marked on the curves (004 quotes σ at ε = 0.5)",
        },
    },
}


CALIBRATIONS = {
    "gaussian_classic": "classic √(2 ln(1.25/δ))/ε (ε < 1 only)",
    "gaussian_simple": "simple √(2 ln(1/δ) + 2ε)/ε",
    "gaussian_pei": "Pei's refinement",
    "gaussian_analytic": "analytic (Balle & Wang, exact)",
}
COLOURS = {
    "gaussian_classic": "#8c564b",
    "gaussian_simple": "#ff7f0e",
    "gaussian_pei": "#1f77b4",
    "gaussian_analytic": "#000000",
}


def check(config: dict, params: dict) -> None:
    """Nothing to cross-check: the figure needs no other result."""


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def epsilon_grid(params: dict) -> np.ndarray:
    """Log-spaced ε from epsilon_min to epsilon_max, plus the marked values."""
    grid = np.geomspace(params["epsilon_min"], params["epsilon_max"], params["points"])
    return np.unique(np.concatenate([grid, params["marked_epsilons"]]))


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (calibration, ε) where the calibration is valid."""
    sensitivity = params["bound"] / params["dataset_size"]
    setting = Setting(sensitivity=sensitivity, neighbouring=Neighbouring.REPLACE_ONE)
    rows = []
    for name in CALIBRATIONS:
        accountant = get(name)
        for eps in epsilon_grid(params):
            try:
                sigma = accountant.sigma(setting, float(eps), params["delta"])
            except AssumptionError:
                continue  # outside the calibration's theorem (classic: ε ≥ 1)
            rows.append(
                {
                    "accountant": name,
                    "epsilon": float(eps),
                    "delta": params["delta"],
                    "noise_multiplier": sigma,
                    "noise_std": units.gaussian_noise_std(sigma, sensitivity),
                    "sensitivity": sensitivity,
                    "dataset_size": params["dataset_size"],
                    "bound": params["bound"],
                    "neighbouring": Neighbouring.REPLACE_ONE,
                    "marked": bool(np.isclose(eps, params["marked_epsilons"]).any()),
                }
            )
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure()
    ax = axes[0][0]
    first = table.iloc[0].to_dict()
    for name, rows in table.groupby("accountant", sort=False):
        ax.plot(
            rows.epsilon,
            rows.noise_std,
            color=COLOURS.get(name, "grey"),
            label=CALIBRATIONS.get(name, name),
            ls="--" if name == "gaussian_classic" else "-",
            zorder=3 if name == "gaussian_classic" else 2,
        )
    for _, row in table[table.marked].iterrows():
        ax.plot(row.epsilon, row.noise_std, "o", color=COLOURS.get(row.accountant, "grey"), ms=4)
        if row.accountant == "gaussian_analytic":
            ax.annotate(
                f"{row.noise_std:.0f} at ε={row.epsilon:g}",
                (row.epsilon, row.noise_std),
                textcoords="offset points",
                xytext=(-10, -14),
                ha="right",
                fontsize=8,
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="ε",
        ylabel="noise std on the mean (σ·Δ, $)",
        title=(
            f"mean salary: n={first['dataset_size']:,.0f}, bound B={first['bound']:,.0f}, "
            f"Δ=B/n={first['sensitivity']:g}, δ={first['delta']:g}"
        ),
    )
    style.plain_log_ticks(ax)
    ax.legend(title="calibration (one release)")
    return fig
