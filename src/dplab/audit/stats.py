"""From an attack's true/false positives to an ε lower bound, with Clopper–Pearson intervals.

(ε, δ)-DP bounds every test between neighbouring datasets (Kairouz et al. 2015, Thm 2.1):
TPR ≤ e^ε·FPR + δ and TNR ≤ e^ε·FNR + δ, so any attack gives

    ε ≥ max( log((TPR − δ)/FPR), log((TNR − δ)/FNR) )

(Jagielski et al. 2020; Nasr et al. 2021).  With finitely many runs the rates are estimated:
the bound at confidence 1 − a uses the Clopper–Pearson lower end of TPR (resp. TNR) and upper end
of FPR (resp. FNR), each an exact two-sided interval at level 1 − a, so each one-sided bound
fails with probability ≤ a/2 and the pair with probability ≤ a (union bound).  The threshold
is chosen on a selection part of the scores (:func:`split_scores`) and the bound evaluated on
the rest, so the choice does not bias it.  This is the audit's distribution-free estimator
(``clopper_pearson`` in :mod:`dplab.audit.estimators`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

from dplab.errors import DPLabError


def clopper_pearson(k, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided interval for a binomial rate after k successes in n trials:
    [Beta(a/2; k, n−k+1), Beta(1−a/2; k+1, n−k)] with a = 1 − confidence (0 and 1 at the ends)."""
    if not 0 < confidence < 1:
        raise DPLabError("confidence", f"must lie in (0, 1); got {confidence}")
    k, n = np.broadcast_arrays(np.asarray(k, float), np.asarray(n, float))
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise DPLabError("runs", "need 0 <= k <= n and n >= 1")
    a = 1.0 - confidence
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, beta.ppf(a / 2, k, n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1 - a / 2, k + 1, n - k), 1.0)
    return lo, hi


