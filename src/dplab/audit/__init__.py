"""Tightness audit: how loose is each upper bound on ε, measured from below.

- :mod:`dplab.audit.exact`: exact Rényi divergence and exact δ(ε) where the released last
  iterate is Gaussian (002 Thm 3's quadratic loss; a linear loss; any
  contraction), as functions of T.
- :mod:`dplab.audit.canary`: input and gradient (Dirac) canaries on dead first-layer coordinates.
- :mod:`dplab.audit.runner`: many training runs in lockstep through the engine's own pieces
  (samplers, per-example clipping, noise, projection), with canaries, and their scores.
- :mod:`dplab.audit.stats`: Clopper–Pearson intervals and the ε lower bound of an attack.
- :mod:`dplab.audit.estimators`: the five estimators (clopper_pearson, gdp, one_run, one_run_gdp,
  one_run_independent).
- :mod:`dplab.audit.membership`: the audit of one threat model (scores → ε lower bounds per
  variant, estimator and T, beside the upper bounds of the same release model).
"""
