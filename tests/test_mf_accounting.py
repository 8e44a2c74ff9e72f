import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dplab.accounting.pld_accountant import PldAccountant
from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError, DPLabError
from dplab.mf import accounting as Acc
from dplab.mf import factorizations as F
from dplab.mf import workload as W


def gaussian_delta(mu: float, eps: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with sensitivity/std = μ (Balle & Wang 2018, Thm 8)."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_no_amplification_is_the_exact_gaussian():
    T, b = 30, 10
    f = F.sqrt(W.prefix_sum(T))
    sampler = Acc.MinSeparation(b, T)
    sens = f.sensitivity(sampler.participations, b).value
    for sigma in (2.0, 5.0):
        d = Acc.delta(f, sampler, sigma, 1.0)
        assert d == pytest.approx(gaussian_delta(sens / sigma, 1.0), rel=2e-3)
    # replace-one doubles the sensitivity
    assert Acc.epsilon(f, sampler, 6.0, 1e-5, "replace_one") == pytest.approx(
        Acc.epsilon(f, sampler, 3.0, 1e-5), rel=1e-6
    )


def test_calibration_single_participation_matches_analytic_gaussian():
    # the seed-004 setting: n=5000, batch 25, T=200 -> one epoch, single participation
    T = 200
    sampler = Acc.MinSeparation.from_batch_size(5000, 25, T)
    assert (sampler.min_separation, sampler.participations) == (200, 1)
    f = F.identity(W.prefix_sum(T))
    sigma = Acc.calibrate(f, sampler, 1.0, 1e-6)
    exact = brentq(lambda s: gaussian_delta(1 / s, 1.0) - 1e-6, 1, 20, xtol=1e-12)
    assert sigma == pytest.approx(exact, rel=1e-3)
    assert Acc.epsilon(f, sampler, sigma, 1e-6) <= 1.0


def test_cyclic_poisson_identity_is_dp_sgd():
    # 1 partition, identity C: T Poisson-sampled Gaussian steps at q = batch/n
    T, n, batch, sigma = 50, 1000, 20, 1.2
    f = F.identity(W.prefix_sum(T))
    eps = Acc.epsilon(f, Acc.CyclicPoisson(n, batch, 1, T), sigma, 1e-5)
    ref = PldAccountant().epsilon(
        Setting(noise_multiplier=sigma, sampling_rate=batch / n, steps=T, sampling="poisson"), 1e-5
    )
    assert eps == pytest.approx(ref, rel=1e-6)


def test_amplification_helps_and_reduces_to_no_amplification_at_rate_one():
    T, b = 40, 4
    f = F.banded(W.prefix_sum(T), b)
    full = Acc.CyclicPoisson(400, 100, b, T)  # p = 1
    assert full.sampling_rate == 1.0
    plain = Acc.MinSeparation(b, T)
    assert Acc.epsilon(f, full, 3.0, 1e-6) == pytest.approx(
        Acc.epsilon(f, plain, 3.0, 1e-6), rel=1e-3
    )
    sub = Acc.CyclicPoisson(4000, 100, b, T)  # p = 0.1
    assert Acc.epsilon(f, sub, 3.0, 1e-6) < 0.5 * Acc.epsilon(f, plain, 3.0, 1e-6)


def test_amplified_accounting_refuses_what_the_theorem_does_not_cover():
    T = 20
    A = W.prefix_sum(T)
    sampler = Acc.CyclicPoisson(1000, 10, 4, T)
    with pytest.raises(AssumptionError, match="bands"):
        Acc.epsilon(F.banded(A, 5), sampler, 1.0, 1e-6)
    with pytest.raises(AssumptionError, match="bands"):
        Acc.epsilon(F.sqrt(A), sampler, 1.0, 1e-6)
    with pytest.raises(AssumptionError, match="neighbouring"):
        Acc.epsilon(F.banded(A, 4), sampler, 1.0, 1e-6, "replace_one")
    with pytest.raises(AssumptionError, match="steps"):
        Acc.epsilon(F.banded(W.prefix_sum(21), 4), sampler, 1.0, 1e-6)
    with pytest.raises(AssumptionError, match="sampler"):
        Acc.epsilon(F.banded(A, 4), "poisson", 1.0, 1e-6)
    with pytest.raises(DPLabError, match="batch_size"):
        Acc.CyclicPoisson(1000, 300, 4, T)  # p > 1
    with pytest.raises(DPLabError, match="delta"):
        Acc.epsilon(F.banded(A, 4), sampler, 1.0, 1.5)


def test_samplers_realize_their_participation_pattern():
    import torch

    n, batch, T = 100, 10, 35
    g = torch.Generator().manual_seed(0)
    s = Acc.MinSeparation.from_batch_size(n, batch, T)
    parts = s.partitions(g)
    steps_of = {}
    for t in range(T):
        for i in s.batch(t, parts, g).tolist():
            steps_of.setdefault(i, []).append(t)
    assert len(steps_of) == n
    assert max(len(v) for v in steps_of.values()) == s.participations == 4
    assert min(np.diff(v).min() for v in steps_of.values() if len(v) > 1) >= s.min_separation

    c = Acc.CyclicPoisson(n, 2.5, 4, T)
    parts = c.partitions(g)
    seen = {}
    for t in range(T):
        for i in c.batch(t, parts, g).tolist():
            seen.setdefault(i, set()).add(t % 4)
    assert all(len(v) == 1 for v in seen.values())  # an example stays in its partition


@pytest.mark.parametrize("n,b", [(3, 2), (10, 4), (100, 7), (5000, 200)])
def test_adding_a_record_moves_no_other_record(n, b):
    """With one seed, the partitions of n + 1 records hold the first n exactly where those of n
    records put them (each record's partition is its own draw), so the min_separation batches of the
    other records are the same at every step, and a cyclic_poisson step draws only from them."""
    import torch

    T = 3 * b

    def partitions(sampler):
        return sampler.partitions(torch.Generator().manual_seed(n))

    def without_last(parts):
        return [p[p < n] for p in parts]

    small, large = Acc.MinSeparation(b, T, n), Acc.MinSeparation(b, T, n + 1)
    p, q = partitions(small), without_last(partitions(large))
    assert sum(len(x) for x in p) == n and sorted(torch.cat(p).tolist()) == list(range(n))
    g = torch.Generator()
    for t in range(T):
        assert torch.equal(small.batch(t, p, g), large.batch(t, q, g))
    batch = n / (2 * b)
    small, large = Acc.CyclicPoisson(n, batch, b, T), Acc.CyclicPoisson(n + 1, batch, b, T)
    p, q = partitions(small), without_last(partitions(large))
    assert all(torch.equal(x, y) for x, y in zip(p, q))


def test_partitions_are_uniform_and_independent_of_the_others():
    """Each record's partition is uniform over the b: over 4000 seeds, record 0 of 3 lands in each
    of 4 partitions 1000 ± 5·√750 times, and jointly with record 1 in each of the 16 pairs
    250 ± 5·√234."""
    import torch

    hits = np.zeros((4, 4))
    for seed in range(4000):
        where = Acc.assignment(3, 4, torch.Generator().manual_seed(seed))
        hits[where[0], where[1]] += 1
    assert np.all(np.abs(hits.sum(1) - 1000) < 5 * math.sqrt(750))
    assert np.all(np.abs(hits - 250) < 5 * math.sqrt(234))
