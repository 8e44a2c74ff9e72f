"""Reading training results for the figures drawn from runs: config cross-checks, file lists,
one description per run (method, accountant, σ) taken from its summary.json, the ε it may
claim (:func:`claims`, decided anew by :func:`dplab.accounting.eligibility.refusal`), and the lower
bounds and comparisons reported beside it (:func:`references`: never a claim), and the attack
risk its summary.json records beside its ε (:func:`risk_columns`, in every description)."""

from __future__ import annotations

import pandas as pd

from dplab import layout
from dplab.accounting import risk
from dplab.accounting.eligibility import (
    KEYS,
    bound,
    exclusion,
    from_summary,
    phases_of,
    phases_refusal,
    refusal,
)
from dplab.errors import DPLabError
from dplab.inputs import run_metrics
from dplab.training.summary import RunSummary


def display_name(method: str) -> str:
    """The name figures show for ``method``: its :attr:`~dplab.training.methods.base.Method.display`
    (the method itself if no module of :mod:`dplab.training.methods` holds it)."""
    from dplab.training.methods import METHODS  # torch: only where a figure names a method

    return METHODS[method].display if method in METHODS else method


def check_runs(config: dict, key: str, names: list[str], private: bool | None = None) -> None:
    """Every name is a run of config `runs` (private/non-private when asked)."""
    from dplab.training.methods import METHODS

    for name in names:
        if name not in config["runs"]:
            raise DPLabError(
                key, f"unknown run {name!r}; defined: {', '.join(sorted(config['runs']))}"
            )
        method = config["runs"][name]["method"]
        is_private = METHODS[method].private if method in METHODS else True
        if private is not None and is_private != private:
            raise DPLabError(
                key,
                f"run {name!r} (method {method}) must be {'private' if private else 'non-private'}",
            )


def run_inputs(names: list[str]) -> dict[str, list[str]]:
    """The inputs ``summaries`` (summary.json) and ``metrics`` (metrics.csv)
    of the runs, in order."""
    return {
        "summaries": [layout.run_files(name)["summary"] for name in names],
        "metrics": [layout.run_files(name)["metrics"] for name in names],
    }


def load_pairs(inputs: dict[str, list[str]]) -> list[tuple[RunSummary, pd.DataFrame]]:
    """(summary, metrics) per run from the inputs of :func:`run_inputs` (a ValueError if
    their numbers differ)."""
    summaries = [RunSummary.read(s) for s in inputs["summaries"]]
    return [
        (s, run_metrics(m, s.settings.steps))
        for s, m in zip(summaries, inputs["metrics"], strict=True)
    ]


def describe(summary: RunSummary) -> dict:
    """The columns every run-based table repeats: what was run and what ε it claims (a run in
    phases: each value its phases differ in, "1.2 → 2", from :func:`phased_values`)."""
    run = summary.settings
    setting, _ = from_summary(summary)
    return {
        "run": run.name or "",
        "method": run.method,
        "model": run.model,
        "dataset": summary.dataset.name,
        "steps": run.steps,
        "sampling": summary.sampling,
        "sampling_rate": setting.sampling_rate if setting is not None else None,
        "batch_size": summary.batch_size,
        "lr": run.lr,
        "clip": run.clip,
        "noise_multiplier": summary.noise_multiplier,
        "accountant": run.accountant or "",
        "target_epsilon": run.target_epsilon,
        "delta": summary.delta,
        "neighbouring": summary.neighbouring,
        **phased_values(summary),
        **risk_columns(summary),
    }


#: the columns of :func:`describe` a run's phases may set each on their own
PHASED = ("sampling_rate", "batch_size", "lr", "clip", "noise_multiplier")


def phased_values(summary: RunSummary) -> dict:
    """A run in phases: each column of :data:`PHASED`, its phases' values in order ("64 → 128")
    where they differ, else their one value; {} for another run."""
    settings = phases_of(summary)
    if settings is None:
        return {}
    out = {}
    for column in PHASED:
        values = [getattr(s, column) for s in settings]
        same = all(v == values[0] for v in values)
        out[column] = values[0] if same else " → ".join(f"{v:.4g}" for v in values)
    return out


def shown(value, spec: str = "g") -> str:
    """A :func:`describe` value in a caption: a number formatted by ``spec``; a run in phases'
    values ("1.2 → 2", :func:`phased_values`) as they are."""
    return value if isinstance(value, str) else format(value, spec)


def risk_columns(summary: RunSummary) -> dict:
    """The attack risk the run's summary.json records beside its ε
    (:data:`dplab.accounting.risk.COLUMNS`: TPR at each FPR, advantage, ``risk_note``), or empty
    values and why there is none."""
    reading = summary.risk
    if "tpr" not in reading:
        return {
            **{c: float("nan") for c in risk.COLUMNS[:-1]},
            "risk_note": f"no risk: {reading['unavailable']}",
        }
    tpr = dict(zip(reading["fpr"], reading["tpr"]))
    return {
        **{f"tpr_at_fpr_{a:g}": tpr.get(a, float("nan")) for a in risk.FPRS},
        "advantage": reading["advantage"],
        "risk_note": f"{reading['neighbouring']}; {reading['method']}",
    }


def claims(summary: RunSummary) -> dict[str, str | None]:
    """Every accountant a run's summary.json reports or excludes → None if the run may claim its ε,
    else why not.  Reported ones are decided anew from the summary's setting and update
    (:func:`dplab.accounting.eligibility.refusal`), so an ε that the function does not grant never
    reaches a table, whatever the file says (a run in phases: from each phase's setting and their
    composed event); excluded ones keep the run's reason."""
    setting, update = from_summary(summary)
    if (settings := phases_of(summary)) is not None:  # a run in phases: its composed event
        out = {name: phases_refusal(name, settings, update) for name in summary.epsilon}
    else:
        out = {name: refusal(name, setting, update) for name in summary.epsilon}
    out.update({name: why for name, why in summary.excluded_accountants.items() if name not in out})
    return out


def claimed_epsilon(summary: RunSummary, accountant: str, key: str) -> float:
    """The run's final ε from ``accountant``; a DPLabError (``key``) if the run may not claim it."""
    why = claims(summary).get(accountant, f"the run reports no ε from {accountant!r}")
    if why:
        raise DPLabError(
            key, f"run {summary.settings.name or ''!r} has no valid ε from {accountant!r}: {why}"
        )
    return float(summary.epsilon[accountant])


def references(summary: RunSummary) -> dict[str, str | None]:
    """Every lower bound and comparison a run's summary.json reports beside its claims
    (``epsilon_lower``, ``epsilon_comparison``) → None if the run's setting admits it (decided
    anew by :func:`dplab.accounting.eligibility.exclusion`; a name under another bound's key is
    refused), else why not.  A table labels these rows with their ``bound``:
    they are never a claim."""
    setting, update = from_summary(summary)
    out = {}
    for kind, reported in (
        ("lower", summary.epsilon_lower),
        ("comparison", summary.epsilon_comparison),
    ):
        for name in reported:
            out[name] = (
                exclusion(name, setting, update)
                if bound(name) == kind
                else f"reported under {KEYS[kind]!r}, but {name} is a {bound(name)} bound"
            )
    return out
