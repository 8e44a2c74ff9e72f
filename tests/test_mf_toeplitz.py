"""Banded Toeplitz factorizations (dplab.mf.toeplitz; BLT's optimum too): the O(T·b) objective
against dense matrices and finite differences, the O(T) sensitivity against the dense module and
brute force, the optimum and the amplified-BandMF ε against jax_privacy (stored values,
tests/peer_values/make_jax_privacy_mf.py; a live run where jax_privacy is installed), and the CLI's
refusals before any optimization."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dplab.cli import main
from dplab.mf import accounting, saved, toeplitz
from dplab.mf.factorizations import Factorization, _toeplitz_lower
from dplab.mf.sensitivity import brute_force, sensitivity, toeplitz_sensitivity

PEER = json.loads((Path(__file__).parent / "peer_values" / "jax_privacy_mf.json").read_text())


@pytest.mark.parametrize("objective", toeplitz.OBJECTIVES)
@pytest.mark.parametrize("steps,bands,k,s", [(50, 5, 1, 50), (60, 7, 3, 10), (60, 12, 4, 7)])
def test_gradient_matches_finite_differences(objective, steps, bands, k, s):
    rng = np.random.default_rng(steps + bands)
    c = np.concatenate([[1.0], 0.3 * rng.random(bands - 1)])
    _, grad = toeplitz.objective_and_gradient(c, steps, objective, k, s)
    h = 1e-6
    numeric = [
        (
            toeplitz.objective_and_gradient(c + h * e, steps, objective, k, s)[0]
            - toeplitz.objective_and_gradient(c - h * e, steps, objective, k, s)[0]
        )
        / (2 * h)
        for e in np.eye(bands)
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8 * np.abs(grad).max())


@pytest.mark.parametrize("strategy", ["banded_toeplitz", "blt"])
@pytest.mark.parametrize("k,s", [(1, 40), (4, 10), (3, 5)])
def test_errors_equal_the_dense_factorization(strategy, k, s):
    """mean/max error and sensitivity of the O(T·b) path (banded: 8 bands, > s = 5 too) and the
    O(T·k) path (BLT, 2 buffers) = the dense T×T path on the same C; both exact."""
    from dplab.mf import blt

    fact = (
        toeplitz.banded_toeplitz(40, 8, "mean", k, s)
        if strategy == "banded_toeplitz"
        else blt.blt(40, 2, "mean", k, s)
    )
    C = _toeplitz_lower(fact.coefficients, 40)
    dense = Factorization("dense", np.tril(np.ones((40, 40))), C, 40).errors(k, s)
    ours = fact.errors(k, s)
    for key in ("sensitivity", "max_error", "mean_error"):
        assert ours[key] == pytest.approx(dense[key], rel=1e-10)
    assert ours["sensitivity_exact"] and dense["sensitivity_exact"]


@pytest.fixture(scope="module")
def every_band():
    """T = 30, k = 3 participations >= s = 10 apart: the optimum for each of bands 1..T (bands > s:
    the search in the cone c >= 0 non-increasing, which once reached c = 0 and crashed at 30)."""
    return {bands: toeplitz.banded_toeplitz(30, bands, "mean", 3, 10) for bands in range(1, 31)}


@pytest.mark.parametrize("bands", range(1, 31))
def test_every_band_count_at_three_participations_is_dense_and_no_worse(every_band, bands):
    """Sensitivity and errors = the dense module's on the same C (sensitivity also = brute force
    over every pattern, X >= 0 in the cone); the error never rises with bands where the sets nest
    (c_0 = 1 for bands <= s; the cone for bands > s, which holds the s-band optimum when that is
    non-negative and non-increasing)."""
    T, k, s = 30, 3, 10
    fact = every_band[bands]
    C = _toeplitz_lower(fact.coefficients, T)
    dense = Factorization("dense", np.tril(np.ones((T, T))), C, bands).errors(k, s)
    ours = fact.errors(k, s)
    for key in ("sensitivity", "max_error", "mean_error"):
        assert ours[key] == pytest.approx(dense[key], rel=1e-10)
    assert ours["sensitivity_exact"] and dense["sensitivity_exact"]
    if np.all(C.T @ C >= 0):
        assert ours["sensitivity"] == pytest.approx(brute_force(C, k, s), rel=1e-12)
    if bands > 1:
        fewer = every_band[bands - 1].errors(k, s)["mean_error"]
        assert ours["mean_error"] <= fewer * (1 + 1e-9) or bands == s + 1
    at_s = every_band[s].coefficients
    if bands > s and np.all(at_s >= 0) and np.all(np.diff(at_s) <= 0):
        assert ours["mean_error"] <= every_band[s].errors(k, s)["mean_error"] * (1 + 1e-9)


def test_sensitivity_exact_cases_and_bound_against_dense_and_brute_force():
    """Random Toeplitz C (any signs, non-negative, non-increasing): an exact value equals the dense
    module's exact value (and brute force where X >= 0); the bound is >= both."""
    rng = np.random.default_rng(0)
    bounds = 0
    for trial in range(240):
        T = int(rng.integers(3, 10))
        b, k, s = int(rng.integers(1, T + 1)), int(rng.integers(1, 4)), int(rng.integers(1, T + 1))
        c = [
            rng.normal(size=b),
            np.sort(rng.random(b) + 0.01)[::-1],
            np.abs(rng.normal(size=b)) + 0.01,
        ][trial % 3]
        C = _toeplitz_lower(c, T)
        ours, dense, brute = (
            toeplitz_sensitivity(c, T, k, s),
            sensitivity(C, k, s),
            brute_force(C, k, s),
        )
        assert ours.value >= brute - 1e-9
        if ours.exact and dense.exact:
            assert ours.value == pytest.approx(dense.value, rel=1e-9)
        if not ours.exact:
            bounds += 1
            assert ours.value >= dense.value - 1e-9 or not dense.exact
    assert bounds > 10  # the bound was exercised


