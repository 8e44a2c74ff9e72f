"""langevin_rdp (002 Fig. 1): the RDP ε of noisy GD vs K, 002 Cor. 1 against composition.

In 002's units (Alg. 1: θ ← θ − (η/n)·g + √(2η)·N(0, σ²I), S_g the sensitivity of the total
gradient): Cor. 1, ε = αS_g²/(λσ²n²)·(1 − e^(−ληK/2)) (:func:`dplab.accounting.langevin.cor1_rdp`),
and the App. E baseline ε = αS_g²ηK/(4n²σ²) (:func:`~dplab.accounting.langevin.composition_rdp`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab.accounting import langevin
from dplab.errors import DPLabError
from dplab.figures import Inputs, style
from dplab.figures.params import positive

TITLE = "Noisy GD: Rényi ε vs K, Cor. 1 (hidden state) vs composition (002)"
SOURCE = "002 Fig. 1"
CAPTION = (
    "reproduces 002 Fig. 1: the Rényi-DP ε of noisy full-batch GD after K iterations by 002 Cor. 1"
    " (solid, only the last iterate released), α S_g²/(λσ²n²)·(1 − e^(−ληK/2)), for (α, λ) ∈"
    " {(30,1), (20,1), (10,1), (10,2), (10,4)}, and the composition baseline of 002 App. E"
    " (dashed), α S_g² ηK/(4n²σ²), with β = 4, S_g = 4, n = 5000, η = 0.02 and σ = 0.02 in 002's"
    " units (Alg. 1 noise √(2η)·N(0, σ²))."
)
INPUTS: dict[str, type] = {}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "002 Fig. 1 (noisy GD, Cor. 1 vs composition), in 002's units; defaults are the figure's "
        "parameters"
    ),
    "properties": {
        "curves": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["alpha", "strong_convexity"],
                "properties": {
                    "alpha": {
                        "type": "number",
                        "exclusiveMinimum": 1,
                        "description": "Rényi order α",
                    },
                    "strong_convexity": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "description": "λ",
                    },
                },
            },
            "default": [
                {"alpha": 30, "strong_convexity": 1},
                {"alpha": 20, "strong_convexity": 1},
                {"alpha": 10, "strong_convexity": 1},
                {"alpha": 10, "strong_convexity": 2},
                {"alpha": 10, "strong_convexity": 4},
            ],
            "description": "the (α, λ) pairs of Fig. 1's legend",
        },
        "smoothness": positive(4.0, "β"),
        "sensitivity": positive(4.0, "S_g, L2 sensitivity of the total gradient"),
        "dataset_size": {"type": "integer", "minimum": 1, "default": 5000, "description": "n"},
        "lr": positive(0.02, "η"),
        "langevin_sigma": positive(
            0.02, "002's σ (Alg. 1 noise √(2η)·N(0, σ²); units.langevin_sigma)"
        ),
        "max_steps": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000,
            "default": 500,
            "description": "K = 0..max_steps",
        },
    },
}


#: the 002 Alg. 1 parameters every curve shares
SHARED = ("lr", "langevin_sigma", "dataset_size", "sensitivity", "smoothness")


def check(config: dict, params: dict) -> None:
    """Cor. 1's assumptions: λ ≤ β and η < 1/β for every curve."""
    key = "figures.langevin_rdp"
    if not params["lr"] < 1.0 / params["smoothness"]:
        raise DPLabError(
            f"{key}.lr", f"must be < 1/smoothness = {1.0 / params['smoothness']:g} (002 Cor. 1)"
        )
    for curve in params["curves"]:
        if curve["strong_convexity"] > params["smoothness"]:
            raise DPLabError(
                f"{key}.curves", f"strong_convexity {curve['strong_convexity']} exceeds smoothness"
            )


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (bound, α, λ, K) for K = 0..max_steps; ``composition`` rows have no λ."""
    check({}, params)
    k = np.arange(0, params["max_steps"] + 1)
    args = {
        "lr": params["lr"],
        "sigma": params["langevin_sigma"],
        "n": params["dataset_size"],
        "sensitivity": params["sensitivity"],
    }
    frames = []
    for curve in params["curves"]:
        alpha, lam = curve["alpha"], curve["strong_convexity"]
        frames.append(
            pd.DataFrame(
                {
                    "bound": "cor1",
                    "alpha": alpha,
                    "strong_convexity": lam,
                    "steps": k,
                    "rdp_epsilon": langevin.cor1_rdp(alpha, k, strong_convexity=lam, **args),
                }
            )
        )
    for alpha in dict.fromkeys(curve["alpha"] for curve in params["curves"]):
        frames.append(
            pd.DataFrame(
                {
                    "bound": "composition",
                    "alpha": alpha,
                    "strong_convexity": np.nan,
                    "steps": k,
                    "rdp_epsilon": langevin.composition_rdp(alpha, k, **args),
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    for key in SHARED:
        frame[key] = params[key]
    return frame


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure()
    ax = axes[0][0]
    first = table.iloc[0].to_dict()
    cor1 = table[table.bound == "cor1"]
    keys = list(dict.fromkeys(zip(cor1.alpha, cor1.strong_convexity)))
    colours = dict(
        zip(keys, ["#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"])
    )
    alpha_colour = {}
    for (alpha, lam), colour in colours.items():
        rows = cor1[(cor1.alpha == alpha) & (cor1.strong_convexity == lam)]
        ax.plot(
            rows.steps,
            rows.rdp_epsilon,
            color=colour,
            lw=2,
            label=f"Cor. 1: α={alpha:g}, λ={lam:g}",
        )
        alpha_colour.setdefault(alpha, colour)
    comp = table[table.bound == "composition"]
    for alpha, rows in comp.groupby("alpha", sort=False):
        ax.plot(
            rows.steps,
            rows.rdp_epsilon,
            color=alpha_colour.get(alpha, "grey"),
            ls="--",
            lw=1.2,
            label=f"composition (App. E): α={alpha:g}",
        )
    top = 1.25 * cor1.rdp_epsilon.max()
    ax.set(
        xlabel="iterations K",
        ylabel="ε in (α, ε)-RDP",
        xlim=(0, table.steps.max()),
        ylim=(0, top),
        title=(
            f"noisy GD, η={first['lr']:g}, σ={first['langevin_sigma']:g},"
            f" n={first['dataset_size']:g}, S_g={first['sensitivity']:g}, β={first['smoothness']:g}"
        ),
    )
    style.sci_offset(ax)
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        title="bold: hidden state (last iterate)\ndashed: composition",
    )
    fig.set_size_inches(9.0, 4.2)
    return fig
