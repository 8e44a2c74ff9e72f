"""The run's privacy claim: its Setting in canonical units, σ (given or calibrated), and ε from
exactly the accountants whose assumptions the run satisfies.

Validity is decided in two places: the accountant's own ``check(setting)`` (sampling,
neighbouring, parameter ranges, required loss constants), and :func:`training_mismatch` for what
only the training side knows (how the update normalises the clipped sum).  Loss constants
(λ, β, L) enter the Setting only when the model and data guarantee them
(:func:`loss_constants`), so hidden-state bounds for convex losses never run on an MLP/CNN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dplab import accounting
from dplab.accounting import Setting
from dplab.errors import DPLabError
from dplab.training.methods import METHODS


@dataclass
class Plan:
    """Everything the run claims, decided before training starts."""

    setting: Setting | None
    noise_multiplier: float | None
    sigma_source: str
    constants_note: str
    curves: dict[str, np.ndarray] = field(default_factory=dict)  # accountant -> ε on the log grid
    release: dict[str, str] = field(default_factory=dict)  # accountant -> trajectory|last_iterate
    excluded: dict[str, str] = field(default_factory=dict)  # accountant -> reason
    details: dict = field(default_factory=dict)  # method-specific summary entries (dp_mf: the factorization)


def loss_constants(cfg: dict, info: dict) -> tuple[dict, str]:
    """(λ, β, L) of the run's per-example loss when guaranteed, else ({}, why not).

    Only logistic regression on data with a guaranteed feature bound R (info.json) has them:
    β = (R²+1)/2 + l2, λ = l2 (if > 0), L = √(2(R²+1)) + l2·D/2 on the ball of diameter D (no L
    when l2 > 0 without projection: the gradient is unbounded).  They describe the gradient
    field only if clipping never acts, so they are withheld unless C ≥ L.
    """
    if cfg["model"] != "logreg":
        return {}, f"model {cfg['model']} is not convex: no loss constants"
    base = info.get("logreg_constants")
    if not base:
        return {}, "the dataset records no feature-norm bound: no loss constants"
    l2, diameter = cfg["l2"], cfg["diameter"]
    if l2 > 0 and diameter is None:
        return {}, "l2 > 0 without projection: the gradient is unbounded (no Lipschitz constant)"
    lipschitz = base["lipschitz"] + (l2 * diameter / 2.0 if l2 > 0 else 0.0)
    if cfg["clip"] is None or cfg["clip"] < lipschitz:
        return {}, f"clip C={cfg['clip']} < L={lipschitz:.6g}: clipping changes the gradient field, so the loss constants do not describe the update"
    out = {"smoothness": base["smoothness"] + l2, "lipschitz": lipschitz}
    if l2 > 0:
        out["strong_convexity"] = l2
    return out, "logistic regression on data with ||x|| <= R (docs/training.md)"


def build_setting(cfg: dict, n: int, b: int, dimension: int, sigma: float, constants: dict) -> Setting:
    """The run's :class:`Setting`, canonical names (docs/units.md)."""
    return Setting(
        noise_multiplier=sigma,
        steps=cfg["steps"],
        sampling=cfg["sampling"],
        neighbouring=cfg["neighbouring"],
        dataset_size=n,
        batch_size=b,
        clip=cfg["clip"],
        lr=cfg["lr"],
        diameter=cfg["diameter"],
        regularization=cfg["regularization"],
        dimension=dimension,
        **constants,
    )


def training_mismatch(cfg: dict, release: str) -> str | None:
    """Why an accountant of the given ``release`` kind does not describe this run's update,
    for reasons the Setting cannot express (None: no objection)."""
    if cfg["sampling"] != "poisson":
        return None
    if cfg["normalize"] == "realized" and release == "trajectory":
        return ("the update divides the clipped sum by the realized batch size |B| (001 eq. 12); "
                "composition bounds for Poisson sampling assume the noisy sum divided by the fixed b")
    if cfg["normalize"] == "expected" and release == "last_iterate":
        return ("the update divides the clipped sum by the expected b, so a step can exceed ηC when |B| > b; "
                "hidden-state bounds under Poisson sampling (001 eq. 12, Lemma 2) need the realized mean")
    return None


def _validity(name: str, cfg: dict, setting: Setting) -> str | None:
    acc = accounting.get(name)
    try:  # the accountant's own assumptions first: they are what a reader looks up
        acc.check(setting)
    except DPLabError as err:  # AssumptionError, or a range check of the Setting
        return str(err)
    return training_mismatch(cfg, acc.describe()["release"])


def calibrate(cfg: dict, setting: Setting) -> float:
    """σ reaching ``target_epsilon`` at δ with the run's ``accountant`` (DPLabError if invalid)."""
    name = cfg["accountant"]
    why = _validity(name, cfg, setting)
    if why:
        raise DPLabError("accountant", f"cannot calibrate σ with {name!r} for this run: {why}")
    return accounting.get(name).sigma(setting, cfg["target_epsilon"], cfg["delta"])


def plan(cfg: dict, n: int, b: int, dimension: int, info: dict, grid: list[int]) -> Plan:
    """σ, the Setting and ε on ``grid`` (one ``epsilon_curve`` call per valid accountant)."""
    requested = cfg["accountants"]
    names = requested if requested is not None else accounting.names()
    for name in names:
        accounting.get(name)  # unknown name: DPLabError listing the valid ones
    if not METHODS[cfg["method"]].private:
        return Plan(None, None, "none (non-private)", "", excluded={k: "non-private run: no noise, no privacy claim" for k in names})
    constants, note = loss_constants(cfg, info)
    if cfg["noise_multiplier"] is not None:
        sigma, source = float(cfg["noise_multiplier"]), "given"
    else:
        probe = build_setting(cfg, n, b, dimension, 1.0, constants)
        sigma = calibrate(cfg, probe)
        source = f"calibrated with {cfg['accountant']} to epsilon={cfg['target_epsilon']} at delta={cfg['delta']}"
    setting = build_setting(cfg, n, b, dimension, sigma, constants)
    out = Plan(setting, sigma, source, note)
    for name in names:
        why = _validity(name, cfg, setting)
        if why is None:
            try:
                curve = accounting.get(name).epsilon_curve(setting, cfg["delta"], grid)
            except DPLabError as err:
                why = str(err)
            else:
                if not np.all(np.isfinite(curve)):
                    why = "returned a non-finite epsilon"
                else:
                    out.curves[name] = curve
                    out.release[name] = accounting.get(name).describe()["release"]
                    continue
        out.excluded[name] = why
    return out
