"""mf_regime (004 §4.3 in the regime its citations use): DP-MF against DP-SGD over epochs and ε,
each method's learning rate chosen on a validation split.

Input: every run of one grid with ``lrs`` (variants = method × number of epochs, each at every
target ε — for a run given σ, its claimed ε to 3 decimals —, learning rate and seed) on a dataset
with a validation split (``validation_fraction``: summary.json ``validation``).  One row per
(variant, ε, lr): the mean and standard deviation (ddof = 1) over the seeds of the final
validation and test accuracy, the run's σ, the L2 sensitivity of what it releases (in units of
C), the ε its claiming accountant gives (``mf``: the MF mechanism's; else the run's own, e.g.
``pld``), and the attack risk its summary records beside that ε
(:func:`dplab.figures.runs.risk_columns`).  ``chosen`` marks, per (variant, ε), the lr of the
largest mean validation accuracy (the first in ``lrs`` order on a tie); the figure draws the test
accuracy of the chosen rows only, so the test images never choose anything.

The choice costs privacy that no row's ε covers. ``grid_epsilon`` is the ε (same δ) of what was run:
every lr's runs on the same records, composed (:func:`dplab.accounting.selection.grid_epsilon`), of
which the chosen lr's are released. ``selection_epsilon`` is what the choice would cost made by
Papernot & Steinke's random-repetition protocol instead (:mod:`dplab.accounting.selection`: K
candidates, K truncated negative binomial with ``selection_shape``, mean ``selection_mean``, default
the number of lrs): this grid trains each lr once, so that bound does not cover it. A candidate is
the seeds' runs at one lr (RDP composed: the curve times the number of seeds). A run's RDP curve:
DP-SGD's from ``rdp`` at its setting; DP-MF's from ``rdp`` at the event its MF accountant charges
(min_separation: one Gaussian of noise multiplier σ/(sens·Δ₁); cyclic Poisson: ⌈T/b⌉ Poisson-sampled
Gaussians of σ/ζ at rate p; docs/matrix_factorization.md). Both cover the records trained on; the
validation records are read without noise, so the choice gives them no DP guarantee (docs/claims.md,
"DP-MF where its sources claim it").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab import entries
from dplab.accounting import risk, selection
from dplab.accounting.eligibility import from_summary
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError, DPLabError
from dplab.figures import Inputs, runs, style
from dplab.schemes import Sampling
from dplab.training.summary import RunSummary
from dplab.units import sum_sensitivity

TITLE = "DP-MF vs DP-SGD over epochs and ε, each method's learning rate chosen on validation data"
SOURCE = (
    "004 §4.3 (DP-MF 'competitive with DP-SGD', citing Choquette-Choo et al.'s multi-epoch results)"
)
CAPTION = (
    "(004 §4.3, in the multi-epoch regime its citations use): final test accuracy against ε (δ = "
    "1e-6), one panel per number of epochs, of DP-SGD (Poisson sampling, ε from PLD) and of the "
    "matrix-factorization mechanism with an amplified banded Toeplitz C (cyclic Poisson) and with"
    " a BLT C (each record once per epoch), at the same batch size and number of steps, on "
    "MNIST-5000 (MLP 128). Each method's learning rate is the one with the best mean validation "
    "accuracy (a split of the training images, never trained on); the test images choose nothing."
    " Markers: mean over seeds, bars: ± sd, dots: the seeds; a dotted vertical line marks where "
    "an MF curve crosses DP-SGD's. The table holds every learning rate tried, each point's σ, "
    "sensitivity, ε from the accountant that claims it, the attack risk beside it, and "
    "grid_epsilon, the ε of the grid that chose the learning rate (its runs composed), which the "
    "per-run ε does not cover (selection_epsilon: were it chosen by Papernot & Steinke's "
    "random-repetition protocol instead). The default config runs a reduced grid (5 epochs, ε 1 "
    "and 8, 2 learning rates, 2 seeds); config/paper.yaml the full one."
)
INPUTS: dict[str, type] = {"summaries": list}
KEY = "figures.mf_regime.grid"
#: the two methods the figure compares: the baseline (independent noise) and matrix factorization;
#: a row's ``strategy`` is the baseline's name or the MF run's strategy
BASELINE, MF_METHOD = "dp_sgd", "dp_mf"
COLOURS = {BASELINE: "#7f7f7f", "banded_toeplitz": "#1f77b4", "blt": "#d62728"}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["grid"],
    "description": (
        "004 §4.3 in the multi-epoch regime: test accuracy vs ε per number of epochs, DP-SGD and "
        "DP-MF, each method's lr chosen on the dataset's validation split\n"
    ),
    "properties": {
        "grid": {
            "type": "string",
            "description": (
                "the grid (key of `grids`) with lrs, dp_sgd and dp_mf variants (one per method "
                "and number of epochs) on a dataset with validation_fraction\n"
            ),
        },
        "selection_mean": {
            "type": "number",
            "minimum": 1,
            "description": (
                "private selection (Papernot & Steinke 2022): mean number of runs K; default the "
                "number of lrs\n"
            ),
        },
        "selection_shape": {
            "type": "number",
            "minimum": 0,
            "description": (
                "shape η of K's truncated negative binomial (0 logarithmic, 1 geometric, .inf "
                "Poisson)\n"
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
    spec = config["grids"][grid]
    if not spec.get("lrs") or not spec.get("target_epsilon"):
        raise DPLabError(
            KEY, f"grid {grid!r} needs lrs (the learning rates to choose from) and target_epsilon"
        )
    runs = entries.grid_run_entries(config, grid)
    methods = {run["method"] for run in runs}
    if not {BASELINE, MF_METHOD} <= methods:
        raise DPLabError(
            KEY,
            f"grid {grid!r} must have dp_sgd and dp_mf variants; has {', '.join(sorted(methods))}",
        )
    for run in runs:
        dataset = run["dataset"]
        if not config["datasets"].get(dataset, {}).get("validation_fraction"):
            raise DPLabError(
                KEY,
                f"grid {grid!r} trains on dataset {dataset!r}, which has no validation split: "
                "give it validation_fraction",
            )


def inputs(config: dict, params: dict) -> Inputs:
    return {"summaries": entries.grid_summaries(config, params["grid"])}


def strategy(summary: RunSummary) -> str:
    """dp_sgd, or the run's MF strategy (banded_toeplitz, blt, …)."""
    return summary.settings.method_key("strategy") or summary.settings.method


