import itertools
import math

import numpy as np
import pytest

from dplab.mf import factorizations as F
from dplab.mf import workload as W
from dplab.mf.sensitivity import brute_force, sensitivity

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
