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

from dplab.errors import DPLabError
from dplab.progress import Progress
from dplab.mf.sensitivity import Sensitivity, sensitivity
from dplab.validate import integer

STRATEGIES = ("identity", "sqrt", "optimal", "banded")


@dataclass(frozen=True)
class Factorization:
    """A = B·C with C lower-triangular; ``bands`` = number of non-zero
    diagonals of C (T if dense)."""

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
        import scipy.linalg  # where a factorization is solved: a run's key check loads this module

        return scipy.linalg.solve_triangular(self.encoder.T, self.workload.T, lower=False).T

    @property
    def lower_triangular(self) -> bool:
        return not np.any(np.triu(self.encoder, 1) != 0)

    @property
    def max_column_norm(self) -> float:
        """ζ = max_j ‖C[:, j]‖."""
        return float(np.sqrt(np.max(np.sum(self.encoder**2, axis=0))))

    def within_bands(self, bands: int) -> bool:
        """C[i, j] = 0 whenever i − j >= ``bands``."""
        lag = np.subtract.outer(np.arange(self.steps), np.arange(self.steps))
        return not np.any(self.encoder[lag >= bands] != 0)

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
    import scipy.linalg

    col = np.zeros(steps)
    col[: min(steps, len(coeffs))] = coeffs[:steps]
    return scipy.linalg.toeplitz(col, np.zeros(steps))


def identity(A: np.ndarray) -> Factorization:
    """C = I, B = A: DP-SGD (004 §4.3)."""
    A = _check_lower(A)
    return Factorization("identity", A, np.eye(A.shape[0]), bands=1)


