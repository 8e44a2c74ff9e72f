"""mf_structure (004 §4.3, "Structure of B and C"): what the factorization A = B·C looks like.

Input: saved factorizations (``results/mf/<key>.npz``, rule ``factorization``) — the one a grid's
dp_mf variant with a dense strategy trains with (``grid``; banded_toeplitz and blt variants, saved
without T×T matrices, are not drawn), or one given by ``strategy``/``steps``/``bands`` — and the
strategies of ``compare`` at the same T.  Four panels, as 004's three figures:

- heatmaps of B = A·C⁻¹ and C of the main factorization (lower triangle: both are lower-triangular);
- the distribution of the entries of C⁻¹ (lower triangle, i ≥ j) per factorization: 004 notes a
  negative cluster, the correlation that makes noise cancel;
- the per-step noise: θ_t = θ₀ − η·A[t,:](G + C⁻¹Z), so the noise on θ_t has std σ·‖(A·C⁻¹)[t,:]‖
  per unit of noise std on the clipped sum: ‖A[t,:]‖ = √(t+1) for DP-SGD (C = I), ‖B[t,:]‖ for MF.
  Per unit σ, before calibration (every C here has unit columns:
  single-participation sensitivity 1).

Tidy table, one row per plotted point: ``panel`` ∈ {heatmap, histogram, row_norm},
``factorization``, ``matrix`` (B, C, C_inv, A), ``i``, ``j``, ``value`` (heatmap cell; row_norm:
i = step t, value = norm), ``bin_low``, ``bin_high``, ``count`` (histogram).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab import entries, layout
from dplab.errors import DPLabError
from dplab.figures import Inputs, style

TITLE = (
    "Structure of the matrix factorization A = B·C: B, C, the entries of C⁻¹, per-step noise of A"
    " vs A·C⁻¹"
)
SOURCE = "004 §4.3 (Structure of B and C: matrix_structure, distribution_c_inv, noise_acc)"
CAPTION = (
    "reproduces 004 §4.3's three figures on the structure of the matrix factorization A = B·C of"
    " the T-step prefix-sum workload, for the factorization the dp_mf runs train with (the grid's"
    " banded C with 16 bands, T = 200; columns of unit norm) and the optimal single-participation"
    " factorization: top, heatmaps of the decoder B = A·C⁻¹ and the encoder C (log colour scale,"
    " lower triangle; blank = 0); bottom left, the distribution of the entries of C⁻¹ (the noise"
    " correlation: a negative cluster makes noise cancel across steps); bottom right, the standard"
    " deviation of the noise on θ_t per unit noise multiplier, ‖A[t,:]‖ = √(t+1) for DP-SGD against"
    " ‖(A·C⁻¹)[t,:]‖ for each factorization (before σ is calibrated; amplification lowers the"
    " banded σ further, see mf_vs_dpsgd)."
)
INPUTS: dict[str, type] = {"factorizations": list}
KEY = "figures.mf_structure"

#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "004 §4.3 structure of B and C; the factorization of a grid's dp_mf variant (grid) or "
        "one given (strategy, steps, bands)"
    ),
    "properties": {
        "grid": {
            "type": "string",
            "description": "take strategy, steps and bands from this grid's dp_mf variant",
        },
        "strategy": {
            "enum": ["identity", "sqrt", "optimal", "banded"],
            "description": "the factorization to draw (without grid)",
        },
        "steps": {"type": "integer", "minimum": 2, "description": "T (without grid)"},
        "bands": {
            "type": "integer",
            "minimum": 1,
            "description": "bands of C (strategy banded, without grid)",
        },
        "compare": {
            "type": "array",
            "items": {"enum": ["identity", "sqrt", "optimal"]},
            "default": ["optimal"],
            "description": (
                "strategies at the same T whose C⁻¹ entries and per-step noise are drawn for "
                "comparison"
            ),
        },
        "bins": {
            "type": "integer",
            "minimum": 5,
            "default": 60,
            "description": "histogram bins of the C⁻¹ entries",
        },
    },
}


def _main_spec(config: dict, params: dict) -> tuple[str, dict]:
    if "grid" in params:
        from dplab.training.methods import run_factorization  # torch: only for a grid's runs

        if {"strategy", "steps", "bands"} & params.keys():
            raise DPLabError(KEY, "give either `grid` or `strategy`/`steps`/`bands`, not both")
        grid = params["grid"]
        if grid not in config.get("grids", {}):
            raise DPLabError(
                f"{KEY}.grid",
                f"unknown grid {grid!r}; defined: {', '.join(sorted(config.get('grids', {})))}",
            )
        # the dense factorizations (banded_toeplitz and blt are saved without their T×T matrices)
        runs = [
            run
            for run in entries.grid_run_entries(config, grid)
            if run_factorization(run) and run["strategy"] not in layout.TOEPLITZ_STRATEGIES
        ]
        if not runs:
            raise DPLabError(
                f"{KEY}.grid",
                f"grid {grid!r} has no dp_mf variant with a dense strategy "
                "(identity, sqrt, optimal, banded)",
            )
        keys = {run_factorization(r) for r in runs}
        if len(keys) > 1:
            raise DPLabError(
                f"{KEY}.grid",
                f"grid {grid!r} trains with several factorizations ({', '.join(sorted(keys))})",
            )
        run = runs[0]
        return layout.mf_spec(run["strategy"], run["steps"], run.get("bands"))
    if "strategy" not in params or "steps" not in params:
        raise DPLabError(KEY, "give `grid` (a grid with a dp_mf variant) or `strategy` and `steps`")
    if (params["strategy"] == "banded") != ("bands" in params):
        raise DPLabError(f"{KEY}.bands", "is required for strategy banded and only applies to it")
    return layout.mf_spec(params["strategy"], params["steps"], params.get("bands"))


def factorizations(config: dict, params: dict) -> dict[str, dict]:
    """The factorizations the table reads: the main one, then ``compare`` at the same T."""
    key, spec = _main_spec(config, params)
    specs = {key: spec}
    for strategy in params.get("compare", []):
        if strategy == "banded":
            raise DPLabError(
                f"{KEY}.compare", "banded needs a number of bands: make it the main factorization"
            )
        other, other_spec = layout.mf_spec(strategy, spec["steps"], None)
        specs.setdefault(other, other_spec)
    return specs


def check(config: dict, params: dict) -> None:
    factorizations(config, params)


def inputs(config: dict, params: dict) -> Inputs:
    return {"factorizations": [layout.mf_file(key) for key in factorizations(config, params)]}


def _label(fact) -> str:
    return f"{fact.strategy}-{fact.bands}" if fact.strategy == "banded" else fact.strategy


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    from dplab.mf.saved import load

    if not inputs["factorizations"]:
        raise DPLabError(KEY, "no factorization files given")
    bins = params.get("bins", 60)
    facts = [load(path)[0] for path in inputs["factorizations"]]
    T = facts[0].steps
    if any(f.steps != T for f in facts):
        raise DPLabError(KEY, f"factorizations of different T: {[f.steps for f in facts]}")
    rows = []
    main = facts[0]
    i, j = np.tril_indices(T)
    for name, M in (("B", main.decoder), ("C", main.encoder)):
        rows.append(
            pd.DataFrame(
                {
                    "panel": "heatmap",
                    "factorization": _label(main),
                    "matrix": name,
                    "i": i,
                    "j": j,
                    "value": M[i, j],
                }
            )
        )
    inverses = {
        _label(f): np.linalg.inv(f.encoder)[i, j] for f in facts
    }  # C⁻¹ is lower-triangular too
    edges = np.histogram_bin_edges(np.concatenate(list(inverses.values())), bins=bins)
    for label, values in inverses.items():
        counts, _ = np.histogram(values, bins=edges)
        rows.append(
            pd.DataFrame(
                {
                    "panel": "histogram",
                    "factorization": label,
                    "matrix": "C_inv",
                    "bin_low": edges[:-1],
                    "bin_high": edges[1:],
                    "count": counts,
                }
            )
        )
    steps = np.arange(T)
    rows.append(
        pd.DataFrame(
            {
                "panel": "row_norm",
                "factorization": "identity (DP-SGD)",
                "matrix": "A",
                "i": steps,
                "value": np.linalg.norm(main.workload, axis=1),
            }
        )
    )
    for f in facts:
        rows.append(
            pd.DataFrame(
                {
                    "panel": "row_norm",
                    "factorization": _label(f),
                    "matrix": "B",
                    "i": steps,
                    "value": np.linalg.norm(f.decoder, axis=1),
                }
            )
        )
    out = pd.concat(rows, ignore_index=True)
    return out[
        ["panel", "factorization", "matrix", "i", "j", "value", "bin_low", "bin_high", "count"]
    ]


def _heatmap(ax, cells: pd.DataFrame, title: str, fig) -> None:
    from matplotlib.colors import LogNorm, SymLogNorm
    from matplotlib.ticker import FuncFormatter

    T = int(cells.i.max()) + 1
    grid = np.full((T, T), np.nan)
    grid[cells.i.astype(int), cells.j.astype(int)] = cells.value
    values = cells.value.to_numpy()
    nonzero = np.abs(values[values != 0])
    if np.all(values >= 0):  # log scale on the non-zero entries; zeros (outside the band) blank
        grid[grid == 0] = np.nan
        norm, cmap, scale = LogNorm(nonzero.min(), nonzero.max()), "viridis", "log"
    else:  # signed entries: symmetric log scale around 0
        top = nonzero.max()
        norm, cmap, scale = (
            SymLogNorm(linthresh=max(np.quantile(nonzero, 0.05), top * 1e-4), vmin=-top, vmax=top),
            "RdBu_r",
            "symlog",
        )
    image = ax.imshow(grid, norm=norm, cmap=cmap, interpolation="nearest")
    bar = fig.colorbar(image, ax=ax, shrink=0.85, label=f"entry ({scale} scale)")
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bar.ax.yaxis.set_minor_formatter(
        FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")
    )
    ax.set(
        title=title, xlabel="column j (step whose gradient / noise enters)", ylabel="row i (step)"
    )
    ax.grid(False)


def draw(table: pd.DataFrame):
    fig, axes = style.new_figure(ncols=2, nrows=2)
    heat = table[table.panel == "heatmap"]
    main = heat.factorization.iloc[0]
    T = int(heat.i.max()) + 1
    _heatmap(axes[0][0], heat[heat.matrix == "B"], f"decoder B = A·C⁻¹ ({main}, T = {T})", fig)
    _heatmap(axes[0][1], heat[heat.matrix == "C"], f"encoder C ({main}, unit columns)", fig)
    ax = axes[1][0]
    hist = table[table.panel == "histogram"]
    for label, g in hist.groupby("factorization", sort=False):
        ax.stairs(
            g["count"].to_numpy(),
            np.append(g.bin_low.to_numpy(), g.bin_high.iloc[-1]),
            label=label,
            linewidth=1.4,
        )
    ax.axvline(0, color="#999999", linewidth=0.8)
    ax.set_yscale("log")
    ax.set(
        title="entries of C⁻¹ (lower triangle)",
        xlabel="value of C⁻¹[i, j]",
        ylabel="number of entries",
    )
    ax.legend()
    ax = axes[1][1]
    norms = table[table.panel == "row_norm"]
    for (label, matrix), g in norms.groupby(["factorization", "matrix"], sort=False):
        dashed = matrix == "A"
        ax.plot(
            g.i,
            g.value,
            "--" if dashed else "-",
            color="#7f7f7f" if dashed else None,
            label=f"‖A[t,:]‖, {label}" if dashed else f"‖(A·C⁻¹)[t,:]‖, {label}",
        )
    ax.set(
        title="noise std on θ_t per unit σ (before calibration)", xlabel="step t", ylabel="row norm"
    )
    ax.legend()
    return fig