def label(summary: RunSummary) -> str:
    """How the legend names a run's method and sampler."""
    key = summary.settings.method_key
    if key("strategy") is None:
        return f"DP-SGD, {summary.sampling} q = {summary.batch_size}/{summary.dataset_size}"
    sampler = summary.details["matrix_factorization"]["sampler"]
    if key("strategy") == "blt":
        return (
            f"DP-MF BLT ({key('buffers')} buffers), min_separation b = {sampler['min_separation']}"
        )
    return (
        f"DP-MF banded Toeplitz ({key('bands')} bands), cyclic Poisson b = {sampler['partitions']}"
    )


def privacy(summary: RunSummary) -> dict:
    """The claiming accountant, its ε, the sensitivity (units of C) and the Setting of ``rdp`` whose
    RDP curve the run satisfies (module doc)."""
    neighbouring = summary.neighbouring
    if summary.settings.method_key("strategy") is None:
        setting, _ = from_summary(summary)
        accountant = summary.settings.accountant
        return {
            "accountant": accountant,
            "epsilon": runs.claimed_epsilon(summary, accountant, KEY),
            "sensitivity": sum_sensitivity(1.0, neighbouring),
            "rdp_setting": setting,
        }
    mf = summary.details["matrix_factorization"]
    sampler = mf["sampler"]
    if sampler["name"] == Sampling.CYCLIC_POISSON:
        scale = mf["max_column_norm"]  # ζ
        setting = Setting(
            noise_multiplier=summary.noise_multiplier / scale,
            sampling_rate=sampler["sampling_rate"],
            steps=sampler["compositions"],
        )
    else:
        scale = mf["sensitivity"] * sum_sensitivity(1.0, neighbouring)  # sens(C; k, b)·Δ₁
        setting = Setting(
            noise_multiplier=summary.noise_multiplier / scale, sampling_rate=1.0, steps=1
        )
    return {
        "accountant": "mf",
        "epsilon": runs.claimed_epsilon(summary, "mf", KEY),
        "sensitivity": scale,
        "rdp_setting": setting,
    }


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    records = []
    for path in inputs["summaries"]:
        s = RunSummary.read(path)
        if s.validation is None:
            raise DPLabError(
                KEY,
                f"{path} has no validation accuracy: its dataset {s.dataset.name!r} has no "
                "validation split",
            )
        run = s.settings
        claim = privacy(s)
        # runs of two variants are never pooled, even where they look alike (label, epochs)
        name = entries.GridName.of(run.name or "", KEY)
        records.append(
            {
                "grid_variant": name.variant,
                "variant": label(s),
                "strategy": strategy(s),
                "epochs": run.steps * s.batch_size / s.dataset_size,
                "steps": run.steps,
                "batch_size": s.batch_size,
                "dataset_size": s.dataset_size,
                "target_epsilon": run.target_epsilon
                if run.target_epsilon is not None
                else round(claim["epsilon"], 3),
                "lr": run.lr,
                "seed": name.seed,  # the grid's (the run trains with entries.grid_seed)
                "noise_multiplier": s.noise_multiplier,
                "sensitivity": claim["sensitivity"],
                "accountant": claim["accountant"],
                "epsilon": claim["epsilon"],
                "delta": s.delta,
                **runs.risk_columns(s),
                "rdp_setting": claim["rdp_setting"],
                "validation_accuracy": s.validation["accuracy"],
                "test_accuracy": s.final.test_accuracy,
            }
        )
    frame = pd.DataFrame(records)
    rows = []
    keys = ["grid_variant", "variant", "epochs", "target_epsilon", "lr"]
    for _, g in frame.groupby(keys, sort=False):
        first, n = g.iloc[0], len(g)
        row = {
            c: first[c]
            for c in (
                "grid_variant",
                "variant",
                "strategy",
                "epochs",
                "steps",
                "batch_size",
                "dataset_size",
                "target_epsilon",
                "lr",
                "noise_multiplier",
                "sensitivity",
                "accountant",
                "delta",
                *risk.COLUMNS,
                "rdp_setting",
            )
        }
        row.update(
            epsilon=float(g.epsilon.max()), seeds=n, seed_list=" ".join(str(v) for v in g.seed)
        )
        for metric in ("validation_accuracy", "test_accuracy"):
            row[f"{metric}_mean"] = float(g[metric].mean())
            row[f"{metric}_sd"] = float(g[metric].std(ddof=1)) if n > 1 else float("nan")
        row["test_accuracy_seeds"] = " ".join(f"{v:.4f}" for v in g.test_accuracy)
        rows.append(row)
    out = pd.DataFrame(rows)
    out["chosen"] = False
    parts = []
    for _, cell in out.groupby(keys[:-1], sort=False):
        out.loc[cell.validation_accuracy_mean.idxmax(), "chosen"] = (
            True  # idxmax: the first of a tie
        )
        parts.append(_selection(cell, params))
    out = out.join(pd.concat(parts))
    out["test_gap_to_dp_sgd"] = _gaps(out)
    return out.drop(columns="rdp_setting")


