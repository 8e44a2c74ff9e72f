"""L2 sensitivity of the encoder C under a participation pattern (Choquette-Choo et al. 2023,
"Multi-Epoch Matrix Factorization", §2–3; 004 §4.3 "be careful how you sample").

One example's clipped gradient enters the steps of a pattern π (at most k steps, any two at
least b apart, ``(k, b)-participation``; k = 1 is single participation) with per-step vectors
g_i, ‖g_i‖ ≤ 1 (units of the clip norm; add/remove neighbours).  Its effect on C·G is
Σ_{i∈π} C[:, i]·g_iᵀ, so with X = CᵀC

    sens² = max_π max_{g} Σ_{i,j∈π} X_ij ⟨g_i, g_j⟩.

What :func:`sensitivity` computes, and when it is exact:
- k = 1: max_i ‖C[:, i]‖ (exact).
- X_ij = 0 whenever |i − j| ≥ b (e.g. C with ≤ b bands): sens² = max_π Σ_{i∈π} X_ii, exact,
  by dynamic programming over the diagonal.
- C lower-triangular Toeplitz with non-negative, non-increasing coefficients (identity, sqrt):
  X_ij = Σ_{s ≤ T−1−max(i,j)} c_s·c_{s+|i−j|} ≥ 0 decreases in max(i, j) and in |i − j|, so
  the all-equal g and the pattern {0, b, …, (k−1)b} are worst: sens = ‖Σ_{m<k} C[:, m·b]‖, exact.
- X ≥ 0 elementwise and few maximal patterns (≤ ``ENUMERATION_LIMIT``; those no step can be added
  to): the worst g are all equal, sens² = max_π 1ᵀX_π1, exact by enumeration.
- otherwise an upper bound: sens² ≤ max_π Σ_{i∈π} u_i with u_i = max_{π∋i} Σ_{j∈π} |X_ij|
  (each by dynamic programming), since ⟨g_i, g_j⟩ ≤ 1; exact where equal g on the pattern it
  picks reach it (1ᵀX_π1 is a lower bound for any X).

:func:`toeplitz_sensitivity` does the same for a banded lower-triangular Toeplitz C given by its
coefficients, in O(T) (O(T log T) for the bound), without forming X.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from dplab.errors import DPLabError
from dplab.validate import integer

ENUMERATION_LIMIT = 20_000


@dataclass(frozen=True)
class Sensitivity:
    value: float
    exact: bool
    method: str


def max_participations(steps: int, participations: int, min_separation: int) -> int:
    """The most participations a pattern can have in T steps: min(k, 1 + ⌊(T−1)/b⌋)."""
    return min(participations, 1 + (steps - 1) // min_separation)


def best_pattern_sum(weights: np.ndarray, participations: int, min_separation: int) -> np.ndarray:
    """max over patterns (≤ k positions, gaps ≥ b) of Σ weights, for each row of ``weights``.

    ``weights`` has shape (rows, T) (or (T,)); entries may be −inf (forbidden positions).
    Dynamic programming from the right: f_j(i) = max(f_j(i+1), w_i + f_{j−1}(i+b)), keeping only the
    b + 1 positions i..i+b that the recursion reads (slot i mod (b + 1)).
    """
    w = np.atleast_2d(np.asarray(weights, dtype=float))
    rows, T = w.shape
    k, b = participations, min_separation
    f = np.zeros(
        (b + 1, rows, k + 1)
    )  # f[i % (b+1), :, j]: best with ≤ j picks among positions ≥ i
    for i in range(T - 1, -1, -1):
        take = w[:, i, None] + f[(i + b) % (b + 1), :, :k]
        f[i % (b + 1), :, 1:] = np.maximum(f[(i + 1) % (b + 1), :, 1:], take)
    out = f[0, :, k]
    return out if np.ndim(weights) > 1 else out[0]


def best_pattern(
    weights: np.ndarray, participations: int, min_separation: int
) -> tuple[float, list[int]]:
    """:func:`best_pattern_sum` of the 1-D ``weights`` ≥ 0 and the positions of a pattern (≤ k,
    gaps ≥ b) attaining it: the same recursion over a full (T + 1) × (k + 1) table, traced back."""
    w = np.asarray(weights, dtype=float)
    T, k, b = len(w), participations, min_separation
    f = np.zeros((T + 1, k + 1))  # f[i, j]: best with ≤ j picks among positions ≥ i
    for i in range(T - 1, -1, -1):
        f[i, 1:] = np.maximum(f[i + 1, 1:], w[i] + f[min(i + b, T), :k])
    pattern, i, j = [], 0, k
    while i < T and j > 0:
        if f[i, j] > f[i + 1, j]:
            pattern.append(i)
            i, j = i + b, j - 1
        else:
            i += 1
    return float(f[0, k]), pattern


def _is_toeplitz_decreasing(C: np.ndarray) -> bool:
    c = C[:, 0]
    T = len(c)
    toeplitz = np.allclose(
        C, np.tril(c[np.subtract.outer(np.arange(T), np.arange(T)) % T]), rtol=0, atol=1e-12
    )
    return toeplitz and bool(np.all(c >= 0)) and bool(np.all(np.diff(c) <= 1e-15))


def sensitivity(C: np.ndarray, participations: int = 1, min_separation: int = 1) -> Sensitivity:
    """Sensitivity of C for (k, b)-participation (module docstring says which case is exact)."""
    C = np.asarray(C, dtype=float)
    T = C.shape[1]
    k = integer("participations", participations)
    b = integer("min_separation", min_separation)
    k = max_participations(T, k, b)
    X = C.T @ C
    diag = np.diag(X)
    if k == 1:
        return Sensitivity(math.sqrt(diag.max()), True, "single participation: max column norm")
    lag = np.abs(np.subtract.outer(np.arange(T), np.arange(T)))
    scale = diag.max()
    if np.all(np.abs(X[lag >= b]) <= 1e-12 * scale):
        return Sensitivity(
            math.sqrt(best_pattern_sum(diag, k, b)),
            True,
            "columns >= b apart orthogonal: DP over column norms",
        )
    if _is_toeplitz_decreasing(C):
        v = C[:, [m * b for m in range(k)]].sum(axis=1)
        return Sensitivity(
            float(np.linalg.norm(v)),
            True,
            "Toeplitz non-increasing non-negative: pattern 0, b, 2b, ...",
        )
    if np.all(X >= -1e-12 * scale):
        patterns = list(_maximal_patterns(T, k, b, ENUMERATION_LIMIT))
        if len(patterns) <= ENUMERATION_LIMIT:
            best = max(X[np.ix_(p, p)].sum() for p in patterns)
            return Sensitivity(math.sqrt(best), True, "X >= 0: enumeration of every pattern")
    absX = np.abs(X)
    per_row = np.where(lag < b, -np.inf, absX)  # other positions of a pattern containing i
    u = np.diag(absX) + best_pattern_sum(per_row, k - 1, b)
    # equal g on the bound's own pattern π give sens² ≥ 1ᵀX_π1: where that meets the bound, exact
    upper, pattern = best_pattern(u, k, b)
    if X[np.ix_(pattern, pattern)].sum() >= upper * (1 - 1e-12):
        return Sensitivity(
            math.sqrt(upper), True, "DP over row bounds of |X|, met by equal g on its pattern"
        )
    return Sensitivity(math.sqrt(upper), False, "upper bound: DP over row bounds of |X|")


def _maximal_patterns(T: int, k: int, b: int, limit: int):
    """Every maximal pattern: ≤ k positions, gaps ≥ b, none can be added.  Non-negative X makes
    adding a position never decrease 1ᵀX_π1, so the others are dominated.  A maximal pattern has k
    positions, or fewer where nothing fits: first < b, every gap < 2b, last > T − 1 − b (the
    min_separation sampler's partition j ≥ T mod b has only ⌈T/b⌉ − 1 steps; T = 3, k = b = 2: {1}).
    Depth-first; every node pushed extends to a maximal pattern.  Yields at most ``limit`` + 1."""

    def nexts(last: int, size: int, full: bool) -> list[tuple[int, bool]]:
        """Positions that may follow ``last`` in a pattern of ``size`` positions so far, each with
        whether the pattern must then reach k (a first position ≥ b or a gap ≥ 2b leaves room
        before it)."""
        reach = T - 1 - (k - size - 1) * b  # the last position from which k can still be reached
        if full:
            return [(p, True) for p in range(last + b, reach + 1)]
        near = [(p, False) for p in range(last + b, min(T, last + 2 * b))]
        return near + [(p, True) for p in range(last + 2 * b, reach + 1)]

    count = 0
    stack = [([p], full) for p, full in nexts(-b, 0, False)]
    while stack:
        pattern, full = stack.pop()
        last = pattern[-1]
        if len(pattern) == k or last + b > T - 1:
            yield pattern
            count += 1
            if count > limit:
                return
            continue
        stack.extend(([*pattern, p], f) for p, f in nexts(last, len(pattern), full))


def brute_force(C: np.ndarray, participations: int, min_separation: int) -> float:
    """max_π 1ᵀX_π1 over every pattern with 1..k positions, gaps ≥ b (tests, small T only).

    Equals sens² when X ≥ 0 (all-equal g are worst); a lower bound on it in general.
    """
    X = np.asarray(C, float).T @ np.asarray(C, float)
    T = X.shape[0]
    best = -np.inf
    for size in range(1, participations + 1):
        for p in itertools.combinations(range(T), size):
            if all(p[m + 1] - p[m] >= min_separation for m in range(size - 1)):
                best = max(best, X[np.ix_(p, p)].sum())
    return math.sqrt(best)


def column_sum(
    coefficients: np.ndarray, steps: int, participations: int, min_separation: int
) -> np.ndarray:
    """v = Σ_{m<k} C[:, m·s] for the T×T lower-triangular Toeplitz C with first column
    ``coefficients`` (zero-padded or cut to T): v_t = Σ_{m<k, m·s≤t} c_{t−m·s}, a cumulative sum
    over blocks of s, O(T)."""
    k, s = participations, min_separation
    rows = -(-steps // s)
    u = np.zeros(rows * s)
    n = min(len(coefficients), steps)
    u[:n] = coefficients[:n]
    sums = u.reshape(rows, s).cumsum(axis=0)  # sums[r, i] = Σ_{m≤r} c_{(r−m)·s+i}
    sums[k:] = sums[k:] - sums[:-k]  # keep m < k
    return sums.ravel()[:steps]


def toeplitz_sensitivity(
    coefficients, steps: int, participations: int = 1, min_separation: int = 1
) -> Sensitivity:
    """Sensitivity of the lower-triangular Toeplitz C with first column c = ``coefficients``
    (b = len(c) bands) for (k, s)-participation, in O(T); which case applies is the ``method``:

    - k = 1: ‖c‖, the first (longest) column (exact);
    - b ≤ s: columns ≥ s apart have disjoint supports and column norms do not increase, so the
      pattern 0, s, 2s, … is worst: sens = ‖Σ_{m<k} C[:, m·s]‖ (exact);
    - c ≥ 0 non-increasing: the same pattern and value (module docstring, the Toeplitz case; the
      value jax_privacy's ``toeplitz.minsep_sensitivity_squared`` computes) (exact);
    - otherwise an upper bound: |X_ij| ≤ r_{|i−j|} = Σ_ℓ |c_ℓ|·|c_{ℓ+|i−j|}|, and the m-th and m'-th
      positions of a pattern are ≥ |m − m'|·s apart, so sens² ≤ k·r_0 + 2·Σ_{d=1}^{k−1} (k − d)·R_d
      with R_d = max_{lag ≥ d·s} r_lag.
    """
    import scipy.signal

    c = np.asarray(coefficients, dtype=float)[: integer("steps", steps)]
    if c.ndim != 1 or len(c) == 0 or not np.all(np.isfinite(c)) or c[0] == 0:
        raise DPLabError("coefficients", "must be finite numbers with c_0 != 0")
    s = integer("min_separation", min_separation)
    k = max_participations(steps, integer("participations", participations), s)
    if k == 1:
        return Sensitivity(
            float(np.linalg.norm(c)), True, "single participation: first column norm"
        )
    if len(c) <= s:
        v = column_sum(c, steps, k, s)
        return Sensitivity(
            float(np.linalg.norm(v)),
            True,
            "bands <= min_separation: disjoint columns 0, s, 2s, ...",
        )
    if np.all(c >= 0) and np.all(np.diff(c) <= 0):
        v = column_sum(c, steps, k, s)
        return Sensitivity(
            float(np.linalg.norm(v)),
            True,
            "Toeplitz non-increasing non-negative: pattern 0, s, 2s, ...",
        )
    a = np.abs(c)
    r = scipy.signal.correlate(a, a, mode="full")[len(a) - 1 :]  # r[lag] = Σ_ℓ a_ℓ·a_{ℓ+lag}
    tail = np.maximum.accumulate(r[::-1])[::-1]  # tail[lag] = max_{lag' ≥ lag} r[lag']
    d = np.arange(1, k)
    R = np.where(d * s < len(r), tail[np.minimum(d * s, len(r) - 1)], 0.0)
    bound = k * r[0] + 2.0 * np.sum((k - d) * R)
    return Sensitivity(
        math.sqrt(bound), False, "upper bound: |X_ij| <= autocorrelation of |c| at |i-j| >= (m'-m)s"
    )
