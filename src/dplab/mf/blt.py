"""Buffered linear Toeplitz (BLT) factorizations of the prefix-sum workload, in O(T·k) per step.

A BLT with k buffers is the lower-triangular Toeplitz C whose generating function is rational of
degree k (Dvijotham, McMahan, Pillutla, Steinke & Thakurta 2024, "Efficient and Near-Optimal
Noise Generation for Streaming Differential Privacy", §4–5; McMahan, Xu & Zhang 2024, "A Hassle-free
Algorithm for Private Learning in Practice: Don't Use Tree Aggregation, Use BLTs", §2):

    C(x) = Π_i (1 − θ̂_i·x) / Π_i (1 − θ_i·x) = 1 + Σ_i ω_i·x / (1 − θ_i·x),
    c_0 = 1,  c_t = Σ_i ω_i·θ_i^(t−1)  (t ≥ 1),   ω_i = Π_j (θ_i − θ̂_j) / Π_{l≠i} (θ_i − θ_l),

so C⁻¹(x) = Π(1 − θ_i·x)/Π(1 − θ̂_i·x) is a BLT too (buffer decays θ̂).  C⁻¹z is an IIR filter of
order k: k state vectors, O(k·d) memory per step (:class:`dplab.mf.noise.FilterNoise`).

Parametrization: the 2k decays interlace, 1 > θ_1 > θ̂_1 > θ_2 > … > θ_k > θ̂_k > 0 (in floating
point a decay may reach 1 or 0, and a pole may meet its neighbouring zero: the pair cancels,
:func:`_cancel`).  Then every
ω_i > 0 (the numerator Π_j(θ_i − θ̂_j) and the denominator have i − 1 negative factors each) and
c_1 = Σ ω_i = Σ(θ_i − θ̂_i) < 1, so c is positive and decreasing — the conditions jax_privacy's
optimizer imposes by penalties (ω > 0, θ, θ̂ ∈ (0, 1)) and the ones under which the min-separation
sensitivity ‖Σ_{m<k} C[:, m·s]‖ is exact (:func:`dplab.mf.sensitivity.toeplitz_sensitivity`).  The
decays are 1 − cumsum(softmax(z)) (2k + 1 gaps), so L-BFGS runs unconstrained on z.

Objective (the same as :mod:`dplab.mf.toeplitz`): sens²·Σ_s w_s·x_s² with x = C⁻¹·1 and
w = (T − s)/T (mean) or 1 (max, the last row).  x and c are cascades of k first-order filters,
and so is each of their derivatives in θ_i, θ̂_i (:func:`objective_and_gradient`): O(T·k) per
evaluation, then the chain rule through the softmax.
"""

from __future__ import annotations

import numpy as np

from dplab.errors import DPLabError
from dplab.mf.sensitivity import column_sum, max_participations
from dplab.mf import toeplitz
from dplab.mf.toeplitz import OBJECTIVES, ToeplitzFactorization, row_weights
from dplab.progress import Progress
from dplab.validate import integer

#: jax_privacy refuses more than 15 buffers (numerical trouble); the same limit here
MAX_BUFFERS = 15