def _selection(cell: pd.DataFrame, params: dict) -> pd.DataFrame:
    """``grid_epsilon``, ``selection_epsilon`` and ``selection_note`` of one (variant, epochs, ε)
    cell (module doc); both ε are empty where a learning rate's runs have no RDP curve."""
    rdp = get("rdp")
    curves, left = [], []
    for row in cell.itertuples():
        try:
            orders, values = selection.candidate_curve(rdp, row.rdp_setting)
        except AssumptionError as err:
            left.append(f"lr {row.lr:g} ({err})")
            continue
        # the seeds' runs on the same records compose: RDP adds
        curves.append(selection.composition([(orders, values)] * row.seeds))
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
    note = (
        f"best of {len(cell)} learning rates ({int(cell.seeds.iloc[0])} seeds each) by validation"
        f" accuracy: grid_epsilon, this grid's runs composed (RDP from rdp); selection_epsilon, "
        f"were the choice made by Papernot & Steinke's protocol instead (K runs, K {law}, mean "
        f"{mean:g}); both cover the records trained on, not the validation records (read without "
        "noise)"
    )
    if left:
        note += "; no ε: no RDP curve for " + "; ".join(left)
    return pd.DataFrame(
        {"grid_epsilon": grid_eps, "selection_epsilon": selection_eps, "selection_note": note},
        index=cell.index,
    )


