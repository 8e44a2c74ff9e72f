"""Exact privacy of full-batch noisy GD when the released last iterate is Gaussian.

With a loss whose gradient is affine in θ with a θ-independent difference between the worst
neighbouring datasets, every iterate is Gaussian with the same covariance under both datasets,
so the exact Rényi divergence and the exact δ(ε) (hockey-stick divergence) are those of two
Gaussians: with μ_T = ‖mean difference‖ / std,

    R_α = α μ_T² / 2,        δ(ε) = Φ(μ_T/2 − ε/μ_T) − e^ε Φ(−μ_T/2 − ε/μ_T)

(Balle & Wang 2018, Thm 8; :func:`dplab.accounting.gaussian.gaussian_delta`).

Canonical update (docs/training.md), full batch b = n, no clipping acting:
θ ← c·θ − η(Σ_i ∇ℓ_i + σC·Z)/n, with contraction c = 1 − η for 002 Thm 3's loss
ℓ(θ; x) = ½‖θ − x‖² (App. E: θ ← (1−η)θ + ηx̄ + noise) and c = 1 for a linear loss
ℓ(θ; x) = −⟨θ, x⟩.  On the pair D, D′ that differ in one record with ‖x − x′‖ = S_g
(S_g = units.sum_sensitivity(C, replace_one) = 2C for records in the ball of radius C), after T
steps the means differ by (η S_g/n)·Σ_{i<T} cⁱ and the std per coordinate is
(ησC/n)·(Σ_{i<T} c²ⁱ)^{1/2}:

    μ_T = (S_g / (σC)) · Σ_{i<T} cⁱ / (Σ_{i<T} c²ⁱ)^{1/2}.

For c = 1 − η, α μ_T²/2 is 002 Thm 3's exact value (App. E), computed in 002's units by
:func:`dplab.accounting.langevin.thm3_exact_rdp`; for c = 1 it is the T-fold Gaussian
composition (μ√T with μ = S_g/(σC)): the last iterate reveals as much as the trajectory.
Add/remove neighbours change n and the contraction, so only replace-one is exact here.
:func:`contracted_mu` is μ_T for any contraction c, the audit's exact value of a gradient canary's
coordinate under full-batch noisy GD with l2 (c = 1 − η·l2).
"""

from __future__ import annotations

import math

import numpy as np

from dplab import units
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon
from dplab.accounting.roots import bisect, doubling
from dplab.errors import DPLabError
from dplab.schemes import Neighbouring

#: where the ε search of :func:`canary_last_iterate_epsilon` stops (e^ε overflows near 709): there
#: the laws' far tails have sunk below the convolution's rounding and no ε is resolved.  Against
#: the Gaussian closed form (q = 1, replace_one) its values drift from 1e-4 at ε ≈ 20 to 3e-3 at
#: ε ≈ 24 and 2 % (low) at ε ≈ 29; at ε ≈ 33 the search reaches this cap.
EPSILON_SEARCH_MAX = 512.0

LOSSES = {
    "quadratic": "002 Thm 3 / App. E: ℓ(θ; x) = ½‖θ − x‖², contraction 1 − η",
    "linear": "ℓ(θ; x) = −⟨θ, x⟩, contraction 1 (no hidden-state gain)",
}


def contraction(loss: str, lr: float) -> float:
    if loss == "quadratic":
        if not 0 < lr < 1:
            raise DPLabError("lr", f"002 Thm 3 needs lr in (0, 1); got {lr}")
        return 1.0 - lr
    if loss == "linear":
        return 1.0
    raise DPLabError("loss", f"must be one of {', '.join(LOSSES)}; got {loss!r}")


def contracted_mu(mu_step: float, c: float, steps) -> np.ndarray:
    """μ_T of the last iterate of v_t = c·v_{t−1} + shift + noise (same shift every step, i.i.d.
    Gaussian noise): μ_step·Σ_{i<T} cⁱ / (Σ_{i<T} c²ⁱ)^{1/2}, every T of
    ``steps``; μ_step√T at c = 1."""
    t = np.asarray(steps, dtype=float)
    if np.any(t < 1):
        raise DPLabError("steps", "must be >= 1")
    if not 0 <= c <= 1:
        raise DPLabError("contraction", f"must lie in [0, 1]; got {c}")
    if c == 1.0:
        return mu_step * np.sqrt(t)
    if c == 0.0:
        return mu_step * np.ones_like(t)
    return mu_step * (1 - c**t) / (1 - c) / np.sqrt((1 - c ** (2 * t)) / (1 - c * c))