def sqrt_coefficients(a: np.ndarray) -> np.ndarray:
    """Coefficients of the power series √(Σ a_j x^j): c_0 = √a_0, c_n = (a_n −
    Σ_{i=1}^{n−1} c_i c_{n−i}) / (2c_0).

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
        raise DPLabError(
            "workload", "the sqrt strategy needs a Toeplitz workload (constant learning rate)"
        )
    C = _toeplitz_lower(sqrt_coefficients(a), len(a))
    return Factorization("sqrt", A, C, bands=len(a), info={"coefficients": C[:, 0].copy()})


def _reverse_cholesky(X: np.ndarray) -> np.ndarray:
    """Lower-triangular C with CᵀC = X (J·X·J = L·Lᵀ, C = J·Lᵀ·J, J the reversal)."""
    L = np.linalg.cholesky(X[::-1, ::-1])
    return L.T[::-1, ::-1].copy()


def _inverse_bidiagonal(A: np.ndarray):
    """(d, e) with A⁻¹ = diag(d) + subdiag(e) when A⁻¹ is lower bidiagonal (prefix sum, also with
    learning-rate factors), else None.  Checked in O(T²): (diag(d) + subdiag(e))·A = I."""
    d = 1.0 / np.diag(A)
    e = -d[1:] * np.diag(A, -1) / np.diag(A)[:-1]
    product = d[:, None] * A
    product[1:] += e[:, None] * A[:-1]
    return (d, e) if np.allclose(product, np.eye(A.shape[0]), rtol=0, atol=1e-10) else None


class _DenseDual:
    """The dual step at v: M = V^½·S·V^½ (S = AᵀA) by a dense eigendecomposition, O(T³)."""

    def __init__(self, A: np.ndarray):
        self.S = A.T @ A

    def __call__(self, v: np.ndarray):
        import scipy.linalg

        r = np.sqrt(v)
        lam, U = scipy.linalg.eigh(r[:, None] * self.S * r[None, :], driver="evd")
        half = np.sqrt(np.clip(lam, 1e-300, None))  # eigenvalues of M^½
        v_new = (U**2) @ half  # diag(M^½)
        # X̃⁻¹ = W·M^(−½)·W, W = diag(√v_new) (module docstring of optimal)
        w = np.sqrt(v_new)
        primal = float(np.sum(((U / half) @ U.T) * (w[:, None] * self.S * w[None, :])))
        return v_new, 2.0 * half.sum() - v.sum(), primal, U, half


class _TridiagonalDual:
    """The same dual step when A⁻¹ is lower bidiagonal: then S⁻¹ = A⁻¹A⁻ᵀ and M⁻¹ = V^(−½)S⁻¹V^(−½)
    are tridiagonal, and M's eigenvectors are those of M⁻¹ (``eigh_tridiagonal``, MRRR: O(T²)
    instead of O(T³)).  The primal tr(S·X̃⁻¹) = ‖A·W·U·diag(μ^¼)‖_F² (μ: eigenvalues of M⁻¹) uses
    A·Y = (A⁻¹)⁻¹·Y, a bidiagonal solve, also O(T²)."""

    def __init__(self, d: np.ndarray, e: np.ndarray):
        self.diag = d**2
        self.diag[1:] += e**2
        self.off = e * d[:-1]  # (S⁻¹)[i+1, i] = A⁻¹[i+1, i]·A⁻¹[i, i]
        self.banded = np.vstack([d, np.append(e, 0.0)])  # A⁻¹ in solve_banded's (1, 0) layout

    def __call__(self, v: np.ndarray):
        import scipy.linalg

        mu, U = scipy.linalg.eigh_tridiagonal(self.diag / v, self.off / np.sqrt(v[1:] * v[:-1]))
        mu = np.clip(mu, 1e-300, None)
        half = mu**-0.5  # eigenvalues of M^½
        v_new = (U**2) @ half
        Y = np.sqrt(v_new)[:, None] * U * mu**0.25
        primal = float(np.sum(scipy.linalg.solve_banded((1, 0), self.banded, Y) ** 2))
        return v_new, 2.0 * half.sum() - v.sum(), primal, U, half


def optimal(
    A: np.ndarray, tol: float = 1e-8, max_iter: int = 1000, history: int = 5
) -> Factorization:
    """Minimum mean error for single participation (Denisov et al. 2022, Thm 3.1/Alg. 1 style).

    Problem: min_X tr(S·X⁻¹) s.t. diag(X) = 1, X ≻ 0, with S = AᵀA (sensitivity 1 ⇔ unit
    columns of C, X = CᵀC).  KKT: X·V·X = S with V = diag(v) ≥ 0, solved by
    X(v) = V^(−1/2)·M^(1/2)·V^(−1/2), M = V^(1/2)·S·V^(1/2); diag(X) = 1 gives the fixed point
    v ← diag(M(v)^(1/2)).  Convergence is certified by the duality gap: for every v ≥ 0,
    dual(v) = 2·tr(M(v)^(1/2)) − Σv ≤ OPT ≤ tr(S·X̃⁻¹) = primal(v), with X̃ = X(v) rescaled to
    unit diagonal.  Stops when (primal − dual)/primal ≤ ``tol``; ``info`` records the gap history.

    Speed: the fixed point is Anderson-accelerated in log v (``history`` past steps; 0 = the
    plain iteration), which cuts the iterations about fourfold (T = 2000: 17 instead of ~70);
    when A⁻¹ is bidiagonal (the prefix sum) each step is O(T²) (:class:`_TridiagonalDual`).
    The certificate holds at every v, so acceleration cannot make the answer wrong, only late.
    """
    A = _check_lower(A)
    bidiagonal = _inverse_bidiagonal(A)
    step = _TridiagonalDual(*bidiagonal) if bidiagonal is not None else _DenseDual(A)
    x = np.log(np.sqrt(np.sum(A**2, axis=0)))  # log v; any v > 0 starts the iteration
    xs, fs, gaps = [], [], []
    progress = Progress(f"mf optimal T={A.shape[0]}", max_iter, unit="iteration")
    for it in range(1, max_iter + 1):
        v = np.exp(x)
        v_new, dual, primal, U, half = step(v)
        gaps.append((primal - dual) / primal)
        progress.update(it, f"relative duality gap {gaps[-1]:.3g} (stops at {tol:g})")
        if gaps[-1] <= tol:
            break
        f = np.log(v_new) - x  # fixed-point residual in log v
        xs, fs = (xs + [x])[-(history + 1) :], (fs + [f])[-(history + 1) :]
        x = x + f
        if len(fs) > 1:  # Anderson (type II): the combination of past steps with the least residual
            dF, dX = np.diff(fs, axis=0).T, np.diff(xs, axis=0).T
            gamma = np.linalg.lstsq(dF, f, rcond=None)[0]
            candidate = x - (dX + dF) @ gamma
            if np.all(np.isfinite(candidate)):
                x = candidate
    else:
        raise DPLabError(
            "optimal", f"fixed point did not reach relative gap {tol} in {max_iter} iterations"
        )
    progress.close()
    r = np.sqrt(v)
    X = (U * half) @ U.T / (r[:, None] * r[None, :])  # X(v) = V^(−½)·M^½·V^(−½)
    d = np.sqrt(np.diag(X))
    X = X / (d[:, None] * d[None, :])
    info = {
        "iterations": it,
        "relative_gap": gaps[-1],
        "gap_history": gaps,
        "objective": primal,
        "solver": "tridiagonal" if bidiagonal is not None else "dense",
    }
    return Factorization("optimal", A, _reverse_cholesky(X), bands=A.shape[0], info=info)


def banded_encoder(coeffs: np.ndarray, steps: int) -> np.ndarray:
    """Toeplitz lower-triangular C with diagonals ``coeffs`` (c_0..c_{m−1}),
    columns scaled to norm 1."""
    return _band_to_dense(_banded_columns(np.asarray(coeffs, dtype=float), steps)[0])


def _banded_columns(c: np.ndarray, steps: int):
    """C in band layout, band[ℓ, j] = C[j+ℓ, j] = c_ℓ/n_j (0 outside the matrix), and the column
    norms n_j = (Σ_{ℓ < min(m, T−j)} c_ℓ²)^½ of the unnormalized Toeplitz band."""
    m = len(c)
    inside = np.arange(m)[:, None] < steps - np.arange(steps)[None, :]  # j + ℓ < T
    raw = np.where(inside, c[:, None], 0.0)
    norms = np.sqrt(np.sum(raw**2, axis=0))
    return raw / norms, inside, norms


def _band_to_dense(band: np.ndarray) -> np.ndarray:
    m, T = band.shape
    C = np.zeros((T, T))
    for lag in range(m):
        C[np.arange(lag, T), np.arange(T - lag)] = band[lag, : T - lag]
    return C


def _banded_loss(c: np.ndarray, A: np.ndarray):
    """‖A·C⁻¹‖_F²/T and its gradient in c for the column-normalized banded C, in O(T²·m).

    B = A·C⁻¹ from the banded triangular solve Cᵀ·Bᵀ = Aᵀ (LAPACK ``tbtrs``);
    dL/dC = −(2/T)·Bᵀ·B·C⁻ᵀ = −(2/T)·Bᵀ·K with Kᵀ = C⁻¹·Bᵀ (a second banded solve), needed only
    on the band; then the chain rule through C[j+ℓ, j] = c_ℓ/n_j.
    """
    import scipy.linalg

    T, m = A.shape[0], len(c)
    band, inside, norms = _banded_columns(c, T)  # LAPACK's lower band layout of C
    Bt, info_t = scipy.linalg.lapack.dtbtrs(band, A.T, uplo="L", trans="T")  # Cᵀ·Bᵀ = Aᵀ
    Kt, info_k = scipy.linalg.lapack.dtbtrs(band, Bt, uplo="L", trans="N")  # C·Kᵀ = Bᵀ
    if info_t or info_k:
        raise DPLabError("bands", f"singular banded encoder for coefficients {c}")
    loss = float(np.sum(Bt**2)) / T
    G = np.zeros((m, T))  # G[ℓ, j] = dL/dC[j+ℓ, j]
    for lag in range(m):
        G[lag, : T - lag] = -(2.0 / T) * np.sum(Bt[lag:, :] * Kt[: T - lag, :], axis=1)
    # C[j+ℓ, j] = c_ℓ/n_j, dn_j/dc_ℓ = c_ℓ/n_j (inside): dL/dc_ℓ = Σ_j
    # G[ℓ,j]/n_j − c_ℓ·Σ_j inside·s_j/n_j³
    s = np.sum(G * np.where(inside, c[:, None], 0.0), axis=0)  # Σ_ℓ G[ℓ,j]·c_ℓ
    grad = (G / norms).sum(axis=1) - c * (inside * (s / norms**3)).sum(axis=1)
    return loss, grad


def check_separation(bands: int, min_separation: int, source: str = "min_separation") -> None:
    """A banded C for participations b = ``min_separation`` apart needs bands <= b: only then is
    its sensitivity √k whatever its coefficients, the error :func:`banded`'s optimizer minimizes
    (``source``: where b comes from, for the message).  :func:`banded` asks it when given b;
    :func:`dplab.training.methods.dp_mf.sampler_spec` of every run, b given or taken from n."""
    if bands > min_separation:
        raise DPLabError("bands", f"must be <= {source} = {min_separation}; got {bands}")


def banded(
    A: np.ndarray, bands: int, min_separation: int | None = None, max_iter: int = 500
) -> Factorization:
    """Banded Toeplitz C with unit columns, optimized by L-BFGS (Choquette-Choo et al. 2023, §4).

    C[i, j] = c_{i−j}/‖column j‖ for 0 ≤ i−j < ``bands`` (c_0 = 1 fixed: normalization removes
    the scale).  Columns ≥ ``bands`` apart have disjoint supports, so for k participations at
    least b ≥ ``bands`` apart the sensitivity is exactly √k (:mod:`dplab.mf.sensitivity`):
    it does not depend on the coefficients, and minimizing the expected error for any such
    (k, b) is minimizing ‖A·C⁻¹‖_F².  Start: the truncated square-root series (bands = T is
    the column-normalized sqrt).  Loss and gradient by banded solves, O(T²·bands) per step
    (:func:`_banded_loss`).  ``info`` records L-BFGS iterations and the final gradient.
    """
    import scipy.optimize

    A = _check_lower(A)
    T = A.shape[0]
    bands = integer("bands", bands, 1, T, "steps")
    if min_separation is not None:
        check_separation(bands, min_separation)
    start = sqrt_coefficients(np.ones(bands))

    def objective(x):
        loss, grad = _banded_loss(np.concatenate([[1.0], x]), A)
        return loss, grad[1:]

    info: dict = {}
    coeffs = start
    if bands > 1:
        progress = Progress(f"mf banded T={T} bands={bands}", max_iter, unit="L-BFGS iteration")

        def report(intermediate_result):
            progress.update(
                progress.done + 1,
                f"mean squared error per unit noise {intermediate_result.fun:.6g}",
            )

        res = scipy.optimize.minimize(
            objective,
            start[1:],
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iter, "gtol": 1e-9},
            callback=report,
        )
        progress.close()
        coeffs = np.concatenate([[1.0], res.x])
        info = {
            "iterations": int(res.nit),
            "gradient_norm": float(np.linalg.norm(res.jac)),
            "message": str(res.message),
        }
    info["coefficients"] = coeffs
    return Factorization("banded", A, banded_encoder(coeffs, T), bands=bands, info=info)


def check_strategy(strategy: str, bands: int | None) -> None:
    """Refuse a strategy name not in ``STRATEGIES``, and banded without ``bands``."""
    if strategy not in STRATEGIES:
        raise DPLabError("strategy", f"must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    if strategy == "banded" and bands is None:
        raise DPLabError("bands", "is required for the banded strategy")


def factorize(
    strategy: str, A: np.ndarray, bands: int | None = None, min_separation: int | None = None
) -> Factorization:
    """Dispatch on the strategy name (``STRATEGIES``)."""
    check_strategy(strategy, bands)
    if strategy == "identity":
        return identity(A)
    if strategy == "sqrt":
        return sqrt(A)
    if strategy == "optimal":
        return optimal(A)
    return banded(A, bands, min_separation)