def decays(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(θ, θ̂) from the 2k + 1 free parameters z: p = 1 − cumsum(softmax(z))[:2k],
    θ = p[0::2], θ̂ = p[1::2]."""
    s = np.exp(z - z.max())
    p = 1.0 - np.cumsum(s / s.sum())[:-1]
    return p[0::2], p[1::2]


def _decays_adjoint(z: np.ndarray, g_theta: np.ndarray, g_hat: np.ndarray) -> np.ndarray:
    """dL/dz from dL/dθ and dL/dθ̂ (the transpose of :func:`decays`' Jacobian)."""
    s = np.exp(z - z.max())
    s /= s.sum()
    g_p = np.empty(2 * len(g_theta))
    g_p[0::2], g_p[1::2] = g_theta, g_hat
    g_s = np.append(-np.cumsum(g_p[::-1])[::-1], 0.0)  # p_j = 1 − Σ_{i≤j} s_i
    return s * (g_s - np.dot(s, g_s))


def _geometric(decay: float, u: np.ndarray) -> np.ndarray:
    """(1 − decay·D)⁻¹·u: y_t = u_t + decay·y_{t−1} (D: the one-step delay)."""
    import scipy.signal

    return scipy.signal.lfilter([1.0], [1.0, -decay], u)


def _delayed(u: np.ndarray) -> np.ndarray:
    """D·u: (0, u_0, …, u_{T−2})."""
    return np.concatenate([[0.0], u[:-1]])


def inverse_sections(theta: np.ndarray, theta_hat: np.ndarray, scale: float = 1.0):
    """C⁻¹ = (1/scale)·Π_i (1 − θ_i·x)/(1 − θ̂_i·x) as first-order filters (b, a): a cascade of poles
    in (0, 1), stable and well conditioned even when the decays crowd near 1 (the expanded
    polynomials are not: T = 10⁵ lost digits in them)."""
    first = ((np.array([1.0, -theta[0]]) / scale, np.array([1.0, -theta_hat[0]])),)
    return first + tuple(
        (np.array([1.0, -t]), np.array([1.0, -h])) for t, h in zip(theta[1:], theta_hat[1:])
    )


def _cascade(sections, u: np.ndarray) -> np.ndarray:
    import scipy.signal

    for b, a in sections:
        u = scipy.signal.lfilter(b, a, u)
    return u


def objective_and_gradient(z, steps: int, objective: str, participations: int, min_separation: int):
    """log L(z) with L = ‖v‖²·Σ_s w_s·x_s² (v = Σ_{m<k} C[:, m·s], x = C⁻¹·1)
    and its gradient, O(T·k).

    With F_i = (1 − θ_i·D)/(1 − θ̂_i·D) (commuting), x = Π F_i·1 and c = Π F_i⁻¹·e_0, so
    dx/dθ_i = −D(1 − θ_i·D)⁻¹·x, dx/dθ̂_i = D(1 − θ̂_i·D)⁻¹·x, dc/dθ_i = D(1 − θ_i·D)⁻¹·c,
    dc/dθ̂_i = −D(1 − θ̂_i·D)⁻¹·c; each is one first-order filter.
    """
    theta, theta_hat = decays(z)
    impulse = np.zeros(steps)
    impulse[0] = 1.0
    x = _cascade(inverse_sections(theta, theta_hat), np.ones(steps))  # C⁻¹·1
    c = _cascade([(a, b) for b, a in inverse_sections(theta, theta_hat)], impulse)  # C[:, 0]
    w = row_weights(steps, objective)
    error = float(np.dot(w, x**2))
    v = column_sum(c, steps, participations, min_separation)
    sens2 = float(v @ v)
    g_x = 2.0 * w * x / error  # d log(error)/dx
    g_c = (
        2.0 * column_sum(v[::-1], steps, participations, min_separation)[::-1] / sens2
    )  # d log(sens²)/dc
    dx, dc = _delayed(x), _delayed(c)
    g_theta = np.array(
        [np.dot(g_c, _geometric(t, dc)) - np.dot(g_x, _geometric(t, dx)) for t in theta]
    )
    g_hat = np.array(
        [np.dot(g_x, _geometric(h, dx)) - np.dot(g_c, _geometric(h, dc)) for h in theta_hat]
    )
    return float(np.log(sens2 * error)), _decays_adjoint(z, g_theta, g_hat)


def output_scales(theta: np.ndarray, theta_hat: np.ndarray) -> np.ndarray:
    """ω_i = Π_j (θ_i − θ̂_j) / Π_{l≠i} (θ_i − θ_l): C(x) = 1 + Σ
    ω_i·x/(1 − θ_i·x) (module docstring)."""
    gaps = theta[:, None] - theta
    np.fill_diagonal(gaps, 1.0)
    return np.prod(theta[:, None] - theta_hat, axis=1) / np.prod(gaps, axis=1)


def coefficients(theta: np.ndarray, theta_hat: np.ndarray, steps: int) -> np.ndarray:
    """C's first column c_0..c_{T−1}: the impulse response of the first-order cascade
    Π(1 − θ̂_i·x)/(1 − θ_i·x), accurate even where decays nearly coincide (the partial fractions
    ω_i = Π(θ_i − θ̂_j)/Π(θ_i − θ_l) then cancel catastrophically).  Whether the rounded c is
    non-increasing, as the exact min-separation sensitivity needs, is checked where it is used
    (:func:`dplab.mf.sensitivity.toeplitz_sensitivity`: otherwise an upper bound)."""
    impulse = np.zeros(steps)
    impulse[0] = 1.0
    return _cascade([(a, b) for b, a in inverse_sections(theta, theta_hat)], impulse)


def _cancel(theta: np.ndarray, theta_hat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop each pole θ equal (in floating point) to a zero θ̂ next to it in the interlaced order:
    (1 − θ̂·x)/(1 − θ·x) = 1, so C is unchanged with one buffer fewer (an optimum that needs fewer
    buffers than given collapses such pairs)."""
    p = np.empty(2 * len(theta))
    p[0::2], p[1::2] = theta, theta_hat
    kept: list[float] = []
    for value in p:  # removing an adjacent pair keeps the rest alternating pole, zero, pole, …
        if kept and kept[-1] == value:
            kept.pop()
        else:
            kept.append(value)
    q = np.array(kept)
    return q[0::2], q[1::2]


def _start(steps: int, buffers: int) -> np.ndarray:
    """z of decays log-spaced between 1 − 1/T and 1 − T^(−1/(2k)) (time scales from
    T down to T^(1/(2k)))."""
    gaps_from_one = steps ** -np.linspace(1.0, 1.0 / (2 * buffers), 2 * buffers)
    p = 1.0 - gaps_from_one
    s = -np.diff(np.concatenate([[1.0], p, [0.0]]))
    return np.log(s)


def check_buffers(buffers: int, steps: int) -> int:
    """k as an int in [1, min(15, ⌊T/2⌋)]: at most :data:`MAX_BUFFERS`, and 2k
    distinct decays need 2k ≤ T."""
    if steps < 2:  # the range would read [1, …=0]
        raise DPLabError(
            "steps",
            f"must be >= 2 for the blt strategy (k >= 1 buffers need 2k <= steps); got {steps}",
        )
    return integer("buffers", buffers, 1, min(MAX_BUFFERS, steps // 2), "min(15, steps/2)")


def blt(
    steps: int,
    buffers: int,
    objective: str = "mean",
    participations: int = 1,
    min_separation: int | None = None,
    max_iter: int = 1000,
) -> ToeplitzFactorization:
    """The BLT C with ``buffers`` buffers minimizing the ``objective`` under (k, s)-participation
    (module docstring), scaled to ‖C[:, 0]‖ = 1.  ``info``: θ, θ̂, ω (of C with c_0 = 1), the (k, s)
    and objective it was minimized for, L-BFGS iterations, message, loss."""
    import scipy.optimize

    steps = toeplitz.check_steps(steps)
    buffers = check_buffers(buffers, steps)
    if objective not in OBJECTIVES:
        raise DPLabError(
            "objective", f"must be one of {', '.join(OBJECTIVES)} for blt; got {objective!r}"
        )
    s = steps if min_separation is None else integer("min_separation", min_separation)
    k = max_participations(steps, integer("participations", participations), s)
    progress = Progress(f"mf blt T={steps} buffers={buffers}", max_iter, unit="L-BFGS iteration")

    def fun(z):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            loss, grad = objective_and_gradient(z, steps, objective, k, s)
        if not (np.isfinite(loss) and np.all(np.isfinite(grad))):
            return np.inf, np.zeros_like(z)
        return loss, grad

    def report(intermediate_result):
        progress.update(
            progress.done + 1,
            f"{objective} squared error per unit noise {np.exp(intermediate_result.fun):.6g}",
        )

    res = scipy.optimize.minimize(
        fun,
        _start(steps, buffers),
        jac=True,
        method="L-BFGS-B",
        callback=report,
        options={"maxiter": max_iter, "gtol": 1e-12, "ftol": 1e-15},
    )
    progress.close()
    info = {
        "objective": objective,
        "participations": k,
        "min_separation": s,
        "iterations": int(res.nit),
        "message": str(res.message),
        "loss": float(np.exp(res.fun)),
    }
    theta, theta_hat = _cancel(*decays(res.x))
    if len(theta) < buffers:
        info["buffers_cancelled"] = buffers - len(theta)
    return from_decays(theta, theta_hat, steps, info)


def from_decays(theta, theta_hat, steps: int, info: dict | None = None) -> ToeplitzFactorization:
    """The BLT of buffer decays θ (C) and θ̂ (C⁻¹), which must interlace (module docstring), scaled
    to ‖C[:, 0]‖ = 1; ``info`` gains θ, θ̂ and ω (of C with c_0 = 1)."""
    theta, theta_hat = np.asarray(theta, dtype=float), np.asarray(theta_hat, dtype=float)
    p = np.empty(2 * len(theta))
    if len(theta) == len(theta_hat):
        p[0::2], p[1::2] = theta, theta_hat
    if len(theta) != len(theta_hat) or not (
        len(p) and 1 >= p[0] and np.all(np.diff(p) < 0) and p[-1] >= 0
    ):
        raise DPLabError(
            "buf_decay",
            "BLT decays must interlace, 1 >= θ_1 > θ̂_1 > θ_2 > … > θ̂_k >= 0; "
            f"got θ = {theta.tolist()}, θ̂ = {theta_hat.tolist()}",
        )
    c = coefficients(theta, theta_hat, steps)
    scale = float(np.linalg.norm(c))
    info = {
        **(info or {}),
        "buffers": len(theta),
        "buf_decay": theta.tolist(),
        "inverse_buf_decay": theta_hat.tolist(),
        "output_scale": output_scales(theta, theta_hat).tolist(),
    }
    return ToeplitzFactorization(
        "blt", c / scale, steps, info, sections=inverse_sections(theta, theta_hat, 1.0 / scale)
    )
