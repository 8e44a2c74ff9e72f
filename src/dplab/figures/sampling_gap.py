"""sampling_gap (new): what the batch sampler costs in ε, at one setting across σ and epochs.

Left: ε after E epochs (t = ⌊n/b⌋ steps each) for Poisson sampling (``pld``, the tight upper
bound), balls-in-bins (``balls_in_bins``, upper; ``balls_in_bins_lower``, a certified lower bound),
shuffled fixed-size batches (``shuffle_lower``: the true ε is at least this) and disjoint batches
without amplification (``fixed_batches``, upper: valid for shuffled batches too), one line style
per σ.  Right: the σ each needs for a target (ε, δ); for a lower bound, where it reaches the
target (:meth:`~dplab.accounting.base.Accountant.noise_needed`).  The true ε of shuffled batches
lies between ``shuffle_lower`` and ``fixed_batches`` (shaded); reporting the Poisson ε for them is
the claim the run does not earn.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab.accounting import Setting, get
from dplab.errors import AssumptionError, DPLabError
from dplab.figures import Inputs, style
from dplab.figures.params import in_unit_interval, positive
from dplab.schemes import Neighbouring, Sampling

TITLE = "ε and σ of Poisson, balls-in-bins, shuffled and fixed batches at one setting"
SOURCE = "new"
CAPTION = (
    "(new figure): what the batch sampler costs in ε at one setting (default: scikit-learn's"
    " digits' n = 1437, run dp_sgd's b = 64, so t = ⌊n/b⌋ = 22 steps per epoch; δ = 10⁻⁵,"
    " add/remove neighbours). The first panels give ε after 1–30 epochs at each σ, the last the σ"
    " each sampler needs for ε = 1. Poisson sampling (pld, black) and balls-in-bins (each example"
    " in one uniformly random step per epoch; balls_in_bins, an upper bound by exact Rényi"
    " divergences, green solid) are within a few percent of each other; balls_in_bins_lower (green"
    " dashed) is a certified lower bound on balls-in-bins. Shuffled fixed-size batches have no"
    " known tight bound: their true ε lies in the shaded band between shuffle_lower (orange dashed:"
    " a certified LOWER bound for one partition cycled every epoch, the sampler's default, Chua"
    " et al. 2024's persistent pair) and fixed_batches (dark red: the valid upper bound"
    " without amplification, each example in ⌈T/t⌉ steps, each moving the sum by up to 2C because a"
    " fixed batch size makes an added record displace another). What to conclude: a run that"
    " shuffles and reports the Poisson ε claims a guarantee it does not have; already the lower"
    " bound is about 14× the Poisson ε after 30 epochs at σ = 1.5 (53.88 vs 3.86) and reaches"
    " ε = 1 only at σ = 12.5 where Poisson needs 4.4; the only ε a shuffled run can claim today is"
    " the"
    " fixed-batch one (57 at σ = 1.5, σ = 40.9 for ε = 1 after 30 epochs), while balls-in-bins"
    " costs as little as Poisson and keeps the epoch structure. Lower bounds are labelled in the"
    " table (column bound) and are never a guarantee."
)
INPUTS: dict[str, type] = {}

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "ε and the σ needed under Poisson, balls-in-bins, shuffled (lower bound) and fixed "
        "batches (upper bound) at one setting; defaults are the default data (digits, 1437 "
        "training examples) and run dp_sgd (b = 64, δ = 1e-5)"
    ),
    "properties": {
        "dataset_size": {"type": "integer", "minimum": 2, "default": 1437, "description": "n"},
        "batch_size": {
            "type": "integer",
            "minimum": 1,
            "default": 64,
            "description": "b (an epoch is t = ⌊n/b⌋ steps)",
        },
        "delta": in_unit_interval(1e-05, "δ"),
        "neighbouring": {
            "enum": [str(n) for n in Neighbouring],
            "default": "add_remove",
            "description": "neighbouring relation",
        },
        "noise_multipliers": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "number", "exclusiveMinimum": 0},
            "default": [0.8, 1.5, 3.0],
            "description": "σ values of the ε panels (one panel each)",
        },
        "epochs": {
            "type": "array",
            "minItems": 2,
            "items": {"type": "integer", "minimum": 1, "maximum": 1000000},
            "default": [1, 3, 10, 30],
            "description": "numbers of epochs (T = epochs·t)",
        },
        "epsilon": positive(1.0, "target ε of the σ panel"),
    },
}


#: (accountant, sampling, legend label) of every curve
CURVES = (
    ("pld", Sampling.POISSON, f"{Sampling.POISSON.display} (pld)"),
    ("balls_in_bins", Sampling.BALLS_IN_BINS, Sampling.BALLS_IN_BINS.display),
    ("balls_in_bins_lower", Sampling.BALLS_IN_BINS, Sampling.BALLS_IN_BINS.display),
    ("shuffle_lower", Sampling.SHUFFLE, Sampling.SHUFFLE.display),
    ("fixed_batches", Sampling.SHUFFLE, "fixed batches, no amplification"),
)
#: relative precision of the σ panel: an upper bound's σ meets the target; a lower bound's value
#: σ_found·(1 − RTOL) misses it
RTOL = 2e-2


def check(config: dict, params: dict) -> None:
    if params["batch_size"] > params["dataset_size"]:
        raise DPLabError(
            "figures.sampling_gap.batch_size",
            f"must be <= dataset_size ({params['dataset_size']}); got {params['batch_size']}",
        )


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def _setting(params: dict, sampling: str, sigma: float, steps: int) -> Setting:
    return Setting(
        noise_multiplier=sigma,
        steps=steps,
        sampling=sampling,
        neighbouring=params["neighbouring"],
        dataset_size=params["dataset_size"],
        batch_size=params["batch_size"],
    )


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (panel, curve, σ, epochs): panel "epsilon" gives ε at δ for each σ of
    ``noise_multipliers``; panel "sigma" the σ at which the curve meets (``epsilon``, δ).  A refused
    curve keeps one row per panel with the reason."""
    n, b, delta = params["dataset_size"], params["batch_size"], params["delta"]
    per_epoch = n // b
    epochs = np.array(sorted(params["epochs"]))
    steps = epochs * per_epoch
    rows, hint = [], None
    # the σ panel starts Poisson's searches from balls-in-bins' answers (close, and cheap to get)
    for name, sampling, label in sorted(CURVES, key=lambda c: c[0] != "balls_in_bins"):
        acc = get(name)
        common = {
            "curve": name,
            "label": label,
            "accountant": name,
            "sampling": sampling,
            "bound": acc.bound,
            "neighbouring": params["neighbouring"],
            "delta": delta,
            "dataset_size": n,
            "batch_size": b,
            "steps_per_epoch": per_epoch,
        }
        try:
            for sigma in params["noise_multipliers"]:
                eps = acc.epsilon_curve(
                    _setting(params, sampling, sigma, int(steps.max())), delta, steps
                )
                rows += [
                    {
                        **common,
                        "panel": "epsilon",
                        "noise_multiplier": sigma,
                        "epochs": int(e),
                        "steps": int(t),
                        "epsilon": float(v),
                        "reason": "",
                    }
                    for e, t, v in zip(epochs, steps, eps)
                ]
            sigmas = acc.noise_needed_curve(
                _setting(params, sampling, 1.0, int(steps.max())),
                params["epsilon"],
                delta,
                steps,
                hint=hint if name == "pld" else None,
                rtol=RTOL,
            )
            hint = sigmas if name == "balls_in_bins" else hint
            if acc.bound == "lower":
                sigmas = sigmas * (1 - RTOL)
            rows += [
                {
                    **common,
                    "panel": "sigma",
                    "noise_multiplier": float(s),
                    "epochs": int(e),
                    "steps": int(t),
                    "epsilon": params["epsilon"],
                    "reason": "",
                }
                for e, t, s in zip(epochs, steps, sigmas)
            ]
        except AssumptionError as err:
            rows = [r for r in rows if r["curve"] != name]
            rows += [
                {
                    **common,
                    "panel": panel,
                    "noise_multiplier": np.nan,
                    "epochs": np.nan,
                    "steps": np.nan,
                    "epsilon": np.nan,
                    "reason": str(err),
                }
                for panel in ("epsilon", "sigma")
            ]
    order = {c[0]: i for i, c in enumerate(CURVES)}
    return pd.DataFrame(sorted(rows, key=lambda r: order[r["curve"]]))


