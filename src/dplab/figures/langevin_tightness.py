"""langevin_tightness (002 Fig. 2): how tight 002's bound is on the ℓ2-squared loss.

ℓ(θ; x) = ½‖θ − x‖², 002's units (Alg. 1 noise σ, total-gradient sensitivity S_g), per α:
the Cor. 2 upper bound αS_g²/((2−η)σ²n²)·(1 − e^(−(2−η)ηK/2)), the Thm 3 lower bound
αS_g²/(4σ²n²)·(1 − e^(−ηK)) (eq. (17)), the exact Rényi divergence of the worst pair from Thm 3's
proof, and the App. E composition baseline αS_g²ηK/(4n²σ²) (:mod:`dplab.accounting.langevin`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab.accounting import langevin
from dplab.errors import DPLabError
from dplab.figures import Inputs, style
from dplab.figures.params import in_unit_interval, positive

TITLE = "Noisy GD on the ℓ2-squared loss: Cor. 2 upper bound, Thm 3 lower bound, composition (002)"
SOURCE = "002 Fig. 2"
CAPTION = (
    "reproduces 002 Fig. 2 on the ℓ2-squared loss: per Rényi order α ∈ {10, 20, 30}, 002 Cor. 2's"
    " upper bound (solid), Thm 3's lower bound eq. (17) (dashed), the exact Rényi divergence of the"
    " worst pair from Thm 3's proof (dotted, not in the source paper's figure) and the App. E"
    " composition baseline (dash-dot), with η = 0.02, σ = 0.02, n = 5000, S_g = 4 (002's units)."
    " The upper bound is about twice the lower bound, as 002 states."
)
INPUTS: dict[str, type] = {}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "002 Fig. 2 (ℓ2-squared loss, Cor. 2 vs Thm 3), in 002's units; defaults are the "
        "figure's parameters"
    ),
    "properties": {
        "alphas": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "number", "exclusiveMinimum": 1},
            "default": [10, 20, 30],
            "description": "Rényi orders α",
        },
        "sensitivity": positive(4.0, "S_g"),
        "dataset_size": {"type": "integer", "minimum": 1, "default": 5000, "description": "n"},
        "lr": in_unit_interval(0.02, "η"),
        "langevin_sigma": positive(0.02, "002's σ"),
        "max_steps": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000,
            "default": 300,
            "description": "K = 0..max_steps",
        },
    },
}


#: bound name → (function of dplab.accounting.langevin, legend label, line style)
BOUNDS = {
    "cor2": (langevin.cor2_rdp, "upper bound, Cor. 2", "-"),
    "thm3_exact": (langevin.thm3_exact_rdp, "exact worst pair (Thm 3 proof)", ":"),
    "thm3_lower": (langevin.thm3_lower_bound, "lower bound, Thm 3 eq. (17)", "--"),
    "composition": (langevin.composition_rdp, "composition (App. E)", "-."),
}


def check(config: dict, params: dict) -> None:
    """Cor. 2 and Thm 3 need η < 1."""
    if not params["lr"] < 1.0:
        raise DPLabError(
            "figures.langevin_tightness.lr", f"must be < 1 (002 Cor. 2, Thm 3); got {params['lr']}"
        )


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (bound, α, K) for K = 0..max_steps."""
    check({}, params)
    k = np.arange(0, params["max_steps"] + 1)
    args = {
        "lr": params["lr"],
        "sigma": params["langevin_sigma"],
        "n": params["dataset_size"],
        "sensitivity": params["sensitivity"],
    }
    frames = [
        pd.DataFrame(
            {"bound": name, "alpha": alpha, "steps": k, "rdp_epsilon": func(alpha, k, **args)}
        )
        for alpha in params["alphas"]
        for name, (func, _, _) in BOUNDS.items()
    ]
    frame = pd.concat(frames, ignore_index=True)
    for key in ("lr", "langevin_sigma", "dataset_size", "sensitivity"):
        frame[key] = params[key]
    return frame


def draw(table: pd.DataFrame):
    from matplotlib.lines import Line2D

    fig, axes = style.new_figure()
    ax = axes[0][0]
    first = table.iloc[0].to_dict()
    colours = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd"]
    alpha_handles = []
    for colour, (alpha, rows) in zip(colours, table.groupby("alpha", sort=False)):
        for name, (_, _, ls) in BOUNDS.items():
            curve = rows[rows.bound == name]
            ax.plot(
                curve.steps,
                curve.rdp_epsilon,
                color=colour,
                ls=ls,
                lw=2.0 if name == "cor2" else 1.2,
            )
        alpha_handles.append(Line2D([], [], color=colour, lw=2, label=f"α = {alpha:g}"))
    bound_handles = [
        Line2D([], [], color="black", ls=ls, lw=2.0 if name == "cor2" else 1.2, label=label)
        for name, (_, label, ls) in BOUNDS.items()
    ]
    ax.add_artist(
        ax.legend(
            handles=alpha_handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="Rényi order"
        )
    )
    ax.legend(handles=bound_handles, loc="upper left", bbox_to_anchor=(1.01, 0.62), title="bound")
    top = 1.25 * table[table.bound == "cor2"].rdp_epsilon.max()
    ax.set(
        xlabel="iterations K",
        ylabel="ε in (α, ε)-RDP",
        xlim=(0, table.steps.max()),
        ylim=(0, top),
        title=(
            f"ℓ2-squared loss, η={first['lr']:g}, σ={first['langevin_sigma']:g},"
            f" n={first['dataset_size']:g}, S_g={first['sensitivity']:g}"
        ),
    )
    style.sci_offset(ax)
    fig.set_size_inches(9.5, 4.6)
    return fig
