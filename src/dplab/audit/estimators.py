"""The audit's five ε estimators: attack scores → an ε lower bound that holds with probability
≥ ``confidence``, and a point estimate.

- ``clopper_pearson`` (distribution-free): the (ε, δ) inequalities TPR ≤ e^ε·FPR + δ at one
  threshold, with Clopper–Pearson ends (:func:`dplab.audit.stats.audit_bound`).  Valid for every
  mechanism; at small δ it needs FPR ≈ e^−ε resolved, so it stays far below a tight ε.
- ``gdp`` (f-DP with a Gaussian trade-off curve; Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski,
  Carlini & Terzis 2023, "Tight Auditing of Differentially Private Machine Learning"): a μ-GDP
  mechanism admits no test with false-positive rate α and false-negative rate below
  G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (Dong, Roth & Su 2022, "Gaussian Differential Privacy"),
  so the Clopper–Pearson upper ends (ᾱ, β̄) of one threshold test certify

      μ ≥ μ_lower = Φ⁻¹(1 − ᾱ) − Φ⁻¹(β̄)

  and ε_lower is the ε(δ) of μ_lower-GDP (Dong, Roth & Su 2022, Cor. 2.13: the Gaussian
  mechanism's profile, :func:`dplab.accounting.gaussian.gaussian_epsilon`).  Every threshold
  informs μ, so the central part of the score distributions, where rates are estimated well,
  decides it.  ε_lower is a lower bound on the mechanism's ε only if its privacy loss has tails
  at least as heavy as G_μ's: exactly so for a Gaussian pair, conservatively for Poisson
  subsampling with add/remove neighbours (the composition of many subsampled steps approaches
  G_μ from the heavy side); a pair with lighter tails (replace-one subsampling at q > 1/2) makes
  it overstate ε.  :func:`dplab.audit.entries.gdp_applies` decides where it is reported.
- ``one_run`` (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run",
  their main theorem and its ε search): m canaries, each included independently with
  probability 1/2, in one training run; the auditor guesses "in" for the r/2 highest scores and
  "out" for the r/2 lowest and abstains on the rest.  If the mechanism is (ε, δ)-DP, the number
  W of correct guesses satisfies P[W ≥ v] ≤ f(v) + 2mδ·max_{i≥1} (f(v − i) − f(v))/i with
  f(v) = P[Binomial(r, e^ε/(1 + e^ε)) ≥ v]; ε_lower is the largest ε this rejects at level
  1 − confidence.  r ranges over :data:`GUESS_FRACTIONS` of m, fixed before the scores are seen,
  with a Bonferroni correction.  Valid without independence between the canaries of the run.
- ``one_run_gdp`` (Mahloujifar, Melis & Chaudhuri 2024, "Auditing f-Differential Privacy in One
  Run", arXiv 2410.22235 / ICML 2025: their recursion for guesses with abstention): the same
  run, guesses and Bonferroni family as ``one_run``, but the hypothesis is "μ-GDP with respect
  to every canary" instead of (ε, δ)-DP, and ε_lower is the ε(δ) of the largest μ rejected,
  converted as ``gdp`` converts it (so it shares gdp's Gaussian-shape assumption and is
  reported only where gdp is).  The bound (:func:`one_run_fdp_rejects`): let I be a canary drawn
  uniformly, S its membership bit, W the number of correct guesses, R_i = P[guess on I correct,
  W ≥ i] and H_i = P[guess on I wrong, W ≥ i].  Guessing S_I from (output, I, S_{−I}) on the
  event "I guessed, W_{−I} ≥ i − 1" is a test between the two worlds of canary I, so f-DP gives
  R_i ≤ 1 − f(H_{i−1}) (1 − f is concave: it holds averaged over I, S_{−I} and both worlds),
  i.e. H_{i−1} ≥ f⁻(R_i) with f⁻(y) = f⁻¹(1 − y), Φ(Φ⁻¹(y) − μ) for G_μ; counting gives
  R_{i−1} − R_i = (i − 1)/(r − i + 1)·(H_{i−1} − H_i), and R_0 + H_0 = r/m.  If P[W ≥ v] ≥ τ then
  R_v ≥ τv/m and H_v ≥ τ(r − v)/m; taking each H_{i−1} as small as the constraint allows gives
  the least R_0 + H_0 the constraints admit (the minimum of that convex program; tested), and
  above r/m, P[W ≥ v] < τ.  It certifies
  more than ``one_run`` on Gaussian scores, but not ε itself: its worst case is a mechanism
  whose canaries leak together, so the bound depends on τ at every m (measured in
  docs/findings.md: about 0.6 × the exact ε at 10⁵ canaries, 0.65 at 10⁷).
- ``one_run_independent``: the same run, guesses and Bonferroni family, for a run whose canaries
  do not interfere — the output is a post-processing of m independent per-canary channels (the
  white-box gradient canaries of :func:`dplab.audit.entries.independent_canaries`), which
  Keinan, Shenfeld & Ligett (NeurIPS 2025, "How Well Can Differential Privacy Be Audited in One
  Run?") identify as what one-run auditing needs to be tight.  Hypothesis: every canary's channel
  is μ-GDP.  A μ-GDP channel is a post-processing of the Gaussian pair N(0, 1) vs N(μ, 1)
  (Blackwell's theorem for two-point experiments, as Dong, Roth & Su 2022 use it for f-DP), so
  the m canaries are a post-processing of m independent pairs.  There, given the outputs x, the bits
  are independent and the guess "in iff x_j > μ/2" errs with probability γ_j = 1/(1 +
  e^{μ|x_j − μ/2|}); any r guesses err with probabilities at least the r smallest γ_j, so the number
  of mistakes is stochastically at least that of the r most confident MAP guesses (coupling).  For
  those, the cut (the (m − r)-th smallest confidence) sits at quantile W ~ Beta(m − r, r + 1), the r
  above it are i.i.d. above it, and, with s = |x − μ/2| (density φ(s − μ/2) + φ(s + μ/2),
  γ(s)·density = φ(s + μ/2)), each errs with probability γ̄(t) = Φ̄(t + μ/2) / (Φ̄(t − μ/2) +
  Φ̄(t + μ/2)) at cut confidence t:

      P[mistakes ≤ u] = E_W[BinCDF(u; r, γ̄(t(W)))]    (r = m: BinCDF(u; m, Φ(−μ/2)))

  (the order-statistics model of the public implementation of Xiang et al. 2025,
  github.com/zihangxiang/tight-privacy-audit-in-one-run, whose recorded Gaussian bounds this
  reproduces: tests/test_audit.py).  μ_lower is the largest μ with P[mistakes ≤ u] ≤ level,
  converted to ε(δ) as ``gdp`` converts it (gdp's Gaussian-shape assumption, reported only
  where gdp is, and only where the canaries are independent).  Unlike the two analyses above it
  concentrates with m: within 10 % of the exact Gaussian ε from 10⁵ canaries (docs/findings.md).
  Without independence it is not valid: canaries that leak together make few mistakes more
  often than independent ones do.

The selection/evaluation split of the first two is :func:`dplab.audit.stats.split_scores`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_ndtr, ndtr, ndtri
from scipy.stats import beta, binom, norm

from dplab.accounting.gaussian import gaussian_epsilon
from dplab.accounting.roots import bisect, doubling
from dplab.audit.stats import (
    audit_bound,
    clopper_pearson,
    counts_at,
    select_threshold,
    split_scores,
)
from dplab.errors import DPLabError

#: share of each score list that chooses the threshold: the Clopper–Pearson optimum sits in a tail
#: and needs many selection scores; gdp only needs the equal-error point
SELECTION = {"clopper_pearson": 1 / 2, "gdp": 1 / 10}
#: guesses r = fraction·m of the one-run audits (half "in", half "out"); the Bonferroni family
GUESS_FRACTIONS = (1.0, 1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64)


@dataclass(frozen=True)
class Estimate:
    """One estimator's answer on one score set."""

    estimator: str
    epsilon_lower: (
        float  # holds with probability ≥ confidence (gdp: under its Gaussian-shape assumption)
    )
    epsilon_estimate: (
        float  # not a bound: the observed rates (one_run: log(v / (r − v)); one_run_gdp: at level
        # 1/2), for one_run* at the guess count of the largest lower bound, so it leans high
    )
    epsilon_upper: float  # the other end of the interval (nan where the estimator has none)
    samples_in: (
        int  # scores the bound is evaluated on (one_run*: members; guesses r, canaries m in detail)
    )
    samples_out: int
    detail: str  # threshold, or guesses / correct / canaries


