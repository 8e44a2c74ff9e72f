"""The Gaussian PLD with its inverse privacy loss on arrays (dplab.accounting.pld_gaussian) is
dp_accounting's ``from_gaussian_mechanism``, byte for byte."""

import math
import re

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution
from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, GaussianPrivacyLoss

from dplab.accounting.pld_gaussian import ArrayGaussianPrivacyLoss, gaussian_pld

Rel = privacy_loss_distribution.NeighborRel


def _bytes(pld):
    """Each PMF of a PLD (remove, add) as (lowest loss, probabilities, infinity mass, interval)."""
    dense = [pmf.to_dense_pmf() for pmf in (pld._pmf_remove, pld._pmf_add)]  # noqa: SLF001
    return [
        (
            int(d._lower_loss),  # noqa: SLF001
            np.asarray(d._probs).tobytes(),  # noqa: SLF001
            float(d._infinity_mass).hex(),  # noqa: SLF001
            d._discretization,  # noqa: SLF001
        )
        for d in dense
    ]


@pytest.mark.parametrize(
    "sigma,q,disc,relation",
    [
        (0.9, 0.05, 1e-3, Rel.ADD_OR_REMOVE_ONE),  # DP-SGD's Poisson step
        (0.5, 0.3, 1e-3, Rel.ADD_OR_REMOVE_ONE),  # a small σ: a wide loss range
        (4.0, 1e-4, 1e-4, Rel.ADD_OR_REMOVE_ONE),  # a tiny q: ε near ±log(1 − q) is in range
        (1.3, 1.0, 1e-3, Rel.ADD_OR_REMOVE_ONE),  # full batch: one symmetric PMF
        (2.0, 0.2, 1e-2, Rel.REPLACE_ONE),  # REPLACE: dp_accounting's own method
    ],
)
def test_gaussian_pld_is_dp_accountings_bit_for_bit(sigma, q, disc, relation):
    want = privacy_loss_distribution.from_gaussian_mechanism(
        sigma, value_discretization_interval=disc, sampling_prob=q, neighboring_relation=relation
    )
    assert _bytes(gaussian_pld(sigma, disc, q, relation)) == _bytes(want)


@pytest.mark.parametrize("q", [0.01, 0.3, 1.0])
@pytest.mark.parametrize("adjacency", [AdjacencyType.ADD, AdjacencyType.REMOVE])
def test_delta_for_epsilon_matches_at_every_branch(q, adjacency):
    """Random ε, ε = ±0, and ε at ±log(1 − q) and ±log1p(−q) (where the scalar code takes
    another branch or refuses): the same δ, bit for bit, or the same refusal."""
    mine = ArrayGaussianPrivacyLoss(1.1, sampling_prob=q, adjacency_type=adjacency)
    theirs = GaussianPrivacyLoss(1.1, sampling_prob=q, adjacency_type=adjacency)
    edges = [math.log(1 - q), math.log1p(-q)] if q < 1 else [1.0]
    epsilons = np.concatenate(
        [np.random.default_rng(0).normal(0, 2, 500), [0.0, -0.0], edges, [-e for e in edges]]
    )
    for eps in (epsilons, 0.5, 0.0, float(-edges[0])):
        try:
            want = np.asarray(theirs.get_delta_for_epsilon(eps)).tobytes()
        except ValueError as why:
            with pytest.raises(ValueError, match=re.escape(str(why))):
                mine.get_delta_for_epsilon(eps)
            continue
        assert np.asarray(mine.get_delta_for_epsilon(eps)).tobytes() == want
