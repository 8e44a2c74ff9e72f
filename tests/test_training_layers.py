"""Per-example clipping for every layer without batch statistics (docs/training.md, "Layers"):
each layer type's clipped sum and norms equal a per-example loop of plain autograd to 1e-6
relative, on the path it takes (ghost clipping for Linear and Conv2d, torch.func for the rest);
a batch-dependent layer is refused in one line naming it and the usual replacement."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dplab.errors import DPLabError
from dplab.training import models
from dplab.training.per_example import clipped_grad_sum, ghost_supported
from test_training_per_example import _naive


class Scaled(nn.Module):
    """A custom module: its own parameter used directly (no registered layer)."""

    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        return torch.tanh(x * self.scale)


class Tokens(nn.Module):
    """Embedding of integer tokens carried in a float input (the prepared data are float)."""

    def __init__(self):
        super().__init__()
        self.embed, self.out = nn.Embedding(7, 4), nn.Linear(4 * 6, 3)

    def forward(self, x):
        return self.out(self.embed(x.long()).flatten(1))


#: layer type -> (network with that layer, input shape (no batch), whether ghost clipping applies)
NETWORKS = {
    "Linear": (
        lambda: nn.Sequential(nn.Flatten(), nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)),
        [6],
        True,
    ),
    "Conv2d": (
        lambda: nn.Sequential(
            nn.Conv2d(2, 3, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(48, 3)
        ),
        [2, 4, 4],
        True,
    ),
    "Conv1d": (
        lambda: nn.Sequential(nn.Conv1d(2, 3, 3), nn.Tanh(), nn.Flatten(), nn.Linear(12, 3)),
        [2, 6],
        False,
    ),
    "LayerNorm": (
        lambda: nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Linear(5, 3)),
        [6],
        False,
    ),
    "GroupNorm": (
        lambda: nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1),
            nn.GroupNorm(2, 4),
            nn.Tanh(),
            nn.Flatten(),
            nn.Linear(64, 3),
        ),
        [2, 4, 4],
        False,
    ),
    "Embedding": (Tokens, [6], False),
    "custom": (lambda: nn.Sequential(Scaled(6), nn.Linear(6, 3)), [6], False),
}


@pytest.mark.parametrize("layer", sorted(NETWORKS))
def test_each_layer_type_clips_exactly_per_example(layer):
    make, shape, ghost = NETWORKS[layer]
    torch.manual_seed(1)
    model = make().double()
    models.check_layers(model)
    x = (
        torch.randint(0, 7, (10, *shape)).double()
        if layer == "Embedding"
        else torch.randn(10, *shape).double()
    )
    y = torch.randint(0, 3, (10,))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    assert ghost_supported(model, params) is ghost
    _, norms = _naive(model, x, y, 1.0, 0.0)
    clip = float(norms.median())  # about half the examples clipped
    want, _ = _naive(model, x, y, clip, 0.0)
    for path in (True, False):  # the path the engine takes, and torch.func's
        got = clipped_grad_sum(models.example_loss(model, 0.0), params, x, y, clip, ghost=path)
        torch.testing.assert_close(got.norms, norms, rtol=1e-6, atol=0)
        for k in want:
            torch.testing.assert_close(got.grad_sum[k], want[k], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize(
    "layer",
    [nn.BatchNorm1d(4), nn.SyncBatchNorm(4), nn.InstanceNorm1d(4, track_running_stats=True)],
)
def test_batch_dependent_layers_are_refused_naming_the_layer(layer):
    model = nn.Sequential(nn.Linear(6, 4), layer, nn.Linear(4, 3))
    with pytest.raises(
        DPLabError, match=rf"layer '1' \({type(layer).__name__}\) .* use GroupNorm"
    ) as err:
        models.check_layers(model)
    assert err.value.key == "model"


def test_an_instance_norm_without_running_statistics_is_per_example():
    models.check_layers(nn.Sequential(nn.Conv1d(2, 4, 3), nn.InstanceNorm1d(4, affine=True)))
