import numpy as np
import pytest
import torch

from dplab.errors import DPLabError
from dplab.mf import factorizations as F
from dplab.mf import workload as W
from dplab.mf.noise import CorrelatedNoise, batch_noise


@pytest.mark.parametrize("strategy", ["banded", "optimal", "identity"])
def test_streamed_equals_batch(strategy):
    T, d, std = 25, 7, 1.7
    f = F.factorize(strategy, W.prefix_sum(T), bands=4)
    noise = CorrelatedNoise(f, std)
    like = torch.zeros(d, dtype=torch.float64)
    g = torch.Generator().manual_seed(3)
    streamed = np.stack([noise.sample(t, like, g).numpy() for t in range(T)])
    assert noise.memory_vectors == min(f.bands - 1, T)
    g = torch.Generator().manual_seed(3)
    Z = np.stack(
        [(torch.randn(d, generator=g, dtype=torch.float64) * std).numpy() for _ in range(T)]
    )
    np.testing.assert_allclose(streamed, batch_noise(f, Z), rtol=0, atol=1e-10)


@pytest.mark.parametrize("strategy", ["banded", "sqrt"])
def test_empirical_covariance(strategy):
    T, d = 6, 200_000
    f = F.factorize(strategy, W.prefix_sum(T), bands=3)
    noise = CorrelatedNoise(f, 1.0)
    g = torch.Generator().manual_seed(0)
    like = torch.zeros(d, dtype=torch.float64)
    Wn = torch.stack([noise.sample(t, like, g) for t in range(T)]).numpy()
    emp = Wn @ Wn.T / d
    expected = np.linalg.inv(f.encoder.T @ f.encoder)
    # each entry is a mean of d products: std ≤ sqrt(2)·max variance/sqrt(d)
    tol = 6 * np.sqrt(2) * np.max(np.diag(expected)) / np.sqrt(d)
    np.testing.assert_allclose(emp, expected, rtol=0, atol=tol)
    assert not np.allclose(expected, np.diag(np.diag(expected)), atol=10 * tol)  # really correlated


def test_noise_keeps_shape_and_order():
    f = F.banded(W.prefix_sum(5), 2)
    noise = CorrelatedNoise(f, 1.0)
    like = torch.zeros(3, 4)
    assert noise.sample(0, like).shape == (3, 4)
    with pytest.raises(DPLabError, match="step"):
        noise.sample(2, like)
    with pytest.raises(DPLabError, match="noise"):
        CorrelatedNoise(f, 0.0)


def _toeplitz_stream(strategy, steps):
    from dplab.mf import blt, toeplitz

    return (
        toeplitz.banded_toeplitz(steps, 5, "mean")
        if strategy == "banded_toeplitz"
        else blt.blt(steps, 3, "max")
    )


@pytest.mark.parametrize("strategy", ["banded_toeplitz", "blt"])
def test_filter_stream_equals_dense_inverse(strategy):
    """FilterNoise's w_t = the dense C⁻¹Z (C materialized from its first column) for
    the same Z, to 1e-10."""
    import scipy.linalg

    from dplab.mf.factorizations import _toeplitz_lower
    from dplab.mf.noise import FilterNoise, stream

    T, d, std = 40, 6, 1.3
    f = _toeplitz_stream(strategy, T)
    noise = stream(f, std)
    assert isinstance(noise, FilterNoise) and noise.memory_vectors == (
        4 if strategy == "banded_toeplitz" else 3
    )
    like = torch.zeros(d, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    streamed = np.stack([noise.sample(t, like, g).numpy() for t in range(T)])
    g = torch.Generator().manual_seed(5)
    Z = np.stack(
        [(torch.randn(d, generator=g, dtype=torch.float64) * std).numpy() for _ in range(T)]
    )
    dense = scipy.linalg.solve_triangular(_toeplitz_lower(f.coefficients, T), Z, lower=True)
    np.testing.assert_allclose(streamed, dense, rtol=0, atol=1e-10)
    assert np.abs(dense).max() > 1  # not trivially small


def test_filter_stream_resumes_from_its_state():
    from dplab.mf import blt
    from dplab.mf.noise import FilterNoise

    f = blt.from_decays([0.99, 0.8, 0.3], [0.95, 0.5, 0.1], 30)
    like = torch.zeros(4, dtype=torch.float64)
    whole, g = FilterNoise(f, 1.0), torch.Generator().manual_seed(1)
    expected = [whole.sample(t, like, g) for t in range(30)]
    first, g = FilterNoise(f, 1.0), torch.Generator().manual_seed(1)
    got = [first.sample(t, like, g) for t in range(12)]
    second = FilterNoise(f, 1.0)
    second.load_state_dict(first.state_dict())
    got += [second.sample(t, like, g) for t in range(12, 30)]
    torch.testing.assert_close(torch.stack(got), torch.stack(expected), rtol=0, atol=0)
    with pytest.raises(DPLabError, match="step"):
        second.sample(3, like, g)


def test_filter_stream_memory_does_not_grow_with_steps():
    """T = 20 000 steps of d = 1000 with a 2-buffer BLT: the process's peak memory grows by less
    than a tenth of the 160 MB a stored T×d noise matrix (or any T-long history) would take."""
    import resource

    from dplab.mf import blt
    from dplab.mf.noise import FilterNoise

    T, d = 20_000, 1000
    noise = FilterNoise(blt.from_decays([0.999, 0.9], [0.99, 0.5], T), 1.0)
    like = torch.zeros(d, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    noise.sample(0, like, g)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    for t in range(1, T):
        w = noise.sample(t, like, g)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 16 and noise.memory_vectors == 2 and torch.isfinite(w).all()
