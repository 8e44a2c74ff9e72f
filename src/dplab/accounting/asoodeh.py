"""``asoodeh_projected`` and ``asoodeh_regularized``: hockey-stick contraction bounds for
DP-SGD whose intermediate iterates stay hidden (001, Asoodeh & Diaz).

Plain functions are in 001's units: σ_A is the parameter-space noise std (001 eq. (1); ours is
units.asoodeh_sigma = η·σ·C/b), p = b/n (our q), r = (D + 2ηC)/σ_A.  Both theorems compare
datasets with the same n that differ in one record (proofs of Props. 2, 3, 5: x_n ≠ x'_n), i.e.
replace-one neighbours; the accountants refuse add_remove.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import chdtrc, chdtri, gammaln, log_ndtr, ndtri

from dplab import units
from dplab.accounting.base import Accountant
from dplab.accounting.roots import expand, safe_root
from dplab.accounting.setting import Setting
from dplab.schemes import Neighbouring, Sampling

#: the largest ε the root searches of Thms 1–3 look for: θ_ε(r) is evaluated in log space, so ε this
#: large (r ≈ 10⁶) still resolves; a bound that needs more is refused (a huge diameter, a tiny σ)
EPSILON_SEARCH_MAX = 1e12


# ------------------------------------------------------------------ projected DP-SGD
def theta(epsilon: float, r) -> np.ndarray:
    """001 Prop. 1: θ_ε(r) = Q(ε/r − r/2) − e^ε·Q(ε/r + r/2), the E_ε contraction coefficient
    of a Gaussian kernel N(x, σ²I) whose inputs have diameter r·σ (Q = 1 − Φ).

    Evaluated as Φ(a)·(1 − e^{ε + log Φ(b) − log Φ(a)}), a = r/2 − ε/r, b = −ε/r − r/2: no
    cancellation where both terms are tiny (large ε), so θ keeps its relative precision down to
    the smallest δ asked for."""
    r = np.asarray(r, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_a = log_ndtr(r / 2 - epsilon / r)
        value = np.exp(log_a) * -np.expm1(
            np.minimum(epsilon + log_ndtr(-epsilon / r - r / 2) - log_a, 0.0)
        )
    return np.where((r > 0) & (log_a > -np.inf), np.clip(value, 0.0, 1.0), 0.0)


def projected_r(diameter: float, lr: float, clip: float, sigma_a: float) -> float:
    """r = (D + 2ηC)/σ_A, the argument of θ_ε in 001 Thms 1–2 (Lemma 2: inputs within D + 2ηC)."""
    return (diameter + 2 * lr * clip) / sigma_a


def projected_delta(epsilon: float, steps, p: float, r: float) -> np.ndarray:
    """001 Thm 1 (Poisson, rate p) and Thm 2 (without replacement, p = b/n), eq. (5):
    δ(T) = pθ·(1 − [(1−p)θ]^T)/(1 − (1−p)θ), θ = θ_ε(r), for every T of ``steps``."""
    th = float(theta(epsilon, r))
    a = (1 - p) * th
    return (
        p * th * -np.expm1(np.asarray(steps, dtype=float) * math.log(a)) / (1 - a)
        if a > 0
        else np.full(np.shape(steps), p * th)
    )


def projected_delta_limit(epsilon: float, p: float, r: float) -> float:
    """001 App.: the T → ∞ limit of Thms 1–2, pθ/(1 − (1−p)θ)."""
    th = float(theta(epsilon, r))
    return p * th / (1 - (1 - p) * th)


def projected_epsilon_limit(delta: float, p: float, r: float) -> float:
    """001 eq. (22): ε*_δ, the root of θ_ε(r) = δ/(p + (1−p)δ) (0 if θ_0(r) already meets it; +∞
    beyond :data:`EPSILON_SEARCH_MAX`)."""
    target = delta / (p + (1 - p) * delta)
    gap = lambda e: float(theta(e, r)) - target  # noqa: E731
    if gap(0.0) <= 0:
        return 0.0
    start = max(projected_epsilon_closed_form(delta, p, r), 1e-12)
    hi = expand(
        lambda e: gap(e) > 0,
        start,
        lambda e: 2 * e,
        within=lambda e: e <= max(EPSILON_SEARCH_MAX, start),
    )
    return math.inf if hi is None else safe_root(gap, 0.0, hi, xtol=1e-14, rtol=1e-12, nudge=None)


def projected_epsilon_closed_form(delta: float, p: float, r: float) -> float:
    """001 eq. (23): ε ≤ r·[r/2 + Φ⁻¹(p(1−δ)/(p + (1−p)δ))], from θ_ε(r) < Q(ε/r − r/2).

    Evaluated as r·[r/2 − Φ⁻¹(δ/(p + (1−p)δ))] (the same, as 1 − Φ⁻¹'s argument): the argument
    itself rounds to 1 below δ ≈ 1e-16·p, which made ε infinite there."""
    return r * (r / 2 - float(ndtri(delta / (p + (1 - p) * delta))))


def projected_epsilon(delta: float, steps, p: float, r: float) -> np.ndarray:
    """ε(T) at δ for every T: the root in ε of δ(ε, T) = δ (Thms 1–2; δ decreases in ε); +∞ where
    no ε ≤ :data:`EPSILON_SEARCH_MAX` reaches δ."""
    out = []
    for t in np.asarray(steps, dtype=float):
        gap = lambda e: float(projected_delta(e, [t], p, r)[0]) - delta  # noqa: E731,B023
        if gap(0.0) <= 0:
            out.append(0.0)
            continue
        hi = expand(
            lambda e: gap(e) > 0,
            max(projected_epsilon_closed_form(delta, p, r), 1e-12),
            lambda e: 2 * e,  # noqa: B023
            within=lambda e: e <= EPSILON_SEARCH_MAX,
        )
        out.append(
            math.inf if hi is None else safe_root(gap, 0.0, hi, xtol=1e-14, rtol=1e-12, nudge=None)
        )
    return np.array(out)


# ---------------------------------------------------------------- regularized DP-SGD
#: the smallest χ² tail read from scipy's ``chdtrc``; below it :func:`chi2_log_tail_bound`
TAIL_MIN = 1e-305
#: a first term of eq. (21) this small at the κ grid's end is left there: a δ far below any asked
FIRST_TERM_NEGLIGIBLE = 1e-250


def chi2_log_tail_bound(dimension: int, x) -> np.ndarray:
    """An upper bound on log P(χ²_d > x), finite where the tail underflows: with a = d/2, z = x/2,
    Γ(a, z) = ∫_z^∞ t^{a−1}e^{−t} dt ≤ z^{a−1}e^{−z}·z/(z − a + 1) for a ≥ 1 and z > a − 1
    (t^{a−1} ≤ z^{a−1}e^{(a−1)(t−z)/z}), ≤ z^{a−1}e^{−z} for a < 1; divided by Γ(a).  +∞ where
    z ≤ a − 1 (no bound: the caller's κ there have a tail far above :data:`TAIL_MIN`)."""
    a, z = dimension / 2, np.asarray(x, dtype=float) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = z - max(a - 1, 0.0)
        log_bound = (a - 1) * np.log(z) - z - gammaln(a) + np.log(z / gap) * (a >= 1)
    return np.where(gap > 0, log_bound, np.inf)


def regularized_delta(
    epsilon: float,
    steps: int,
    p: float,
    lr: float,
    clip: float,
    sigma_a: float,
    regularization: float,
    dimension: int,
    kappa,
) -> np.ndarray:
    """001 Thm 3, eq. (21), at T = ``steps`` for each κ in ``kappa``:

    δ ≤ (1+e^ε)[1 − P(χ²_d ≤ κ²)^T] + (b/(n−b))·Σ_{t=1}^T (1−p)^{T−t} Π_{s=t}^T θ_ε(2(r_s − σκ)/σ),
    r_s = (ηC + κσ)(1 − (1−λ)^s)/λ (eq. (20)), σ = σ_A.

    Correction to the printed (21): Prop. 5's proof puts the Gaussian kernel's inputs in the
    ball B(r_s − σκ), whose *diameter* 2(r_s − σκ) is what Prop. 1 needs; (21) prints the radius.
    The factor b/(n−b) is kept as printed (Lemma 1 gives b/n·(1−p)^{T−t}, smaller by (1−p)).
    """
    kappa = np.atleast_1d(np.asarray(kappa, dtype=float))[:, None]
    s = np.arange(1, steps + 1, dtype=float)[None, :]
    lam, sig = regularization, sigma_a
    # 1 − (1−λ)^s reaches 1.0 in floating point after a few dozen s unless λ is small: θ is taken
    # once per distinct value (the same numbers, fewer evaluations), then laid out along s in
    # row-major order, the order the sums below add in
    growth, along_s = np.unique(-np.expm1(s * math.log1p(-lam)), return_inverse=True)
    radius = (lr * clip + kappa * sig) * growth / lam - sig * kappa
    with np.errstate(divide="ignore"):
        log_theta = np.log(theta(epsilon, 2 * np.maximum(radius, 0.0) / sig))
    log_theta = np.take(log_theta, along_s.ravel(), axis=1)
    # Σ_t (1−p)^{T−t} Π_{s=t}^T θ_s with the suffix sums Σ_{s=t}^T log θ_s (θ_s may underflow to 0)
    suffix = np.cumsum(log_theta[:, ::-1], axis=1)[:, ::-1]
    terms = np.exp((steps - s) * math.log1p(-p) + suffix)
    second = p / (1 - p) * terms.sum(axis=1)
    first = np.exp(np.minimum(log_first_term(epsilon, steps, dimension, kappa[:, 0]), 1.0))
    return first + second  # values > 1 are capped by the caller anyway


def log_first_term(epsilon: float, steps: int, dimension: int, kappa) -> np.ndarray:
    """log of eq. (21)'s first term (1+e^ε)[1 − P(χ²_d ≤ κ²)^T], in log space (no overflow at
    large ε); where the tail P(χ²_d > κ²) is below :data:`TAIL_MIN`, bounded by
    log(1+e^ε) + log T + :func:`chi2_log_tail_bound` (1 − (1 − u)^T ≤ Tu)."""
    x = np.asarray(kappa, dtype=float) ** 2
    tail = chdtrc(dimension, x)  # scipy.stats's chi2.sf
    with np.errstate(divide="ignore", invalid="ignore"):
        log_miss = np.where(
            tail >= TAIL_MIN,
            np.log(-np.expm1(steps * np.log1p(-tail))),
            math.log(steps) + chi2_log_tail_bound(dimension, x),
        )
    return np.logaddexp(0.0, epsilon) + log_miss


def regularized_delta_optimized(
    epsilon: float,
    steps: int,
    p: float,
    lr: float,
    clip: float,
    sigma_a: float,
    regularization: float,
    dimension: int,
) -> tuple[float, float]:
    """(δ, κ*): eq. (21) minimized over κ > 0 — a grid of 161 κ with χ² tail P(χ²_d > κ²) from
    10⁰ to 10⁻³⁰⁰ (κ = √(χ²_d quantile)), continued by 5 % steps in κ while the first term at the
    grid's last κ exceeds 1 % of the best δ and :data:`FIRST_TERM_NEGLIGIBLE` (large ε:
    (1+e^ε)·10⁻³⁰⁰ ≥ 1 beyond ε ≈ 690), then bounded Brent in log κ between the grid neighbours
    of the best point.  Every κ gives a valid bound; the search only tightens it."""
    from scipy.optimize import minimize_scalar

    def at(kappas):
        return regularized_delta(
            epsilon, steps, p, lr, clip, sigma_a, regularization, dimension, kappas
        )

    tails = np.logspace(-0.01, -300, 161)
    grid = np.sqrt(chdtri(dimension, tails))  # the χ²_d quantiles, scipy.stats's chi2.isf
    grid = grid[np.isfinite(grid) & (grid > 0)]
    values = at(grid)
    while np.min(values) > 0 and log_first_term(epsilon, steps, dimension, grid[-1]) > max(
        math.log(0.01 * np.min(values)), math.log(FIRST_TERM_NEGLIGIBLE)
    ):
        more = grid[-1] * 1.05 ** np.arange(1, 41)
        grid, values = np.concatenate([grid, more]), np.concatenate([values, at(more)])
    i = int(np.argmin(values))
    lo, hi = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, len(grid) - 1)])
    best_k, best = grid[i], float(values[i])
    if hi > lo:

        def f(lk):
            return float(at([math.exp(lk)])[0])

        res = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-8})
        if res.fun < best:
            best_k, best = math.exp(res.x), float(res.fun)
    return min(best, 1.0), best_k


