"""The CUDA-graph step (dplab.training.graphed): on the CPU, the masked step on a padded batch
against the eager step on the batch itself, and which runs are graphed; on a CUDA device, the
captured step against the eager one and a graphed run against ``cuda_graph=False``."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import model_settings
from dplab.training import graphed, loop, models, per_example
from dplab.training.noise import GaussianNoise
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings
from dplab.training.step import apply

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _mlp(device="cpu", l2=0.0):
    torch.manual_seed(0)
    model = models.build(model_settings("mlp", hidden=16), [1, 6, 6], 4).to(device)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    x = torch.rand(40, 1, 6, 6, device=device)
    y = torch.randint(0, 4, (40,), device=device)
    return models.example_loss(model, l2), params, x, y


@pytest.mark.parametrize("l2", [0.0, 0.1])
def test_masked_ghost_sum_is_the_clipped_sum_of_the_real_rows(l2):
    """Ghost clipping with a mask over a padded batch = ghost clipping of the real rows (the
    padding: other records, weight 0), and = torch.func's masked sum."""
    loss, params, x, y = _mlp(l2=l2)
    idx, pad = torch.tensor([3, 17, 5, 30, 8]), torch.tensor([0, 1, 2])
    mask = torch.tensor([1.0] * 5 + [0.0] * 3)
    whole = torch.cat([idx, pad])
    real = per_example.clipped_grad_sum(loss, params, x[idx], y[idx], 0.5)
    masked = per_example.clipped_grad_sum(loss, params, x[whole], y[whole], 0.5, mask=mask)
    func = per_example.clipped_grad_sum(
        loss, params, x[whole], y[whole], 0.5, ghost=False, mask=mask
    )
    torch.testing.assert_close(masked.norms[:5], real.norms)
    torch.testing.assert_close(masked.loss_sum, real.loss_sum)
    torch.testing.assert_close(func.loss_sum, real.loss_sum)
    for k in params:
        torch.testing.assert_close(masked.grad_sum[k], real.grad_sum[k], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(func.grad_sum[k], real.grad_sum[k], rtol=1e-5, atol=1e-7)


def test_graph_body_on_a_padded_batch_is_the_eager_step():
    """The captured body, run eagerly on the CPU: the same noise (the same generator), the same
    update as the eager step on the unpadded batch, with a projection."""
    loss, params, x, y = _mlp()
    eager = {k: p.clone() for k, p in params.items()}
    noise = GaussianNoise(0.7)
    step = graphed.GraphedStep(loss, params, x, y, 0.5, noise, None, 0.3, 8, 0.01, 2.0, capacity=16)
    for batch in (
        torch.tensor([4, 9, 1]),
        torch.arange(10, 26),
        torch.tensor([], dtype=torch.int64),
    ):
        g_graph, g_eager = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
        step.stage(batch)
        step._body(params, g_graph)
        grads = per_example.clipped_grad_sum(loss, eager, x[batch], y[batch], 0.5)
        apply(
            eager,
            grads.grad_sum,
            noise.sample(0, eager, g_eager),
            lr=0.3,
            denom=8,
            b=8,
            regularization=0.01,
            diameter=2.0,
        )
        for k in params:
            torch.testing.assert_close(params[k], eager[k], rtol=1e-5, atol=1e-6)


def test_capacity_holds_a_poisson_batch_and_never_exceeds_n():
    assert graphed.capacity(256, 60000) == 8 * -(-(256 + 6 * 16) // 8) == 352
    assert graphed.capacity(60, 60) == 60
    assert graphed.capacity(8, 60) % 8 == 0 and graphed.capacity(8, 60) >= 8 + 6 * 8**0.5


@pytest.mark.parametrize(
    "keys, reason",
    [
        ({}, None),
        ({"optimizer": "adam"}, "optimizer adam"),
        ({"lr_schedule": "cosine"}, "lr_schedule cosine"),
        ({"normalize": "realized"}, "normalize realized"),
        ({"noise_rng": "portable"}, "noise_rng portable"),
    ],
)
def test_which_runs_are_graphed(keys, reason):
    cfg = resolve_run(
        {
            "method": "dp_sgd",
            "steps": 5,
            "batch_size": 8,
            "lr": 0.1,
            "noise_multiplier": 1.0,
            "device": "cuda",
            **keys,
        }
    )
    why = graphed.refusal(
        RunSettings.of(cfg), torch.device("cuda"), GaussianNoise(1.0), individual=False
    )
    if reason is None and not hasattr(torch.cuda.CUDAGraph, "register_generator_state"):
        assert why.startswith("torch ")  # a CPU build of torch captures no graph
    else:
        assert why == reason
    assert (
        graphed.refusal(RunSettings.of(cfg), torch.device("cpu"), None, individual=False)
        == "not on a CUDA device"
    )


# ------------------------------------------------------------------ on a CUDA device only
@cuda
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_cuda_graph_replays_the_eager_step(model):
    """Ten replays with the noise off: the parameters of ten eager steps on the same batches."""
    torch.manual_seed(0)
    shape = [1, 12, 12]
    net = models.build(
        model_settings(model, **({"hidden": 16} if model == "mlp" else {"channels": 8})), shape, 4
    )
    net = net.cuda()
    params = {k: v.detach().clone() for k, v in net.named_parameters()}
    eager = {k: p.clone() for k, p in params.items()}
    loss = models.example_loss(net, 0.0)
    x, y = torch.rand(64, *shape, device="cuda"), torch.randint(0, 4, (64,), device="cuda")
    step = graphed.GraphedStep(loss, params, x, y, 0.5, None, None, 0.2, 16, 0.0, None, capacity=32)
    g = torch.Generator().manual_seed(1)
    for _ in range(10):
        batch = torch.randperm(64, generator=g)[
            : int(torch.randint(1, 33, (1,), generator=g))
        ].cuda()
        step(batch)
        grads = per_example.clipped_grad_sum(loss, eager, x[batch], y[batch], 0.5)
        apply(eager, grads.grad_sum, None, lr=0.2, denom=16, b=16, regularization=0.0)
    for k in params:
        torch.testing.assert_close(params[k], eager[k], rtol=1e-4, atol=1e-5)


@cuda
def test_cuda_graphed_run_is_the_eager_run(synth, tmp_path):
    """A dp_sgd run graphed and eager: the same ε and σ, the summary says which, and (the noise
    drawn from the same registered generator) parameters that agree to rounding."""
    cfg = resolve_run(
        {
            "method": "dp_sgd",
            "model": "mlp",
            "hidden": 32,
            "steps": 40,
            "batch_size": 8,
            "lr": 0.5,
            "noise_multiplier": 1.0,
            "log_every": 20,
            "accountants": ["rdp"],
            "device": "cuda",
        }
    )
    on = loop.train(RunSettings.of(cfg), synth, tmp_path / "on")
    off = loop.train(RunSettings.of(cfg), synth, tmp_path / "off", cuda_graph=False)
    envs = [
        json.loads((tmp_path / f / "summary.json").read_text())["environment"]
        for f in ("on", "off")
    ]
    assert envs[0]["cuda_graph"] == "on" and envs[1]["cuda_graph"] == "off: --cuda-graph off"
    assert on.epsilon == off.epsilon and on.noise_multiplier == off.noise_multiplier
    a = torch.load(tmp_path / "on" / "model.pt")
    b = torch.load(tmp_path / "off" / "model.pt")
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    print("graphed vs eager, max parameter difference:", diff)
    assert diff < 1e-4
