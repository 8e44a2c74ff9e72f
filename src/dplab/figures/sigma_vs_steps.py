"""sigma_vs_steps (004 §3.2–3.4; 003 §3): the noise multiplier σ needed for (ε, δ) vs T.

One panel per sampling scheme (full batch, as 004's DP-GD; Poisson with rate q, as 004's
DP-SGD), one curve per composition accountant, calibrated by
:meth:`dplab.accounting.Accountant.sigma_curve`. 003's closed forms σ_naive (§3.1) and
σ_strong (§3.2, constant 1) are drawn dashed for their slope in T; they are first-order
approximations, not valid bounds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab.accounting import Setting, get
from dplab.accounting.registry import ACCOUNTANTS
from dplab.accounting.composition import sigma_naive_note, sigma_strong_note
from dplab.accounting.eligibility import refusal
from dplab.errors import AssumptionError, DPLabError
from dplab.figures import Inputs, style
from dplab.figures.params import in_unit_interval, positive
from dplab.schemes import Neighbouring, Sampling

TITLE = "Noise multiplier σ needed for (ε, δ) vs steps T, per accountant"
SOURCE = "004 §3.2–3.4 (σ vs T figures); 003 §3"
CAPTION = (
    "reproduces 004 §3.2–3.4's σ-vs-T figures and 003 §3's comparison: the smallest noise"
    " multiplier σ (noise std on the clipped sum divided by C; add/remove, where it equals 004's σ"
    " for DP-GD) that meets (ε = 1, δ = 10⁻⁶) after T steps, per composition accountant (naive,"
    " advanced, kairouz, moments, rdp, pld), for full-batch DP-GD (left) and Poisson-sampled DP-SGD"
    " with q = 0.05 (right). Each σ is calibrated to a relative tolerance of 10⁻⁴. Dashed: 003's"
    " closed forms σ_naive (§3.1) and σ_strong (§3.2, constant taken as 1), first-order"
    " approximations drawn for their slope in T, not valid bounds."
)
INPUTS: dict[str, type] = {}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "004 §3.2–3.4 / 003 §3 (σ needed for (ε, δ) vs T per composition accountant); defaults "
        "are 004's values"
    ),
    "properties": {
        "epsilon": positive(1.0, "ε"),
        "delta": in_unit_interval(1e-06, "δ"),
        "neighbouring": {
            "enum": [str(n) for n in Neighbouring],
            "default": "add_remove",
            "description": "neighbouring relation",
        },
        "sampling_rates": {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "default": [0.05],
            "description": "Poisson rates q, one panel each (a full-batch panel is always drawn)",
        },
        "steps": {
            "type": "array",
            "minItems": 2,
            "items": {"type": "integer", "minimum": 1, "maximum": 100000000},
            "default": [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
            "description": "the T grid",
        },
        "accountants": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "examples": list(ACCOUNTANTS)},
            "default": ["naive", "advanced", "kairouz", "rdp", "moments", "pld"],
            "description": "composition accountants to calibrate (must include pld)",
        },
    },
}


#: 003's closed forms: name → (function, legend label)
CLOSED_FORMS = {
    "naive_003": (sigma_naive_note, "003 §3.1 σ_naive = qT√(2 ln(1.25qT/δ))/ε"),
    "strong_003": (sigma_strong_note, "003 §3.2 σ_strong ~ q√(T ln(1/δ) ln(T/δ))/ε"),
}


def check(config: dict, params: dict) -> None:
    from dplab.accounting import names

    for name in params["accountants"]:
        if name not in names():
            raise DPLabError("figures.sigma_vs_steps.accountants", f"unknown accountant {name!r}")
    if "pld" not in params["accountants"]:
        raise DPLabError("figures.sigma_vs_steps.accountants", "must include pld (the reference)")


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def panels(params: dict) -> list[tuple[str, float]]:
    """(sampling, q) of each panel: full batch, then Poisson at each configured rate."""
    return [(Sampling.FULL_BATCH, 1.0)] + [(Sampling.POISSON, q) for q in params["sampling_rates"]]


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (panel, accountant or closed form, T); a refused accountant gets one row
    per panel with an empty σ and the reason."""
    eps, delta, neighbouring = params["epsilon"], params["delta"], params["neighbouring"]
    steps = np.array(sorted(params["steps"]))
    rows = []
    for sampling, q in panels(params):
        setting = Setting(
            noise_multiplier=1.0,
            sampling=sampling,
            sampling_rate=q,
            neighbouring=neighbouring,
            steps=int(steps.max()),
        )
        common = {
            "sampling": sampling,
            "sampling_rate": q,
            "neighbouring": neighbouring,
            "epsilon": eps,
            "delta": delta,
        }
        hint = None  # the smallest σ(T) found so far in this panel: the start of the next search
        for name in params["accountants"]:
            accountant = get(name)
            try:
                sigmas = accountant.sigma_curve(setting, eps, delta, steps, hint=hint)
            except AssumptionError as err:
                rows.append(
                    {
                        **common,
                        "curve": name,
                        "kind": "accountant",
                        "release": accountant.release,
                        "steps": np.nan,
                        "noise_multiplier": np.nan,
                        "reason": str(err),
                    }
                )
                continue
            hint = sigmas if hint is None else np.minimum(hint, sigmas)
            for t, s in zip(
                steps, sigmas
            ):  # each (σ, T) must be a setting the accountant may claim
                why = refusal(name, setting.replace(noise_multiplier=float(s), steps=int(t)))
                rows.append(
                    {
                        **common,
                        "curve": name,
                        "kind": "accountant",
                        "release": accountant.release,
                        "steps": int(t),
                        "noise_multiplier": np.nan if why else s,
                        "reason": why or "",
                    }
                )
        for name, (func, _) in CLOSED_FORMS.items():
            rows += [
                {
                    **common,
                    "curve": name,
                    "kind": "closed_form",
                    "release": "trajectory",
                    "steps": int(t),
                    "noise_multiplier": func(q, int(t), eps, delta),
                    "reason": "",
                }
                for t in steps
            ]
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    keys = list(dict.fromkeys(zip(table.sampling, table.sampling_rate)))
    fig, axes = style.new_figure(ncols=len(keys))
    first = table.iloc[0].to_dict()
    for ax, (sampling, q) in zip(axes[0], keys):
        panel = table[(table.sampling == sampling) & (table.sampling_rate == q)]
        for name, rows in panel[panel.kind == "accountant"].groupby("curve", sort=False):
            rows = rows.dropna(subset=["noise_multiplier"])
            if len(rows):
                ax.plot(
                    rows.steps,
                    rows.noise_multiplier,
                    color=style.colour(name),
                    marker="o",
                    ms=3,
                    lw=2.2 if name == "pld" else 1.5,
                    label=name + (" (tight reference)" if name == "pld" else ""),
                )
        for name, rows in panel[panel.kind == "closed_form"].groupby("curve", sort=False):
            colour = style.colour("naive" if name == "naive_003" else "advanced")
            ax.plot(
                rows.steps,
                rows.noise_multiplier,
                color=colour,
                ls="--",
                lw=1.0,
                label=CLOSED_FORMS[name][1],
            )
        refused = panel[panel.kind == "accountant"].groupby("curve").noise_multiplier.count()
        note = ", ".join(refused[refused == 0].index)
        title = (
            "full batch (DP-GD)"
            if sampling == Sampling.FULL_BATCH
            else f"Poisson sampling, q = {q:g} (DP-SGD)"
        )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="steps T",
            ylabel="noise multiplier σ (noise std / C on the sum)",
            title=title + (f"\nrefused: {note}" if note else ""),
        )
        style.plain_log_ticks(ax)
    axes[0][-1].legend(
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        title_fontsize=8,
        title=f"accountant, for ε={first['epsilon']:g}, δ={first['delta']:g},\n"
        f"{first['neighbouring'].replace('_', '/')} neighbours",
    )
    fig.set_size_inches(6.4 * len(keys) + 3.2, 4.2)
    return fig
