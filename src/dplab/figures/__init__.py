"""Figures (CATALOGUE §4): one module per figure id.

Each module defines ``TITLE``, ``SOURCE`` (the seed figure it reproduces, or "new"),
``check(config, params)`` (cross-references; raise DPLabError), ``inputs(config, params)`` (the
result files its table is made from), ``table(inputs, params) -> DataFrame`` (tidy: one row
per plotted point, canonical column names) and ``draw(table) -> matplotlib Figure`` (from the
table alone, so a figure can be redrawn without recomputing anything).
"""

from dplab.figures import (
    accountants_vs_pld,
    asoodeh_projected,
    asoodeh_regularized,
    gaussian_sigma,
    langevin_rdp,
    langevin_tightness,
    sigma_vs_steps,
    techniques_table,
)

FIGURES = {
    "accountants_vs_pld": accountants_vs_pld,
    "gaussian_sigma": gaussian_sigma,
    "sigma_vs_steps": sigma_vs_steps,
    "asoodeh_projected": asoodeh_projected,
    "asoodeh_regularized": asoodeh_regularized,
    "langevin_rdp": langevin_rdp,
    "langevin_tightness": langevin_tightness,
    "techniques_table": techniques_table,
}