def test_sensitivity_refuses_a_zero_leading_coefficient():
    with pytest.raises(Exception, match="coefficients"):
        toeplitz_sensitivity([0.0, 1.0], 5)


PEER_OPTIMA = [("banded_toeplitz", r) for r in PEER["errors"]] + [
    ("blt", r) for r in PEER["blt_errors"]
]


@pytest.mark.parametrize(
    "strategy,row",
    PEER_OPTIMA,
    ids=lambda x: (
        x
        if isinstance(x, str)
        else f"T{x['T']}-{x.get('bands', x.get('buffers'))}-k{x['participations']}-{x['objective']}"
    ),
)
def test_reaches_jax_privacys_error(strategy, row):
    """Same strategy (bands or buffers), T, participation and objective: our optimum's error <=
    jax_privacy's (rel 1e-9), with an exact sensitivity."""
    from dplab.mf import blt

    k, s = row["participations"], row["min_separation"]
    if strategy == "banded_toeplitz":
        fact = toeplitz.banded_toeplitz(row["T"], row["bands"], row["objective"], k, s)
    else:
        fact = blt.blt(row["T"], row["buffers"], row["objective"], k, s)
    ours = fact.errors(k, s)
    assert ours[row["objective"] + "_error"] <= row["error"] * (1 + 1e-9)
    assert ours["sensitivity_exact"]


@pytest.mark.parametrize(
    "row", PEER["epsilons"], ids=lambda r: f"T{r['T']}-b{r['bands']}-q{r['sampling_rate']}"
)
def test_amplified_bandmf_epsilon_equals_jax_privacy(row):
    fact = toeplitz.ToeplitzFactorization(
        "banded_toeplitz", np.ones(row["bands"]) / math.sqrt(row["bands"]), row["T"]
    )
    sampler = accounting.PoissonGroups(row["sampling_rate"], row["bands"], row["T"])
    eps = accounting.epsilon(fact, sampler, row["noise_multiplier"], row["delta"])
    # both upper bounds: pld's certified read-off (pld_tilted) of a pessimistic PLD that may
    # be finer than dp_accounting's default grid (a quarter of one step's loss std), and the
    # FFT value jax_privacy reads
    assert row["epsilon"] * (1 - 1e-6) <= eps <= row["epsilon"] * (1 + 1e-4)


def test_amplification_refuses_a_C_with_more_bands_than_groups():
    fact = toeplitz.ToeplitzFactorization(
        "banded_toeplitz", np.array([1.0, 0.5, 0.25]) / math.sqrt(1.3125), 20
    )
    with pytest.raises(Exception, match="bands"):
        accounting.epsilon(fact, accounting.PoissonGroups(0.1, 2, 20), 1.0, 1e-5)


def test_live_jax_privacy_optimum():
    """Where jax_privacy is installed: its optimum on T = 200, 6 bands, max
    objective, against ours."""
    pytest.importorskip("jax_privacy")
    import jax.numpy as jnp
    from jax_privacy.matrix_factorization import toeplitz as peer

    coef = peer.optimize_banded_toeplitz(200, 6, reduction_fn=jnp.max)
    theirs = float(peer.sensitivity_squared(coef, 200)) * float(
        peer.per_query_error(strategy_coef=coef, n=200)[-1]
    )
    assert toeplitz.banded_toeplitz(200, 6, "max").errors()["max_error"] <= theirs * (1 + 1e-6)


def _cli(capsys, *args):
    rc = main(["mf", *args])
    return rc, capsys.readouterr()


def test_cli_prints_amplified_epsilon(capsys):
    row = PEER["epsilons"][0]
    rc, out = _cli(
        capsys,
        "--strategy",
        "banded_toeplitz",
        "--steps",
        str(row["T"]),
        "--bands",
        str(row["bands"]),
        "--objective",
        "max",
        "--noise-multiplier",
        str(row["noise_multiplier"]),
        "--sampling-rate",
        str(row["sampling_rate"]),
        "--delta",
        str(row["delta"]),
    )
    res = json.loads(out.out)
    assert rc == 0 and row["epsilon"] * (1 - 1e-9) <= res["epsilon"] <= row["epsilon"] * (1 + 1e-4)
    assert (
        res["sampling"] == "amplified_bandmf"
        and res["groups"] == row["bands"]
        and res["objective"] == "max"
    )
    assert res["max_error"] <= res["mean_error"] * 2.5 and res["optimization_seconds"] > 0


