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
    Z = np.stack([(torch.randn(d, generator=g, dtype=torch.float64) * std).numpy() for _ in range(T)])
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
