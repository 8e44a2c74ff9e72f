"""mf_scale: error and optimization time of the MF strategies production uses,
vs the number of steps T.

For each T and participation pattern (single; k = ``participations`` at least s = ⌊T/k⌋ apart) the
table holds, per strategy, the squared error of the privatized prefix sums per unit noise
(``mean_error``, ``max_error``: :meth:`dplab.mf.toeplitz.ToeplitzFactorization.errors`, noise
calibrated to the exact sensitivity under the pattern) and the wall-clock seconds the optimization
took on the machine that computed the table:

- ``identity``: DP-SGD (C = I), nothing to optimize;
- ``banded_toeplitz``: b-banded Toeplitz C (:func:`dplab.mf.toeplitz.banded_toeplitz`);
- ``blt``: buffered linear Toeplitz C with k buffers (:func:`dplab.mf.blt.blt`);
- ``optimal``: the dense optimum of the mean error (:func:`dplab.mf.factorizations.optimal`, O(T²)
  memory), single participation only and only for T ≤ ``dense_max_steps``.

A sensitivity that is only an upper bound is a refusal (the figure would understate the error).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from dplab.errors import DPLabError
from dplab.figures import Inputs, style

TITLE = (
    "MF at scale: error and optimization time of identity, banded Toeplitz, BLT and the dense"
    " optimum vs T"
)
SOURCE = "new (Choquette-Choo et al. 2023 banded MF, Dvijotham et al. 2024 BLT)"
CAPTION = (
    "the squared error of the privatized prefix sums per unit noise multiplier (the optimized"
    " objective, mean or max over the T steps; noise calibrated to the exact sensitivity of C) of"
    " DP-SGD (identity, C = I), a banded Toeplitz C, a BLT C (buffered linear Toeplitz) and the"
    " dense optimum of the mean error (single participation, only up to the configured T: T×T"
    " matrices), for T from 10² up, under single participation (top) and k participations at least"
    " ⌊T/k⌋ steps apart (bottom); right: the wall-clock seconds each optimization took on the"
    " machine that computed the table (load-dependent; identity has nothing to optimize and is not"
    " drawn there; benchmarks/mf_scale.py compares with jax_privacy)."
)
INPUTS: dict[str, type] = {}
KEY = "figures.mf_scale"
STRATEGIES = ("identity", "banded_toeplitz", "blt", "optimal")

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "error and optimization time of identity, banded Toeplitz, BLT and the dense optimum vs "
        "T; defaults keep the default run to seconds"
    ),
    "properties": {
        "steps": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "integer", "minimum": 2, "maximum": 100000},
            "default": [100, 300, 1000, 3000, 10000],
            "description": (
                "the T grid (banded Toeplitz and BLT cost O(T·b) and O(T·k) per L-BFGS step)"
            ),
        },
        "bands": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1024,
            "default": 16,
            "description": "b, bands of the banded Toeplitz C (<= the smallest T)",
        },
        "buffers": {
            "type": "integer",
            "minimum": 1,
            "maximum": 15,
            "default": 4,
            "description": "k, buffers of the BLT (<= the smallest T/2)",
        },
        "objective": {
            "enum": ["mean", "max"],
            "default": "max",
            "description": (
                "what banded Toeplitz and BLT minimize (the dense optimum minimizes the mean)"
            ),
        },
        "participations": {
            "type": "integer",
            "minimum": 2,
            "maximum": 1000,
            "default": 4,
            "description": "k of the multiple-participation panels, at least ⌊T/k⌋ steps apart",
        },
        "dense_max_steps": {
            "type": "integer",
            "minimum": 0,
            "maximum": 6688,
            "default": 300,
            "description": "largest T of the dense optimum (O(T²) memory, O(T³)-ish time; 0: none)",
        },
    },
}


def check(config: dict, params: dict) -> None:
    steps = params["steps"]
    if len(set(steps)) != len(steps):
        raise DPLabError(f"{KEY}.steps", f"has repeated values: {steps}")
    if params["bands"] > min(steps):
        raise DPLabError(
            f"{KEY}.bands", f"must be <= the smallest T = {min(steps)}; got {params['bands']}"
        )
    if 2 * params["buffers"] > min(steps):
        raise DPLabError(
            f"{KEY}.buffers",
            f"must be <= the smallest T/2 = {min(steps) // 2}; got {params['buffers']}",
        )
    if params["participations"] > min(steps):
        raise DPLabError(
            f"{KEY}.participations",
            f"must be <= the smallest T = {min(steps)}; got {params['participations']}",
        )


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def _timed(build):
    start = time.perf_counter()
    fact = build()
    return fact, time.perf_counter() - start


def _factorization(strategy: str, steps: int, params: dict, k: int, s: int):
    from dplab.mf import blt, factorizations, toeplitz, workload

    objective = params["objective"]
    if strategy == "identity":
        return _timed(lambda: toeplitz.ToeplitzFactorization("identity", np.ones(1), steps))
    if strategy == "banded_toeplitz":
        return _timed(lambda: toeplitz.banded_toeplitz(steps, params["bands"], objective, k, s))
    if strategy == "blt":
        return _timed(lambda: blt.blt(steps, params["buffers"], objective, k, s))
    return _timed(lambda: factorizations.optimal(workload.prefix_sum(steps)))


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per (participation, strategy, T): errors, sensitivity and optimization seconds."""
    rows = []
    for steps in sorted(params["steps"]):
        for k in (1, params["participations"]):
            s = steps if k == 1 else steps // k
            for strategy in STRATEGIES:
                if strategy == "optimal" and (k > 1 or steps > params["dense_max_steps"]):
                    continue
                fact, seconds = _factorization(strategy, steps, params, k, s)
                errors = fact.errors(k, s)
                if not errors["sensitivity_exact"]:
                    raise DPLabError(
                        KEY,
                        f"{strategy} at T = {steps}, k = {k}, s = {s}: the sensitivity is only an "
                        f"upper bound ({errors['sensitivity_method']})",
                    )
                rows.append(
                    {
                        "participation": "single" if k == 1 else "multiple",
                        "participations": k,
                        "min_separation": s,
                        "strategy": strategy,
                        "steps": steps,
                        "objective": "mean" if strategy == "optimal" else params["objective"],
                        "bands": params["bands"] if strategy == "banded_toeplitz" else fact.bands,
                        "buffers": params["buffers"] if strategy == "blt" else 0,
                        "sensitivity": errors["sensitivity"],
                        "mean_error": errors["mean_error"],
                        "max_error": errors["max_error"],
                        "optimization_seconds": seconds,
                    }
                )
    return pd.DataFrame(rows)


