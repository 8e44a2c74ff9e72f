"""The workload matrix A of a T-step first-order training run (004 §4.1–4.2).

Row t of A·G is what the update of step t depends on: θ_{t+1} = θ₀ − η·(A·G)[t].
Plain SGD gives the prefix-sum matrix (004 §4.1, A[t, s] = 1 for s ≤ t).  Heavy-ball
momentum m_t = β·m_{t−1} + g_t with learning rates η·λ_t folds into
A[t, s] = Σ_{u=s}^{t} λ_u·β^{u−s} (Denisov et al. 2022, §2; Choquette-Choo et al. 2023, §2).
"""

from __future__ import annotations

import math

import numpy as np

from dplab.errors import DPLabError
from dplab.validate import integer


#: the memory the T×T matrices of one factorization may take: the workload, encoder, decoder and the
#: solvers' temporaries, about :data:`MATRICES` of 8·T² bytes (measured:
#: `dplab mf --strategy identity --steps 6000` peaks at 1.5 GB): T ≤ 6688
MEMORY_MAX = 2 * 2**30
MATRICES = 6


def check_steps(steps: int) -> int:
    """T as an int; refused up front when its T×T matrices would exceed :data:`MEMORY_MAX`."""
    steps = integer("steps", steps)
    need = MATRICES * 8 * int(steps) ** 2
    if need > MEMORY_MAX:
        most = math.isqrt(MEMORY_MAX // (8 * MATRICES))
        raise DPLabError(
            "steps",
            f"T = {steps} needs about {need / 2**30:.3g} GiB for its T×T matrices "
            f"({MATRICES} of 8·T² bytes), above the {MEMORY_MAX / 2**30:g} GiB limit "
            f"(dplab.mf.workload.MEMORY_MAX): T must be <= {most}",
        )
    return int(steps)


def prefix_sum(steps: int) -> np.ndarray:
    """A[t, s] = 1 for s ≤ t (004 §4.1): the T×T lower-triangular all-ones matrix."""
    steps = check_steps(steps)
    return np.tril(np.ones((steps, steps)))


def momentum_workload(steps: int, momentum: float = 0.0, lr_factors=None) -> np.ndarray:
    """A[t, s] = Σ_{u=s}^{t} λ_u·β^{u−s}: momentum β ∈ [0, 1), learning-rate factors λ_u > 0.

    With β = 0 and λ ≡ 1 this is :func:`prefix_sum`.
    """
    steps = check_steps(steps)
    if not (0.0 <= momentum < 1.0):
        raise DPLabError("momentum", f"must lie in [0, 1); got {momentum}")
    lam = np.ones(steps) if lr_factors is None else np.asarray(lr_factors, dtype=float)
    if lam.shape != (steps,) or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise DPLabError("lr_factors", f"must be {steps} finite numbers > 0")
    # M[u, s] = β^{u−s} for s ≤ u (momentum buffer after step u), A = cumsum over u of λ_u·M[u, :]
    idx = np.arange(steps)
    expo = idx[:, None] - idx[None, :]
    decay = np.where(expo >= 0, float(momentum) ** np.maximum(expo, 0), 0.0)
    return np.cumsum(lam[:, None] * decay, axis=0)
