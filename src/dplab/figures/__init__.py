"""Figures (README.md, Figures): one module per figure id, imported when first needed.

Each module defines ``TITLE``, ``SOURCE`` (the seed figure it reproduces, or "new"),
``check(config, params)`` (cross-references; raise DPLabError), ``inputs(config, params)`` (the
result files its table is made from), ``table(inputs, params) -> DataFrame`` (tidy: one row
per plotted point, canonical column names) and ``draw(table) -> matplotlib Figure`` (from the
table alone, so a figure can be redrawn without recomputing anything).  A figure drawn from
factorizations of the MF mechanism also defines ``factorizations(config, params)`` (cache key ->
spec; the pipeline computes each once, see :func:`dplab.pipeline.factorizations`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: every figure id, in the order the index and the report list them
FIGURE_IDS = (
    "gaussian_sigma",
    "grad_norms",
    "nonprivate_training",
    "sigma_vs_steps",
    "dp_training_tries",
    "techniques_table",
    "asoodeh_projected",
    "asoodeh_regularized",
    "langevin_rdp",
    "langevin_tightness",
    "accountants_vs_pld",
    "hidden_state_gain",
    "privacy_utility",
    "mf_vs_dpsgd",
    "mf_structure",
    "tightness_audit",
    "sampling_gap",
)


def figure(figure_id: str) -> ModuleType:
    """The module of ``figure_id`` (one of :data:`FIGURE_IDS`)."""
    if figure_id not in FIGURE_IDS:
        raise KeyError(figure_id)
    return importlib.import_module(f"dplab.figures.{figure_id}")
