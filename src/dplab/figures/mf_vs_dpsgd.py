"""mf_vs_dpsgd (004 §4.3, "competitive with DP-SGD"): DP-MF vs DP-SGD at matched ε over seeds.

Input: the summaries of every run of one grid (variants = methods, several seeds each).  Each run's
ε is the tight one of its method: ``mf`` (PLD of the MF mechanism) for dp_mf, ``pld`` for the
others; the table refuses runs whose ε or δ differ by more than 1 % (not a matched comparison).  One
row per method variant: mean, standard deviation and standard error over seeds of the final test
accuracy and loss (diagnostics on the test split, not privatised).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab import entries
from dplab.errors import DPLabError
from dplab.figures import Inputs, style
from dplab.figures.runs import claimed_epsilon
from dplab.training.settings import RunSettings
from dplab.training.summary import RunSummary

TITLE = "DP-MF vs DP-SGD at matched ε: final test accuracy and loss over seeds"
SOURCE = "004 §4.3 (fourth try: matrix factorization, compared with DP-SGD)"
CAPTION = (
    "(004 §4.3, fourth try): final test accuracy and loss, mean ± standard deviation over seeds, of"
    " the matrix-factorization mechanism (dp_mf, correlated noise C⁻¹Z, ε from the MF accountant)"
    " and of DP-SGD (Poisson sampling, ε from PLD) at the same ε and δ on the same data. The table"
    " refuses runs whose ε differ by more than 1%. The default config runs this grid (2 methods × 5"
    " seeds) on scikit-learn's 8×8 digits, in 004's proportions (batch 7 of 1437, T = 200) and with"
    " C = 1 (config/paper.yaml: MNIST, C = 30)."
)
INPUTS: dict[str, type] = {"summaries": list}
KEY = "figures.mf_vs_dpsgd.grid"

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["grid"],
    "properties": {
        "grid": {
            "type": "string",
            "description": (
                "the grid (key of `grids`) whose variants (methods, one of them dp_mf) are "
                "compared over seeds at matched ε"
            ),
        },
    },
}


def check(config: dict, params: dict) -> None:
    grid = params["grid"]
    if grid not in config.get("grids", {}):
        raise DPLabError(
            KEY, f"unknown grid {grid!r}; defined: {', '.join(sorted(config.get('grids', {})))}"
        )
    from dplab.training.methods import METHODS  # torch: only where the config is checked

    runs = entries.grid_run_entries(config, grid)
    public = [r["method"] for r in runs if not METHODS[r["method"]].private]
    if public:
        raise DPLabError(KEY, f"grid {grid!r} has a non-private ({public[0]}) variant")
    if not any(METHODS[r["method"]].factorization(r) for r in runs):
        raise DPLabError(KEY, f"grid {grid!r} must have a dp_mf variant")


def inputs(config: dict, params: dict) -> Inputs:
    return {"summaries": entries.grid_summaries(config, params["grid"])}


def _label(run: RunSettings) -> str:
    strategy, bands, buffers = (run.method_key(k) for k in ("strategy", "bands", "buffers"))
    if strategy is not None:  # a factorization: dp_mf
        label = f"-{bands}" if bands is not None else ""
        label += f"-{buffers} buffers" if buffers is not None else ""
        parts = run.method_key("min_separation") or "n/batch"
        return f"dp_mf {strategy}{label}, {run.sampling} b={parts}"
    return f"{run.method}, {run.sampling}"


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    rows = []
    for path in inputs["summaries"]:
        s = RunSummary.read(path)
        accountant = "mf" if "mf" in s.epsilon else "pld"  # the run's tight accountant
        epsilon = claimed_epsilon(s, accountant, KEY)  # a DPLabError if the run may not claim it
        run = s.settings
        rows.append(
            {
                "variant": _label(run),
                "method": run.method,
                "seed": run.seed,
                "accountant": accountant,
                "epsilon": epsilon,
                "delta": s.delta,
                "noise_multiplier": s.noise_multiplier,
                "test_accuracy": s.final.test_accuracy,
                "test_loss": s.final.test_loss,
            }
        )
    runs = pd.DataFrame(rows)
    for col in ("epsilon", "delta"):
        lo, hi = runs[col].min(), runs[col].max()
        if hi > lo * 1.01:
            raise DPLabError(
                KEY, f"{col} differs between runs ({lo:.4g} to {hi:.4g}): not a matched comparison"
            )
    out = []
    for variant, g in runs.groupby("variant", sort=False):
        n = len(g)
        row = {
            "variant": variant,
            "method": g.method.iloc[0],
            "accountant": g.accountant.iloc[0],
            "epsilon": g.epsilon.max(),
            "delta": g.delta.iloc[0],
            "noise_multiplier": g.noise_multiplier.iloc[0],
            "seeds": n,
        }
        for metric in ("test_accuracy", "test_loss"):
            sd = float(g[metric].std(ddof=1)) if n > 1 else float("nan")
            row.update(
                {
                    f"{metric}_mean": float(g[metric].mean()),
                    f"{metric}_sd": sd,
                    f"{metric}_se": sd / np.sqrt(n),
                }
            )
        out.append(row)
    return pd.DataFrame(out)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    x = np.arange(len(table))
    for ax, metric in zip(axes[0], ("test_accuracy", "test_loss")):
        ax.bar(
            x,
            table[f"{metric}_mean"],
            yerr=table[f"{metric}_sd"],
            capsize=4,
            color=["#1f77b4" if a == "mf" else "#7f7f7f" for a in table.accountant],
        )
        ax.set_xticks(
            x,
            [
                f"{v}\nε from {a}".replace(", ", "\n")
                for v, a in zip(table.variant, table.accountant)
            ],
            fontsize=8,
        )
        ax.set(
            ylabel=f"final {metric.replace('_', ' ')} (mean ± sd, {int(table.seeds.min())} seeds)"
        )
    first = table.iloc[0]
    fig.suptitle(
        f"DP-MF vs DP-SGD at ε = {table.epsilon.max():.3g}, δ = {first.delta:.0e} "
        f"(each ε from the method's tight accountant: mf = PLD of the MF mechanism, pld)",
        fontsize=10,
    )
    return fig
