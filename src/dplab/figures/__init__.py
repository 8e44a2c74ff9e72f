"""Figures (CATALOGUE §4): one module per figure id.

Each module defines ``TITLE``, ``SOURCE`` (the seed figure it reproduces, or "new"),
``check(config, params)`` (cross-references; raise DPLabError), ``inputs(config, params)`` (the
result files its table is made from), ``table(inputs, params) -> DataFrame`` (tidy: one row
per plotted point, canonical column names) and ``draw(table) -> matplotlib Figure`` (from the
table alone, so a figure can be redrawn without recomputing anything).
"""

from dplab.figures import accountants_vs_pld, tightness_audit

FIGURES = {
    "accountants_vs_pld": accountants_vs_pld,
    "tightness_audit": tightness_audit,
}