@pytest.mark.parametrize(
    "args,key",
    [
        (["--strategy", "banded_toeplitz", "--steps", "100"], "bands"),
        (["--strategy", "banded_toeplitz", "--steps", "100", "--bands", "0"], "bands"),
        (["--strategy", "banded_toeplitz", "--steps", "100", "--bands", "101"], "bands"),
        (["--strategy", "banded_toeplitz", "--steps", "1000000000", "--bands", "2"], "steps"),
        (
            [
                "--strategy",
                "banded_toeplitz",
                "--steps",
                "100",
                "--bands",
                "4",
                "--momentum",
                "0.9",
            ],
            "momentum",
        ),
        (["--strategy", "optimal", "--steps", "100", "--objective", "max"], "objective"),
        (["--strategy", "identity", "--steps", "100", "--objective", "mean"], "objective"),
        (
            [
                "--strategy",
                "sqrt",
                "--steps",
                "100",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "0.1",
                "--delta",
                "1e-5",
            ],
            "sampling_rate",
        ),
        (
            [
                "--strategy",
                "banded_toeplitz",
                "--steps",
                "100",
                "--bands",
                "4",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "1.5",
                "--delta",
                "1e-5",
            ],
            "sampling_rate",
        ),
        (
            [
                "--strategy",
                "banded_toeplitz",
                "--steps",
                "100",
                "--bands",
                "4",
                "--noise-multiplier",
                "1",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
            ],
            "noise_multiplier",
        ),
        (
            [
                "--strategy",
                "banded_toeplitz",
                "--steps",
                "100",
                "--bands",
                "4",
                "--noise-multiplier",
                "1",
            ],
            "delta",
        ),
        (
            [
                "--strategy",
                "banded_toeplitz",
                "--steps",
                "100",
                "--bands",
                "4",
                "--epsilon",
                "1",
                "--delta",
                "2",
            ],
            "delta",
        ),
    ],
)
def test_bad_flags_refused_before_optimizing(capsys, monkeypatch, args, key):
    def never(*a, **k):
        raise AssertionError("optimization started")

    monkeypatch.setattr(toeplitz, "banded_toeplitz", never)
    monkeypatch.setattr("dplab.mf.factorizations.optimal", never)
    rc, out = _cli(capsys, *args)
    assert rc == 2 and out.err.count("\n") == 1 and key in out.err, out.err


def test_cli_unamplified_calibration_scales_the_gaussian_by_the_sensitivity(capsys):
    """Without --sampling-rate: one Gaussian of sensitivity √k (bands 4 <= s = 10), σ =
    sens·σ_analytic(ε, δ)."""
    from dplab.accounting.gaussian import sigma_analytic

    rc, out = _cli(
        capsys,
        "--strategy",
        "banded_toeplitz",
        "--steps",
        "100",
        "--bands",
        "4",
        "--min-separation",
        "10",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
    )
    res = json.loads(out.out)
    assert (
        rc == 0
        and res["sampling"] == "min_separation"
        and res["sensitivity"] == pytest.approx(math.sqrt(10))
    )
    assert res["noise_multiplier"] == pytest.approx(
        math.sqrt(10) * sigma_analytic(2, 1e-5), rel=1e-9
    )


@pytest.mark.parametrize("strategy", ["banded_toeplitz", "blt"])
def test_saved_factorization_reads_back_exactly_and_a_damaged_file_is_refused(tmp_path, strategy):
    """save → load keeps C's first column, the inverse filters (the streamed noise is the same to
    the bit) and info; a file cut short is an error naming the command that writes it again."""
    import torch

    from dplab.errors import DPLabError
    from dplab.mf import blt
    from dplab.mf.noise import FilterNoise

    fact = (
        toeplitz.banded_toeplitz(40, 4, "max", 2, 20)
        if strategy == "banded_toeplitz"
        else blt.blt(40, 3, "max", 2, 20)
    )
    path = tmp_path / "c.npz"
    saved.save(fact, path)
    back = saved.load_toeplitz(path, "REGENERATE")
    assert (back.strategy, back.steps, back.info) == (
        fact.strategy,
        fact.steps,
        json.loads(json.dumps(fact.info)),
    )
    np.testing.assert_array_equal(back.coefficients, fact.coefficients)
    streams = [FilterNoise(f, 1.5) for f in (fact, back)]
    draws = [
        [
            s.sample(t, torch.zeros(5, dtype=torch.float64), torch.Generator().manual_seed(t))
            for t in range(40)
        ]
        for s in streams
    ]
    assert all(torch.equal(a, b) for a, b in zip(*draws))
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DPLabError, match="REGENERATE"):
        saved.load_toeplitz(path, "REGENERATE")
