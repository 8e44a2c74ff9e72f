"""techniques_table (000 Table I): the noise each analysis technique needs for one (ε, δ) setting.

000 Table I lists, per technique, the order of σ needed for (ε, δ)-DP and the assumptions it
rests on.  Here every accountant is calibrated (:meth:`dplab.accounting.Accountant.sigma_curve`)
on one common setting — the same n, b, T, C, η, loss constants and (ε, δ); the weight decay λ_reg
and the projection D only where the technique analyses them (``Accountant.excludes``) — each under
the sampling scheme and neighbouring relation its theorem is proved for (recorded per row) and the
update it analyses (:func:`dplab.accounting.eligibility.analysed_update`); the σ found must give a
setting the technique may claim (:func:`dplab.accounting.eligibility.refusal`).  σ is the canonical
noise multiplier (noise std on the clipped sum / C); ``effective_noise_multiplier`` = noise std /
sensitivity of the sum (σ for add_remove, σ/2 for replace_one) compares rows across relations.
A technique that cannot reach the target gets an empty σ and the reason.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from dplab import units
from dplab.accounting import Setting, get, risk
from dplab.accounting.eligibility import analysed_update, refusal
from dplab.errors import AssumptionError
from dplab.figures import Inputs, style
from dplab.figures.params import in_unit_interval, positive
from dplab.schemes import Neighbouring, Sampling

TITLE = "σ needed for one (ε, δ) by each analysis technique, with its assumptions (000 Table I)"
SOURCE = "000 Table I"
CAPTION = (
    "extends 000 Table I: the noise multiplier σ that each analysis technique (accountant) needs"
    " for one common (ε = 1, δ = 10⁻⁵) target on one common setting (n = 1000, b = 10, T = 1000, C"
    " = 1, η = 0.1, loss constants λ = 0.1, β = 1, L = 1, D = 1, weight decay 0.5, d = 10; 000"
    " states no setting, these are ours), each under the sampling scheme and neighbouring relation"
    " its theorem is proved for, with its release model and loss assumption and, where 000 Table I"
    " lists it, the article and σ order printed there. σ/(Δ/C) divides by the sensitivity of the"
    " clipped sum (C add/remove, 2C replace-one) so rows under different relations compare. 'none':"
    " no σ meets the target (the reason is in the table)."
)
INPUTS: dict[str, type] = {}


#: accountant → (sampling, neighbouring, 000 Table I article, its σ order, loss assumption)
TECHNIQUES = {
    "naive": (Sampling.POISSON, Neighbouring.ADD_REMOVE, "", "", "none (clipping)"),
    "advanced": (Sampling.POISSON, Neighbouring.ADD_REMOVE, "", "", "none (clipping)"),
    "kairouz": (Sampling.POISSON, Neighbouring.ADD_REMOVE, "", "", "none (clipping)"),
    "moments": (
        Sampling.POISSON,
        Neighbouring.ADD_REMOVE,
        "[ACG+16]",
        "Ω(√(T ln(1/δ))/(nε))",
        "none (clipping)",
    ),
    "rdp": (
        Sampling.POISSON,
        Neighbouring.ADD_REMOVE,
        "[Mir17]",
        "Ω(√(T ln(1/δ))/(nε))",
        "none (clipping)",
    ),
    "rdp_closed_form": (
        Sampling.POISSON,
        Neighbouring.ADD_REMOVE,
        "[Mir17]",
        "",
        "none (clipping); q ≤ 1/5, σ ≥ 4",
    ),
    "pld": (Sampling.POISSON, Neighbouring.ADD_REMOVE, "", "", "none (clipping)"),
    "pabi": (
        Sampling.SHUFFLE,
        Neighbouring.REPLACE_ONE,
        "[FMTT18]",
        "Ω(√(T ln(1/δ))/(nε))",
        "convex, L-Lipschitz, β-smooth",
    ),
    "langevin": (
        Sampling.FULL_BATCH,
        Neighbouring.REPLACE_ONE,
        "[CYS21]",
        "Ω(√(ln(1/δ))/ε)",
        "λ-strongly convex, β-smooth",
    ),
    "ye_shokri": (
        Sampling.WITHOUT_REPLACEMENT,
        Neighbouring.REPLACE_ONE,
        "",
        "",
        "λ-strongly convex, β-smooth",
    ),
    "asoodeh_projected": (
        Sampling.POISSON,
        Neighbouring.REPLACE_ONE,
        "",
        "",
        "none; projection on a set of diameter D",
    ),
    "asoodeh_regularized": (
        Sampling.WITHOUT_REPLACEMENT,
        Neighbouring.REPLACE_ONE,
        "",
        "",
        "none; weight decay λ_reg",
    ),
}


#: the JSON schema of the figure's config entry (``figures.<id>``; config.schema.yaml's is
#: generated from it by ``python -m dplab.registries``)
PARAMS: dict = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "000 Table I (σ for one (ε, δ) per technique); 000 states no common setting, these "
        "defaults are ours"
    ),
    "properties": {
        "epsilon": positive(1.0, "ε"),
        "delta": in_unit_interval(1e-05, "δ"),
        "dataset_size": {"type": "integer", "minimum": 2, "default": 1000, "description": "n"},
        "batch_size": {
            "type": "integer",
            "minimum": 1,
            "default": 10,
            "description": "b (divides n, for pabi's fixed batches)",
        },
        "steps": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100000000,
            "default": 1000,
            "description": "T",
        },
        "clip": positive(1.0, "C"),
        "lr": positive(0.1, "η"),
        "strong_convexity": positive(0.1, "λ (langevin, ye_shokri)"),
        "smoothness": positive(1.0, "β"),
        "lipschitz": positive(1.0, "L (≤ clip)"),
        "diameter": positive(1.0, "D (asoodeh_projected)"),
        "regularization": in_unit_interval(0.5, "weight decay λ_reg (asoodeh_regularized)"),
        "dimension": {
            "type": "integer",
            "minimum": 1,
            "default": 10,
            "description": "d (asoodeh_regularized)",
        },
        "accountants": {
            "type": "array",
            "minItems": 1,
            "items": {
                "enum": list(TECHNIQUES),
            },
            "default": list(TECHNIQUES),
            "description": "techniques (accountants) to calibrate, one row each",
        },
    },
}

SETTING_KEYS = (
    "dataset_size",
    "batch_size",
    "steps",
    "clip",
    "lr",
    "strong_convexity",
    "smoothness",
    "lipschitz",
    "diameter",
    "regularization",
    "dimension",
)


def check(config: dict, params: dict) -> None:
    """Nothing to cross-check: the figure needs no other result."""


def inputs(config: dict, params: dict) -> Inputs:
    return {}


def technique_setting(name: str, values: dict, steps: int) -> Setting:
    """The common setting (``values``: :data:`SETTING_KEYS`, e.g. a row of the table) as technique
    ``name`` analyses it, after ``steps`` steps: its sampling and relation, without the update terms
    it does not analyse (``Accountant.excludes``); σ = 1 until calibrated."""
    sampling, neighbouring = TECHNIQUES[name][:2]
    used = {k: values[k] for k in SETTING_KEYS if k not in get(name).excludes and k != "steps"}
    return Setting(
        noise_multiplier=1.0, sampling=sampling, neighbouring=neighbouring, steps=steps, **used
    )


def table(inputs: Inputs, params: dict) -> pd.DataFrame:
    """One row per technique: its σ for (ε, δ) on the common setting, or the reason it has none, and
    the attack risk of that σ where the technique has a privacy-loss distribution
    (:func:`dplab.accounting.risk.columns`)."""
    eps, delta = params["epsilon"], params["delta"]
    rows = []
    for name in params["accountants"]:
        sampling, neighbouring, article, order, loss = TECHNIQUES[name]
        accountant = get(name)
        values = {key: params[key] for key in SETTING_KEYS}
        if sampling == Sampling.FULL_BATCH:  # full-batch noisy GD: every step uses all n records
            values["batch_size"] = values["dataset_size"]
        setting = technique_setting(name, values, values["steps"])
        row = {
            "accountant": name,
            "source": accountant.source,
            "release": accountant.release,
            "sampling": sampling,
            "neighbouring": neighbouring,
            "table_i_article": article,
            "table_i_sigma": order,
            "loss_assumption": loss,
            "epsilon": eps,
            "delta": delta,
            "noise_multiplier": np.nan,
            "effective_noise_multiplier": np.nan,
            "reason": "",
        }
        start = time.perf_counter()
        try:
            sigma = float(accountant.sigma_curve(setting, eps, delta, [params["steps"]])[0])
        except AssumptionError as err:
            row["reason"] = str(err)
        else:  # the setting at that σ must be one the technique may claim
            # (dplab.accounting.eligibility)
            row["reason"] = (
                refusal(
                    name,
                    setting.replace(noise_multiplier=sigma),
                    analysed_update(accountant.release),
                )
                or ""
            )
            if not row["reason"]:
                row.update(
                    noise_multiplier=sigma,
                    effective_noise_multiplier=units.effective_noise_multiplier(
                        sigma, neighbouring
                    ),
                )
        row["seconds"] = round(time.perf_counter() - start, 2)
        if row["reason"]:
            row.update(risk.columns(name, None), risk_note="no risk: no σ (see reason)")
        else:  # the attack risk of that σ where the technique has a privacy-loss distribution
            row.update(
                risk.columns(name, setting.replace(noise_multiplier=row["noise_multiplier"]))
            )
        rows.append({**row, **values})
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    table = table.fillna({"table_i_article": "", "table_i_sigma": "", "reason": ""})
    first = table.iloc[0].to_dict()
    header = [
        "technique",
        "000 Table I",
        "sampling, relation",
        "release",
        "loss assumption",
        "σ",
        "σ / (Δ/C)",
    ]
    cells = []
    for _, row in table.iterrows():
        found = not np.isnan(row.noise_multiplier)
        cells.append(
            [
                row.accountant,
                f"{row.table_i_article} {row.table_i_sigma}".strip(),
                f"{row.sampling}, {row.neighbouring.replace('_', '/')}",
                row.release.replace("_", " "),
                row.loss_assumption,
                f"{row.noise_multiplier:.4g}" if found else "none",
                f"{row.effective_noise_multiplier:.4g}" if found else "—",
            ]
        )
    fig, ax = style.table_figure(header, cells, width=13.0, row_height=0.3, fontsize=8)
    ax.set_title(
        f"σ for (ε={first['epsilon']:g}, δ={first['delta']:g}): n={first['dataset_size']:g},"
        f" b={first['batch_size']:g}, T={first['steps']:g}, C={first['clip']:g}, η={first['lr']:g},"
        f" λ={first['strong_convexity']:g}, β={first['smoothness']:g}, L={first['lipschitz']:g},"
        f" D={first['diameter']:g}, λ_reg={first['regularization']:g}, d={first['dimension']:g}",
        fontsize=9,
    )
    return fig
