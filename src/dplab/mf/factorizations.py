"""Factorizations A = B·C of a workload (004 §4.3) and their expected error.

The mechanism releases C·G + Z (Z i.i.d. Gaussian, std σ·clip, calibrated to the sensitivity
of C, see :mod:`dplab.mf.sensitivity`) and decodes A·G + B·Z with B = A·C⁻¹, i.e. it adds the
correlated noise C⁻¹Z to the gradients (004 §4.3, Â·H = A(H + C⁻¹Z)).  C is lower-triangular,
so the noise of step t depends only on Z[0..t] (streamable, :mod:`dplab.mf.noise`).

Expected error (per coordinate, per unit noise multiplier, noise calibrated to sensitivity
sens(C) so that only the *shape* of C matters):

    err_t = sens(C)² · ‖B[t, :]‖²        (variance of coordinate t of the privatized A·G)
    max_error  = max_t err_t
    mean_error = (1/T)·Σ_t err_t = sens(C)²·‖B‖_F² / T

For C = I (DP-SGD) and the prefix-sum A: err_t = t+1, max T, mean (T+1)/2.

Strategies: :func:`identity`, :func:`sqrt` (Toeplitz square root, Henzinger et al. 2023 /
Fichtenberger et al. 2023), :func:`optimal` (Denisov et al. 2022, fixed point for the optimal
X = CᵀC under single participation), :func:`banded` (Toeplitz, column-normalized, `bands`
diagonals, Choquette-Choo et al. 2023 "(Amplified) Banded Matrix Factorization").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.optimize
import torch

from dplab.errors import DPLabError
from dplab.mf.sensitivity import Sensitivity, sensitivity

STRATEGIES = ("identity", "sqrt", "optimal", "banded")


@dataclass(frozen=True)
class Factorization:
    """A = B·C with C lower-triangular; ``bands`` = number of non-zero diagonals of C (T if dense)."""

    strategy: str
    workload: np.ndarray
    encoder: np.ndarray
    bands: int
    info: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return self.workload.shape[0]

    @property
    def decoder(self) -> np.ndarray:
        """B = A·C⁻¹ (triangular solve, Cᵀ·Bᵀ = Aᵀ)."""
        return scipy.linalg.solve_triangular(self.encoder.T, self.workload.T, lower=False).T

    def sensitivity(self, participations: int = 1, min_separation: int = 1) -> Sensitivity:
        return sensitivity(self.encoder, participations, min_separation)

    def errors(self, participations: int = 1, min_separation: int = 1) -> dict:
        """``max_error``, ``mean_error`` (module docstring) and the sensitivity they use."""
        sens = self.sensitivity(participations, min_separation)
        rows = np.sum(self.decoder**2, axis=1) * sens.value**2
        return {
            "sensitivity": sens.value,
            "sensitivity_exact": sens.exact,
            "sensitivity_method": sens.method,
            "max_error": float(rows.max()),
            "mean_error": float(rows.mean()),
        }


def _check_lower(A: np.ndarray) -> np.ndarray:
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise DPLabError("workload", f"must be a square matrix; got shape {A.shape}")
    if np.any(np.triu(A, 1) != 0) or np.any(np.diag(A) <= 0):
        raise DPLabError("workload", "must be lower-triangular with a positive diagonal")
    return A


def _toeplitz_lower(coeffs: np.ndarray, steps: int) -> np.ndarray:
    col = np.zeros(steps)
    col[: min(steps, len(coeffs))] = coeffs[:steps]
    return scipy.linalg.toeplitz(col, np.zeros(steps))


def identity(A: np.ndarray) -> Factorization:
    """C = I, B = A: DP-SGD (004 §4.3)."""
    A = _check_lower(A)
    return Factorization("identity", A, np.eye(A.shape[0]), bands=1)


def sqrt_coefficients(a: np.ndarray) -> np.ndarray:
    """Coefficients of the power series √(Σ a_j x^j): c_0 = √a_0, c_n = (a_n − Σ_{i=1}^{n−1} c_i c_{n−i}) / (2c_0).

    For the prefix sum (a ≡ 1, series (1−x)⁻¹) this gives (1−x)^(−1/2): c_j = binom(2j, j)/4^j.
    """
    c = np.zeros(len(a))
    c[0] = np.sqrt(a[0])
    for n in range(1, len(a)):
        c[n] = (a[n] - np.dot(c[1:n], c[n - 1 : 0 : -1])) / (2 * c[0])
    return c


def sqrt(A: np.ndarray) -> Factorization:
    """B = C = the lower-triangular Toeplitz square root of a lower-triangular Toeplitz A.

    Henzinger, Upadhyay & Upadhyay 2023; Fichtenberger, Henzinger & Upadhyay 2023 (prefix sum).
    """
    A = _check_lower(A)
    a = A[:, 0]
    if not np.allclose(A, _toeplitz_lower(a, len(a)), rtol=0, atol=1e-12):
        raise DPLabError("workload", "the sqrt strategy needs a Toeplitz workload (constant learning rate)")
    C = _toeplitz_lower(sqrt_coefficients(a), len(a))
    return Factorization("sqrt", A, C, bands=len(a), info={"coefficients": C[:, 0].copy()})


def _reverse_cholesky(X: np.ndarray) -> np.ndarray:
    """Lower-triangular C with CᵀC = X (J·X·J = L·Lᵀ, C = J·Lᵀ·J, J the reversal)."""
    L = np.linalg.cholesky(X[::-1, ::-1])
    return L.T[::-1, ::-1].copy()


def optimal(A: np.ndarray, tol: float = 1e-8, max_iter: int = 10_000) -> Factorization:
    """Minimum mean error for single participation (Denisov et al. 2022, Thm 3.1/Alg. 1 style).

    Problem: min_X tr(S·X⁻¹) s.t. diag(X) = 1, X ≻ 0, with S = AᵀA (sensitivity 1 ⇔ unit
    columns of C, X = CᵀC).  KKT: X·V·X = S with V = diag(v) ≥ 0, solved by
    X(v) = V^(−1/2)·M^(1/2)·V^(−1/2), M = V^(1/2)·S·V^(1/2); diag(X) = 1 gives the fixed point
    v ← diag(M(v)^(1/2)).  Convergence is certified by the duality gap: for every v ≥ 0,
    dual(v) = 2·tr(M(v)^(1/2)) − Σv ≤ OPT ≤ tr(S·X̃⁻¹) = primal(v), with X̃ = X(v) rescaled to
    unit diagonal.  Stops when (primal − dual)/primal ≤ ``tol``; ``info`` records the gap history.
    """
    A = _check_lower(A)
    S = A.T @ A
    v = np.sqrt(np.diag(S))  # any v > 0 starts the iteration
    gaps = []
    for it in range(1, max_iter + 1):
        r = np.sqrt(v)
        lam, U = np.linalg.eigh(r[:, None] * S * r[None, :])
        lam = np.clip(lam, 1e-300, None)
        half = np.sqrt(lam)
        v_new = (U**2) @ half  # diag(M^(1/2))
        dual = 2.0 * half.sum() - v.sum()
        # X = V^-1/2 M^1/2 V^-1/2 has diag d = v_new / v; X̃ = D^-1/2 X D^-1/2,
        # X̃⁻¹ = W M^(-1/2) W with W = diag(sqrt(v·d)) = diag(sqrt(v_new))
        w = np.sqrt(v_new)
        primal = float(np.sum(((U / half) @ U.T) * (w[:, None] * S * w[None, :])))
        gaps.append((primal - dual) / primal)
        v = v_new
        if gaps[-1] <= tol:
            break
    else:
        raise DPLabError("optimal", f"fixed point did not reach relative gap {tol} in {max_iter} iterations")
    r = np.sqrt(v)
    lam, U = np.linalg.eigh(r[:, None] * S * r[None, :])
    X = (U * np.sqrt(np.clip(lam, 0, None))) @ U.T / (r[:, None] * r[None, :])
    d = np.sqrt(np.diag(X))
    X = X / (d[:, None] * d[None, :])
    info = {"iterations": it, "relative_gap": gaps[-1], "gap_history": gaps, "objective": primal}
    return Factorization("optimal", A, _reverse_cholesky(X), bands=A.shape[0], info=info)


def banded_encoder(coeffs, steps: int):
    """Toeplitz lower-triangular C with diagonals ``coeffs`` (c_0..c_{m−1}), columns scaled to norm 1.

    Works on numpy arrays or torch tensors (the optimizer differentiates through it).
    """
    lib = torch if isinstance(coeffs, torch.Tensor) else np
    m = coeffs.shape[0]
    i = np.arange(steps)
    lag = i[:, None] - i[None, :]
    mask = (lag >= 0) & (lag < m)
    idx = np.where(mask, lag, 0)
    if lib is torch:
        C = torch.where(torch.from_numpy(mask), coeffs[torch.from_numpy(idx)], torch.zeros((), dtype=coeffs.dtype))
        return C / torch.sqrt((C**2).sum(0, keepdim=True))
    C = np.where(mask, coeffs[idx], 0.0)
    return C / np.sqrt((C**2).sum(0, keepdims=True))


def banded(A: np.ndarray, bands: int, min_separation: int | None = None, max_iter: int = 500) -> Factorization:
    """Banded Toeplitz C with unit columns, optimized by L-BFGS (Choquette-Choo et al. 2023, §4).

    C[i, j] = c_{i−j}/‖column j‖ for 0 ≤ i−j < ``bands`` (c_0 = 1 fixed: normalization removes
    the scale).  Columns ≥ ``bands`` apart have disjoint supports, so for k participations at
    least b ≥ ``bands`` apart the sensitivity is exactly √k (:mod:`dplab.mf.sensitivity`):
    it does not depend on the coefficients, and minimizing the expected error for any such
    (k, b) is minimizing ‖A·C⁻¹‖_F².  Start: the truncated square-root series (bands = T is
    the column-normalized sqrt).  ``info`` records L-BFGS iterations and the final gradient.
    """
    A = _check_lower(A)
    T = A.shape[0]
    if isinstance(bands, bool) or int(bands) != bands or not (1 <= bands <= T):
        raise DPLabError("bands", f"must be an integer in [1, steps={T}]; got {bands!r}")
    bands = int(bands)
    if min_separation is not None and bands > min_separation:
        raise DPLabError("bands", f"must be <= min_separation={min_separation}; got {bands}")
    start = sqrt_coefficients(np.ones(bands))
    At = torch.from_numpy(A)

    def objective(x):
        c = torch.cat([torch.ones(1, dtype=torch.float64), torch.from_numpy(x).requires_grad_()])
        leaf = c  # gradient w.r.t. the free coefficients only
        C = banded_encoder(c, T)
        B = torch.linalg.solve_triangular(C, At, upper=False, left=False)
        loss = (B**2).sum() / T
        (grad,) = torch.autograd.grad(loss, leaf)
        return loss.item(), grad[1:].numpy().copy()

    info: dict = {}
    coeffs = start
    if bands > 1:
        res = scipy.optimize.minimize(
            objective, start[1:], jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": 1e-9}
        )
        coeffs = np.concatenate([[1.0], res.x])
        info = {"iterations": int(res.nit), "gradient_norm": float(np.linalg.norm(res.jac)), "message": str(res.message)}
    info["coefficients"] = coeffs
    return Factorization("banded", A, banded_encoder(coeffs, T), bands=bands, info=info)


def save(factorization: Factorization, path, momentum: float = 0.0) -> None:
    """Write C (and what rebuilds A) to ``path`` (.npz, atomic); :func:`load` reads it back."""
    from dplab.io import atomic_write

    def write(tmp):
        with open(tmp, "wb") as handle:
            np.savez(handle, encoder=factorization.encoder, strategy=factorization.strategy,
                     bands=factorization.bands, momentum=momentum)

    atomic_write(path, write)


def load(path) -> tuple[Factorization, float]:
    """(factorization, momentum) written by :func:`save`; A is rebuilt from T and the momentum."""
    from dplab.mf.workload import momentum_workload

    with np.load(path) as f:
        C, momentum = f["encoder"], float(f["momentum"])
        return Factorization(str(f["strategy"]), momentum_workload(C.shape[0], momentum), C, int(f["bands"])), momentum


def factorize(strategy: str, A: np.ndarray, bands: int | None = None, min_separation: int | None = None) -> Factorization:
    """Dispatch on the strategy name (``STRATEGIES``)."""
    if strategy == "identity":
        return identity(A)
    if strategy == "sqrt":
        return sqrt(A)
    if strategy == "optimal":
        return optimal(A)
    if strategy == "banded":
        if bands is None:
            raise DPLabError("bands", "is required for the banded strategy")
        return banded(A, bands, min_separation)
    raise DPLabError("strategy", f"must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
