"""The run's privacy claim: its Setting in canonical units, σ (given or calibrated), ε from
exactly the accountants the run may claim, and beside it the lower bounds and comparisons its
setting admits (reference values, never the run's ε).

Which ones it reports is decided by :func:`dplab.accounting.eligibility.exclusion` from the Setting
and the run's :class:`~dplab.accounting.eligibility.Update`
(:meth:`dplab.training.methods.base.Method.update`), both written to
summary.json so that sweeps and figures decide the same way; only upper bounds are claims.  Loss
constants (λ, β, L) enter the Setting only when the model and the data guarantee them
(:func:`loss_constants`), so hidden-state bounds for convex losses never run on an MLP/CNN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dplab import accounting
from dplab.accounting import Setting, epochs
from dplab.accounting.eligibility import Update, bound, defaults, exclusion, refusal
from dplab.errors import DPLabError
from dplab.schemes import Sampling
from dplab.training.data import largest_norm, logreg_constants
from dplab.training.settings import RunSettings


@dataclass(kw_only=True)
class Plan:
    """Everything the run claims, decided before training starts."""

    setting: Setting | None
    noise_multiplier: float | None
    sigma_source: str
    constants_note: str
    curves: dict[str, np.ndarray] = field(
        default_factory=dict
    )  # claimed (upper-bound) accountant -> ε on the log grid
    references: dict[str, np.ndarray] = field(
        default_factory=dict
    )  # lower bound / comparison -> ε: beside the claims
    release: dict[str, str] = field(default_factory=dict)  # accountant -> trajectory|last_iterate
    excluded: dict[str, str] = field(default_factory=dict)  # accountant -> reason
    details: dict = field(
        default_factory=dict
    )  # method-specific summary entries (dp_mf: the factorization)
    update: Update = Update()  # what the engine did that the Setting does not say (claims.refusal)


def loss_constants(run: RunSettings, info: dict, features) -> tuple[dict, str]:
    """(λ, β, L) of the run's per-example loss when guaranteed, else ({}, why not).

    Only logistic regression on data with a guaranteed feature bound R (info.json, checked
    against the dataset's kind and arrays by :func:`dplab.training.data.load`) has them:
    β = (R²+1)/2 + l2, λ = l2 (if > 0), L = √(2(R²+1)) + l2·D/2 on the ball of diameter D (no L
    when l2 > 0 without projection: the gradient is unbounded) — computed here from R, never read
    from the file.  ``features`` are the records the run trains on: one beyond R (an audit's
    canary) voids them.  They describe the gradient field only if clipping never acts, so they
    are withheld unless C ≥ L.
    """
    if run.model != "logreg":
        return {}, f"model {run.model} is not convex: no loss constants"
    bound = info.get("feature_norm_bound")
    if bound is None:
        return {}, "the dataset records no feature-norm bound: no loss constants"
    largest = largest_norm(features)
    if not largest <= bound * (1 + 1e-6):  # NaN too
        return (
            {},
            (
                f"a record the run trains on has ||x|| = {largest:.6g} > R = {bound:g}: no loss"
                " constants"
            ),
        )
    base = logreg_constants(bound)
    l2, diameter = run.l2, run.diameter
    if l2 > 0 and diameter is None:
        return {}, "l2 > 0 without projection: the gradient is unbounded (no Lipschitz constant)"
    lipschitz = base["lipschitz"] + (l2 * diameter / 2.0 if l2 > 0 else 0.0)
    if run.clip is None or run.clip < lipschitz:
        return (
            {},
            (
                f"clip C={run.clip} < L={lipschitz:.6g}: clipping changes the gradient field, so"
                " the loss constants do not describe the update"
            ),
        )
    out = {"smoothness": base["smoothness"] + l2, "lipschitz": lipschitz}
    if l2 > 0:
        out["strong_convexity"] = l2
    return out, f"logistic regression on data with ||x|| <= R = {bound:g} (docs/training.md)"


def build_setting(
    run: RunSettings, n: int, b: int, dimension: int, sigma: float, constants: dict
) -> Setting:
    """The run's :class:`Setting`, canonical names (docs/units.md)."""
    return Setting(
        noise_multiplier=sigma,
        steps=run.steps,
        sampling=run.sampling,
        neighbouring=run.neighbouring,
        dataset_size=n,
        batch_size=b,
        clip=run.clip,
        lr=run.lr,
        diameter=run.diameter,
        regularization=run.regularization,
        dimension=dimension,
        reshuffle=run.reshuffle if run.sampling == Sampling.SHUFFLE else None,
        **constants,
    )


def check_calibration(run: RunSettings, setting: Setting, update: Update) -> None:
    """DPLabError unless the run's ``accountant`` may calibrate σ for ``setting`` and the
    engine's ``update`` (:meth:`dplab.training.methods.base.Method.update`) at any σ."""
    name = run.accountant
    accounting.get(name).check_limit("delta", run.delta)  # the σ search asks ε at this δ
    why = refusal(name, setting, update, any_sigma=True)
    if why:
        raise DPLabError("accountant", f"cannot calibrate σ with {name!r} for this run: {why}")


def calibrate(run: RunSettings, setting: Setting, update: Update) -> tuple[float, str]:
    """σ reaching ``target_epsilon`` at δ with the run's ``accountant``, or keeping every attacker's
    TPR at ``target_fpr`` within ``target_tpr`` (:func:`dplab.accounting.risk.sigma_for_risk`), and
    how it was obtained (DPLabError if invalid)."""
    check_calibration(run, setting, update)
    if run.target_tpr is not None:
        from dplab.accounting import risk  # pld's package: imported where a run reads risk

        sigma = risk.sigma_for_risk(setting, tpr=run.target_tpr, fpr=run.target_fpr)
        return (
            sigma,
            f"calibrated with pld to attack TPR <= {run.target_tpr} at FPR {run.target_fpr}",
        )
    sigma = accounting.get(run.accountant).sigma(setting, run.target_epsilon, run.delta)
    return (
        sigma,
        f"calibrated with {run.accountant} to epsilon={run.target_epsilon} at delta={run.delta}",
    )


def risk_reading(claim: Plan) -> dict:
    """The attack risk of the run's T steps (:func:`dplab.accounting.risk.risk`: TPR at FPR 0.001,
    0.01, 0.1 and the advantage, docs/risk.md), read from pld's PLD when pld is among the run's
    claims; otherwise {"unavailable": the reason}."""
    if claim.setting is None:
        if claim.noise_multiplier is None:
            return {"unavailable": "non-private run"}
        return {
            "unavailable": (
                f"{claim.update.noise} noise (the matrix mechanism): no privacy-loss distribution"
                " of its steps is computed here (risk for independent noise only, docs/risk.md)"
            )
        }
    return pld_risk([claim.setting], claim.curves, claim.excluded)


def pld_risk(settings: list[Setting], accountants, excluded: dict[str, str]) -> dict:
    """The attack risk of the steps of ``settings`` in turn (one setting, or a run's phases:
    :func:`dplab.accounting.risk.phases_risk`) where pld is among ``accountants``, the run's; else,
    or where pld cannot read it, {"unavailable": the reason} (``excluded``: why an accountant is
    not among them)."""
    if "pld" not in accountants:
        why = excluded.get("pld", "not among the accountants the run reports")
        return {"unavailable": f"pld: {why}"}
    from dplab.accounting import risk  # pld's package: imported where a run reads risk

    try:
        return risk.phases_risk(settings)
    except DPLabError as err:
        return {"unavailable": str(err)}


def unclaimed(setting: Setting, update: Update, excluded: dict[str, str]) -> DPLabError:
    """The refusal of a private run none of whose accountants bounds its ε (``excluded``: name → why
    not), keyed by what the first upper bound's assumptions object to
    (``accountants`` if none do)."""
    key = "accountants"
    for name in excluded:
        if bound(name) == "upper":
            try:
                accounting.get(name).check(setting)
            except DPLabError as err:
                key = err.key
                break
    reasons = "; ".join(f"{name}: {why}" for name, why in list(excluded.items())[:3])
    more = f"; and {len(excluded) - 3} more" if len(excluded) > 3 else ""
    return DPLabError(
        key,
        f"no accountant the run reports bounds its ε, so it would train without a privacy "
        f"claim ({reasons}{more})",
    )


def check_claimable(run: RunSettings, setting: Setting, update: Update) -> None:
    """DPLabError (:func:`unclaimed`) unless one upper-bound accountant the run reports accepts
    ``setting`` with its σ: the assumptions only, no ε computed (config check).  ``accountants: []``
    asks for no ε at all (the engine's tests and benchmarks): nothing to refuse."""
    names = requested_accountants(run)
    if not names:
        return
    excluded = {name: exclusion(name, setting, update) for name in names}
    if not any(why is None and bound(name) == "upper" for name, why in excluded.items()):
        raise unclaimed(setting, update, {k: v for k, v in excluded.items() if v is not None})


def requested_accountants(run: RunSettings) -> list[str]:
    """The accountants a run reports: its ``accountants`` entry, or every registered one of
    independent noise (:func:`dplab.accounting.eligibility.defaults`)."""
    return list(run.accountants) if run.accountants is not None else defaults()


def plan(
    run: RunSettings,
    update: Update,
    n: int,
    b: int,
    dimension: int,
    info: dict,
    grid: list[int],
    features,
) -> Plan:
    """σ, the Setting and ε on ``grid`` (one ``epsilon_curve`` call per accountant the run
    reports: claims, and lower bounds and comparisons as references) of a run whose engine
    ``update`` has no or independent noise; ``features`` are the records the run trains on
    (:func:`loss_constants`)."""
    names = requested_accountants(run)
    if update.noise == "none":
        return Plan(
            setting=None,
            noise_multiplier=None,
            sigma_source="none (non-private)",
            constants_note="",
            excluded={k: exclusion(k, None, update) for k in names},
        )
    constants, note = loss_constants(run, info, features)
    epochs.check(
        run.accountant, build_setting(run, n, b, dimension, 1.0, constants)
    )  # as preflight.check_run
    if run.noise_multiplier is not None:
        sigma, source = float(run.noise_multiplier), "given"
    else:
        probe = build_setting(run, n, b, dimension, 1.0, constants)
        sigma, source = calibrate(run, probe, update)
    setting = build_setting(run, n, b, dimension, sigma, constants)
    out = Plan(
        setting=setting,
        noise_multiplier=sigma,
        sigma_source=source,
        constants_note=note,
        update=update,
    )
    for name in names:
        why = exclusion(name, setting, update)
        if why is None:
            try:
                curve = accounting.get(name).epsilon_curve(setting, run.delta, grid)
            except DPLabError as err:
                why = str(err)
            else:
                if not np.all(np.isfinite(curve)):
                    why = "returned a non-finite epsilon"
                else:
                    if bound(name) == "upper":
                        out.curves[name] = curve
                        out.release[name] = accounting.get(name).release
                    else:
                        out.references[name] = curve
                    continue
        out.excluded[name] = why
    return out
