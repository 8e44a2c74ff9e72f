"""hidden_state_gain (new): composition vs hidden-state bounds on the same runs.

For each run, ε(T) of every accountant valid for it, read from its metrics.csv (the
``epsilon_<accountant>`` columns: the guarantee if training stopped at step T).  Composition
accountants (release ``trajectory``) cover every iterate; hidden-state accountants (release
``last_iterate``: 001 Thms 1–3, 002 Cor. 1, 000 Thm VII.2, PABI) cover only the final
parameters, under their loss assumptions.  ``gain`` = the smallest composition ε at that T divided
by the accountant's ε (> 1: the hidden state buys that factor).  Every accountant the run
excludes keeps one row with an empty ε and the reason, and the figure lists it under its panel.
Lower bounds and comparisons the run reports beside its claims (a shuffled run's
``shuffle_lower`` and ``as_if_poisson``, docs/sampling.md) are rows of their ``bound``, drawn
dotted and labelled as not a guarantee, and never enter ``best_composition`` or ``gain``.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from dplab.accounting.registry import ACCOUNTANTS
from dplab.accounting.eligibility import bound, column
from dplab.accounting.registry import get
from dplab.figures import Inputs, runs, style

TITLE = "Hidden-state vs composition bounds on the same training runs"
SOURCE = "new"
CAPTION = (
    "(new figure, no counterpart in the source papers): for each training run (one panel; σ given,"
    " replace-one neighbours, logistic regression on synthetic data with ‖x‖ ≤ 1 so that the loss"
    " constants are known), ε at δ vs the number of steps T from every accountant valid for the"
    " run: composition bounds (solid, ε covers every iterate) and hidden-state bounds (dashed, ε"
    " covers the final parameters only: 001 Thms 1–3, 002 Cor. 1, 000 Thm VII.2, PABI). The box"
    " gives the hidden-state gain, best composition ε / hidden-state ε, at the last step. Under"
    " each panel: every accountant the run excludes and why (sampling scheme, neighbouring"
    " relation, missing convexity, or a bound that gives no finite ε)."
)
INPUTS: dict[str, type] = {"summaries": list, "metrics": list}

#: the characters of σ, η, C, b and the relation that fit one title line of a panel
TITLE_LINE = 44
#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["runs"],
    "description": (
        "composition vs hidden-state ε(T) of the same runs, with the accountants each run "
        "excludes and why"
    ),
    "properties": {
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string"},
            "description": "private runs (keys of `runs`), one panel each",
        },
        "skip": {
            "type": "array",
            "items": {"type": "string", "examples": list(ACCOUNTANTS)},
            "default": ["gaussian_classic", "gaussian_simple", "gaussian_pei", "gaussian_analytic"],
            "description": (
                "accountants not listed as excluded (single-release calibrations, not training "
                "accountants)"
            ),
        },
    },
}


def check(config: dict, params: dict) -> None:
    runs.check_runs(config, "figures.hidden_state_gain.runs", params["runs"], private=True)


def inputs(config: dict, params: dict) -> Inputs:
    return runs.run_inputs(params["runs"])


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    rows = []
    for summary, metrics in runs.load_pairs(inputs):
        info = runs.describe(summary)
        claims = runs.claims(
            summary
        )  # decided anew: a curve the run may not claim becomes a refused row
        references = runs.references(
            summary
        )  # lower bounds, comparisons: rows of their bound, never a claim
        release = {
            k: ("trajectory" if v == "every iterate" else "last_iterate")
            for k, v in summary.epsilon_covers.items()
            if claims[k] is None
        }
        composition = [column(k) for k, r in release.items() if r == "trajectory"]
        best = (
            metrics[composition].min(axis=1).to_numpy()
            if composition
            else np.full(len(metrics), np.nan)
        )
        for name in release:
            for i, row in metrics.iterrows():
                eps = float(row[column(name)])
                rows.append(
                    {
                        **info,
                        "accountant": name,
                        "bound": "upper",
                        "release": release[name],
                        "step": int(row.step),
                        "epsilon": eps,
                        "best_composition": best[i],
                        "gain": best[i] / eps,
                        "reason": "",
                    }
                )
        for name in (k for k, why in references.items() if why is None):
            rows += [
                {
                    **info,
                    "accountant": name,
                    "bound": bound(name),
                    "release": get(name).release,
                    "step": int(step),
                    "epsilon": float(eps),
                    "best_composition": np.nan,
                    "gain": np.nan,
                    "reason": "",
                }
                for step, eps in zip(metrics.step, metrics[column(name)])
            ]
        for name, reason in {**claims, **references}.items():
            if reason is not None and name not in params["skip"]:
                rows.append(
                    {
                        **info,
                        "accountant": name,
                        "bound": bound(name),
                        "release": "",
                        "epsilon": np.nan,
                        "reason": reason,
                    }
                )
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    run_names = list(dict.fromkeys(table.run))
    fig, axes = style.new_figure(ncols=len(run_names), nrows=1)
    for ax, name in zip(axes[0], run_names):
        rows = table[table.run == name]
        valid = rows.dropna(subset=["epsilon"])
        for accountant, curve in valid.groupby("accountant", sort=False):
            hidden = curve.release.iloc[0] == "last_iterate"
            kind = curve["bound"].iloc[0]
            if kind != "upper":  # a reference value: never drawn or labelled as a guarantee
                ax.plot(
                    curve.step,
                    curve.epsilon,
                    color=style.colour(accountant),
                    ls=":",
                    lw=1.2,
                    label=f"{accountant} ({kind}{' bound' if kind == 'lower' else ''}, "
                    f"{'final parameters' if hidden else 'every iterate'}: NOT a guarantee)",
                )
                continue
            ax.plot(
                curve.step,
                curve.epsilon,
                color=style.colour(accountant),
                ls="--" if hidden else "-",
                lw=2.4 if hidden else 1.4,
                label=f"{accountant} ({'final parameters' if hidden else 'every iterate'})",
            )
        first = rows.iloc[0]
        update = (
            f"σ={runs.shown(first.noise_multiplier, '.3g')}, η={runs.shown(first.lr)},"
            f" C={runs.shown(first['clip'])}"
        )
        batch = f"b={runs.shown(first.batch_size, '.0f')}, {first.neighbouring.replace('_', '-')}"
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="steps T",
            ylabel=f"ε at δ={first.delta:g}",
            title=(
                f"{runs.display_name(first.method)} ({first.sampling.replace('_', ' ')})\n{update}"
                # a run in phases' values ("4.88 → 8.133") take a line more within the panel
                + (", " if len(update) + len(batch) <= TITLE_LINE else "\n")
                + batch
            ),
        )
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * (high / low) ** 0.6)  # head room: the legend above the curves
        style.plain_log_ticks(ax)
        ax.legend(
            fontsize=6.5, title="accountant (what ε covers)", title_fontsize=7, loc="upper left"
        )
        hidden = valid[valid.release == "last_iterate"]
        if len(hidden):
            last = hidden[hidden.step == hidden.step.max()]
            gains = ", ".join(
                f"{r.accountant} ×{r.gain:.3g}" for r in last.itertuples() if np.isfinite(r.gain)
            )
            if gains:
                ax.text(
                    0.98,
                    0.02,
                    f"best composition ε / hidden-state ε at T={int(last.step.iloc[0])}:\n{gains}",
                    transform=ax.transAxes,
                    fontsize=7,
                    va="bottom",
                    ha="right",
                    bbox={"facecolor": "white", "alpha": 0.8, "lw": 0},
                )
        refused = rows[rows.epsilon.isna()]
        if len(refused):
            note = "\n".join(
                textwrap.shorten(f"✗ {r.accountant}: {r.reason}", 80) for r in refused.itertuples()
            )
            ax.text(0.0, -0.16, "refused:\n" + note, transform=ax.transAxes, fontsize=6.5, va="top")
    fig.set_size_inches(5.2 * len(run_names), 6.4)
    return fig