def last_iterate_mu(
    noise_multiplier: float,
    lr: float,
    steps,
    loss: str,
    neighbouring: str = Neighbouring.REPLACE_ONE,
    clip: float = 1.0,
) -> np.ndarray:
    """μ_T = mean distance / std of the last iterates on the worst neighbouring pair, every T."""
    if neighbouring != Neighbouring.REPLACE_ONE:
        raise DPLabError(
            "neighbouring",
            "the exact last-iterate value is derived for replace_one only (002 Thm 3's pair)",
        )
    c = contraction(loss, lr)
    step = units.sum_sensitivity(clip, neighbouring) / units.noise_std_on_sum(
        noise_multiplier, clip
    )
    return contracted_mu(step, c, steps)


def exact_rdp(
    alpha: float, noise_multiplier: float, lr: float, steps, loss: str, **kw
) -> np.ndarray:
    """Exact Rényi divergence α μ_T²/2 of the two last iterates (002 Thm 3
    for the quadratic loss)."""
    return alpha * last_iterate_mu(noise_multiplier, lr, steps, loss, **kw) ** 2 / 2


def exact_delta(
    epsilon: float, noise_multiplier: float, lr: float, steps, loss: str, **kw
) -> np.ndarray:
    """Exact δ(ε) of the last iterate (hockey-stick divergence of the two Gaussians), every T."""
    return gaussian_delta(epsilon, last_iterate_mu(noise_multiplier, lr, steps, loss, **kw))


def exact_epsilon(
    delta: float, noise_multiplier: float, lr: float, steps, loss: str, **kw
) -> np.ndarray:
    """Exact ε(δ) of the last iterate, every T (inverse of :func:`exact_delta`)."""
    return gaussian_epsilon(delta, last_iterate_mu(noise_multiplier, lr, steps, loss, **kw))


#: the most cells of W's law (and of the x-grid) :func:`canary_last_iterate_epsilon` builds
CELLS_MAX = 2**24


def _check_cells(cells: float, t: int, shift: float) -> None:
    """A DPLabError where the grid would need more than :data:`CELLS_MAX` cells: a canary shift
    of many noise stds (a tiny σ), whose ε is far beyond what an audit resolves."""
    if not cells <= CELLS_MAX:
        raise DPLabError(
            "noise_multiplier",
            f"the exact last-iterate ε at T = {t} (canary shift {shift:g} noise stds) needs a grid"
            f" of {cells:.3g} cells (at most {CELLS_MAX}): raise noise_multiplier",
        )


