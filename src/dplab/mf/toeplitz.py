"""Banded Toeplitz factorizations of the prefix-sum workload at large T, in O(T·b) per step.

C is the T×T lower-triangular Toeplitz matrix with first column (c_0, …, c_{b−1}, 0, …) (b bands,
Choquette-Choo et al. 2023, "(Amplified) Banded Matrix Factorization", §4; McKenna 2024,
"Scaling up the Banded Matrix Factorization Mechanism for Differentially Private ML", §3).  For the
prefix sum A, B = A·C⁻¹ is lower-triangular Toeplitz too, with first column x = C⁻¹·1, so
(per unit noise, noise calibrated to sens(C))

    err_t      = sens(C)²·Σ_{s≤t} x_s²         (row t of B; non-decreasing in t)
    max_error  = sens(C)²·‖x‖²                 (the last row)
    mean_error = sens(C)²·Σ_s (T − s)·x_s² / T  (= sens²·‖B‖_F²/T)

x is a linear recursion (c_0·x_t = 1 − Σ_{ℓ=1}^{b−1} c_ℓ·x_{t−ℓ}), run as an IIR filter
(``scipy.signal.lfilter``): O(T·b), no T×T matrix.  The optimizer minimizes the objective
sens²·err (``mean`` or ``max``) with sens² = ‖Σ_{m<k} C[:, m·s]‖² for the participation
(k, s) — the exact sensitivity for b ≤ s (any c) and for c ≥ 0 non-increasing
(:func:`dplab.mf.sensitivity.toeplitz_sensitivity`), so with b > s the search is kept in that cone
— by L-BFGS(-B) with the analytic gradient (adjoint filter), c_0 = 1 fixed otherwise (the
objective does not depend on the scale of c); the result is scaled to ‖c‖ = 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dplab.errors import DPLabError
from dplab.mf.factorizations import sqrt_coefficients
from dplab.mf.sensitivity import Sensitivity, column_sum, max_participations, toeplitz_sensitivity
from dplab.progress import Progress
from dplab.validate import integer

OBJECTIVES = ("mean", "max")
#: the largest T of the O(T) strategies (banded Toeplitz, BLT): each L-BFGS step filters a few
#: dozen T-long float64 vectors (8·T bytes each); larger T is refused up front, not left to
#: run (before this limit, ``dplab mf --strategy banded_toeplitz --steps 1000000000 --bands
#: 2`` had not finished in 60 s)
MAX_STEPS = 10**6


#: the largest T·b of a banded Toeplitz C: each L-BFGS step filters T-long vectors through b taps
#: (T·b = 1e8: 0.25 s; ``--steps 1000000 --bands 100000``, 1e11, ran for hours)
MAX_WORK = 10**8


def check_steps(steps: int) -> int:
    """T as an int in [1, :data:`MAX_STEPS`]."""
    return integer("steps", steps, 1, MAX_STEPS, "dplab.mf.toeplitz.MAX_STEPS")


def check_bands(bands: int, steps: int) -> int:
    """b as an int in [1, T] with T·b at most :data:`MAX_WORK`."""
    bands = integer("bands", bands, 1, steps, "steps")
    if steps * bands > MAX_WORK:
        raise DPLabError(
            "bands",
            f"steps × bands = {steps * bands:.3g} is above {MAX_WORK:.0e} (dplab.mf.toeplitz."
            f"MAX_WORK, the work of one optimizer step): at T = {steps}, bands must be <= "
            f"{MAX_WORK // steps}",
        )
    return bands


def inverse_apply(coefficients: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """C⁻¹·rhs for the lower-triangular Toeplitz C of ``coefficients`` (forward
    substitution as a filter)."""
    import scipy.signal

    return scipy.signal.lfilter([1.0], coefficients, rhs)


def row_weights(steps: int, objective: str) -> np.ndarray:
    """w with err = Σ_s w_s·x_s²: (T − s)/T for the mean over rows, 1 for the last (largest) row."""
    return (steps - np.arange(steps)) / steps if objective == "mean" else np.ones(steps)


@dataclass(frozen=True)
class ToeplitzFactorization:
    """A = B·C for the T-step prefix sum with C lower-triangular Toeplitz, ‖C[:, 0]‖ = 1.

    ``coefficients``: C's first column, c_0..c_{b−1} (banded) or all T entries (BLT).
    ``sections``: C⁻¹ as a cascade of filters (b, a), C⁻¹(x) = Π b(x)/a(x) (BLT: k first-order
    sections, :mod:`dplab.mf.blt`); None: the banded C, C⁻¹(x) = 1/c(x), one all-pole filter.
    """

    strategy: str
    coefficients: np.ndarray
    steps: int
    info: dict = field(default_factory=dict)
    sections: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None

    @property
    def inverse_sections(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """The filters (b, a) whose cascade is C⁻¹: C⁻¹·z = lfilter(b_k, a_k, …
        lfilter(b_1, a_1, z))."""
        if self.sections is None:
            return ((np.ones(1), np.asarray(self.coefficients, dtype=float)),)
        return self.sections

    def inverse(self, rhs: np.ndarray) -> np.ndarray:
        """C⁻¹·rhs (``rhs`` with T rows), without forming C: O(T·bands) or
        O(T·buffers) per column."""
        import scipy.signal

        out = np.asarray(rhs, dtype=float)
        for b, a in self.inverse_sections:
            out = scipy.signal.lfilter(b, a, out, axis=0)
        return out

    @property
    def bands(self) -> int:
        return len(self.coefficients)

    lower_triangular = True

    @property
    def max_column_norm(self) -> float:
        """ζ = ‖C[:, 0]‖: the first column is the longest."""
        return float(np.linalg.norm(self.coefficients[: self.steps]))

    def within_bands(self, bands: int) -> bool:
        """C[i, j] = 0 whenever i − j >= ``bands``."""
        return self.bands <= bands

    def sensitivity(self, participations: int = 1, min_separation: int = 1) -> Sensitivity:
        return toeplitz_sensitivity(self.coefficients, self.steps, participations, min_separation)

    def errors(self, participations: int = 1, min_separation: int = 1) -> dict:
        """The same keys as :meth:`dplab.mf.factorizations.Factorization.errors`
        (module docstring)."""
        sens = self.sensitivity(participations, min_separation)
        x2 = self.inverse(np.ones(self.steps)) ** 2
        return {
            "sensitivity": sens.value,
            "sensitivity_exact": sens.exact,
            "sensitivity_method": sens.method,
            "max_error": float(sens.value**2 * x2.sum()),
            "mean_error": float(sens.value**2 * np.dot(row_weights(self.steps, "mean"), x2)),
        }


def objective_and_gradient(
    c: np.ndarray, steps: int, objective: str, participations: int, min_separation: int
):
    """L(c) = ‖v‖²·Σ_s w_s·x_s² (v = Σ_{m<k} C[:, m·s], x = C⁻¹·1) and dL/dc,
    in O(T·b) (or O(T log T)).

    dE/dc_ℓ = −Σ_j y_{j+ℓ}·x_j with y = C⁻ᵀ·(2w∘x) (the adjoint solve, the same filter on the
    reversed vector), since d(C⁻¹)·1 = −C⁻¹·dC·x and dC/dc_ℓ is the ℓ-th subdiagonal;
    d‖v‖²/dc_ℓ = 2·Σ_{m<k} v_{ℓ+m·s} (the adjoint of the column sum).
    """
    import scipy.signal

    b = len(c)
    x = inverse_apply(c, np.ones(steps))
    w = row_weights(steps, objective)
    error = float(np.dot(w, x**2))
    y = inverse_apply(c, (2.0 * w * x)[::-1])[::-1]
    lags = scipy.signal.correlate(y, x, mode="full")[steps - 1 : steps - 1 + b]  # Σ_j y_{j+ℓ}·x_j
    d_error = -lags
    v = column_sum(c, steps, participations, min_separation)
    sens2 = float(v @ v)
    d_sens2 = 2.0 * column_sum(v[::-1], steps, participations, min_separation)[::-1][:b]
    return sens2 * error, sens2 * d_error + error * d_sens2


def _ratios_to_c(r: np.ndarray) -> np.ndarray:
    """The cone c_0 = 1 >= c_1 >= … >= 0 as a box: c_ℓ = Π_{j≤ℓ} r_j, r_j ∈ [0, 1] (r_j: z[j−1])."""
    return np.concatenate([[1.0], np.cumprod(r)])


def _ratios_adjoint(r: np.ndarray, c: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """dL/dr_j = c_{j−1}·S_j, S_j = Σ_{ℓ≥j} g_ℓ·Π_{j<i≤ℓ} r_i = g_j + r_{j+1}·S_{j+1} (no division
    by r)."""
    S = np.empty(len(r))
    S[-1] = grad[-1]
    for j in range(len(r) - 2, -1, -1):  # S[j] is S_{j+1} of the docstring (r, S index lags from 1)
        S[j] = grad[j + 1] + r[j + 1] * S[j + 1]
    return c[:-1] * S


def banded_toeplitz(
    steps: int,
    bands: int,
    objective: str = "mean",
    participations: int = 1,
    min_separation: int | None = None,
    max_iter: int = 500,
) -> ToeplitzFactorization:
    """Optimal b-banded Toeplitz C for the prefix sum under (k, s)-participation (module docstring).

    Start: the square-root series truncated to b terms (Fichtenberger, Henzinger & Upadhyay 2023),
    as jax_privacy's ``optimize_banded_toeplitz``.  ``info``: L-BFGS iterations, message, objective
    and the (k, s) it was minimized for.
    """
    import scipy.optimize

    steps = check_steps(steps)
    bands = check_bands(bands, steps)
    if objective not in OBJECTIVES:
        raise DPLabError(
            "objective",
            f"must be one of {', '.join(OBJECTIVES)} for banded_toeplitz; got {objective!r}",
        )
    s = steps if min_separation is None else integer("min_separation", min_separation)
    k = max_participations(steps, integer("participations", participations), s)
    start = sqrt_coefficients(np.ones(bands))
    # b > s with k > 1: the objective's ‖v‖² is the sensitivity only for c >= 0
    # non-increasing, so the search stays in that cone; c_0 = 1 fixed either way (the
    # objective does not depend on scale)
    monotone = k > 1 and bands > s
    info: dict = {
        "objective": objective,
        "participations": k,
        "min_separation": s,
        "parametrization": "c >= 0 non-increasing" if monotone else "c_0 = 1",
    }
    coeffs = start
    if bands > 1:
        progress = Progress(
            f"mf banded_toeplitz T={steps} bands={bands}", max_iter, unit="L-BFGS iteration"
        )
        to_c = _ratios_to_c if monotone else lambda z: np.concatenate([[1.0], z])

        def fun(z):
            c = to_c(z)
            with np.errstate(over="ignore", invalid="ignore"):
                loss, grad = objective_and_gradient(c, steps, objective, k, s)
            if not (np.isfinite(loss) and np.all(np.isfinite(grad))):
                return np.inf, np.zeros_like(
                    z
                )  # an unstable filter (C⁻¹ growing): rejected by the line search
            return loss, (_ratios_adjoint(z, c, grad) if monotone else grad[1:])

        def report(intermediate_result):
            progress.update(
                progress.done + 1,
                f"{objective} squared error per unit noise {intermediate_result.fun:.6g}",
            )

        z0 = start[1:] / start[:-1] if monotone else start[1:]
        res = scipy.optimize.minimize(
            fun,
            z0,
            jac=True,
            method="L-BFGS-B",
            callback=report,
            bounds=[(0.0, 1.0)] * (bands - 1) if monotone else None,
            options={"maxiter": max_iter, "gtol": 1e-10, "ftol": 1e-13},
        )
        progress.close()
        coeffs = to_c(res.x)
        info.update(iterations=int(res.nit), message=str(res.message), loss=float(res.fun))
    return ToeplitzFactorization("banded_toeplitz", coeffs / np.linalg.norm(coeffs), steps, info)
