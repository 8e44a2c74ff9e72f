import itertools
import math

import numpy as np
import pytest

from dplab.mf import factorizations as F
from dplab.mf import workload as W
from dplab.mf.sensitivity import _maximal_patterns, brute_force, sensitivity

PATTERNS = [(1, 1), (2, 3), (3, 3), (2, 5), (4, 2), (5, 2)]


@pytest.mark.parametrize("strategy", ["identity", "sqrt", "optimal", "banded"])
@pytest.mark.parametrize("k,b", PATTERNS)
def test_matches_brute_force(strategy, k, b):
    T = 10
    f = F.factorize(strategy, W.prefix_sum(T), bands=min(b, 3))
    assert np.all(f.encoder.T @ f.encoder >= -1e-12)  # X ≥ 0: brute force is the sensitivity
    s = f.sensitivity(k, b)
    assert s.exact
    assert s.value == pytest.approx(brute_force(f.encoder, k, b), rel=1e-10)


def test_banded_sensitivity_is_sqrt_k():
    f = F.banded(W.prefix_sum(40), 5)
    for k in (1, 2, 8):
        assert f.sensitivity(k, 5).value == pytest.approx(math.sqrt(k), rel=1e-12)
    assert f.sensitivity(20, 5).value == pytest.approx(math.sqrt(8), rel=1e-12)  # at most ⌈40/5⌉


def test_sqrt_multi_participation_closed_form():
    T, k, b = 30, 3, 10
    c = np.array([math.comb(2 * j, j) / 4**j for j in range(T)])
    v = np.zeros(T)
    for m in range(k):
        v[m * b :] += c[: T - m * b]
    assert F.sqrt(W.prefix_sum(T)).sensitivity(k, b).value == pytest.approx(
        np.linalg.norm(v), rel=1e-12
    )


def test_general_upper_bound_dominates_worst_case():
    rng = np.random.default_rng(1)
    T = 8
    C = np.tril(rng.standard_normal((T, T))) + 3 * np.eye(T)
    X = np.abs(C.T @ C)
    for k, b in [(2, 2), (3, 2), (2, 3)]:
        s = sensitivity(C, k, b)
        assert not s.exact
        worst = max(
            X[np.ix_(p, p)].sum()
            for size in range(1, k + 1)
            for p in itertools.combinations(range(T), size)
            if all(p[i + 1] - p[i] >= b for i in range(size - 1))
        )
        assert s.value >= math.sqrt(worst) - 1e-12
        assert s.value >= brute_force(C, k, b) - 1e-12


def test_enumeration_counts_patterns_that_cannot_reach_k():
    """X ≥ 0 (the enumeration case): a pattern of fewer than k steps that no step fits into is a
    real participation (the min_separation sampler's partitions j ≥ T mod b).  T = 3, k = b = 2:
    pattern {1} gives ‖C[:, 1]‖ = 1.0817; enumerating only k-step patterns gave 0.7071.  `optimal`
    on a learning-rate-weighted workload (T = 9, k = 5, b = 2; X ≥ 0) gave 2.2953 where pattern
    {1, 3, 5, 7} gives 2.5331."""
    C = np.array([[0.5, 0, 0], [0.3, 0.9, 0], [0.2, 0.6, 0.2]])
    s = sensitivity(C, 2, 2)
    assert s.exact and s.value == pytest.approx(np.linalg.norm(C[:, 1]), rel=1e-14)
    rates = [2.0105, 2.5722, 0.2302, 1.5656, 0.0897, 0.4642, 0.0955, 2.6087, 0.9992]
    f = F.optimal(W.momentum_workload(9, 0.0, rates))
    X = f.encoder.T @ f.encoder
    assert np.all(X >= -1e-12)
    s = f.sensitivity(5, 2)
    assert s.value == pytest.approx(brute_force(f.encoder, 5, 2), rel=1e-10)
    assert s.value >= math.sqrt(X[np.ix_([1, 3, 5, 7], [1, 3, 5, 7])].sum()) * (1 - 1e-12)


def test_maximal_patterns_are_those_no_step_can_be_added_to():
    """Against the definition, every (T, k, b) with T ≤ 8."""
    for T in range(1, 9):
        for b in range(1, T + 1):
            for k in range(1, -(-T // b) + 1):
                every = {
                    p
                    for size in range(1, k + 1)
                    for p in itertools.combinations(range(T), size)
                    if all(p[m + 1] - p[m] >= b for m in range(size - 1))
                }
                maximal = {
                    p for p in every if not any(len(q) > len(p) and set(p) < set(q) for q in every)
                }
                assert sorted(map(tuple, _maximal_patterns(T, k, b, 10**6))) == sorted(maximal)
    assert len(list(_maximal_patterns(30, 10, 1, 100))) == 101  # stops one past the limit


def test_random_nonnegative_gram_matrices_match_brute_force():
    """Lower-triangular C ≥ 0 (so X ≥ 0 and brute force is the sensitivity) with columns scaled
    at random, the family where k-step patterns alone fell short (up to 11×)."""
    rng = np.random.default_rng(11)
    for _ in range(150):
        T = int(rng.integers(3, 8))
        C = np.tril(rng.random((T, T))) * rng.random(T) ** 3
        b = int(rng.integers(1, T))
        k = int(rng.integers(2, -(-T // b) + 1)) if -(-T // b) > 1 else 1
        s = sensitivity(C, k, b)
        assert s.value == pytest.approx(brute_force(C, k, b), rel=1e-10), (T, k, b, s)


def test_the_row_bound_is_exact_where_its_own_pattern_meets_it():
    """optimal at T = 40, k = 10, b = 4 has more maximal patterns than the enumeration takes; the
    row bound is met by equal g on the pattern it picks, so it is exact: the best k-step pattern
    (a lower bound) reaches it."""
    f = F.factorize("optimal", W.prefix_sum(40), min_separation=4)
    s = f.sensitivity(10, 4)
    assert s.exact and "met" in s.method
    X = f.encoder.T @ f.encoder
    span = 40 - 9 * 3
    best = max(
        X[np.ix_(p, p)].sum()
        for q in itertools.combinations(range(span), 10)
        for p in [[q_m + 3 * m for m, q_m in enumerate(q)]]
    )
    assert s.value == pytest.approx(math.sqrt(best), rel=1e-12)