def _gaps(table: pd.DataFrame) -> pd.Series:
    """Per chosen row: its mean test accuracy minus DP-SGD's chosen one at the same epochs and ε
    (the best of several DP-SGD variants there; empty for rows not chosen or without a DP-SGD
    point)."""
    chosen = table[table.chosen]
    dp_sgd = chosen[chosen.strategy == BASELINE]
    sgd = dp_sgd.groupby(["epochs", "target_epsilon"]).test_accuracy_mean.max()
    gaps = pd.Series(np.nan, index=table.index)
    for i, row in chosen.iterrows():
        ref = sgd.get((row.epochs, row.target_epsilon))
        if ref is not None:
            gaps[i] = row.test_accuracy_mean - ref
    return gaps


def crossings(chosen: pd.DataFrame) -> list[tuple[float, str, float, float, float]]:
    """(epochs, variant, ε below, ε above, ε at the crossing) wherever a chosen MF curve's gap to
    DP-SGD changes sign between two neighbouring ε of a panel; the crossing is where the drawn
    segments meet: the gap interpolated linearly in log ε."""
    out = []
    for (epochs, variant), rows in chosen[chosen.strategy != BASELINE].groupby(
        ["epochs", "variant"], sort=False
    ):
        rows = rows.dropna(subset=["test_gap_to_dp_sgd"]).sort_values("target_epsilon")
        gap, eps = rows.test_gap_to_dp_sgd.to_numpy(), rows.target_epsilon.to_numpy()
        for i in range(len(gap) - 1):
            if gap[i] * gap[i + 1] < 0:
                share = gap[i] / (gap[i] - gap[i + 1])
                at = float(np.exp(np.log(eps[i]) + share * np.log(eps[i + 1] / eps[i])))
                out.append((epochs, variant, eps[i], eps[i + 1], at))
    return out


def draw(table: pd.DataFrame):
    chosen = table[table.chosen]
    panels = sorted(chosen.epochs.unique())
    fig, axes = style.new_figure(ncols=len(panels), sharey=True)
    variants = list(dict.fromkeys(chosen.variant))
    cross = crossings(chosen)
    for ax, epochs in zip(axes[0], panels):
        here = chosen[chosen.epochs == epochs]
        for i, variant in enumerate(variants):
            rows = here[here.variant == variant].sort_values("target_epsilon")
            if rows.empty:
                continue
            colour = COLOURS.get(rows.strategy.iloc[0], "#333333")
            dodge = 1.03 ** (i - (len(variants) - 1) / 2)
            x = rows.target_epsilon * dodge
            ax.errorbar(
                x,
                rows.test_accuracy_mean,
                yerr=rows.test_accuracy_sd.fillna(0),
                marker="o",
                ms=4,
                capsize=3,
                color=colour,
                label=variant,
            )
            for xi, seeds in zip(x, rows.test_accuracy_seeds):
                values = [float(v) for v in str(seeds).split()]
                ax.plot([xi] * len(values), values, ".", color=colour, alpha=0.4, ms=3)
        for e, variant, lo, hi, at in cross:
            if e == epochs:
                ax.axvline(at, color="black", ls=":", lw=1)
                right = at > np.sqrt(lo * hi)  # the label on the side with more room
                ax.text(
                    at,
                    ax.get_ylim()[0],
                    f"{variant.split(',')[0]}\ncrosses DP-SGD\nbetween ε {lo:g} and {hi:g}",
                    fontsize=6.5,
                    va="bottom",
                    ha="right" if right else "left",
                )
        first = here.iloc[0]
        ax.set(
            xscale="log",
            xlabel="ε (δ = 1e-6; each method's claiming accountant)",
            title=f"{epochs:g} epoch{'s' if epochs != 1 else ''}: T = {int(first.steps)}, batch "
            f"{int(first.batch_size)} of {int(first.dataset_size)}",
        )
        style.plain_log_ticks(ax, "x")
    axes[0][0].set_ylabel(
        f"final test accuracy, lr chosen on validation\n(mean ± sd over "
        f"{int(chosen.seeds.min())} seeds; dots: the seeds)"
    )
    axes[0][0].legend(
        fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5 * len(panels), -0.16), frameon=False
    )
    fig.set_size_inches(max(5.0, 4.2 * len(panels)), 4.8)
    return fig