def _band(ax, rows: pd.DataFrame, y: str) -> None:
    """Shade where the true value of shuffled batches lies: between
    shuffle_lower and fixed_batches."""
    low, high = (
        rows[rows.curve == name].sort_values("epochs")
        for name in ("shuffle_lower", "fixed_batches")
    )
    if len(low) and len(low) == len(high):
        ax.fill_between(
            low.epochs,
            low[y],
            high[y].to_numpy(),
            color=style.colour("shuffle_lower"),
            alpha=0.12,
            lw=0,
            label="shuffled batches: the true value lies here",
        )


def _curves(ax, rows: pd.DataFrame, y: str) -> None:
    _band(ax, rows, y)
    for name, curve in rows.groupby("curve", sort=False):
        lower = curve.bound.iloc[0] == "lower"
        ax.plot(
            curve.epochs,
            curve[y],
            color=style.colour(name),
            marker="v" if lower else "o",
            ms=3.5,
            lw=1.0 if lower else 1.8,
            ls="--" if lower else "-",
            label=f"{curve.label.iloc[0]}, {name} ({'LOWER bound' if lower else 'upper bound'})",
        )


def draw(table: pd.DataFrame):
    valid = table.dropna(subset=["epsilon", "noise_multiplier"])
    eps_rows, sigma_rows = valid[valid.panel == "epsilon"], valid[valid.panel == "sigma"]
    sigmas = sorted(eps_rows.noise_multiplier.unique())
    fig, axes = style.new_figure(ncols=len(sigmas) + 1)
    first = table.iloc[0]
    for ax, sigma in zip(axes[0], sigmas):
        _curves(ax, eps_rows[eps_rows.noise_multiplier == sigma], "epsilon")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="epochs",
            ylabel=f"ε at δ={first.delta:g}",
            title=f"ε at σ = {sigma:g}",
        )
    right = axes[0][-1]
    _curves(right, sigma_rows, "noise_multiplier")
    target = sigma_rows.epsilon.iloc[0] if len(sigma_rows) else float("nan")
    right.set(
        xscale="log",
        yscale="log",
        xlabel="epochs",
        ylabel="noise multiplier σ",
        title=(
            f"σ needed for ε = {target:g}, δ = {first.delta:g}\n(lower bound: where it reaches"
            " the target)"
        ),
    )
    for ax in axes[0]:
        style.plain_log_ticks(ax)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=3,
        fontsize=8,
        title=(
            f"sampler, accountant (bound) — n = {first.dataset_size}, b = {first.batch_size}, t ="
            f" {first.steps_per_epoch} steps per epoch, {first.neighbouring.replace('_', '/')}"
            " neighbours"
        ),
        title_fontsize=8,
    )
    fig.set_size_inches(4.3 * (len(sigmas) + 1), 4.8)
    refused = table[table.epsilon.isna() | table.noise_multiplier.isna()].drop_duplicates("curve")
    note = (
        "refused: " + "; ".join(f"{r.curve} ({r.reason})" for r in refused.itertuples())
        if len(refused)
        else ""
    )
    if note:
        fig.text(0.01, 0.005, note, fontsize=6.5, va="bottom", wrap=True)
    style.reserve_bottom(fig, 0.24 if note else 0.2)
    return fig
