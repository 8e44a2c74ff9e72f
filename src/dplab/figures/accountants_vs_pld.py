"""accountants_vs_pld (new): every accountant's ε vs T on one DP-SGD setting, PLD as reference.

Left: ε(T) per accountant; right: its ratio to the tight PLD value at the same T.  The sweep
names the accountants (by default every composition accountant valid for DP-SGD); one the run
may not claim (:func:`dplab.accounting.eligibility.refusal`, asked again here from the run's
summary.json) keeps one row with an empty ε and the reason, and the figure lists it as refused.
"""

from __future__ import annotations

import pandas as pd

from dplab import layout
from dplab.accounting import risk
from dplab.accounting.eligibility import from_summary, refusal
from dplab.errors import DPLabError
from dplab.figures import Inputs, style
from dplab.training.summary import RunSummary
from dplab.tables import read_table

TITLE = "Every accountant's ε vs T, and its ratio to PLD"
SOURCE = "new"
CAPTION = (
    "(new figure, no counterpart in the source papers): every composition accountant's ε (naive,"
    " advanced, kairouz, moments, rdp, rdp_closed_form, pld, as listed in the sweep) as a function"
    " of the number of steps T on one DP-SGD setting (the σ, q, δ, sampling and neighbouring"
    " relation of the training run named in the config), and the ratio of each to the tight PLD"
    " value at the same T. A ratio of 1.3 means the bound claims 30% more privacy loss than the"
    " tight accounting. Accountants the run may not claim (the setting violates their assumptions,"
    " or the run's update is not the one they analyse) are listed under the plot with the reason."
    " The table carries, beside each PLD ε, the attack risk of the same T steps (TPR at FPR 0.001,"
    " 0.01, 0.1 and the advantage); the other accountants have no privacy-loss distribution and say"
    " so in risk_note."
)
INPUTS: dict[str, type] = {"sweep": str, "summary": str}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sweep"],
    "properties": {
        "sweep": {
            "type": "string",
            "description": "name of the sweep (key of `sweeps`) to plot; must include pld",
        },
    },
}


def check(config: dict, params: dict) -> None:
    sweep = params["sweep"]
    if sweep not in config.get("sweeps", {}):
        raise DPLabError("figures.accountants_vs_pld.sweep", f"unknown sweep {sweep!r}")
    if "pld" not in config["sweeps"][sweep]["accountants"]:
        raise DPLabError(
            "figures.accountants_vs_pld.sweep", f"sweep {sweep!r} must include the pld accountant"
        )


def inputs(config: dict, params: dict) -> Inputs:
    """The sweep, and the summary.json of the run it was computed for."""
    run = config["sweeps"][params["sweep"]]["run"]
    return {
        "sweep": layout.sweep_file(params["sweep"]),
        "summary": layout.run_files(run)["summary"],
    }


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """The sweep's rows, with ``ratio_to_pld`` = ε / ε_pld at the same T (empty for refused rows);
    an accountant the run may not claim keeps one row with an empty ε and the reason."""
    sweep = read_table(
        inputs["sweep"],
        "sweep table",
        f"dplab sweep --config CONFIG --sweep {params['sweep']} --out {inputs['sweep']}",
    )
    sweep = _claimed(sweep, RunSummary.read(inputs["summary"]))
    pld = sweep[sweep.accountant == "pld"].dropna(subset=["epsilon"]).set_index("steps")["epsilon"]
    if pld.empty:
        raise DPLabError(
            "figures.accountants_vs_pld.sweep",
            "the sweep has no pld values (pld refused the setting)",
        )
    sweep["ratio_to_pld"] = sweep["epsilon"].to_numpy() / pld.reindex(sweep["steps"]).to_numpy()
    sweep["reason"] = sweep["reason"].fillna("")
    return sweep.reset_index(drop=True)


def _claimed(sweep: pd.DataFrame, summary: RunSummary) -> pd.DataFrame:
    """The sweep with each curve of an accountant the run may not claim
    replaced by one refused row."""
    setting, update = from_summary(summary)
    keep = []
    for name, rows in sweep.groupby("accountant", sort=False):
        why = refusal(name, setting, update) if rows.epsilon.notna().any() else None
        if why:
            rows = rows.iloc[:1].assign(
                steps=float("nan"),
                epsilon=float("nan"),
                reason=why,
                **{**risk.columns(name, None), "risk_note": "no risk: no ε (see reason)"},
            )
        keep.append(rows)
    return pd.concat(keep, ignore_index=True)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    left, right = axes[0]
    refused = table[table.epsilon.isna()]
    table = table.dropna(subset=["epsilon"])
    for name, rows in table.groupby("accountant", sort=False):
        kwargs = {
            "color": style.colour(name),
            "label": f"{name} ({rows.release.iloc[0].replace('_', ' ')})",
        }
        left.plot(rows.steps, rows.epsilon, **kwargs)
        right.plot(rows.steps, rows.ratio_to_pld, **kwargs)
    first = table.iloc[0]
    setting = (
        f"σ={first.noise_multiplier:.3g}, q={first.sampling_rate:.3g}, δ={first.delta:.0e}, "
        f"{first.sampling}, {first.neighbouring.replace('_', '/')}"
    )
    left.set(
        xscale="log",
        yscale="log",
        xlabel="steps T",
        ylabel=f"ε at δ={first.delta:.0e}",
        title=f"ε vs T ({setting})",
    )
    right.set(
        xscale="log",
        yscale="log",
        xlabel="steps T",
        ylabel="ε / ε_PLD",
        title="ratio to the tight PLD bound",
    )
    right.axhline(1.0, color="grey", lw=0.8, ls="--")
    left.legend(title="accountant (release)")
    style.plain_log_ticks(left)
    style.plain_log_ticks(right)
    if len(refused):
        note = "refused: " + "; ".join(
            f"{row.accountant} ({row.reason})" for row in refused.itertuples()
        )
        fig.text(0.01, 0.005, note, fontsize=6.5, va="bottom", wrap=True)
        fig.subplots_adjust(bottom=0.2)
    return fig
