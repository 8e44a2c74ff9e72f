"""Per-example clipped gradient sums: against a naive per-example loop and against Opacus."""

import copy

import pytest
import torch
from torch import nn

from conftest import model_settings
from dplab.training import models
from dplab.training.per_example import CLIP_EPS, clipped_grad_sum

SHAPES = {"logreg": [1, 8, 8], "mlp": [1, 8, 8], "cnn": [1, 8, 8], "cnn28": [1, 28, 28]}


def _setup(kind, l2=0.0, batch=12, seed=0):
    torch.manual_seed(seed)
    shape = SHAPES[kind]
    model = models.build(
        model_settings(kind.replace("28", ""), hidden=16, channels=4), shape, 10
    ).double()
    for p in model.parameters():  # logreg starts at 0: move away so gradients differ per example
        nn.init.normal_(p, std=0.3)
    x = torch.rand(batch, *shape, dtype=torch.float64)
    y = torch.randint(0, 10, (batch,))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    return model, params, x, y


def _naive(model, x, y, clip, l2):
    """Loop over examples with plain autograd; Opacus's clip factor C/(||g||+1e-6) capped at 1."""
    total = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
    norms = []
    for i in range(len(x)):
        model.zero_grad()
        loss = nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        loss = loss + 0.5 * l2 * sum((p * p).sum() for p in model.parameters())
        loss.backward()
        g = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
        norm = torch.sqrt(sum((v * v).sum() for v in g.values()))
        norms.append(norm)
        factor = min(1.0, clip / (float(norm) + CLIP_EPS))
        for k in total:
            total[k] += factor * g[k]
    return total, torch.stack(norms)


@pytest.mark.parametrize(
    "kind,l2", [("logreg", 0.0), ("logreg", 0.05), ("mlp", 0.0), ("cnn", 0.0), ("cnn28", 0.0)]
)
def test_matches_naive_loop(kind, l2):
    model, params, x, y = _setup(kind, l2)
    _, norms = _naive(model, x, y, 1.0, l2)
    clip = float(norms.median())  # about half the examples are clipped
    got = clipped_grad_sum(models.example_loss(model, l2), params, x, y, clip)
    want, _ = _naive(model, x, y, clip, l2)
    torch.testing.assert_close(got.norms, norms, atol=1e-9, rtol=1e-9)
    assert (norms > clip * 1.001).any() and (norms < clip * 0.999).any()
    for k in want:
        torch.testing.assert_close(got.grad_sum[k], want[k], atol=1e-6, rtol=0)


def test_clipped_norms_and_no_clip():
    model, params, x, y = _setup("mlp")
    loss = models.example_loss(model, 0.0)
    clip = 0.1
    # one example at a time: the clipped gradient's norm is min(||g||, C) up to the 1e-6 guard
    for i in range(4):
        one = clipped_grad_sum(loss, params, x[i : i + 1], y[i : i + 1], clip)
        norm = torch.sqrt(sum((g * g).sum() for g in one.grad_sum.values()))
        expected = min(
            float(one.norms[0]), clip * float(one.norms[0]) / (float(one.norms[0]) + CLIP_EPS)
        )
        assert float(norm) == pytest.approx(expected, rel=1e-9)
        assert float(norm) <= clip
    free = clipped_grad_sum(loss, params, x, y, None)
    want, _ = _naive(model, x, y, 1e9, 0.0)
    for k in want:
        torch.testing.assert_close(free.grad_sum[k], want[k], atol=1e-9, rtol=1e-9)


def test_empty_batch_gives_zero_sum():
    model, params, x, y = _setup("logreg")
    out = clipped_grad_sum(models.example_loss(model, 0.0), params, x[:0], y[:0], 1.0)
    assert out.norms.numel() == 0 and all(float(g.abs().sum()) == 0 for g in out.grad_sum.values())


@pytest.mark.parametrize("kind", ["logreg", "mlp", "cnn", "cnn28"])
def test_matches_opacus(kind):
    """σ = 0: our clipped sum equals Opacus 1.6's summed clipped per-sample gradients."""
    opacus = pytest.importorskip("opacus")
    from opacus.optimizers import DPOptimizer

    model, params, x, y = _setup(kind, batch=16)
    clip = float(
        clipped_grad_sum(models.example_loss(model, 0.0), params, x, y, None).norms.median()
    )
    got = clipped_grad_sum(models.example_loss(model, 0.0), params, x, y, clip)
    peer = opacus.GradSampleModule(copy.deepcopy(model), loss_reduction="sum")
    opt = DPOptimizer(
        torch.optim.SGD(peer.parameters(), lr=0.0),
        noise_multiplier=0.0,
        max_grad_norm=clip,
        expected_batch_size=len(x),
        loss_reduction="sum",
    )
    opt.zero_grad()
    nn.functional.cross_entropy(peer(x), y, reduction="sum").backward()
    opt.pre_step()
    for name, p in peer._module.named_parameters():
        torch.testing.assert_close(got.grad_sum[name], p.grad, atol=1e-6, rtol=0)
