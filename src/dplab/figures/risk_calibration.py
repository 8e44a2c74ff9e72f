"""risk_calibration (new): σ from an ε target vs σ calibrated to the attack risk directly
(Kulynych et al., "Attack-Aware Noise Calibration for Differential Privacy", NeurIPS 2024, §4).

A practitioner who must keep every membership attacker's TPR at FPR α within a target τ and
goes through ε uses the (ε, δ) bound TPR ≤ e^ε·α + δ (Kairouz, Oh & Viswanath 2015, Thm 2.1),
so picks ε = ln((τ − δ)/α) and calibrates σ to it; calibrating σ to (τ, α) itself
(:func:`dplab.accounting.risk.sigma_for_risk`) needs less noise for the same protection.  Both
runs train on the same data; the table holds each one's σ, ε, attack TPR and test accuracy, and
its whole trade-off curve (TPR at :data:`CURVE_POINTS` log-spaced FPRs,
:func:`dplab.accounting.risk.risk`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dplab import layout
from dplab.accounting import risk
from dplab.accounting.eligibility import from_summary
from dplab.errors import DPLabError
from dplab.figures import Inputs, runs, style
from dplab.training.summary import RunSummary

TITLE = "Attack risk and accuracy: σ from an ε target vs σ calibrated to the risk"
SOURCE = "new"
CAPTION = (
    "(new figure, no counterpart in the source papers; after Kulynych et al. 2024): a practitioner"
    " must keep every membership attacker's TPR at a fixed FPR α below a target τ. Going through ε,"
    " the (ε, δ) bound TPR ≤ e^ε·α + δ gives ε = ln((τ − δ)/α), and σ is calibrated to that ε with"
    " the tight PLD accountant (run by ε); calibrating σ to (τ, α) directly from the privacy-loss"
    " distribution (run by risk) needs less noise. Left: the attacker's TPR against FPR (the f-DP"
    " trade-off curve of each run's T steps, log axes) with the target marked; right: the test"
    " accuracy each run reaches on the same data and model. Both runs are DP-SGD with Poisson"
    " sampling; the neighbouring relation is add/remove."
)
INPUTS: dict[str, type] = {"by_epsilon": str, "by_risk": str}
#: FPRs of each trade-off curve (log-spaced, 1e-4 to 1)
CURVE_POINTS = 40

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["by_epsilon", "by_risk"],
    "description": (
        "attack TPR at fixed FPR and accuracy, σ from an ε target vs σ calibrated to the risk "
        "(Kulynych et al. 2024)"
    ),
    "properties": {
        "by_epsilon": {
            "type": "string",
            "description": (
                "a private run (key of `runs`) with accountant pld and target_epsilon = ln((τ − "
                "δ)/α) of by_risk's target"
            ),
        },
        "by_risk": {
            "type": "string",
            "description": "a private run (key of `runs`) with target_tpr τ and target_fpr α",
        },
    },
}


def conversion_epsilon(tpr: float, fpr: float, delta: float) -> float:
    """The ε whose bound e^ε·α + δ equals the target τ: ln((τ − δ)/α)."""
    return math.log((tpr - delta) / fpr)


def check(config: dict, params: dict) -> None:
    key = "figures.risk_calibration"
    runs.check_runs(config, f"{key}.by_epsilon", [params["by_epsilon"]], private=True)
    runs.check_runs(config, f"{key}.by_risk", [params["by_risk"]], private=True)
    by_eps, by_risk = config["runs"][params["by_epsilon"]], config["runs"][params["by_risk"]]
    if by_risk.get("target_tpr") is None:
        raise DPLabError(
            f"{key}.by_risk", f"run {params['by_risk']!r} must set target_tpr and target_fpr"
        )
    if by_eps.get("target_epsilon") is None or by_eps.get("accountant") != "pld":
        raise DPLabError(
            f"{key}.by_epsilon",
            f"run {params['by_epsilon']!r} must set target_epsilon and accountant: pld",
        )
    tpr, fpr, delta = by_risk["target_tpr"], by_risk["target_fpr"], by_eps.get("delta", 1e-5)
    if tpr - delta <= fpr:
        raise DPLabError(
            f"{key}.by_epsilon",
            f"delta {delta:g} of run {params['by_epsilon']!r} leaves no ε > 0 with e^ε·α + δ = τ"
            f" for the target of run {params['by_risk']!r} (τ = {tpr:g}, α = {fpr:g}): needs"
            " δ < τ − α",
        )
    wanted = conversion_epsilon(tpr, fpr, delta)
    if not math.isclose(by_eps["target_epsilon"], wanted, rel_tol=1e-3):
        raise DPLabError(
            f"{key}.by_epsilon",
            f"run {params['by_epsilon']!r} must set target_epsilon = ln((τ − δ)/α) "
            f"= {wanted:.6g} for run {params['by_risk']!r}'s target; got"
            f" {by_eps['target_epsilon']}",
        )


def inputs(config: dict, params: dict) -> Inputs:
    return {name: layout.run_files(params[name])["summary"] for name in INPUTS}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """Rows of kind ``run`` (per run: σ, pld ε, the target, the attacker's TPR at the target FPR,
    test accuracy) and ``curve`` (per run: TPR at each FPR of the trade-off curve)."""
    summaries = {name: RunSummary.read(path) for name, path in inputs.items()}
    target = summaries["by_risk"].settings
    tpr_target, fpr_target = target.target_tpr, target.target_fpr
    fprs = np.unique(np.append(np.geomspace(1e-4, 1.0, CURVE_POINTS), fpr_target))
    rows = []
    for name, summary in summaries.items():
        setting, _ = from_summary(summary)
        reading = risk.risk(setting, fprs=fprs)
        common = {
            "calibrated_by": name,
            **runs.describe(summary),
            "epsilon_pld": summary.epsilon.get("pld"),
            "target_tpr": tpr_target,
            "target_fpr": fpr_target,
        }
        at_target = reading["tpr"][int(np.searchsorted(fprs, fpr_target))]
        rows.append(
            {
                "kind": "run",
                **common,
                "tpr_at_target_fpr": at_target,
                "advantage": reading["advantage"],
                "test_accuracy": summary.final.test_accuracy,
                "risk_method": reading["method"],
            }
        )
        rows += [
            {"kind": "curve", **common, "fpr": a, "tpr": t} for a, t in zip(fprs, reading["tpr"])
        ]
    return pd.DataFrame(rows)


LABELS = {"by_epsilon": "σ from ε = ln((τ − δ)/α)", "by_risk": "σ calibrated to (τ, α)"}
COLOURS = {"by_epsilon": "#1f77b4", "by_risk": "#d62728"}


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    left, right = axes[0]
    summary = table[table.kind == "run"].set_index("calibrated_by")
    for name, curve in table[table.kind == "curve"].groupby("calibrated_by", sort=False):
        row = summary.loc[name]
        left.plot(
            curve.fpr,
            curve.tpr,
            color=COLOURS[name],
            label=f"{LABELS[name]}: σ={row.noise_multiplier:.3g}, ε_pld={row.epsilon_pld:.3g}, "
            f"TPR={row.tpr_at_target_fpr:.3g}",
        )
    first = summary.iloc[0]
    left.plot([1e-4, 1], [1e-4, 1], color="grey", lw=0.8, ls=":", label="random guess")
    left.plot(
        [first.target_fpr],
        [first.target_tpr],
        "k*",
        ms=10,
        label=f"target: TPR ≤ {first.target_tpr:g} at FPR {first.target_fpr:g}",
    )
    left.set(
        xscale="log",
        yscale="log",
        xlabel="attacker's FPR α",
        ylabel="attacker's TPR (upper bound)",
        title="membership attack trade-off of each run",
    )
    left.legend(loc="lower right", fontsize=7)
    right.bar(
        [LABELS[n] for n in summary.index],
        summary.test_accuracy,
        color=[COLOURS[n] for n in summary.index],
    )
    for i, acc in enumerate(summary.test_accuracy):
        right.text(i, acc, f"{acc:.3f}", ha="center", va="bottom")
    right.set(ylabel="test accuracy", ylim=(0, 1), title="accuracy on the same data")
    fig.suptitle(
        f"{first.method} on {first.dataset}, q={first.sampling_rate:.3g}, T={first.steps},"
        f" δ={first.delta:g}, {first.neighbouring.replace('_', '/')}",
        fontsize=10,
    )
    return fig