def canary_last_iterate_epsilon(
    delta: float,
    shift: float,
    steps,
    neighbouring: str,
    q: float = 1.0,
    contraction: float = 1.0,
    period: int | None = None,
    bins: int | None = None,
) -> np.ndarray:
    """Exact ε(δ) of the last iterate of a gradient canary's coordinate, every T of ``steps``.

    In units of the per-step noise std, v_T − c^T v_0 = a·W + N(0, Σ_{i<T} c²ⁱ) with a =
    ``shift`` (the canary's norm / σC), c = ``contraction`` and W = Σ c^{T−t} over the steps t
    that drew the canary: each step independently with probability ``q`` (Poisson, without
    replacement); (``period`` Q: fixed batches cycled) the steps t ≡ j (mod Q) of the canary's
    batch j, uniform over the Q batches; or (``bins`` Q: balls-in-bins) one step uniform over
    each epoch of Q steps, independently per epoch, and in a last partial epoch of r < Q steps
    one of them with probability r/Q (uniform).  The neighbour is N(0, ·) (add_remove: absent)
    or −a·W′ + N(0, ·) (replace_one: the mirror).  δ(ε) is the hockey-stick divergence of the
    two laws (larger of both orders): W's law (c < 1: on a grid of step (x-grid)/(4T)), its
    atoms split linearly between x-grid cells of step std/400, convolved with the Gaussian; ε by
    bisection to 1e-6 relative, the upper end returned (a numerical value, not a bound: where the
    canary is the worst case it may lie ~1e-6 above a tight upper bound).  Checked against the
    binomial pair that pld composes, the Gaussian closed form (to ~1e-3) and, for balls-in-bins,
    W's law enumerated.
    """
    from scipy.signal import fftconvolve
    from scipy.stats import binom, norm

    if neighbouring not in (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE):
        raise DPLabError("neighbouring", f"must be add_remove or replace_one; got {neighbouring!r}")
    out = []
    for t in np.asarray(steps, dtype=int):
        powers = contraction ** np.arange(t)  # c^(T−s) of the steps s = T, T−1, …, 1
        std = math.sqrt(float((powers**2).sum()))
        dx = std / 400
        epochs, rest = divmod(t, bins or 1)
        if bins is not None and contraction == 1.0:  # W = epochs + Bernoulli(rest/Q)
            positions = shift * np.array([epochs, epochs + 1])
            mass = np.array([1 - rest / bins, rest / bins])
        elif period is None and contraction == 1.0:  # W ~ Binomial(T, q): its atoms exactly
            positions, mass = shift * np.arange(t + 1), binom.pmf(np.arange(t + 1), t, q)
        elif period is None:  # W's law on a grid: a convolution of independent draws
            fine = dx / (4 * t)
            _check_cells(float(np.sum(shift * powers / fine)), t, shift)
            moves = np.round(shift * powers / fine).astype(int)
            if bins is None:  # each step: 0 or its move
                draws = [([0, k], [1 - q, q]) for k in moves]
            else:  # each epoch of Q steps, then the partial one (the last r steps)
                draws = [(moves[i : i + bins], [1 / bins] * bins) for i in range(rest, t, bins)]
                if rest:
                    draws.append(([0, *moves[:rest]], [1 - rest / bins, *[1 / bins] * rest]))
            law = np.ones(1)
            for ks, ps in draws:
                grown = np.zeros(len(law) + max(ks))
                for k, p in zip(ks, ps):
                    grown[k : k + len(law)] += p * law
                law = grown
            positions, mass = np.arange(len(law)) * fine, law
        else:
            steps_drawn = [
                np.arange(t - 1 - j, -1, -period) for j in range(period)
            ]  # indices into powers
            positions = np.array([shift * powers[i].sum() for i in steps_drawn])
            mass = np.full(period, 1.0 / period)
        # each atom's mass split between its two neighbouring cells (linear: position error O(dx²))
        _check_cells(positions.max() / dx, t, shift)
        cell = np.floor(positions / dx).astype(int)
        frac = positions / dx - cell
        cells = np.bincount(cell, weights=mass * (1 - frac), minlength=cell.max() + 2)
        cells += np.bincount(cell + 1, weights=mass * frac, minlength=cell.max() + 2)
        reach = int(math.ceil(14 * std / dx))
        kernel = norm.pdf(np.arange(-reach, reach + 1) * dx, 0.0, std) * dx
        p_in = np.clip(
            fftconvolve(np.concatenate([np.zeros(len(cells) - 1), cells]), kernel), 0, None
        )
        if neighbouring == Neighbouring.ADD_REMOVE:
            p_out = np.zeros_like(p_in)
            p_out[len(cells) - 1 : len(cells) - 1 + len(kernel)] = kernel
        else:
            p_out = np.clip(
                fftconvolve(np.concatenate([cells[::-1], np.zeros(len(cells) - 1)]), kernel),
                0,
                None,
            )

        def excess(eps: float) -> float:
            return (
                max(
                    np.maximum(p_in - math.exp(eps) * p_out, 0).sum(),
                    np.maximum(p_out - math.exp(eps) * p_in, 0).sum(),
                )
                - delta
            )

        if excess(0.0) <= 0:
            out.append(0.0)
            continue
        found = doubling(lambda e: excess(e) > 0, 1.0, EPSILON_SEARCH_MAX)  # noqa: B023
        if found is None:  # the laws' far tails sink below the convolution's rounding
            raise DPLabError(
                "steps",
                f"the exact last-iterate ε at T = {t} (canary shift {shift:g}, {neighbouring}) is"
                f" beyond what its grid resolves (no ε ≤ {EPSILON_SEARCH_MAX:g} meets δ ="
                f" {delta:g}): audit fewer steps or a smaller canary",
            )
        _, hi = bisect(
            lambda e: excess(e) > 0, *found, steps=200, done=lambda lo, hi: hi - lo <= 1e-6 * hi
        )  # noqa: B023
        out.append(float(hi))
    return np.array(out)