# ---------------------------------------------------------------------- accountants
class _AsoodehBase(Accountant):
    release = "last_iterate"
    neighbourings = (Neighbouring.REPLACE_ONE,)

    @staticmethod
    def sigma_a(setting: Setting) -> float:
        return units.asoodeh_sigma(
            setting.noise_multiplier, setting.lr, setting.clip, setting.batch_size
        )


class AsoodehProjectedAccountant(_AsoodehBase):
    """Projected DP-SGD (001 eq. (1), (12)): 001 Thm 1 for ``poisson``, Thm 2 for
    ``without_replacement`` — the same δ(ε, T) of eq. (5) with p = q, θ = θ_ε((D + 2ηC)/σ_A)
    (Prop. 1), σ_A = units.asoodeh_sigma.  ε from δ by root finding in ε; no loss assumption."""

    name = "asoodeh_projected"
    source = "001 Thm 1 (poisson), Thm 2 (without_replacement), Prop. 1; limits eq. (22), (23)"
    samplings = (Sampling.POISSON, Sampling.WITHOUT_REPLACEMENT)
    requires = ("noise_multiplier", "steps", "batch_size", "dataset_size", "clip", "lr", "diameter")
    assumptions = (
        "only the last iterate is released (hidden state)",
        "every iterate is projected onto a convex set of diameter `diameter` (001 eq. (1))",
        (
            "per-example gradients clipped to `clip`; the update averages over the realized batch"
            " (001 eq. (12))"
        ),
        "replace-one neighbours (001 Props. 2–3)",
    )

    def _params(self, setting: Setting) -> tuple[float, float]:
        r = projected_r(setting.diameter, setting.lr, setting.clip, self.sigma_a(setting))
        return setting.sampling_rate, r

    def _epsilon_curve(self, setting, delta, steps):
        eps = projected_epsilon(delta, steps, *self._params(setting))
        if not np.all(np.isfinite(eps)):
            r = self._params(setting)[1]
            raise self.too_far(
                "delta",
                f"001 Thms 1–2 give no ε <= {EPSILON_SEARCH_MAX:g} at δ = {delta:g} here "
                f"(r = (D + 2ηC)/σ_A = {r:.3g}: the kernel barely contracts)",
            )
        return eps

    def _delta_curve(self, setting, epsilon, steps):
        return projected_delta(epsilon, steps, *self._params(setting))


