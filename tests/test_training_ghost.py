"""Ghost clipping (per_example.py) against the materialized per-example computation.

Every check compares the clipped sum and the norms of :func:`clipped_grad_sum` (ghost path) with
torch.func's per-example gradients and with a naive one-example-at-a-time autograd loop, at a
clip that acts on about half of the batch.
"""

import pytest
import torch
from torch import nn

from conftest import model_settings
from dplab.training import models, per_example
from dplab.training.per_example import (
    CLIP_EPS,
    _materialized,
    clipped_grad_sum,
    ghost_supported,
)


def _naive(model, params, x, y, clip, l2):
    total = {k: torch.zeros_like(p) for k, p in params.items()}
    norms = []
    for i in range(len(x)):
        ps = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
        out = torch.func.functional_call(model, ps, (x[i : i + 1],))
        loss = nn.functional.cross_entropy(out, y[i : i + 1]) + 0.5 * l2 * sum(
            (p * p).sum() for p in ps.values()
        )
        grads = torch.autograd.grad(loss, list(ps.values()))
        norm = torch.sqrt(sum((g * g).sum() for g in grads))
        norms.append(norm)
        factor = 1.0 if clip is None else min(1.0, clip / (float(norm) + CLIP_EPS))
        for k, g in zip(ps, grads):
            total[k] += factor * g
    return total, torch.stack(norms)


class SeqLinear(nn.Module):
    """Linear layers on a (B, T, d) sequence input (Gram or materialized norms by shape)."""

    def __init__(self, t, d, hidden):
        super().__init__()
        self.t, self.d = t, d
        self.inner = nn.Linear(d, hidden)
        self.head = nn.Linear(t * hidden, 10)

    def forward(self, x):
        h = torch.tanh(self.inner(x.reshape(len(x), self.t, self.d)))
        return self.head(h.flatten(1))


def _model(kind):
    if kind == "logreg":
        return models.build(model_settings("logreg"), [1, 8, 8], 10), [1, 8, 8]
    if kind == "mlp004":
        return models.build(model_settings("mlp", hidden=128), [1, 28, 28], 10), [1, 28, 28]
    if kind == "cnn28":
        return models.build(model_settings("cnn", channels=4), [1, 28, 28], 10), [1, 28, 28]
    if (
        kind == "tanh_cnn"
    ):  # Tramèr & Boneh's: strided 8×8 conv with padding, max-pool stride 1, tanh
        return models.build(model_settings("tanh_cnn"), [1, 28, 28], 10), [1, 28, 28]
    if kind == "wide_mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(64, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        ), [1, 8, 8]
    if kind == "seq_gram":  # T·(d+p) = 4·(48+40) < 48·40: Gram trick
        return SeqLinear(4, 48, 40), [4, 48]
    if kind == "seq_materialized":  # T·(d+p) = 16·(4+6) > 4·6
        return SeqLinear(16, 4, 6), [16, 4]
    if kind == "conv_gram":  # 4×4 output positions, k = 9·24, p = 24: Gram trick
        return nn.Sequential(
            nn.Conv2d(24, 24, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(24, 24, 3, stride=2, padding=1),
            nn.Flatten(),
            nn.Linear(24 * 2 * 2, 10, bias=False),
        ), [24, 4, 4]
    if (
        kind == "conv_grouped"
    ):  # 8 input channels on CPU: per-example weight gradients by a grouped convolution
        return nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 6, 3, stride=2, padding=2, dilation=2),
            nn.Flatten(),
            nn.Linear(6 * 5 * 5, 10),
        ), [8, 10, 10]
    raise KeyError(kind)


def _setup(kind, batch=12, seed=0):
    torch.manual_seed(seed)
    model, shape = _model(kind)
    model = model.double()
    for p in model.parameters():
        nn.init.normal_(p, std=0.3 if p.dim() > 1 and p.shape[1] < 100 else 0.05)
    x = torch.rand(batch, *shape, dtype=torch.float64)
    y = torch.randint(0, 10, (batch,))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    return model, params, x, y


