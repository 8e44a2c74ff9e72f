"""privacy_utility (new): test accuracy vs ε for every training method at matched ε.

Reads every run of the listed config `grids` entries (variants = methods, each calibrated to each
target ε with its own accountant; seeds; the non-private reference is a grid without target ε).  One
row per (variant, target ε): mean, standard deviation (ddof = 1), min and max of the final test
accuracy over the seeds, and the accountant, its release model (every iterate / final parameters
only) and the neighbouring relation the ε is stated under.  "Matched ε" therefore means equal
numbers under possibly different accountants and release models: the legend names them.  A variant
without target ε (non-private sgd) is one row with an empty ε, drawn as a horizontal reference.

A row's ε covers its own runs, not the choice of the best of them: ``grid_epsilon`` is the ε (same
δ) of what was run, every run of the variants at that target ε and relation on the same records,
composed (:func:`dplab.accounting.selection.grid_epsilon`), of which the best is released;
``selection_epsilon`` what releasing the best would cost made by Papernot & Steinke's
random-repetition protocol instead (:mod:`dplab.accounting.selection`: K candidates, K truncated
negative binomial with ``selection_shape`` η, mean ``selection_mean``, default the number of
candidates), which this grid does not run.  A candidate is a variant judged on its mean over its
seeds, so it is its seeds' runs composed (:func:`dplab.accounting.selection.composition`).  Both
from each run's RDP curve (its own accountant's where that is an RDP bound, else ``rdp``'s); where
any run of the cell has none, both are empty for the whole cell (what was released depends on that
run too), and ``selection_note`` names the candidates and the runs without a curve, and why.
"""

from __future__ import annotations


import pandas as pd

from dplab import entries
from dplab.accounting import selection
from dplab.accounting.eligibility import from_summary
from dplab.accounting.registry import get
from dplab.errors import AssumptionError, DPLabError
from dplab.figures import Inputs, runs, style
from dplab.training.summary import RunSummary

TITLE = "Privacy–utility: test accuracy vs ε per training method, mean ± sd over seeds"
SOURCE = "new"
CAPTION = (
    "(new figure, no counterpart in the source papers): final test accuracy vs target ε for every"
    " training method (mean ± standard deviation over the seeds of the grid), each method's σ"
    " calibrated to the target ε by its own natural accountant, named in the legend with the"
    " neighbouring relation and what the ε covers (every iterate for composition accountants, the"
    " final parameters only for hidden-state ones). Equal ε under different accountants and release"
    " models is a stated, not a proven, equivalence of privacy. The dashed line and band are"
    " non-private SGD (mean ± sd). The default config trains logistic regression on synthetic data"
    " (its many runs stay cheap). The table's grid_epsilon is the ε of the grid that picks the"
    " best method at each target (its runs composed; empty where a run has no RDP curve): the"
    " per-run ε does not cover picking the best run (selection_epsilon: were it picked by"
    " Papernot & Steinke's random-repetition protocol instead, each method its seeds' runs)."
)
INPUTS: dict[str, type] = {"summaries": list}
COLOURS = {
    "dp_sgd": "#1f77b4",
    "dp_gd": "#ff7f0e",
    "noisy_gd": "#2ca02c",
    "dp_sgd_fixed_batches": "#9467bd",
    "projected_dp_sgd": "#7f7f7f",
    "regularized_dp_sgd": "#393b79",
    "dp_mf": "#e377c2",
}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["grids"],
    "description": (
        "test accuracy vs target ε per training method (grid variants), mean ± sd over seeds"
    ),
    "properties": {
        "grids": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string"},
            "description": (
                "keys of `grids`: methods × target ε × seeds, and a non-private reference grid "
                "without target ε"
            ),
        },
        "selection_mean": {
            "type": "number",
            "minimum": 1,
            "description": (
                "private selection (Papernot & Steinke 2022): mean number of runs K; default the "
                "candidates"
            ),
        },
        "selection_shape": {
            "type": "number",
            "minimum": 0,
            "description": (
                "shape η of K's truncated negative binomial (0 logarithmic, 1 geometric, .inf "
                "Poisson)"
            ),
        },
    },
}


def check(config: dict, params: dict) -> None:
    for grid in params["grids"]:
        if grid not in config.get("grids", {}):
            raise DPLabError("figures.privacy_utility.grids", f"unknown grid {grid!r}")


def inputs(config: dict, params: dict) -> Inputs:
    return {
        "summaries": [
            path for grid in params["grids"] for path in entries.grid_summaries(config, grid)
        ]
    }


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    records, summaries = [], []
    for path in inputs["summaries"]:
        summary = RunSummary.read(path)
        summaries.append(summary)
        name = entries.GridName.of(summary.settings.name or "", "figures.privacy_utility.grids")
        if name.lr is not None:  # runs of one variant at several lr would be pooled as seeds
            raise DPLabError(
                "figures.privacy_utility.grids",
                f"{path}: a grid with lrs (lr {name.lr}); this figure takes one lr per variant",
            )
        info = runs.describe(summary)
        records.append(
            {
                "variant": name.variant,
                "seed": name.seed,
                **info,
                "release": _release(summary, info["accountant"]),
                "epsilon_claimed": (
                    runs.claimed_epsilon(
                        summary, info["accountant"], "figures.privacy_utility.grids"
                    )
                    if info["accountant"]
                    else None
                ),
                "test_accuracy": summary.final.test_accuracy,
            }
        )
    frame = pd.DataFrame(records)
    frame["summary"] = summaries
    frame["target_epsilon"] = frame["target_epsilon"].astype(float)
    rows = []
    for (variant, eps), group in frame.groupby(
        ["variant", "target_epsilon"], dropna=False, sort=True
    ):
        acc = group["test_accuracy"].to_numpy(dtype=float)
        first = group.iloc[0]
        rows.append(
            {
                "variant": variant,
                "method": first.method,
                "accountant": first.accountant,
                "release": first.release,
                "neighbouring": first.neighbouring,
                "sampling": first.sampling,
                "epsilon": eps,
                "delta": first.delta,
                "epsilon_claimed_max": group["epsilon_claimed"].max(),
                "noise_multiplier": first.noise_multiplier,
                "steps": first.steps,
                "clip": first["clip"],
                "model": first.model,
                "dataset": first.dataset,
                "seeds": len(acc),
                "accuracy_mean": float(acc.mean()),
                "accuracy_sd": float(acc.std(ddof=1)) if len(acc) > 1 else 0.0,
                "accuracy_min": float(acc.min()),
                "accuracy_max": float(acc.max()),
                "summary": first.summary,
            }
        )
    table = pd.DataFrame(rows)
    picked = [
        _selection(cell, params)
        for _, cell in table.groupby(["epsilon", "neighbouring"], sort=False)
    ]
    table = (
        table.join(pd.concat(picked))
        if picked
        else table.assign(grid_epsilon=None, selection_epsilon=None, selection_note=None)
    )
    return table.drop(columns="summary")


