"""accountants_vs_pld (new): every accountant's ε vs T on one DP-SGD setting, PLD as reference.

Left: ε(T) per accountant; right: its ratio to the tight PLD value at the same T.
"""

from __future__ import annotations

import pandas as pd

from dplab import pipeline
from dplab.errors import DPLabError
from dplab.figures import style

TITLE = "Every accountant's ε vs T, and its ratio to PLD"
SOURCE = "new"


def check(config: dict, params: dict) -> None:
    sweep = params["sweep"]
    if sweep not in config.get("sweeps", {}):
        raise DPLabError("figures.accountants_vs_pld.sweep", f"unknown sweep {sweep!r}")
    if "pld" not in config["sweeps"][sweep]["accountants"]:
        raise DPLabError("figures.accountants_vs_pld.sweep", f"sweep {sweep!r} must include the pld accountant")


def inputs(config: dict, params: dict) -> list[str]:
    return [pipeline.sweep_file(params["sweep"])]


def table(inputs: list[str], params: dict) -> pd.DataFrame:
    """The sweep's valid rows, with ``ratio_to_pld`` = ε / ε_pld at the same T."""
    sweep = pd.read_csv(inputs[0])
    valid = sweep.dropna(subset=["epsilon"]).copy()
    pld = valid[valid.accountant == "pld"].set_index("steps")["epsilon"]
    valid["ratio_to_pld"] = valid["epsilon"].to_numpy() / pld.reindex(valid["steps"]).to_numpy()
    return valid.drop(columns=["reason"]).reset_index(drop=True)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    left, right = axes[0]
    for name, rows in table.groupby("accountant", sort=False):
        kwargs = {"color": style.colour(name), "label": f"{name} ({rows.release.iloc[0].replace('_', ' ')})"}
        left.plot(rows.steps, rows.epsilon, **kwargs)
        right.plot(rows.steps, rows.ratio_to_pld, **kwargs)
    first = table.iloc[0]
    setting = (
        f"σ={first.noise_multiplier:.3g}, q={first.sampling_rate:.3g}, δ={first.delta:.0e}, "
        f"{first.sampling}, {first.neighbouring.replace('_', '/')}"
    )
    left.set(xscale="log", yscale="log", xlabel="steps T", ylabel="ε", title=f"ε vs T ({setting})")
    right.set(xscale="log", xlabel="steps T", ylabel="ε / ε_PLD", title="ratio to the tight PLD bound")
    right.axhline(1.0, color="grey", lw=0.8, ls="--")
    left.legend(title="accountant (release)")
    return fig