COLOURS = {
    "identity": "#7f7f7f",
    "banded_toeplitz": "#1f77b4",
    "blt": "#d62728",
    "optimal": "#000000",
}


def _label(row) -> str:
    if row.strategy == "banded_toeplitz":
        return f"banded Toeplitz, {row.bands} bands"
    if row.strategy == "blt":
        return f"BLT, {row.buffers} buffers"
    return "identity (DP-SGD)" if row.strategy == "identity" else "dense optimum (mean error)"


def draw(table: pd.DataFrame):
    patterns = list(dict.fromkeys(table.participation))
    fig, axes = style.new_figure(ncols=2, nrows=len(patterns))
    objective = table.loc[table.strategy != "optimal", "objective"].iloc[0]
    for row_axes, pattern in zip(axes, patterns):
        part = table[table.participation == pattern]
        k = int(part.participations.iloc[0])
        for strategy, g in part.groupby("strategy", sort=False):
            g = g.sort_values("steps")
            kw = {"color": COLOURS[strategy], "marker": "o", "label": _label(g.iloc[0])}
            row_axes[0].plot(g.steps, g[f"{objective}_error"], **kw)
            if strategy != "identity":  # nothing to optimize
                row_axes[1].plot(g.steps, g.optimization_seconds, **kw)
        who = "single participation" if k == 1 else f"k = {k} participations, ≥ ⌊T/k⌋ apart"
        row_axes[0].set(
            xscale="log",
            yscale="log",
            xlabel="steps T",
            ylabel=f"{objective} squared error per unit σ",
            title=who,
        )
        row_axes[1].set(
            xscale="log",
            yscale="log",
            xlabel="steps T",
            ylabel="optimization seconds (wall clock)",
            title=who,
        )
        for ax in row_axes:
            style.plain_log_ticks(ax)
        row_axes[0].legend()
    fig.suptitle("MF strategies at scale: prefix-sum error and optimization time vs T", fontsize=10)
    return fig
