"""asoodeh_projected (001 Figs. 1 and 3): the privacy loss of projected DP-SGD vs T.

Left: δ(T) at fixed ε (001 Thm 1/2, eq. (5)) with its T → ∞ limit pθ/(1 − (1−p)θ); right:
ε(T) at fixed δ with the limits of eq. (22) (the root ε*_δ) and eq. (23) (closed form).
Computed in 001's own units (σ_A the parameter-space noise std, p = b/n) by
:mod:`dplab.accounting.asoodeh`; the bound is the same for Poisson (Thm 1) and sampling
without replacement (Thm 2), replace-one neighbours.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab.accounting import asoodeh
from dplab.figures import Inputs, style
from dplab.figures.params import in_unit_interval, positive
from dplab.schemes import Neighbouring

TITLE = "Projected DP-SGD: δ vs T at fixed ε and ε vs T at fixed δ (001 Thms 1–2)"
SOURCE = "001 Fig. 1 and Fig. 3"
CAPTION = (
    "reproduces 001 Fig. 1 (left: δ vs T at ε = 3; right: ε vs T at δ = 10⁻³) and Fig. 3 (the right"
    " panel with the limits of eq. (22) and eq. (23) as horizontal lines): the hidden-state privacy"
    " loss of projected DP-SGD by 001 Thms 1–2 (Poisson and without replacement give the same"
    " bound), with D = 3, C = 2, η = 0.01, σ_A = 1 (001's parameter-space noise std), p = 0.001,"
    " replace-one neighbours. ε converges to the root ε*_δ of eq. (22) within about 10 steps and"
    " stays below the closed form of eq. (23)."
)
INPUTS: dict[str, type] = {}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "001 Figs. 1 and 3 (projected DP-SGD, Thms 1–2); defaults are the figures' parameters"
    ),
    "properties": {
        "diameter": positive(3.0, "D, diameter of the projection set"),
        "clip": positive(2.0, "C"),
        "lr": positive(0.01, "η"),
        "sigma_a": positive(
            1.0, "001's σ: parameter-space noise std (units.asoodeh_sigma = η·σ·C/b)"
        ),
        "sampling_rate": in_unit_interval(0.001, "p = b/n"),
        "epsilon": positive(3.0, "ε of the δ-vs-T panel (Fig. 1 left)"),
        "delta": in_unit_interval(0.001, "δ of the ε-vs-T panel (Fig. 1 right, Fig. 3)"),
        "max_steps": {
            "type": "integer",
            "minimum": 2,
            "maximum": 100000,
            "default": 30,
            "description": "T = 1..max_steps",
        },
    },
}


def check(config: dict, params: dict) -> None:
    """Nothing to cross-check: the figure needs no other result."""


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (panel, curve, T): ``bound`` for every T of 1..max_steps, and the limits
    (``limit`` for δ; ``eq22``, ``eq23`` for ε) repeated at the two ends of the T range."""
    p, eps, delta = params["sampling_rate"], params["epsilon"], params["delta"]
    r = asoodeh.projected_r(params["diameter"], params["lr"], params["clip"], params["sigma_a"])
    steps = np.arange(1, params["max_steps"] + 1)
    ends = np.array([1, params["max_steps"]])
    common = {key: params[key] for key in ("diameter", "clip", "lr", "sigma_a", "sampling_rate")}
    common.update(
        accountant="asoodeh_projected",
        neighbouring=Neighbouring.REPLACE_ONE,
        release="last_iterate",
    )
    parts = [
        ("delta_vs_steps", "bound", steps, eps, asoodeh.projected_delta(eps, steps, p, r)),
        (
            "delta_vs_steps",
            "limit",
            ends,
            eps,
            np.full(2, asoodeh.projected_delta_limit(eps, p, r)),
        ),
        ("epsilon_vs_steps", "bound", steps, asoodeh.projected_epsilon(delta, steps, p, r), delta),
        (
            "epsilon_vs_steps",
            "eq22",
            ends,
            np.full(2, asoodeh.projected_epsilon_limit(delta, p, r)),
            delta,
        ),
        (
            "epsilon_vs_steps",
            "eq23",
            ends,
            np.full(2, asoodeh.projected_epsilon_closed_form(delta, p, r)),
            delta,
        ),
    ]
    frames = [
        pd.DataFrame(
            {"panel": panel, "curve": curve, "steps": t, "epsilon": e, "delta": d, **common}
        )
        for panel, curve, t, e, d in parts
    ]
    return pd.concat(frames, ignore_index=True)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    left, right = axes[0]
    first = table.iloc[0].to_dict()
    setting = (
        f"D={first['diameter']:g}, C={first['clip']:g}, η={first['lr']:g},"
        f" σ_A={first['sigma_a']:g}, p={first['sampling_rate']:g}"
    )
    colour = style.colour("asoodeh_projected")

    delta = table[table.panel == "delta_vs_steps"]
    bound = delta[delta.curve == "bound"]
    left.plot(
        bound.steps,
        bound.delta,
        color=colour,
        marker="o",
        ms=3,
        label="Thm 1/2 bound (hidden state)",
    )
    limit = delta[delta.curve == "limit"]
    left.plot(limit.steps, limit.delta, color="tab:red", ls="--", label="limit T→∞: pθ/(1−(1−p)θ)")
    left.set(xlabel="steps T", ylabel="δ", title=f"δ vs T at ε = {bound.epsilon.iloc[0]:g}")
    style.sci_offset(left)

    eps = table[table.panel == "epsilon_vs_steps"]
    bound = eps[eps.curve == "bound"]
    right.plot(
        bound.steps,
        bound.epsilon,
        color=colour,
        marker="o",
        ms=3,
        label="Thm 1/2 bound (hidden state)",
    )
    for curve, ls, label in (
        ("eq22", "--", "limit ε*_δ, eq. (22)"),
        ("eq23", ":", "closed-form limit, eq. (23)"),
    ):
        rows = eps[eps.curve == curve]
        right.plot(rows.steps, rows.epsilon, color="tab:red", ls=ls, label=label)
    right.set(xlabel="steps T", ylabel="ε", title=f"ε vs T at δ = {bound.delta.iloc[0]:g}")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.legend(title=f"{setting}, replace-one", loc="lower right")
    return fig
