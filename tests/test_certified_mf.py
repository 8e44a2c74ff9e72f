"""The matrix-factorization ε (``dplab mf``, dp_mf training: :mod:`dplab.mf.accounting`) against the
exact ε of small runs computed here by brute force, independently of its code.

Scalar clipped gradients in {−C, 0, C} (C = 1), datasets of n ≤ 4 records and their neighbours
(one record added, or one replaced); every way the sampler can place the records (every
permutation of the earlier ``order[i::b]`` split, every assignment of records to partitions of
the sampler used now, and for cyclic Poisson every assignment and inclusion); the release
Y = C·G + Z, Z ~ N(0, σ²I), is a Gaussian mixture over the placements.  With the batches fixed by
partition (G_t = s_{t mod b}), Y's mean is K·s, K = C·E (E[t, t mod b] = 1): QᵀY, K = QR, is a
sufficient statistic, N(R·s, σ²I) in b dimensions, so the hockey-stick divergence of the pair is
that of b-dimensional mixtures (T = 3 in 2-D); cyclic Poisson keeps T = 2.  δ(ε) is integrated on
a grid (step σ/16, ±9σ beyond the means; checked against the closed-form Gaussian), both orders.
"""

import functools
import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from dplab.accounting.gaussian import gaussian_epsilon
from dplab.cli import main
from dplab.mf import accounting, factorizations
from dplab.mf.workload import prefix_sum

VALUES = (-1.0, 0.0, 1.0)  # clipped scalar gradients, C = 1
DELTA = 1e-5


# ------------------------------------------------------------------ placements of the records
def permutation_sums(values: tuple, b: int) -> tuple[np.ndarray, np.ndarray]:
    """(partition sums, probabilities) of the earlier sampler: a uniform permutation ``order`` of
    the records, partition j = order[j::b]."""
    m = len(values)
    rows = [
        [sum(values[i] for i in order[j::b]) for j in range(b)]
        for order in itertools.permutations(range(m))
    ]
    return _merge(np.array(rows), np.full(len(rows), 1.0 / math.factorial(m)))


def assignment_sums(values: tuple, b: int) -> tuple[np.ndarray, np.ndarray]:
    """(partition sums, probabilities) of the sampler used now: every record in a uniform partition
    of the b, independently; every one of the b^m assignments."""
    rows = [
        [sum(v for v, a in zip(values, where) if a == j) for j in range(b)]
        for where in itertools.product(range(b), repeat=len(values))
    ]
    return _merge(np.array(rows, dtype=float), np.full(len(rows), float(b) ** -len(values)))


def cyclic_poisson_sums(values: tuple, b: int, steps: int, p: float) -> tuple[np.ndarray, ...]:
    """(step sums G, probabilities) of cyclic Poisson: a uniform partition j per record, then each
    of its steps t ≡ j (mod b) taken with probability p; every assignment and inclusion."""
    own = []  # per record: (its steps' inclusion vector, probability)
    for j in range(b):
        mine = [t for t in range(steps) if t % b == j]
        for kept in itertools.product((0, 1), repeat=len(mine)):
            g = np.zeros(steps)
            g[[t for t, k in zip(mine, kept) if k]] = 1.0
            own.append((g, p ** sum(kept) * (1 - p) ** (len(mine) - sum(kept)) / b))
    rows, weights = [], []
    for choice in itertools.product(own, repeat=len(values)):
        rows.append(sum(v * g for v, (g, _) in zip(values, choice)))
        weights.append(math.prod(w for _, w in choice))
    return _merge(np.array(rows), np.array(weights))