@pytest.mark.parametrize(
    "kind,l2",
    [
        ("logreg", 0.0),
        ("logreg", 0.3),
        ("mlp004", 0.0),
        ("mlp004", 0.1),
        ("cnn28", 0.0),
        ("cnn28", 0.05),
        ("tanh_cnn", 0.0),
        ("wide_mlp", 0.0),
        ("seq_gram", 0.0),
        ("seq_materialized", 0.02),
        ("conv_gram", 0.0),
        ("conv_grouped", 0.0),
        ("conv_grouped", 0.1),
    ],
)
def test_ghost_equals_materialized_and_naive(kind, l2, monkeypatch):
    model, params, x, y = _setup(kind)
    grouped = []
    monkeypatch.setattr(
        per_example,
        "_conv_per_example",
        lambda *a, f=per_example._conv_per_example: grouped.append(1) or f(*a),
    )
    loss = models.example_loss(model, l2)
    assert ghost_supported(model, params)
    free = clipped_grad_sum(loss, params, x, y, None)
    clip = float(free.norms.median())
    got = clipped_grad_sum(loss, params, x, y, clip)
    func = _materialized(loss, params, x, y, clip)
    want, norms = _naive(model, params, x, y, clip, l2)
    assert (norms > clip * 1.001).any() and (norms < clip * 0.999).any()  # clipping acts on some
    torch.testing.assert_close(got.norms, norms, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(got.norms, func.norms, atol=1e-9, rtol=1e-9)
    alone = clipped_grad_sum(loss, params, x, y, clip, summed=False)
    assert torch.equal(alone.norms, got.norms) and alone.grad_sum == {}  # no sum, same bits
    torch.testing.assert_close(got.loss_sum, func.loss_sum, atol=1e-9, rtol=1e-9)
    assert list(got.grad_sum) == list(params)
    for k in params:
        torch.testing.assert_close(got.grad_sum[k], want[k], atol=1e-6, rtol=0)
        torch.testing.assert_close(got.grad_sum[k], func.grad_sum[k], atol=1e-6, rtol=0)
    assert bool(grouped) == (kind == "conv_grouped")  # each conv path is the one under test
    want_free, _ = _naive(model, params, x, y, None, l2)
    for k in params:
        torch.testing.assert_close(free.grad_sum[k], want_free[k], atol=1e-6, rtol=0)


def test_single_float32_batch_of_one_and_empty():
    model, params, x, y = _setup("mlp004", batch=5)
    model = model.float()
    params = {k: v.float() for k, v in params.items()}
    x = x.float()
    loss = models.example_loss(model, 0.0)
    one = clipped_grad_sum(loss, params, x[:1], y[:1], 1e-3)
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in one.grad_sum.values()))
    assert float(norm) <= 1e-3 * (1 + 1e-5)
    func = _materialized(loss, params, x[:1], y[:1], 1e-3)
    for k in params:
        torch.testing.assert_close(one.grad_sum[k], func.grad_sum[k], atol=1e-7, rtol=1e-4)
    empty = clipped_grad_sum(loss, params, x[:0], y[:0], 1.0)
    assert empty.norms.numel() == 0 and all(
        float(g.abs().sum()) == 0 for g in empty.grad_sum.values()
    )


