"""The privacy cost of choosing hyperparameters: releasing the best of many private runs.

Picking the best run of a grid by a score is itself a mechanism: the per-run ε does not cover
it.  Papernot & Steinke, "Hyperparameter Tuning with Renyi Differential Privacy" (ICLR 2022)
bound the protocol that draws a random number K of repetitions, trains each repetition with
candidate hyperparameters drawn at random, and releases only the best run (by any score) with
its score.  If every candidate is (λ, ε(λ))-RDP for every order λ, the released best run is
(λ, ε'(λ))-RDP with

- K truncated negative binomial with shape η ≥ 0 and halting probability γ (their Definition 1;
  η = 0 the logarithmic, η = 1 the geometric distribution), Theorem 2:
  ε'(λ) = ε(λ) + (1 + η)·min over λ̂ of [(1 − 1/λ̂)·ε(λ̂) + log(1/γ)/λ̂] + log(E K)/(λ − 1);
- K Poisson with mean μ (η = ∞), Theorem 6: ε'(λ) = ε(λ) + μ·δ̂ + log(μ)/(λ − 1), where
  δ̂ is the candidate's δ at ε̂ = log(1 + 1/(λ − 1)) (from its RDP curve).

RDP is non-decreasing in λ, so ε'(λ) ≤ ε'(λ') for λ ≤ λ' is applied last (as dp_accounting's
``RepeatAndSelectDpEvent`` does; ``tests/test_selection.py`` checks this module against it).
Candidates that differ are covered by their pointwise largest RDP curve (each satisfies it).
A candidate judged on its mean over several runs (a grid method's seeds) is those runs composed:
its curve is :func:`composition` of theirs, ``seeds`` × one run's where the runs are alike.

The bound holds for that protocol only.  A grid that trains every candidate once and releases
the best (what the pipeline's grids do) is the composition of its runs: :func:`grid_epsilon`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dplab.accounting import rdp_conversion
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError

#: K's distribution: η = ∞ is Poisson
POISSON = math.inf


def tnb_mean(gamma: float, shape: float) -> float:
    """E K of the truncated negative binomial (Papernot & Steinke, Definition 1 and §2.2):
    η(1 − γ)/(γ(1 − γ^η)); the limits 1/γ at η = 1 and (1 − γ)/(γ log(1/γ)) at η = 0."""
    if gamma == 1.0:
        return 1.0
    if shape == 0:
        return (1 - gamma) / (gamma * -math.log(gamma))
    return shape * (1 - gamma) / (gamma * -math.expm1(shape * math.log(gamma)))


def tnb_gamma(mean: float, shape: float) -> float:
    """The halting probability γ whose truncated negative binomial has E K ≥ ``mean`` (bisection
    to a relative 1e-12; the lower end is returned, so E K is never below the mean asked for)."""
    if shape == 1:
        return 1.0 / mean
    low, high = 0.0, 1.0
    while high - low > 1e-12 * high:
        mid = (low + high) / 2
        low, high = (mid, high) if tnb_mean(mid, shape) >= mean else (low, mid)
    return low


def check(mean: float, shape: float) -> None:
    if not (math.isfinite(mean) and mean >= 1):
        raise DPLabError(
            "selection_mean", f"must be a finite number >= 1 (the mean number of runs); got {mean}"
        )
    if math.isnan(shape) or shape < 0:
        raise DPLabError(
            "selection_shape",
            f"must be >= 0 (0 logarithmic, 1 geometric, inf Poisson); got {shape}",
        )


def repeat_and_select(orders: np.ndarray, rdp: np.ndarray, mean: float, shape: float) -> np.ndarray:
    """RDP of releasing the best of K runs, each with RDP ``rdp`` at ``orders`` (module docstring);
    +∞ at orders ≤ 1, where neither theorem applies."""
    check(mean, shape)
    orders, rdp = np.asarray(orders, dtype=float), np.asarray(rdp, dtype=float)
    above = orders > 1
    out = np.full_like(rdp, np.inf)
    log_mean = np.log(mean) / (orders[above] - 1)
    if shape == POISSON:
        eps_hat = np.log1p(1 / (orders[above] - 1))
        delta_hat = np.array(
            [rdp_conversion.delta_from_rdp(rdp[None, :], orders, e)[0] for e in eps_hat]
        )
        out[above] = rdp[above] + mean * delta_hat + log_mean
    else:
        gamma = tnb_gamma(mean, shape)
        hat = (1 + shape) * np.min(
            (1 - 1 / orders[above]) * rdp[above] + math.log(1 / gamma) / orders[above]
        )
        out[above] = rdp[above] + hat + log_mean
    return np.minimum.accumulate(out[::-1])[::-1]  # RDP is non-decreasing in the order


def _on_common_orders(
    curves: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """Every order of any candidate and, per candidate (rows), a bound on its RDP there: its value
    at that order or the next larger order it was evaluated at (RDP is non-decreasing in the
    order; +∞ past a candidate's largest order)."""
    orders = np.unique(np.concatenate([o for o, _ in curves]))
    rows = []
    for own, values in curves:
        index = np.searchsorted(own, orders)  # first own order >= each order
        rows.append(
            np.where(index < len(own), np.asarray(values)[np.minimum(index, len(own) - 1)], np.inf)
        )
    return orders, np.array(rows)


def worst_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One RDP curve that every candidate satisfies: the largest of their bounds at every order of
    any of them (:func:`_on_common_orders`)."""
    orders, bounds = _on_common_orders(curves)
    return orders, bounds.max(axis=0)


def candidate_curve(accountant, setting: Setting) -> tuple[np.ndarray, np.ndarray]:
    """(orders, RDP) of one candidate run from an accountant that states an RDP curve (``rdp`` and
    the hidden-state RDP bounds): an AssumptionError where the run is outside its assumptions."""
    accountant.check(setting)
    return accountant.rdp_curve(setting)


def epsilon(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], delta: float, mean: float, shape: float
) -> float:
    """ε at δ of releasing the best of K runs of the candidates with these RDP curves."""
    orders, rdp = worst_curve(curves)
    selected = repeat_and_select(orders, rdp, mean, shape)
    finite = np.isfinite(selected)
    return float(
        rdp_conversion.epsilon_from_rdp(selected[finite][None, :], orders[finite], delta)[0]
    )


def composition(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One RDP curve of runs on the same records composed: RDP adds order by order (Mironov,
    "Rényi Differential Privacy", Prop. 1), each run's bound read as :func:`_on_common_orders`
    reads it.  A grid's candidate that is a method's mean over its seeds is its seeds' runs
    composed: its curve is this of their curves (``seeds`` × one run's where they are alike)."""
    orders, bounds = _on_common_orders(curves)
    return orders, bounds.sum(axis=0)


def grid_epsilon(curves: Sequence[tuple[np.ndarray, np.ndarray]], delta: float) -> float:
    """ε at δ of a grid that trains every candidate once on the same records and releases the best
    (a post-processing of all of them): the candidates composed (:func:`composition`), converted
    as ``rdp`` converts. What the grid that was run costs; :func:`epsilon` is what Papernot &
    Steinke's protocol, which draws a random number of runs, would."""
    orders, composed = composition(curves)
    finite = np.isfinite(composed)
    return float(
        rdp_conversion.epsilon_from_rdp(composed[finite][None, :], orders[finite], delta)[0]
    )