def _merge(rows: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unique, inverse = np.unique(np.round(rows, 9), axis=0, return_inverse=True)
    return unique, np.bincount(inverse.ravel(), weights)


# ------------------------------------------------------------------ hockey-stick on a grid
class Pairs:
    """δ(ε) of pairs of datasets for one C, b and σ (densities cached per dataset, a multiset:
    the samplers treat records alike).  ``sampler``: "permutation", "assignment" or
    ("cyclic_poisson", p)."""

    def __init__(self, encoder: np.ndarray, b: int, sigma: float, sampler):
        self.encoder, self.b, self.sigma, self.sampler = encoder, b, sigma, sampler
        steps = encoder.shape[0]
        if sampler in ("permutation", "assignment"):
            placed = np.zeros((steps, b))
            placed[np.arange(steps), np.arange(steps) % b] = 1.0
            _, self.map = np.linalg.qr(encoder @ placed)  # mean of QᵀY = R·s
        else:
            self.map = encoder  # mean of Y = C·G
        reach = np.abs(self.map).sum(1).max() * 4 + 9 * sigma  # |means| ≤ 4 records · row sum
        self.h = sigma / 16
        self.grid = np.arange(-reach, reach + self.h, self.h)
        self.cache = {}

    def density(self, values: tuple) -> np.ndarray:
        values = tuple(sorted(values))
        if values not in self.cache:
            if self.sampler == "permutation":
                sums, weights = permutation_sums(values, self.b)
            elif self.sampler == "assignment":
                sums, weights = assignment_sums(values, self.b)
            else:
                steps, p = self.encoder.shape[0], self.sampler[1]
                sums, weights = cyclic_poisson_sums(values, self.b, steps, p)
            means = sums @ self.map.T
            assert means.shape[1] == 2, "2-D grids only"
            axes = [
                norm.pdf((self.grid[None, :] - means[:, [d]]) / self.sigma) / self.sigma
                for d in range(2)
            ]
            self.cache[values] = (axes[0].T * weights) @ axes[1]
        return self.cache[values]

    def delta(self, d: tuple, d2: tuple, epsilon: float) -> float:
        """max of δ(D‖D') and δ(D'‖D) at ε."""
        p, q = self.density(d), self.density(d2)
        return max(
            float(np.maximum(a - math.exp(epsilon) * c, 0).sum()) * self.h**2
            for a, c in ((p, q), (q, p))
        )

    def epsilon(self, d: tuple, d2: tuple, delta: float) -> float:
        """The pair's exact ε at δ (bisection on the grid's δ(ε), to 1e-6)."""
        lo, hi = 0.0, 50.0
        while hi - lo > 1e-6:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.delta(d, d2, mid) > delta else (lo, mid)
        return hi


def neighbours(n: int, relation: str):
    """Every pair (D, D') with |D| = n: D' = D plus one record (add_remove; removing one from D'
    is the same pair), or D with one record replaced (replace_one)."""
    for d in itertools.combinations_with_replacement(VALUES, n):
        if relation == "add_remove":
            near = {tuple(sorted(d + (v,))) for v in VALUES}
        else:
            near = {tuple(sorted(d[:i] + (v,) + d[i + 1 :])) for i in range(n) for v in VALUES} - {
                d
            }
        for d2 in near:
            yield d, d2


@functools.lru_cache(maxsize=None)
def strategy(name: str, steps: int):
    A = prefix_sum(steps)
    return {
        "identity": factorizations.identity,
        "optimal": factorizations.optimal,
        "banded": lambda a: factorizations.banded(a, 2),
    }[name](A)


# ------------------------------------------------------------------ the tests
def test_grid_reproduces_the_closed_form_gaussian():
    """The integrator itself: one Gaussian pair of μ = 1 (C = I, one record alone in a batch:
    not a pair the sampler makes, so it is built by hand)."""
    pairs = Pairs(np.eye(2), 2, 1.0, "assignment")
    pairs.cache[("a",)] = pairs.density(())
    axes = [norm.pdf(pairs.grid - m) for m in (1.0, 0.0)]
    pairs.cache[("b",)] = np.outer(*axes)
    exact = gaussian_epsilon(DELTA, 1.0)
    assert pairs.epsilon(("a",), ("b",), DELTA) == pytest.approx(exact, abs=2e-3)


def test_permutation_split_breaks_add_remove_by_far():
    """The defect: with the batches cut from one permutation, three records at −C and one added
    at +C move the batch sums from (−2, −1) to (0, −2) or (−2, 0); that pair's exact ε at
    δ = 1e-5 is 10.43 (σ = 1, C = I, T = b = 2), where `dplab mf` printed 4.3772 (Δ₁ = 1)."""
    pairs = Pairs(np.eye(2), 2, 1.0, "permutation")
    d, d2 = (-1.0,) * 3, (-1.0,) * 3 + (1.0,)
    assert pairs.epsilon(d, d2, DELTA) == pytest.approx(10.43, abs=5e-3)
    sampler = accounting.MinSeparation(2, 2)
    printed = accounting.epsilon(strategy("identity", 2), sampler, 1.0, DELTA)
    assert printed == pytest.approx(4.3772, abs=1e-4)
    assert pairs.delta(d, d2, printed) > 100 * DELTA


#: (strategy, T, relation): b = 2 partitions, k = ⌈T/2⌉; σ = 1
MIN_SEPARATION = [
    (s, t, r)
    for s in ("identity", "optimal", "banded")
    for t in (2, 3)
    for r in ("add_remove", "replace_one")
]


@pytest.mark.parametrize("name,steps,relation", MIN_SEPARATION)
def test_min_separation_epsilon_holds_for_every_pair_of_small_datasets(name, steps, relation):
    """Each record in a uniform partition drawn independently: at the ε the accountant prints
    (sensitivity·Δ₁, Δ₁ = 1 add_remove, 2 replace_one) no pair of datasets of 3 records and their
    neighbours exceeds δ (grid error ≤ 1e-3 relative), in either order."""
    fact = strategy(name, steps)
    printed = accounting.epsilon(fact, accounting.MinSeparation(2, steps), 1.0, DELTA, relation)
    pairs = Pairs(fact.encoder, 2, 1.0, "assignment")
    worst = max(pairs.delta(d, d2, printed) for d, d2 in neighbours(3, relation))
    assert worst <= DELTA * (1 + 1e-3)


def test_min_separation_adds_a_fourth_record_and_the_defect_pair_is_below_the_printed_epsilon():
    """n = 4 records plus one added, and the pair of the defect under the sampler used now: its
    exact ε is below the printed 4.3772."""
    fact = strategy("identity", 2)
    printed = accounting.epsilon(fact, accounting.MinSeparation(2, 2), 1.0, DELTA)
    pairs = Pairs(fact.encoder, 2, 1.0, "assignment")
    worst = max(pairs.delta(d, d2, printed) for d, d2 in neighbours(4, "add_remove"))
    assert worst <= DELTA * (1 + 1e-3)
    assert pairs.epsilon((-1.0,) * 3, (-1.0,) * 3 + (1.0,), DELTA) < printed


@pytest.mark.parametrize("name,partitions", [("identity", 2), ("banded", 2)])
def test_cyclic_poisson_epsilon_holds_for_every_pair_of_small_datasets(name, partitions):
    """Cyclic Poisson (T = b = 2, rate p = 0.5, add_remove): the amplified-BandMF ε (PLD) is not
    beaten by any pair of datasets of 3 records plus one (measured: the worst δ is 5e-7 of 1e-5)."""
    fact = strategy(name, 2)
    sampler = accounting.CyclicPoisson(
        dataset_size=4, batch_size=2 / partitions, partitions_count=partitions, steps=2
    )
    assert sampler.sampling_rate == 0.5
    printed = accounting.epsilon(fact, sampler, 1.0, DELTA)
    pairs = Pairs(fact.encoder, partitions, 1.0, ("cyclic_poisson", 0.5))
    worst = max(pairs.delta(d, d2, printed) for d, d2 in neighbours(3, "add_remove"))
    assert worst <= DELTA * (1 + 1e-3)


def test_dplab_mf_prints_the_epsilon_the_brute_force_bounds(capsys):
    """The command of the defect prints the Gaussian of Δ₁ = 1 under the sampler it documents,
    and the worst pair of that sampler stays below δ there; cyclic Poisson under replace_one is
    refused."""
    command = [
        "mf",
        "--strategy",
        "identity",
        "--steps",
        "2",
        "--min-separation",
        "2",
        "--noise-multiplier",
        "1",
        "--delta",
        "1e-5",
    ]
    assert main(command) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["sampling"], out["neighbouring"]) == ("min_separation", "add_remove")
    assert out["epsilon"] == pytest.approx(gaussian_epsilon(DELTA, 1.0), rel=1e-9)
    pairs = Pairs(np.eye(2), 2, 1.0, "assignment")
    worst = max(pairs.delta(d, d2, out["epsilon"]) for d, d2 in neighbours(3, "add_remove"))
    assert worst <= DELTA * (1 + 1e-3)
    assert (
        main(
            [
                *command,
                "--sampling",
                "cyclic_poisson",
                "--dataset-size",
                "4",
                "--batch-size",
                "1",
                "--neighbouring",
                "replace_one",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "neighbouring" in err