class Twice(nn.Module):
    """One Linear layer applied twice (weight sharing): the ghost path must not be taken."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 10)

    def forward(self, x):
        return self.lin(torch.tanh(self.lin(x.flatten(1))))


@pytest.mark.parametrize("name", ["layernorm", "twice", "inplace_relu", "grouped_conv"])
def test_unsupported_layers_fall_back_to_torch_func(name):
    torch.manual_seed(1)
    shape = [10]
    if name == "layernorm":
        model = nn.Sequential(nn.Linear(10, 16), nn.LayerNorm(16), nn.Linear(16, 10))
    elif name == "twice":
        model = Twice()
    elif name == "inplace_relu":
        model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(inplace=True), nn.Linear(16, 10))
    else:
        model = nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.Flatten(), nn.Linear(4 * 4, 10))
        shape = [2, 4, 4]
    model = model.double()
    x = torch.randn(9, *shape, dtype=torch.float64)
    y = torch.randint(0, 10, (9,))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    assert ghost_supported(model, params) == (
        name in ("twice", "inplace_relu")
    )  # these two: detected at run time
    loss = models.example_loss(model, 0.0)
    free = clipped_grad_sum(loss, params, x, y, None)
    clip = float(free.norms.median())
    got = clipped_grad_sum(loss, params, x, y, clip)
    want, norms = _naive(model, params, x, y, clip, 0.0)
    torch.testing.assert_close(got.norms, norms, atol=1e-9, rtol=1e-9)
    assert torch.equal(clipped_grad_sum(loss, params, x, y, clip, summed=False).norms, got.norms)
    assert clipped_grad_sum(loss, params, x[:0], y[:0], clip, summed=False).norms.shape == (0,)
    for k in params:
        torch.testing.assert_close(got.grad_sum[k], want[k], atol=1e-6, rtol=0)


def test_plain_function_loss_uses_torch_func():
    """A loss without ``model``/``l2`` attributes still gets the exact clipped sum."""
    model, params, x, y = _setup("mlp004", batch=6)
    inner = models.example_loss(model, 0.0)

    def loss(p, xi, yi):
        return inner(p, xi, yi)

    got = clipped_grad_sum(loss, params, x, y, 0.05)
    want, _ = _naive(model, params, x, y, 0.05, 0.0)
    for k in params:
        torch.testing.assert_close(got.grad_sum[k], want[k], atol=1e-6, rtol=0)


def test_tanh_cnn_is_tramer_and_boneh_s_network():
    """Their end-to-end Fashion-MNIST CNN: conv 16@8×8/2 (pad 2), pool 2/1, conv 32@4×4/2, pool 2/1,
    dense 32, dense 10, tanh after each hidden layer: 1040 + 8224 +
    16416 + 330 = 26010 parameters."""
    model = models.build(model_settings("tanh_cnn"), [1, 28, 28], 10)
    assert [
        sum(p.numel() for p in m.parameters()) for m in model if any(True for _ in m.parameters())
    ] == [1040, 8224, 16416, 330]
    assert sum(isinstance(m, nn.Tanh) for m in model) == 3 and model(
        torch.zeros(2, 1, 28, 28)
    ).shape == (2, 10)
    with pytest.raises(Exception, match="28×28"):
        models.build(model_settings("tanh_cnn"), [1, 8, 8], 10)


class _Hooked(nn.Sequential):
    """An nn.Sequential subclass: ghost clipping's general path (hooks, ``functional_call``)."""


