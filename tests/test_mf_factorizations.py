import math

import numpy as np
import pytest

from dplab.errors import DPLabError
from dplab.mf import factorizations as F
from dplab.mf import workload as W


@pytest.mark.parametrize("T", [16, 64])
@pytest.mark.parametrize("strategy", ["identity", "sqrt", "optimal", "banded"])
def test_decoder_times_encoder_reproduces_workload(T, strategy):
    A = W.prefix_sum(T)
    f = F.factorize(strategy, A, bands=4)
    assert np.max(np.abs(f.decoder @ f.encoder - A)) < 1e-8
    assert np.all(np.triu(f.encoder, 1) == 0)


@pytest.mark.parametrize("T", [16, 64, 256])
def test_error_ordering_single_participation(T):
    A = W.prefix_sum(T)
    e = {s: F.factorize(s, A).errors() for s in ("identity", "sqrt", "optimal")}
    assert e["optimal"]["mean_error"] <= e["sqrt"]["mean_error"] <= e["identity"]["mean_error"]
    assert e["optimal"]["max_error"] <= e["sqrt"]["max_error"] <= e["identity"]["max_error"]


@pytest.mark.parametrize("T", [1, 7, 100])
def test_identity_closed_form(T):
    e = F.identity(W.prefix_sum(T)).errors()
    assert e["mean_error"] == pytest.approx((T + 1) / 2, rel=1e-12)
    assert e["max_error"] == pytest.approx(T, rel=1e-12)
    assert e["sensitivity"] == 1.0


def test_sqrt_closed_forms():
    T = 50
    f = F.sqrt(W.prefix_sum(T))
    c = np.array([math.comb(2 * j, j) / 4**j for j in range(T)])
    np.testing.assert_allclose(f.encoder[:, 0], c, rtol=1e-12)
    np.testing.assert_allclose(f.encoder @ f.encoder, W.prefix_sum(T), atol=1e-12)
    assert f.sensitivity().value ** 2 == pytest.approx(np.sum(c**2), rel=1e-12)
    # B = C, so row t of B has norm² Σ_{j≤t} c_j²; error = sens²·that
    rows = np.cumsum(c**2) * np.sum(c**2)
    assert f.errors()["mean_error"] == pytest.approx(rows.mean(), rel=1e-12)


def test_sqrt_needs_toeplitz_workload():
    with pytest.raises(DPLabError, match="workload"):
        F.sqrt(W.momentum_workload(8, 0.0, lr_factors=np.linspace(1, 0.5, 8)))


def test_optimal_converges_with_certified_gap():
    f = F.optimal(W.prefix_sum(64), tol=1e-10)
    assert f.info["relative_gap"] <= 1e-10
    gaps = np.array(f.info["gap_history"])
    assert gaps[0] > 1e-3 and np.all(gaps[5:] <= gaps[4])
    np.testing.assert_allclose(np.sum(f.encoder**2, axis=0), 1.0, atol=1e-10)  # unit columns


def test_optimal_beats_other_unit_column_factorizations():
    A = W.prefix_sum(32)
    best = F.optimal(A).errors()["mean_error"]
    for other in (F.banded(A, 8), F.banded(A, 32), F.identity(A)):
        assert best <= other.errors()["mean_error"] + 1e-9
    # random feasible perturbations of the optimum are worse
    rng = np.random.default_rng(0)
    C = F.optimal(A).encoder
    for _ in range(5):
        Cp = C + 1e-3 * np.tril(rng.standard_normal(C.shape))
        Cp /= np.linalg.norm(Cp, axis=0)
        B = np.linalg.solve(Cp.T, A.T).T
        assert np.sum(B**2) / 32 >= best - 1e-9


def test_banded_structure_and_monotone_in_bands():
    A = W.prefix_sum(64)
    errs = []
    for m in (1, 2, 4, 16):
        f = F.banded(A, m)
        lag = np.subtract.outer(np.arange(64), np.arange(64))
        assert np.all(f.encoder[(lag >= m) | (lag < 0)] == 0)
        np.testing.assert_allclose(np.sum(f.encoder**2, axis=0), 1.0, atol=1e-12)
        errs.append(f.errors()["mean_error"])
    assert errs[0] == pytest.approx(32.5)  # 1 band = identity: (T+1)/2
    assert all(a >= b for a, b in zip(errs, errs[1:]))


def test_banded_rejects_more_bands_than_separation():
    with pytest.raises(DPLabError, match="bands"):
        F.banded(W.prefix_sum(10), 5, min_separation=3)


def test_momentum_workload_closed_form():
    beta, T = 0.9, 12
    A = W.momentum_workload(T, beta)
    t, s = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    expected = np.where(s <= t, (1 - beta ** (t - s + 1)) / (1 - beta), 0.0)
    np.testing.assert_allclose(A, expected, rtol=1e-12)
    np.testing.assert_array_equal(W.momentum_workload(T), W.prefix_sum(T))
    f = F.sqrt(A)  # Toeplitz: the series square root applies
    np.testing.assert_allclose(f.encoder @ f.encoder, A, atol=1e-10)


@pytest.mark.parametrize(
    "A",
    [W.prefix_sum(40), W.momentum_workload(40, 0.0, lr_factors=np.linspace(1, 0.3, 40))],
    ids=["prefix_sum", "lr_decay"],
)
def test_tridiagonal_dual_step_equals_dense(A):
    """A⁻¹ bidiagonal: the O(T²) step gives the dense step's diag(M^½), dual and primal."""
    assert F._inverse_bidiagonal(A) is not None
    v = np.random.default_rng(1).uniform(0.3, 3.0, A.shape[0])
    dense, tri = F._DenseDual(A)(v), F._TridiagonalDual(*F._inverse_bidiagonal(A))(v)
    for a, b in zip(dense[:3], tri[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-9)


def test_optimal_accelerated_equals_plain_fixed_point():
    """Anderson acceleration and the plain iteration reach the same certified optimum, in fewer
    steps; momentum (A⁻¹ not bidiagonal) takes the dense path and is certified the same way."""
    A = W.prefix_sum(128)
    fast, plain = F.optimal(A, tol=1e-10), F.optimal(A, tol=1e-10, history=0)
    assert (
        fast.info["solver"] == "tridiagonal"
        and fast.info["iterations"] < plain.info["iterations"] / 2
    )
    assert fast.errors()["mean_error"] == pytest.approx(plain.errors()["mean_error"], rel=1e-9)
    assert fast.info["objective"] / 128 == pytest.approx(fast.errors()["mean_error"], rel=1e-9)
    Am = W.momentum_workload(32, 0.9)
    assert F._inverse_bidiagonal(Am) is None
    m = F.optimal(Am)
    assert m.info["solver"] == "dense" and m.info["relative_gap"] <= 1e-8
    assert m.errors()["mean_error"] <= F.sqrt(Am).errors()["mean_error"]


def test_banded_loss_gradient_and_value():
    """The O(T²·m) loss equals ‖A·C⁻¹‖_F²/T of the dense encoder; its gradient
    matches central differences."""
    A = W.momentum_workload(30, 0.5, lr_factors=np.linspace(1, 0.4, 30))
    c = np.array([1.0, 0.6, -0.2, 0.3])
    loss, grad = F._banded_loss(c, A)
    C = F.banded_encoder(c, 30)
    assert loss == pytest.approx(np.sum(np.linalg.solve(C.T, A.T) ** 2) / 30, rel=1e-12)
    h = 1e-6
    fd = [
        (F._banded_loss(c + h * e, A)[0] - F._banded_loss(c - h * e, A)[0]) / (2 * h)
        for e in np.eye(4)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
