"""tightness_audit (new): measured lower bounds on ε next to every upper bound, per method and T.

Rows: the audited methods (empirical ε lower bounds of a canary membership attack on the
engine's runs, `dplab audit`) and full-batch noisy GD on losses whose last iterate is Gaussian
(exact ε, :mod:`dplab.audit.exact`).  Columns: ``upper_<accountant>`` (every accountant valid for
the setting, ε at the run's δ), ``release_<accountant>``, ``exact_epsilon``, and per observation
o ∈ {last_iterate, trajectory}: ``lower_<o>`` (point estimate), ``lower_<o>_ci_low`` (the lower
bound, valid with probability ≥ ``confidence``), ``lower_<o>_ci_high``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dplab import accounting, pipeline
from dplab.accounting import Setting
from dplab.accounting.claims import analysed_update, refusal
from dplab.audit import exact
from dplab.audit.membership import OBSERVATIONS
from dplab.errors import DPLabError
from dplab.figures import style

TITLE = "Measured ε lower bounds (audit, exact) next to every upper bound"
SOURCE = "new"


def check(config: dict, params: dict) -> None:
    audit = params["audit"]
    if audit not in config.get("audits", {}):
        raise DPLabError("figures.tightness_audit.audit", f"unknown audit {audit!r}")
    lr = config["audits"][audit]["run"].get("lr", 0.1)
    if "quadratic" in params.get("exact_losses", ["quadratic"]) and not 0 < lr < 1:
        raise DPLabError("figures.tightness_audit.exact_losses", f"the quadratic loss (002 Thm 3) needs the audit's lr < 1; got {lr}")


def inputs(config: dict, params: dict) -> list[str]:
    return [pipeline.audit_file(params["audit"])]


def _lower(audit: pd.DataFrame) -> pd.DataFrame:
    keys = ["method", "steps"]
    first = audit[audit.observation == OBSERVATIONS[0]].drop(
        columns=["observation", "threshold", "tp", "fp", "positives", "negatives",
                 "epsilon_lower", "epsilon_lower_ci_low", "epsilon_lower_ci_high"])
    for obs in OBSERVATIONS:
        part = audit[audit.observation == obs].set_index(keys)
        cols = {"epsilon_lower": f"lower_{obs}", "epsilon_lower_ci_low": f"lower_{obs}_ci_low",
                "epsilon_lower_ci_high": f"lower_{obs}_ci_high", "tp": f"tp_{obs}", "fp": f"fp_{obs}"}
        first = first.join(part[list(cols)].rename(columns=cols), on=keys)
    return first


def exact_rows(base: pd.Series, steps: np.ndarray, losses: list[str]) -> pd.DataFrame:
    """Full-batch noisy GD with the audit's σ, C, η, n, δ: exact ε and every valid upper bound."""
    rows = []
    for loss in losses:
        constants = {"strong_convexity": 1.0, "smoothness": 1.0} if loss == "quadratic" else {}
        setting = Setting(noise_multiplier=float(base["noise_multiplier"]), steps=int(steps.max()), sampling="full_batch",
                          neighbouring="replace_one", dataset_size=int(base["dataset_size"]), batch_size=int(base["dataset_size"]),
                          clip=float(base["clip"]), lr=float(base["lr"]), **constants)
        frame = pd.DataFrame({"method": f"noisy_gd_{loss}", "model": loss, "steps": steps, "delta": base["delta"],
                              "noise_multiplier": setting.noise_multiplier, "sampling_rate": 1.0, "sampling": "full_batch",
                              "neighbouring": "replace_one", "clip": setting.clip, "lr": setting.lr,
                              "dataset_size": setting.dataset_size, "batch_size": setting.dataset_size})
        frame["exact_epsilon"] = exact.exact_epsilon(base["delta"], setting.noise_multiplier, setting.lr, steps, loss,
                                                     clip=setting.clip)
        for name in accounting.names():
            acc = accounting.get(name)
            if refusal(name, setting, analysed_update(acc.release)):  # dplab.accounting.claims decides
                continue
            try:
                curve = acc.epsilon_curve(setting, base["delta"], steps)
            except (DPLabError, OverflowError):
                continue
            frame[f"upper_{name}"] = curve
            frame[f"release_{name}"] = acc.describe()["release"]
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


def table(inputs: list[str], params: dict) -> pd.DataFrame:
    audit = pd.read_csv(inputs[0])
    lower = _lower(audit)
    steps = np.array(sorted(audit.steps.unique()))
    exact_part = exact_rows(audit.iloc[0], steps, params.get("exact_losses", ["quadratic", "linear"]))
    out = pd.concat([lower, exact_part], ignore_index=True)
    first = ["method", "model", "steps", "delta", "noise_multiplier", "sampling_rate", "sampling", "neighbouring"]
    bounds = sorted(c for c in out if c.startswith(("upper_", "exact_", "lower_")))
    rest = [c for c in out if c not in first and c not in bounds]
    return out[first + bounds + rest]


def draw(table: pd.DataFrame):
    methods = list(dict.fromkeys(table.method))
    ncols = min(3, len(methods))
    nrows = -(-len(methods) // ncols)
    fig, axes = style.new_figure(ncols=ncols, nrows=nrows)
    flat = axes.flatten()
    for ax, method in zip(flat, methods):
        rows = table[table.method == method].sort_values("steps")
        for col in [c for c in rows if c.startswith("upper_") and rows[c].notna().any()]:
            name = col.removeprefix("upper_")
            ax.plot(rows.steps, rows[col], color=style.colour(name), marker=".",
                    label=f"{name} ({str(rows[f'release_{name}'].iloc[0]).replace('_', ' ')})")
        if "exact_epsilon" in rows and rows.exact_epsilon.notna().any():
            ax.plot(rows.steps, rows.exact_epsilon, color="#d62728", ls="--", lw=2, label="exact (Gaussian last iterate)")
        for obs, marker, shift in (("last_iterate", "o", 0.96), ("trajectory", "s", 1.04)):
            col = f"lower_{obs}_ci_low"
            if col in rows and rows[col].notna().any():
                ok = rows[col].notna()
                lo, hi = rows[col][ok], rows[f"lower_{obs}_ci_high"][ok].clip(upper=50)
                ax.errorbar(rows.steps[ok] * shift, lo, yerr=[np.zeros(len(lo)), (hi - lo).clip(lower=0)], fmt=marker,
                            mfc="white", capsize=2, color="#444444" if obs == "last_iterate" else "#8c564b",
                            label=f"audit lower bound, {obs.replace('_', ' ')} (bar: to CI high)")
        conf = table.get("confidence", pd.Series([0.95])).dropna()
        ax.set(xscale="log", yscale="symlog", xlabel="steps T", ylabel="ε", title=method.replace("_", " "))
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=6, title=f"δ={rows.delta.iloc[0]:.0e}, σ={rows.noise_multiplier.iloc[0]:.3g}; "
                  f"lower: {conf.iloc[0]:.0%} CP", title_fontsize=6)
    for ax in flat[len(methods):]:
        ax.set_visible(False)
    return fig