@pytest.mark.parametrize(
    "acts,l2",
    [
        ((nn.ReLU(),), 0.0),
        ((nn.Tanh(), nn.Sigmoid()), 0.2),
        ((nn.GELU(), nn.SiLU()), 0.0),
        ((nn.LeakyReLU(0.1), nn.ELU()), 0.2),
    ],
)
def test_linear_stack_path_is_the_hooked_path_bit_for_bit(acts, l2):
    """A Sequential of Linear layers and activations runs without hooks or autograd: the same
    clipped sum, norms and loss as the general path to the bit, exact against the naive loop, and
    no graph kept (the sum needs no gradient: the loop's in-place update would otherwise chain
    steps)."""
    torch.manual_seed(3)
    layers = [nn.Flatten(), nn.Linear(12, 9), acts[0], nn.Linear(9, 7)]
    layers += [acts[-1], nn.Linear(7, 10, bias=False)]
    stack, hooked = nn.Sequential(*layers).double(), _Hooked(*layers).double()
    assert per_example._plan(stack).stack is not None and per_example._plan(hooked).stack is None
    x, y = torch.randn(11, 3, 4, dtype=torch.float64), torch.randint(0, 10, (11,))
    params = {k: v.detach().clone().requires_grad_() for k, v in stack.named_parameters()}
    mask = (torch.arange(11) % 3 != 0).double()
    loss = models.example_loss(stack, l2)
    clip = float(clipped_grad_sum(loss, params, x, y, None).norms.median())
    for m in (None, mask):
        got = clipped_grad_sum(loss, params, x, y, clip, mask=m)
        ref = clipped_grad_sum(models.example_loss(hooked, l2), params, x, y, clip, mask=m)
        assert torch.equal(got.norms, ref.norms) and torch.equal(got.loss_sum, ref.loss_sum)
        assert list(got.grad_sum) == list(params)
        assert all(torch.equal(got.grad_sum[k], ref.grad_sum[k]) for k in params)
        assert not any(g.requires_grad for g in got.grad_sum.values())
    for model in (stack, hooked):  # nor for norms and loss, even from an input that has a graph
        got = clipped_grad_sum(
            models.example_loss(model, l2), params, x * params["1.bias"][0], y, 1
        )
        assert not got.norms.requires_grad and not got.loss_sum.requires_grad
        assert not any(g.requires_grad for g in got.grad_sum.values())
    want, norms = _naive(stack, params, x, y, clip, l2)
    got = clipped_grad_sum(loss, params, x, y, clip)
    assert (norms > clip * 1.001).any() and (norms < clip * 0.999).any()  # clipping acts on some
    torch.testing.assert_close(got.norms, norms, atol=1e-9, rtol=1e-9)
    for k in params:
        torch.testing.assert_close(got.grad_sum[k], want[k], atol=1e-9, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch,width", [(1, 1), (6, 1), (5, 4)])
def test_linear_stack_path_needs_no_autograd(dtype, batch, width):
    """The stack path's own backward pass runs autograd's operations without autograd: the hooked
    path's clipped sum, norms and loss to the bit, in float32 too, with GELU's tanh form, Flatten
    and Identity between layers and a hidden layer of width 1 (at batch 1 its (1, 1) input counts
    as column-major, for which autograd transposes the product), under ``torch.inference_mode``,
    where autograd cannot run."""
    torch.manual_seed(batch + width)
    layers = [nn.Flatten(), nn.Linear(6, width), nn.GELU("tanh"), nn.Flatten()]
    layers += [nn.Linear(width, 5), nn.Identity(), nn.Tanh(), nn.Linear(5, 4)]
    stack, hooked = nn.Sequential(*layers).to(dtype), _Hooked(*layers).to(dtype)
    assert per_example._plan(stack).stack is not None
    params = {k: v.detach().clone() for k, v in stack.named_parameters()}
    x, y = torch.randn(batch, 2, 3, dtype=dtype), torch.randint(0, 4, (batch,))
    ref = clipped_grad_sum(models.example_loss(hooked, 0.1), params, x, y, 0.5)
    with torch.inference_mode():
        got = clipped_grad_sum(models.example_loss(stack, 0.1), params, x, y, 0.5)
    assert torch.equal(got.norms, ref.norms) and torch.equal(got.loss_sum, ref.loss_sum)
    assert all(torch.equal(got.grad_sum[k], ref.grad_sum[k]) for k in params)


def test_which_sequentials_take_the_linear_stack_path():
    """Distinct hook-free Linear layers and out-of-place per-example modules only; anything
    else (a shared layer, an in-place activation, a convolution, Flatten over the batch, a hook)
    keeps the general path, which detects a layer run twice or changed in place."""
    lin = nn.Linear(4, 4)
    hooked = nn.Linear(4, 4)
    hooked.register_forward_hook(lambda m, i, o: o * 2)
    doubled = (
        nn.Tanh()
    )  # a hook that changes an activation's output: the stack's backward would not
    doubled.register_forward_hook(lambda m, i, o: o * 2)
    cases = {
        "mlp": (nn.Sequential(nn.Flatten(), nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), True),
        "shared": (nn.Sequential(lin, nn.Tanh(), lin), False),
        "inplace": (nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2)), False),
        "conv": (nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2)), False),
        "flatten0": (nn.Sequential(nn.Flatten(0), nn.Linear(4, 2)), False),
        "hook": (nn.Sequential(hooked, nn.Linear(4, 2)), False),
        "activation hook": (nn.Sequential(nn.Linear(4, 4), doubled, nn.Linear(4, 2)), False),
    }
    for name, (model, stack) in cases.items():
        assert (per_example._plan(model).stack is not None) == stack, name
