"""individual_privacy (new): each training record's individual ε, per class, beside the run's
worst case and the test accuracy per class.

The run (``individual_epsilon: true``) writes individual_epsilon.csv (index, class, ε: the
individual RDP accounting of Feldman & Zrnic 2021 from each record's clipped gradient norms,
:mod:`dplab.accounting.individual`) and, in summary.json's ``individual_privacy``, the worst case
(the run's rdp ε) and the test accuracy per class.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dplab import layout
from dplab.errors import DPLabError
from dplab.figures import Inputs, runs, style
from dplab.inputs import read_csv, train_command
from dplab.training.summary import RunSummary

TITLE = "Individual ε per class, beside the worst case and the accuracy per class"
SOURCE = "new"
CAPTION = (
    "(new figure, no counterpart in the source papers): the distribution of every training record's"
    " individual ε (left, one box per class: median, quartiles, 5%–95% whiskers) in a DP-SGD run,"
    " computed from the record's own clipped gradient norms at every step (individual RDP"
    " accounting of Feldman & Zrnic 2021, neighbouring relation: add/remove of that record;"
    " docs/individual_privacy.md), against the worst-case ε the run claims from the same accountant"
    " (dashed line: the ε of a record clipped at every step), and the test accuracy per class"
    " (right). Individual ε is data-dependent (it reads the realised trajectory and the record's"
    " gradients): a description of how much each record's gradients weighed, not a release"
    " guarantee, since no filter stopped any record at a budget."
)
INPUTS: dict[str, type] = {"individual": str, "summary": str}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["run"],
    "description": (
        "individual ε per class of a DP-SGD run beside its worst case and the test accuracy per "
        "class"
    ),
    "properties": {
        "run": {
            "type": "string",
            "description": "a private run (key of `runs`) with individual_epsilon: true",
        },
    },
}


def check(config: dict, params: dict) -> None:
    key = "figures.individual_privacy.run"
    runs.check_runs(config, key, [params["run"]], private=True)
    if not config["runs"][params["run"]].get("individual_epsilon"):
        raise DPLabError(key, f"run {params['run']!r} must set individual_epsilon: true")


def inputs(config: dict, params: dict) -> Inputs:
    files = layout.run_files(params["run"])
    return {"individual": files["individual_epsilon"], "summary": files["summary"]}


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per class: the quantiles of its records' individual ε (q05, q25, median, q75, q95,
    max), its number of records and its test accuracy, with the run's worst-case ε."""
    summary = RunSummary.read(inputs["summary"])
    info = summary.individual_privacy
    if info is None:
        raise DPLabError(
            "figures.individual_privacy.run",
            f"{inputs['summary']} has no individual_privacy "
            "(the run did not set individual_epsilon: true)",
        )
    records = read_csv(
        inputs["individual"], "individual ε", train_command(Path(inputs["individual"]).parent)
    )
    if records.empty:
        raise DPLabError(
            "figures.individual_privacy.run", f"{inputs['individual']} holds no records"
        )
    common = {
        **runs.describe(summary),
        "worst_case_epsilon": info["worst_case_epsilon"],
        "individual_method": info["method"],
        "individual_neighbouring": info["neighbouring"],
    }
    rows = []
    for label, group in records.groupby("class"):
        eps = group.individual_epsilon.to_numpy()
        q05, q25, median, q75, q95 = np.quantile(eps, [0.05, 0.25, 0.5, 0.75, 0.95])
        rows.append(
            {
                "class": int(label),
                "records": len(eps),
                "q05": q05,
                "q25": q25,
                "median": median,
                "q75": q75,
                "q95": q95,
                "max": eps.max(),
                "test_accuracy": info["test_accuracy_per_class"].get(str(int(label)), np.nan),
                **common,
            }
        )
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2)
    left, right = axes[0]
    first = table.iloc[0]
    stats = [
        {
            "label": str(r["class"]),
            "med": r["median"],
            "q1": r.q25,
            "q3": r.q75,
            "whislo": r.q05,
            "whishi": r.q95,
            "fliers": [],
        }
        for _, r in table.iterrows()
    ]
    left.bxp(stats, showfliers=False)
    left.plot(
        range(1, len(table) + 1), table["max"], "x", color="#d62728", label="largest in the class"
    )
    left.axhline(
        first.worst_case_epsilon,
        color="black",
        ls="--",
        lw=1.2,
        label=f"worst case (the run's rdp ε) = {first.worst_case_epsilon:.3g}",
    )
    left.set(
        xlabel="class",
        ylabel=f"individual ε at δ={first.delta:g}",
        ylim=(0, first.worst_case_epsilon * 1.1),
        title="individual ε of the training records",
    )
    left.legend(loc="lower right", fontsize=8)
    right.bar(table["class"].astype(str), table.test_accuracy, color="#1f77b4", alpha=0.8)
    right.set(xlabel="class", ylabel="test accuracy", ylim=(0, 1), title="test accuracy per class")
    fig.suptitle(
        f"run {first.run}: {first.method} on {first.dataset}, σ={first.noise_multiplier:.3g}, "
        f"q={first.sampling_rate:.3g}, T={first.steps}; individual ε: add/remove of one record",
        fontsize=10,
    )
    return fig
