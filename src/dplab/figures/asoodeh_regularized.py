"""asoodeh_regularized (001 Fig. 2): the δ of regularized (unprojected) DP-SGD vs T.

001 Thm 3, eq. (21), minimized over κ
(:func:`dplab.accounting.asoodeh.regularized_delta_optimized`), one panel per regularization λ.
001 does not state the model dimension d that eq. (21) needs (through P(χ²_d ≤ κ²)): it is the
config parameter ``dimension``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab.accounting import asoodeh
from dplab.figures import Inputs, style
from dplab.figures.params import in_unit_interval, positive
from dplab.schemes import Neighbouring, Sampling

TITLE = "Regularized DP-SGD: δ vs T at fixed ε (001 Thm 3)"
SOURCE = "001 Fig. 2"
CAPTION = (
    "reproduces 001 Fig. 2: the δ of regularized unprojected DP-SGD after T steps by 001 Thm 3 (eq."
    " (21), κ optimized numerically at each T), with C = 1, η = 0.1, σ_A = 5, ε = 5, p = 0.001 and"
    " λ = 0.65 (left) and λ = 0.01 (right). The model dimension d enters eq. (21) through P(χ²_d ≤"
    " κ²) and 001 does not state it: d = 10 here (config parameter `dimension`). eq. (21) is"
    " evaluated with the diameter 2(r_s − σκ)/σ in θ_ε, where 001 prints the radius (see"
    " docs/hidden_state.md)."
)
INPUTS: dict[str, type] = {}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "001 Fig. 2 (regularized DP-SGD, Thm 3); defaults are the figure's parameters except "
        "`dimension`"
    ),
    "properties": {
        "clip": positive(1.0, "C"),
        "lr": positive(0.1, "η"),
        "sigma_a": positive(5.0, "001's σ: parameter-space noise std"),
        "sampling_rate": in_unit_interval(0.001, "p = b/n"),
        "epsilon": positive(5.0, "ε"),
        "regularizations": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "default": [0.65, 0.01],
            "description": "λ of 001 eq. (17), one panel each",
        },
        "dimension": {
            "type": "integer",
            "minimum": 1,
            "default": 10,
            "description": "d, model dimension in P(χ²_d ≤ κ²) of eq. (21); 001 does not state it",
        },
        "max_steps": {
            "type": "integer",
            "minimum": 2,
            "maximum": 100000,
            "default": 1000,
            "description": "largest T",
        },
        "points": {
            "type": "integer",
            "minimum": 2,
            "maximum": 2000,
            "default": 50,
            "description": "number of evenly spaced T values",
        },
    },
}


def check(config: dict, params: dict) -> None:
    """Nothing to cross-check: the figure needs no other result."""


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def steps_grid(max_steps: int, points: int) -> np.ndarray:
    """About ``points`` evenly spaced integers from 1 to ``max_steps`` (both included)."""
    return np.unique(np.round(np.linspace(1, max_steps, points)).astype(int))


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (λ, T): δ of eq. (21) at the optimal κ (also recorded)."""
    rows = []
    for lam in params["regularizations"]:
        for t in steps_grid(params["max_steps"], params["points"]):
            delta, kappa = asoodeh.regularized_delta_optimized(
                params["epsilon"],
                int(t),
                params["sampling_rate"],
                params["lr"],
                params["clip"],
                params["sigma_a"],
                lam,
                params["dimension"],
            )
            rows.append({"regularization": lam, "steps": int(t), "delta": delta, "kappa": kappa})
    frame = pd.DataFrame(rows)
    for key in ("epsilon", "clip", "lr", "sigma_a", "sampling_rate", "dimension"):
        frame[key] = params[key]
    frame["accountant"], frame["neighbouring"], frame["sampling"] = (
        "asoodeh_regularized",
        Neighbouring.REPLACE_ONE,
        Sampling.WITHOUT_REPLACEMENT,
    )
    return frame


def draw(table: pd.DataFrame):
    lams = list(dict.fromkeys(table.regularization))
    fig, axes = style.new_figure(ncols=len(lams))
    first = table.iloc[0].to_dict()
    setting = (
        f"C={first['clip']:g}, η={first['lr']:g}, σ_A={first['sigma_a']:g}, ε={first['epsilon']:g},"
        f" p={first['sampling_rate']:g}, d={first['dimension']:g}"
    )
    for ax, lam in zip(axes[0], lams):
        rows = table[table.regularization == lam]
        ax.plot(
            rows.steps,
            rows.delta,
            color=style.colour("asoodeh_regularized"),
            marker="o",
            ms=3,
            label="Thm 3, eq. (21), κ optimized",
        )
        ax.set(xlabel="steps T", ylabel="δ", title=f"λ = {lam:g}", ylim=(0, None))
        ax.legend(title=setting, loc="upper left")
    return fig
