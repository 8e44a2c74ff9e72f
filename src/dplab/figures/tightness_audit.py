"""tightness_audit (new): measured lower bounds on ε next to every upper bound of the same
release model, per threat model, audited variant, estimator and T.

The table is the audits' rows (``dplab audit``, :mod:`dplab.audit.membership`) stacked: one row
per (audit, variant, threat model, observation, estimator, T) with ``epsilon_lower`` (certified
at ``confidence``; gdp: under its Gaussian-shape assumption), ``epsilon_estimate``,
``epsilon_upper``, ``exact_epsilon`` where the audited coordinate is Gaussian, and
``upper_<accountant>`` of every accountant valid for the run and for what the attack observes
(a trajectory observation: composition bounds only).  The figure has one row of panels per
threat model and one panel per audited variant: upper bounds as lines, lower bounds as
intervals from the certified bound to the interval's other end.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab import layout
from dplab.audit.entries import ESTIMATORS, THREAT_MODELS
from dplab.errors import DPLabError
from dplab.figures import Inputs, style
from dplab.tables import read_table

TITLE = "Measured ε lower bounds per threat model next to every upper bound of the same release"
SOURCE = "new"
CAPTION = (
    "(new figure; thousands of short runs, so on scikit-learn's 8×8 digits, not MNIST): one row of"
    " panels per threat model (white box: Dirac gradient canaries, every iterate observed; last"
    " iterate: gradient canaries, only the final model; input canary: the dead-feature input"
    " canary), one panel per audited variant. Lines: the ε upper bound of every accountant valid"
    " for the run and for what the attack observes (a trajectory observation is tested against"
    " composition bounds only), at the run's δ and neighbouring relation; dashed: the exact ε of"
    " the canary's coordinate where it is known. Markers: ε lower bounds of the audit on the"
    " engine's runs by estimator (square: Clopper–Pearson, distribution-free; circle: f-DP/GDP,"
    " Nasr et al. 2023, valid where the trade-off curve is at least as heavy-tailed as a Gaussian;"
    " triangle: one-run, Steinke et al. 2023, (ε, δ) analysis on a single run; diamond: one-run,"
    " Mahloujifar, Melis & Chaudhuri 2024, f-DP (GDP) analysis of the same run, under gdp's"
    " assumption; star: one-run with independent canaries, GDP hypothesis, order-statistics test of"
    " the same guesses, under gdp's assumption), at the marker the bound certified at the stated"
    " confidence, the bar up to the interval's other end (one-run: its point estimate)."
    " docs/findings.md states what each audit measured."
)
INPUTS: dict[str, type] = {"audits": list}
FIRST = [
    "audit",
    "threat_model",
    "variant",
    "method",
    "model",
    "observation",
    "estimator",
    "steps",
    "delta",
    "neighbouring",
    "sampling",
    "noise_multiplier",
    "sampling_rate",
    "confidence",
    "runs",
    "canaries",
]

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["audits"],
    "properties": {
        "audits": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string"},
            "description": (
                "names of the audits (keys of `audits`) whose lower bounds are plotted, one row "
                "of panels per threat model"
            ),
        },
    },
}


def check(config: dict, params: dict) -> None:
    for audit in params["audits"]:
        if audit not in config.get("audits", {}):
            raise DPLabError(
                "figures.tightness_audit.audits",
                f"unknown audit {audit!r}; defined: "
                f"{', '.join(config.get('audits', {})) or 'none'}",
            )


def inputs(config: dict, params: dict) -> Inputs:
    return {"audits": [layout.audit_file(audit) for audit in params["audits"]]}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    out = pd.concat(
        [
            read_table(
                path,
                "audit table",
                f"dplab audit --config CONFIG --audit NAME --data DATA --out {path}",
            )
            for path in inputs["audits"]
        ],
        ignore_index=True,
    )
    first = [c for c in FIRST if c in out]
    bounds = ["epsilon_lower", "epsilon_estimate", "epsilon_upper", "exact_epsilon"]
    bounds += sorted(c for c in out if c.startswith("upper_"))
    rest = [c for c in out if c not in first and c not in bounds]
    return out[first + bounds + rest]


def _panel(ax, rows: pd.DataFrame) -> None:
    for col in [c for c in rows if c.startswith("upper_") and rows[c].notna().any()]:
        curve = rows.dropna(subset=[col]).groupby("steps")[col].first()
        name = col.removeprefix("upper_")
        ax.plot(
            curve.index, curve.to_numpy(), color=style.colour(name), marker=".", lw=1.2, label=name
        )
    exact = rows.dropna(subset=["exact_epsilon"]) if "exact_epsilon" in rows else rows.iloc[:0]
    for obs, part in exact.groupby("observation"):
        curve = part.groupby("steps").exact_epsilon.first()
        ax.plot(
            curve.index,
            curve.to_numpy(),
            color="#d62728",
            ls="--",
            lw=2,
            label=f"exact ({obs.replace('_', ' ')})",
        )
    series = [(o, e) for o in ("last_iterate", "trajectory") for e in ESTIMATORS]
    shifts = {pair: 1.0 + 0.05 * (i - (len(series) - 1) / 2) for i, pair in enumerate(series)}
    for (obs, est), part in rows.groupby(["observation", "estimator"]):
        part = part.sort_values("steps")
        low = part.epsilon_lower.to_numpy()
        top = part.epsilon_upper.where(part.epsilon_upper.notna(), part.epsilon_estimate).to_numpy()
        top = np.minimum(np.where(np.isfinite(top), top, low), 1e4)
        ax.errorbar(
            part.steps.to_numpy() * shifts[(obs, est)],
            low,
            yerr=[np.zeros(len(low)), np.maximum(top - low, 0)],
            fmt=ESTIMATORS.meta[est]["marker"],
            mfc="white" if obs == "last_iterate" else None,
            capsize=2,
            color="#444444" if obs == "last_iterate" else "#8c564b",
            label=f"{est.replace('_', ' ')} lower bound, {obs.replace('_', ' ')}",
        )


def draw(table: pd.DataFrame):
    threats = [t for t in THREAT_MODELS if t in set(table.threat_model)]
    panels = {
        t: list(
            dict.fromkeys(
                zip(table.audit[table.threat_model == t], table.variant[table.threat_model == t])
            )
        )
        for t in threats
    }
    ncols = max(len(p) for p in panels.values())
    fig, axes = style.new_figure(ncols=ncols, nrows=len(threats))
    for i, threat in enumerate(threats):
        for j in range(ncols):
            ax = axes[i][j]
            if j >= len(panels[threat]):
                ax.set_visible(False)
                continue
            audit, variant = panels[threat][j]
            rows = table[(table.audit == audit) & (table.variant == variant)]
            _panel(ax, rows)
            first = rows.iloc[0]
            ax.set(
                xscale="log",
                xlabel="steps T",
                ylabel="ε (linear below 1)",
                title=f"{threat.replace('_', ' ')}: {variant.replace('_', ' ')} ({first.model})",
            )
            ax.set_yscale("symlog", linthresh=1.0)
            ax.set_ylim(bottom=0)
            ax.legend(
                fontsize=6,
                title=(
                    f"δ={first.delta:.0e}, σ={first.noise_multiplier:.3g},"
                    f" q={first.sampling_rate:.3g}, {first.neighbouring.replace('_', ' ')}; bars:"
                    f" {first.confidence:.0%} interval"
                ),
                title_fontsize=6,
            )
    return fig