class AsoodehRegularizedAccountant(_AsoodehBase):
    """Regularized unprojected DP-SGD (001 eq. (16)–(17): w ← (1−λ)w − η·mean(clip(g)) + σ_A·Z,
    λ = ``regularization``): 001 Thm 3, eq. (21) with the diameter correction of
    :func:`regularized_delta`, κ optimized numerically per T (:func:`regularized_delta_optimized`).
    ε from δ by root finding in ε."""

    name = "asoodeh_regularized"
    source = "001 Thm 3, eq. (20)–(21) (κ optimized numerically)"
    samplings = (Sampling.WITHOUT_REPLACEMENT,)
    requires = (
        "noise_multiplier",
        "steps",
        "batch_size",
        "dataset_size",
        "clip",
        "lr",
        "regularization",
        "dimension",
    )
    excludes = ("diameter",)  # 001 eq. (16): unprojected (Π_t of eq. (19) is a device of the proof)
    assumptions = (
        "only the last iterate is released (hidden state)",
        (
            "update (1−λ)w − η·mean(clip(g)) + σ_A·Z with λ = regularization in (0, 1), no"
            " projection (diameter unset), W₀ data-independent (001 eq. (16)–(17): W₀ = 0,"
            " 'immaterial'; docs/hidden_state.md)"
        ),
        "sampling without replacement (Thm 3 is proved for it only)",
        "replace-one neighbours (001 Prop. 5)",
        "batch_size < dataset_size (the factor b/(n−b) of eq. (21))",
    )

    limits = {
        "steps": (
            1,
            10**4,
            "eq. (21) is evaluated at every step for 161 values of κ: 10^4 steps take "
            "0.2 s and 70 MB per δ, and ε needs dozens",
        )
    }

    def check_setting(self, setting: Setting) -> None:
        if not setting.regularization > 0:
            raise self.fail(
                "regularization", f"must lie in (0, 1) (001 eq. (17)); got {setting.regularization}"
            )
        if not setting.batch_size < setting.dataset_size:
            raise self.fail(
                "batch_size", f"must be < dataset_size ({setting.dataset_size}) for 001 eq. (21)"
            )

    def _args(self, setting: Setting) -> tuple:
        return (
            setting.sampling_rate,
            setting.lr,
            setting.clip,
            self.sigma_a(setting),
            setting.regularization,
            setting.dimension,
        )

    def _delta_curve(self, setting, epsilon, steps):
        args = self._args(setting)
        return np.array([regularized_delta_optimized(epsilon, int(t), *args)[0] for t in steps])

    def _epsilon_curve(self, setting, delta, steps):
        args = self._args(setting)
        out = []
        for t in steps:
            gap = lambda e: regularized_delta_optimized(e, int(t), *args)[0] - delta  # noqa: E731,B023
            hi = expand(
                lambda e: gap(e) > 0, 1.0, lambda e: 2 * e, within=lambda e: e <= EPSILON_SEARCH_MAX
            )  # noqa: B023
            if hi is None:
                raise self.too_far(
                    "delta",
                    f"001 Thm 3 gives no ε <= {EPSILON_SEARCH_MAX:g} at δ = {delta:g}, T = {t}",
                )
            lo = hi / 2 if hi > 1.0 else 0.0  # the last ε that missed δ (0: none tried)
            out.append(
                safe_root(gap, lo, hi, xtol=1e-10, rtol=1e-8, nudge=None) if gap(lo) > 0 else lo
            )
        return np.array(out)