def _curve(summary: RunSummary, claimed: str):
    """A candidate's RDP curve: its claimed accountant's if that states one, else ``rdp``'s."""
    accountant = get(claimed)
    if not hasattr(accountant, "rdp_curve"):
        accountant = get("rdp")
    setting, _ = from_summary(summary)
    if setting is None:
        raise AssumptionError(accountant.name, "setting", "the run records no accounting setting")
    return selection.candidate_curve(accountant, setting)


def _selection(cell: pd.DataFrame, params: dict) -> pd.DataFrame:
    """``grid_epsilon``, ``selection_epsilon`` and ``selection_note`` of every row of one
    (target ε, relation) cell (module doc).  A candidate is a variant judged on its mean over its
    seeds: its runs composed (:func:`selection.composition`).  Both ε are empty for the whole cell
    where any of its runs has no RDP curve: the grid released the best of all of them."""
    curves, left = [], []
    for row in cell.itertuples():
        try:
            curve = _curve(row.summary, row.accountant)  # its runs share the setting
        except AssumptionError as err:
            left.append(f"{row.variant} ({err})")
            continue
        curves.append(selection.composition([curve] * row.seeds))  # its seeds' runs: RDP adds
    mean = params.get("selection_mean") or len(cell)
    shape = params.get("selection_shape", 1.0)
    delta = float(cell.delta.iloc[0])
    grid_eps = selection_eps = float("nan")
    if not left:
        grid_eps = selection.grid_epsilon(curves, delta)
        selection_eps = selection.epsilon(curves, delta, mean, shape)
    law = (
        "Poisson" if shape == selection.POISSON else f"truncated negative binomial, shape {shape:g}"
    )
    runs = "/".join(str(n) for n in sorted(set(cell.seeds)))
    note = (
        f"best of {', '.join(cell.variant)} by the mean of their runs (runs each: {runs}): "
        f"grid_epsilon, all their runs composed (what this grid ran); selection_epsilon, were the "
        f"best released by Papernot & Steinke's protocol instead (K candidates, each its seeds' "
        f"runs composed, K {law}, mean {mean:g}); the row's own ε does not cover picking the best "
        "run on test data"
    )
    if left:
        note += "; no ε, some of the runs compared have no RDP curve: " + "; ".join(left)
    return pd.DataFrame(
        {"grid_epsilon": grid_eps, "selection_epsilon": selection_eps, "selection_note": note},
        index=cell.index,
    )


def _release(summary: RunSummary, accountant: str) -> str:
    return summary.epsilon_covers.get(accountant, "")


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure()
    ax = axes[0][0]
    private = table.dropna(subset=["epsilon"])
    variants = list(dict.fromkeys(private.variant))
    for i, (_, rows) in enumerate(private.groupby("variant", sort=False)):
        first = rows.iloc[0]
        label = (
            f"{runs.display_name(first.method)} — {first.accountant}, "
            f"{first.neighbouring.replace('_', '/')}, covers {first.release}"
        )
        dodge = 1.04 ** (
            i - (len(variants) - 1) / 2
        )  # side by side at each ε, so no bar hides another
        ax.errorbar(
            rows.epsilon * dodge,
            rows.accuracy_mean,
            yerr=rows.accuracy_sd,
            marker="o",
            ms=4,
            capsize=3,
            color=COLOURS.get(first.method, "#333333"),
            label=label,
        )
    for _, ref in table[table.epsilon.isna()].iterrows():
        ax.axhline(
            ref.accuracy_mean,
            color="black",
            ls="--",
            lw=1,
            label=f"{runs.display_name(ref.method)}: {ref.accuracy_mean:.3f} (no privacy)",
        )
        ax.axhspan(
            ref.accuracy_mean - ref.accuracy_sd,
            ref.accuracy_mean + ref.accuracy_sd,
            color="black",
            alpha=0.08,
        )
    first = private.iloc[0]
    ax.set(
        xscale="log",
        xlabel="target ε (each method's own accountant, see legend)",
        ylabel=f"final test accuracy (mean ± sd over {int(first.seeds)} seeds)",
        title=(
            f"{first.model} on {first.dataset}, T={first.steps}, C={first['clip']:g},"
            f" δ={first.delta:g}"
        ),
    )
    style.plain_log_ticks(ax, "x")
    ax.legend(
        fontsize=7.5,
        title="method — accountant, neighbours, what ε covers (markers shifted apart in ε)",
        title_fontsize=7.5,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        frameon=False,
    )
    fig.set_size_inches(7.4, 4.6 + 0.2 * len(table))
    return fig
