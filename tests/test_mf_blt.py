"""BLT factorizations (dplab.mf.blt): the O(T·k) objective and its gradient, the closed-form
coefficients and their monotonicity, the optimum against jax_privacy's BLT optimizer where it is
installed (the stored peer values: tests/test_mf_toeplitz.py), and the CLI's refusals
before any optimization."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.signal

from dplab.cli import main
from dplab.errors import DPLabError
from dplab.mf import blt
from dplab.mf.factorizations import _toeplitz_lower

PEER = json.loads((Path(__file__).parent / "peer_values" / "jax_privacy_mf.json").read_text())


@pytest.mark.parametrize("objective", ["mean", "max"])
@pytest.mark.parametrize("steps,buffers,k,s", [(50, 2, 1, 50), (60, 3, 3, 10), (40, 1, 4, 7)])
def test_gradient_matches_finite_differences(objective, steps, buffers, k, s):
    z = np.random.default_rng(steps + buffers).normal(size=2 * buffers + 1)
    _, grad = blt.objective_and_gradient(z, steps, objective, k, s)
    h = 1e-6
    numeric = [
        (
            blt.objective_and_gradient(z + h * e, steps, objective, k, s)[0]
            - blt.objective_and_gradient(z - h * e, steps, objective, k, s)[0]
        )
        / (2 * h)
        for e in np.eye(len(z))
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8 * np.abs(grad).max())


def test_coefficients_are_the_rational_generating_function_and_decrease():
    """c from ω, θ (closed form) = the impulse response of Π(1 − θ̂x)/Π(1 − θx); positive and
    decreasing; C⁻¹ from the sections inverts C."""
    theta, theta_hat = np.array([0.99, 0.8, 0.3]), np.array([0.95, 0.5, 0.1])
    T = 300
    impulse = np.zeros(T)
    impulse[0] = 1.0
    c = blt.coefficients(theta, theta_hat, T)
    np.testing.assert_allclose(
        c, scipy.signal.lfilter(np.poly(theta_hat), np.poly(theta), impulse), rtol=1e-12, atol=1e-15
    )
    assert (
        np.all(c > 0)
        and np.all(np.diff(c) <= 0)
        and np.all(blt.output_scales(theta, theta_hat) > 0)
    )
    fact = blt.from_decays(theta, theta_hat, T)
    C = _toeplitz_lower(fact.coefficients, T)
    np.testing.assert_allclose(C @ fact.inverse(np.eye(T)), np.eye(T), atol=1e-10)


@pytest.mark.parametrize(
    "theta,theta_hat",
    [
        ([0.9, 0.5], [0.95, 0.2]),
        ([0.9, 0.5], [0.6, 0.55]),
        ([1.1], [0.5]),
        ([0.5], [-0.1]),
        ([0.9], [0.5, 0.1]),
    ],
)
def test_from_decays_refuses_what_does_not_interlace(theta, theta_hat):
    """Decays out of [0, 1], out of order or of unequal numbers are refused (ω
    would not all be > 0)."""
    with pytest.raises(DPLabError, match="interlace"):
        blt.from_decays(theta, theta_hat, 10)


@pytest.mark.slow
def test_live_jax_privacy_blt():
    """Where jax_privacy is installed: its 2-buffer BLT for T = 150, max error, against ours."""
    pytest.importorskip("jax_privacy")
    from jax_privacy.matrix_factorization import buffered_toeplitz as peer

    loss_fn = peer.LossFn.build_min_sep(n=150, error="max", min_sep=150, max_participations=1)
    _, theirs = peer.optimize_loss(loss_fn, num_buffers=2)
    assert blt.blt(150, 2, "max").errors()["max_error"] <= float(theirs) * (1 + 1e-6)


def _cli(capsys, *args):
    rc = main(["mf", *args])
    return rc, capsys.readouterr()


def test_cli_blt_prints_errors_and_unamplified_sigma(capsys):
    rc, out = _cli(
        capsys, "--strategy", "blt", "--steps", "200", "--buffers", "2", "--objective", "max"
    )
    res = json.loads(out.out)
    row = next(r for r in PEER["blt_errors"] if (r["T"], r["objective"]) == (200, "max"))
    assert rc == 0 and res["buffers"] == 2 and res["bands"] == 200 and res["objective"] == "max"
    assert res["max_error"] <= row["error"] * (1 + 1e-9) and res["optimization_seconds"] > 0


def test_an_optimum_needing_fewer_buffers_cancels_pole_zero_pairs():
    """T = 100, 8 buffers, 4 participations 25 apart: the optimum collapses decays (a pole meets its
    zero, θ_1 reaches 1 in floating point), which used to be refused; now the equal pairs cancel, C
    is valid and its error and exact sensitivity equal the dense path's."""
    from dplab.mf.factorizations import Factorization

    fact = blt.blt(100, 8, "max", 4, 25)
    ours = fact.errors(4, 25)
    dense = Factorization(
        "dense", np.tril(np.ones((100, 100))), _toeplitz_lower(fact.coefficients, 100), 100
    ).errors(4, 25)
    assert ours["sensitivity_exact"] and ours["max_error"] == pytest.approx(
        dense["max_error"], rel=1e-9
    )
    assert ours["max_error"] <= blt.blt(100, 2, "max", 4, 25).errors(4, 25)["max_error"] * (
        1 + 1e-9
    )


@pytest.mark.parametrize(
    "args,key",
    [
        (["--steps", "100"], "buffers"),
        (["--steps", "100", "--buffers", "0"], "buffers"),
        (["--steps", "100", "--buffers", "16"], "buffers"),
        (["--steps", "5", "--buffers", "3"], "buffers"),
        (["--steps", "1000000000", "--buffers", "3"], "steps"),
        (["--steps", "100", "--buffers", "2", "--bands", "4"], "bands"),
        (["--steps", "100", "--buffers", "2", "--momentum", "0.9"], "momentum"),
        (
            [
                "--steps",
                "100",
                "--buffers",
                "2",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "0.1",
                "--delta",
                "1e-5",
            ],
            "sampling_rate",
        ),
    ],
)
def test_bad_flags_refused_before_optimizing(capsys, monkeypatch, args, key):
    def never(*a, **k):
        raise AssertionError("optimization started")

    monkeypatch.setattr(blt, "blt", never)
    rc, out = _cli(capsys, "--strategy", "blt", *args)
    assert rc == 2 and out.err.count("\n") == 1 and key in out.err, out.err


def test_buffers_only_for_blt(capsys):
    rc, out = _cli(capsys, "--strategy", "sqrt", "--steps", "10", "--buffers", "2")
    assert rc == 2 and "buffers" in out.err