# ------------------------------------------------------------------------------------ gdp
def gdp_mu(
    fp, negatives, fn, positives, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(point, lower, upper) of μ from fp false positives among ``negatives`` and fn false
    negatives among ``positives``: Φ⁻¹(1 − α) − Φ⁻¹(β) at the observed rates (a zero count
    replaced by 1/2), at the Clopper–Pearson upper ends (lower μ) and lower ends (upper μ), each
    end at level ``confidence`` two-sided so the pair holds with probability ≥ ``confidence``."""
    fpr_lo, fpr_hi = clopper_pearson(fp, negatives, confidence)
    fnr_lo, fnr_hi = clopper_pearson(fn, positives, confidence)
    fp, fn = np.asarray(fp, float), np.asarray(fn, float)
    alpha = np.clip(fp, 0.5, negatives - 0.5) / negatives
    beta = np.clip(fn, 0.5, positives - 0.5) / positives
    with np.errstate(divide="ignore"):
        return (
            norm.isf(alpha) - norm.ppf(beta),
            norm.isf(fpr_hi) - norm.ppf(fnr_hi),
            norm.isf(fpr_lo) - norm.ppf(fnr_lo),
        )


def _gdp_epsilon(delta: float, mu) -> float:
    mu = float(mu)
    if not mu > 0:
        return 0.0
    return float(gaussian_epsilon(delta, mu)) if math.isfinite(mu) else math.inf


def gdp_bound(
    scores_in,
    scores_out,
    delta: float,
    confidence: float = 0.95,
    selection: float = SELECTION["gdp"],
) -> Estimate:
    """The ``gdp`` estimator (module docstring): the threshold is the equal-error point (FPR =
    FNR) of the selection part, where Φ⁻¹ of both rates is estimated most precisely; μ and ε are
    evaluated on the rest.  (Maximizing μ_lower over every threshold instead chases the noise of
    the selection part into the tails and certifies less.)"""
    sel_in, ev_in = split_scores(scores_in, selection)
    sel_out, ev_out = split_scores(scores_out, selection)
    tau = select_threshold(
        sel_in, sel_out, lambda tp, fp: -np.abs(fp / len(sel_out) - 1 + tp / len(sel_in))
    )
    tp, fp = counts_at(ev_in, ev_out, np.array([tau]))
    point, low, high = (
        float(v[0]) for v in gdp_mu(fp, len(ev_out), len(ev_in) - tp, len(ev_in), confidence)
    )
    return Estimate(
        "gdp",
        _gdp_epsilon(delta, low),
        _gdp_epsilon(delta, point),
        _gdp_epsilon(delta, high),
        len(ev_in),
        len(ev_out),
        f"threshold {tau:.6g}; mu {low:.4g} (point {point:.4g})",
    )


# -------------------------------------------------------------------------------- one_run
def one_run_p_value(
    canaries: int, guesses: int, correct: int, epsilon: float, delta: float
) -> float:
    """P[W ≥ correct] bound of Steinke, Nasr & Jagielski 2023 (module docstring) for an (ε, δ)-DP
    mechanism with ``canaries`` = m and ``guesses`` = r."""
    if not 0 <= correct <= guesses <= canaries:
        raise DPLabError(
            "guesses",
            f"need 0 <= correct <= guesses <= canaries; got {correct}, {guesses}, {canaries}",
        )
    f = binom.sf(
        correct - 1 - np.arange(correct + 1), guesses, expit(epsilon)
    )  # f(v − i), i = 0..v
    if delta == 0 or correct == 0:
        return float(f[0])
    gain = np.max((f[1:] - f[0]) / np.arange(1, correct + 1))
    return float(min(1.0, f[0] + 2 * canaries * delta * gain))


def one_run_epsilon(canaries: int, guesses: int, correct: int, delta: float, level: float) -> float:
    """Largest ε whose p-value (:func:`one_run_p_value`) is ≤ ``level`` (0 if none): bisection,
    the p-value grows with ε."""

    def rejects(eps: float) -> bool:
        return one_run_p_value(canaries, guesses, correct, eps, delta) <= level

    if not rejects(0.0):
        return 0.0
    lo, _ = bisect(
        rejects,
        *doubling(rejects, 1.0),
        steps=200,
        done=lambda lo, hi: hi - lo <= 1e-6 * max(hi, 1.0),
    )
    return float(lo)


def _one_run_guesses(scores, members) -> list[tuple[int, int]]:
    """(guesses r, correct v) for every r of the one-run Bonferroni family: "in" for the r/2
    highest of the run's m canary scores, "out" for the r/2 lowest (``members``: True where the
    canary was included, each with probability 1/2)."""
    scores, members = np.asarray(scores, float), np.asarray(members, bool)
    m = len(scores)
    if m < 2 or members.shape != scores.shape:
        raise DPLabError(
            "canaries",
            "the one-run estimators need >= 2 canaries in the run, one membership bit each",
        )
    if not np.all(np.isfinite(scores)):
        raise DPLabError("scores", "attack scores must be finite")
    order = members[np.argsort(-scores, kind="stable")]
    sizes = sorted({2 * int(f * m / 2) for f in GUESS_FRACTIONS} - {0}, reverse=True)
    return [(r, int(order[: r // 2].sum() + (~order[m - r // 2 :]).sum())) for r in sizes]


def one_run_bound(scores, members, delta: float, confidence: float = 0.95) -> Estimate:
    """The ``one_run`` estimator on the m canaries of one run: ``scores`` (m,) and ``members``
    (m,) booleans (True: the canary was included), each drawn with probability 1/2."""
    guesses = _one_run_guesses(scores, members)
    m, level = len(members), (1.0 - confidence) / len(guesses)
    best = (-1.0, 0, 0)
    for r, correct in guesses:
        eps = one_run_epsilon(m, r, correct, delta, level)
        if eps > best[0]:
            best = (eps, r, correct)
    eps, r, v = best
    estimate = math.log(min(max(v, 0.5), r - 0.5) / (r - min(max(v, 0.5), r - 0.5)))
    members = np.asarray(members, bool)
    return Estimate(
        "one_run",
        eps,
        max(estimate, 0.0),
        math.nan,
        int(members.sum()),
        int((~members).sum()),
        f"guesses {r}, correct {v}, canaries {m}",
    )


# ---------------------------------------------------------------------------- one_run_gdp
def gdp_lower(mu):
    """f⁻ of μ-GDP, vectorized over μ: y ↦ Φ(Φ⁻¹(y) − μ), the least probability an event can have
    in one world when it has probability y in the other."""
    mu = np.asarray(mu, float)
    return lambda y: ndtr(ndtri(y) - mu)


def one_run_fdp_rejects(
    canaries: int, guesses: int, correct: int, level: float, lower
) -> np.ndarray:
    """Whether ``correct`` = v right out of ``guesses`` = r among ``canaries`` = m rejects, at
    ``level`` τ, the f-DP hypothesis whose f⁻ is ``lower`` (a vectorized y ↦ array; one answer
    per element: :func:`gdp_lower` of a μ grid): the recursion of the module docstring
    (Mahloujifar, Melis & Chaudhuri 2024), True where R_0 + H_0 > r/m.  R and H only grow as i
    falls, and stop changing for good once H ≥ f⁻(R), so the loop ends there."""
    m, r, v = canaries, guesses, correct
    if not 0 <= v <= r <= m or m < 1 or r < 1:
        raise DPLabError(
            "guesses", f"need 0 <= correct <= guesses <= canaries, guesses >= 1; got {v}, {r}, {m}"
        )
    if not 0 < level < 1:
        raise DPLabError("confidence", f"the level must lie in (0, 1); got {level}")
    h = np.full(np.shape(lower(np.array(0.5))), level * (r - v) / m)
    rr = np.full(h.shape, level * v / m)
    for i in range(v, 0, -1):
        new = np.maximum(h, lower(np.minimum(rr, 1.0)))
        grown = new > h
        rr, h = rr + (i - 1) / (r - i + 1) * (new - h), new
        if not np.any(grown & (rr + h <= r / m)):
            break
    return rr + h > r / m


def one_run_fdp_p_value(canaries: int, guesses: int, correct: int, lower) -> float:
    """The smallest level at which :func:`one_run_fdp_rejects` rejects (bisection; the mass bound
    grows with the level): P[W ≥ correct] is at most this under the hypothesis."""
    _, hi = bisect(
        lambda t: not bool(one_run_fdp_rejects(canaries, guesses, correct, t, lower)),
        0.0,
        1.0,
        steps=60,
        done=lambda lo, hi: hi - lo <= 1e-12,
    )
    return float(hi)


def one_run_gdp_mu(
    canaries: int, guesses: int, correct: int, level: float, points: int = 32
) -> float:
    """The largest μ whose μ-GDP hypothesis :func:`one_run_fdp_rejects` rejects at ``level`` (0 if
    none), on three nested grids of ``points`` (rejection is monotone: a smaller μ is a stronger
    claim); the grid point returned is itself rejected, so the bound is never rounded up."""

    def rejects(mu):
        return one_run_fdp_rejects(canaries, guesses, correct, level, gdp_lower(mu))

    if not rejects(0.0):
        return 0.0
    lo, hi = doubling(lambda mu: bool(rejects(mu)), 8.0)
    for _ in range(3):
        grid = np.linspace(lo, hi, points)
        k = int(np.flatnonzero(rejects(grid))[-1])
        lo, hi = grid[k], grid[min(k + 1, points - 1)]
    return float(lo)


def _one_run_mu_bound(
    name: str, largest_mu, scores, members, delta: float, confidence: float
) -> Estimate:
    """A GDP one-run estimator on the canaries of one run, with the guesses and Bonferroni family
    of :func:`one_run_bound`: ``largest_mu(m, r, v, level)`` is the largest μ its test rejects.
    The point estimate is the ε of what the same test rejects at level 1/2 with the r that
    certified the bound."""
    guesses = _one_run_guesses(scores, members)
    level = (1.0 - confidence) / len(guesses)
    m = len(members)
    mu, r, v = max((largest_mu(m, r, v, level), r, v) for r, v in guesses)
    half = largest_mu(m, r, v, 0.5)
    members = np.asarray(members, bool)
    return Estimate(
        name,
        _gdp_epsilon(delta, mu),
        _gdp_epsilon(delta, max(half, mu)),
        math.nan,
        int(members.sum()),
        int((~members).sum()),
        f"guesses {r}, correct {v}, canaries {m}; mu {mu:.4g} (level 1/2: {half:.4g})",
    )


def one_run_gdp_bound(scores, members, delta: float, confidence: float = 0.95) -> Estimate:
    """The ``one_run_gdp`` estimator (module docstring) on the canaries of one run."""
    return _one_run_mu_bound("one_run_gdp", one_run_gdp_mu, scores, members, delta, confidence)


# -------------------------------------------------------------------- one_run_independent
def _cut_tail(mu: float, tail):
    """t ≥ 0 with P[|x − μ/2| > t] = ``tail`` (array), x ~ N(0, 1) or N(μ, 1) with probability 1/2:
    the confidence of the cut, by bisection of the tail Φ̄(t − μ/2) + Φ̄(t + μ/2) in logs, between
    the t where its first term alone is ``tail`` and where it is ``tail``/2."""
    log_tail = np.log(tail)

    def above(t):
        return np.logaddexp(log_ndtr(mu / 2 - t), log_ndtr(-mu / 2 - t)) > log_tail

    lo, hi = np.maximum(mu / 2 + norm.isf(tail), 0.0), mu / 2 + norm.isf(tail / 2)
    lo, hi = bisect(above, lo, hi, steps=80, done=lambda lo, hi: hi - lo <= 1e-10)
    return 0.5 * (lo + hi)


#: the one-run-independent p-value's quadrature over the cut's quantile W: W = its Φ(z)-quantile,
#: z on this grid, weights φ(z)·dz (the trapezoid rule, which reaches W's tails to 1e-33)
_CUT_Z = np.linspace(-12.0, 12.0, 801)
_CUT_WEIGHTS = norm.pdf(_CUT_Z) * (_CUT_Z[1] - _CUT_Z[0])


@functools.lru_cache(maxsize=64)
def _cut_quantiles(canaries: int, guesses: int) -> np.ndarray:
    """1 − W at W's Φ(z)-quantiles (z: :data:`_CUT_Z`), W ~ Beta(m − r, r + 1) the cut's quantile,
    so 1 − W ~ Beta(r + 1, m − r), each side from the end it is near; the same for every μ a
    search tries (read-only)."""
    m, r = canaries, guesses
    tail = np.where(
        _CUT_Z > 0, beta.ppf(ndtr(-_CUT_Z), r + 1, m - r), beta.isf(ndtr(_CUT_Z), r + 1, m - r)
    )
    tail = np.maximum(tail, 1e-300)
    tail.flags.writeable = False
    return tail


def one_run_independent_p_value(canaries: int, guesses: int, mistakes: int, mu: float) -> float:
    """P[at most ``mistakes`` wrong among the ``guesses`` most confident] for m = ``canaries``
    independent μ-GDP canaries guessed optimally (module docstring): E over the cut's quantile
    W ~ Beta(m − r, r + 1) of BinCDF(u; r, γ̄_μ(W)) (quadrature: :data:`_CUT_Z`)."""
    m, r, u = canaries, guesses, mistakes
    if not 0 <= u <= r <= m or r < 1:
        raise DPLabError(
            "guesses", f"need 0 <= mistakes <= guesses <= canaries, guesses >= 1; got {u}, {r}, {m}"
        )
    if r == m:  # no cut: every canary guessed, each wrong with the Bayes error Φ(−μ/2)
        return float(binom.cdf(u, r, ndtr(-mu / 2)))
    t = _cut_tail(mu, _cut_quantiles(m, r))
    error = expit(log_ndtr(-t - mu / 2) - log_ndtr(mu / 2 - t))  # γ̄: mean error above the cut
    return float(min(1.0, np.dot(_CUT_WEIGHTS, binom.cdf(u, r, error))))


def one_run_independent_mu(canaries: int, guesses: int, correct: int, level: float) -> float:
    """The largest μ whose hypothesis "independent μ-GDP canaries" is rejected at ``level`` by
    :func:`one_run_independent_p_value` (0 if none): bisection, the p-value grows with μ."""

    def rejects(mu: float) -> bool:
        return one_run_independent_p_value(canaries, guesses, guesses - correct, mu) <= level

    if not rejects(0.0):
        return 0.0
    lo, _ = bisect(
        rejects,
        *doubling(rejects, 1.0),
        steps=200,
        done=lambda lo, hi: hi - lo <= 1e-6 * max(hi, 1.0),
    )
    return float(lo)


def one_run_independent_bound(scores, members, delta: float, confidence: float = 0.95) -> Estimate:
    """The ``one_run_independent`` estimator (module docstring) on the canaries of one run."""
    return _one_run_mu_bound(
        "one_run_independent", one_run_independent_mu, scores, members, delta, confidence
    )


def clopper_pearson_bound(
    scores_in,
    scores_out,
    delta: float,
    confidence: float = 0.95,
    selection: float = SELECTION["clopper_pearson"],
) -> Estimate:
    """The ``clopper_pearson`` estimator (:func:`dplab.audit.stats.audit_bound`) as an Estimate."""
    b = audit_bound(scores_in, scores_out, delta, confidence, selection)
    return Estimate(
        "clopper_pearson",
        b.ci_low,
        b.epsilon,
        b.ci_high,
        b.positives,
        b.negatives,
        f"threshold {b.threshold:.6g}; tp {b.tp}/{b.positives}, fp {b.fp}/{b.negatives}",
    )
