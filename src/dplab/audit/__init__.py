"""Tightness audit (issue 9): how loose is each upper bound on ε, measured from below.

- :mod:`dplab.audit.exact`: exact Rényi divergence and exact δ(ε) where the released last
  iterate is Gaussian (002 Thm 3's quadratic loss; a linear loss), as functions of T.
- :mod:`dplab.audit.runner`: many training runs in lockstep through the engine's own pieces
  (samplers, per-example clipping, noise, projection), with and without a canary.
- :mod:`dplab.audit.stats`: Clopper–Pearson intervals and the ε lower bound of an attack.
- :mod:`dplab.audit.membership`: the audit itself (scores → ε lower bounds per method and T).
"""
