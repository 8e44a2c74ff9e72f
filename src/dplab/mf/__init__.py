"""Matrix-factorization (correlated-noise) mechanism, 004 §4.3.

``workload`` builds A, ``factorizations`` finds A = B·C, ``sensitivity`` bounds ‖C·ΔG‖ under a
participation pattern, ``accounting`` turns it into (ε, δ) (with or without amplification),
``noise`` streams the correlated noise C⁻¹Z step by step for training.
"""