def epsilon_from_rates(tpr, fpr, delta: float) -> np.ndarray:
    """max(log((TPR − δ)/FPR), log((1 − FPR − δ)/(1 − TPR)), 0): the ε any (ε, δ)-DP mechanism
    needs for an attack with these rates (inf where a denominator is 0 and the numerator > 0)."""
    tpr, fpr = np.broadcast_arrays(np.asarray(tpr, float), np.asarray(fpr, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.where(
            tpr - delta > 0, np.log(np.maximum(tpr - delta, 1e-300)) - np.log(fpr), -np.inf
        )
        two = np.where(
            1 - fpr - delta > 0,
            np.log(np.maximum(1 - fpr - delta, 1e-300)) - np.log(1 - tpr),
            -np.inf,
        )
    return np.maximum(np.maximum(one, two), 0.0)


def epsilon_interval(tp, pos, fp, neg, delta: float, confidence: float = 0.95):
    """(point, ci_low, ci_high) of the ε an attack with tp/pos true and fp/neg false positives
    certifies.  ci_low is the lower bound that holds with probability ≥ ``confidence``
    (Clopper–Pearson ends combined as in the module docstring); point uses the observed rates,
    with a zero count replaced by 1/2 (so it stays finite); ci_high uses the other ends."""
    tpr_lo, tpr_hi = clopper_pearson(tp, pos, confidence)
    fpr_lo, fpr_hi = clopper_pearson(fp, neg, confidence)
    low = np.maximum(epsilon_from_rates(tpr_lo, fpr_hi, delta), 0.0)
    # the symmetric bound needs TNR_lo = 1 − FPR_hi and FNR_hi = 1 − TPR_lo: same ends
    high = epsilon_from_rates(tpr_hi, fpr_lo, delta)
    tp, fp = np.asarray(tp, float), np.asarray(fp, float)
    tpr = np.clip(tp, 0.5, pos - 0.5) / pos
    fpr = np.clip(fp, 0.5, neg - 0.5) / neg
    return epsilon_from_rates(tpr, fpr, delta), low, high


@dataclass(frozen=True)
class AuditBound:
    threshold: float
    tp: int
    positives: int
    fp: int
    negatives: int
    epsilon: float  # point estimate on the evaluation half
    ci_low: float  # the ε lower bound, valid with probability ≥ confidence
    ci_high: float


def counts_at(
    scores_in: np.ndarray, scores_out: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Positives (score ≥ threshold) among in-runs and out-runs, for every threshold."""
    s_in, s_out = np.sort(scores_in), np.sort(scores_out)
    tp = len(s_in) - np.searchsorted(s_in, thresholds, side="left")
    fp = len(s_out) - np.searchsorted(s_out, thresholds, side="left")
    return tp, fp


def split_scores(scores, selection: float) -> tuple[np.ndarray, np.ndarray]:
    """(selection part, evaluation part) of one score list: its first ⌊selection·n⌋ entries (at
    least 1, at most n − 1) and the rest.  Scores come in run order, so the
    parts are independent."""
    scores = np.asarray(scores, float)
    if len(scores) < 2:
        raise DPLabError("runs", "need at least 2 scores per world to split selection/evaluation")
    if not np.all(np.isfinite(scores)):
        raise DPLabError("scores", "attack scores must be finite")
    if not 0 < selection < 1:
        raise DPLabError("selection", f"must lie in (0, 1); got {selection}")
    cut = min(max(int(selection * len(scores)), 1), len(scores) - 1)
    return scores[:cut], scores[cut:]


def select_threshold(sel_in: np.ndarray, sel_out: np.ndarray, objective) -> float:
    """The threshold τ of the test "score ≥ τ ⇒ in" that maximizes ``objective(tp, fp)`` (an array
    per candidate; a tuple of arrays: lexicographic) on the selection scores.  Every τ between
    two consecutive candidates has the same counts: the middle of that interval is returned."""
    candidates = np.unique(np.concatenate([sel_in, sel_out, [np.inf]]))
    tp, fp = counts_at(sel_in, sel_out, candidates)
    keys = objective(tp, fp)
    keys = keys if isinstance(keys, tuple) else (keys,)
    best = np.lexsort(tuple(reversed(keys)))[-1]
    if best == 0:
        return float(candidates[0])
    if not np.isfinite(candidates[best]):
        return float(candidates[best - 1]) + 1.0
    return float((candidates[best] + candidates[best - 1]) / 2)


def audit_bound(
    scores_in, scores_out, delta: float, confidence: float = 0.95, selection: float = 0.5
) -> AuditBound:
    """ε lower bound of the threshold test "score ≥ τ ⇒ in": τ maximizes the Clopper–Pearson
    lower bound on the selection part of each score list (:func:`split_scores`); the bound
    reported is the one of the evaluation part at that τ (held out, so the selection does not
    inflate it)."""
    sel_in, ev_in = split_scores(scores_in, selection)
    sel_out, ev_out = split_scores(scores_out, selection)

    def objective(tp, fp):
        point, low, _ = epsilon_interval(tp, len(sel_in), fp, len(sel_out), delta, confidence)
        return low, point  # best certified bound; ties broken by the point estimate

    tau = select_threshold(sel_in, sel_out, objective)
    tp_e, fp_e = counts_at(ev_in, ev_out, np.array([tau]))
    point_e, low_e, high_e = epsilon_interval(
        tp_e, len(ev_in), fp_e, len(ev_out), delta, confidence
    )
    return AuditBound(
        tau,
        int(tp_e[0]),
        len(ev_in),
        int(fp_e[0]),
        len(ev_out),
        float(point_e[0]),
        float(low_e[0]),
        float(high_e[0]),
    )


def runs_to_certify(
    tpr: float,
    fpr: float,
    target: float,
    delta: float,
    confidence: float = 0.95,
    max_runs: int = 10**8,
) -> int | None:
    """Smallest number of evaluation runs per world whose Clopper–Pearson ε lower bound exceeds
    ``target`` when the attack's true rates are ``tpr``, ``fpr`` (expected counts, rounded);
    None if even ``max_runs`` does not (e.g. the rates themselves certify no more than target)."""
    if float(epsilon_from_rates(tpr, fpr, delta)) <= target:
        return None

    def certifies(n: int) -> bool:
        _, low, _ = epsilon_interval(round(tpr * n), n, round(fpr * n), n, delta, confidence)
        return float(low) > target

    n = 2
    while not certifies(n):
        n *= 2
        if n > max_runs:
            return None
    lo = n // 2
    while n - lo > max(1, n // 100):  # within 1 %
        mid = (lo + n) // 2
        lo, n = (lo, mid) if certifies(mid) else (mid, n)
    return int(math.ceil(n))
