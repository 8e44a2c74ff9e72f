"""Models (docs/training.md): the built-in networks as plug-ins, and any ``nn.Module`` class in a
file of the user's project (``model: FILE.py:Class``, :mod:`dplab.training.model_file`).

Each module of this package (but :mod:`~dplab.training.models.base`) holds one built-in model,
its ``MODEL`` (:class:`~dplab.training.models.base.Model`: name, display name, source and
``build``), named in :data:`MODELS` as the training methods are; a new built-in is a new module
and a line in :data:`MODELS`.

.. generated: models (python -m dplab.registries)
========  ========================================================================================
model     network
========  ========================================================================================
cnn       two 3×3 Conv2d (``channels``, 2·``channels``), ReLU, pooling, Linear
logreg    Flatten, Linear; θ₀ = 0 (001 eq. 16)
mlp       Flatten, Linear(d, hidden), ReLU, Linear(hidden, classes) (004 §3.2)
tanh_cnn  Tramèr & Boneh (ICLR 2021): Conv2d 8×8/2, tanh, pool, Conv2d 4×4/2, tanh, pool, 2 Linear
========  ========================================================================================
.. end generated: models

Every model is checked where it is built (:func:`build`): no layer that mixes the examples of a
batch (batch norm: per-example gradients are undefined), and one example's output is a vector
of one logit per class (:func:`check_output`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dplab.errors import DPLabError
from dplab.registry import Registry
from dplab.training import model_file
from dplab.training.models.base import Model
from dplab.training.settings import RunSettings

if TYPE_CHECKING:  # torch is imported where a network is built or run: a plan needs none
    import torch
    from torch import nn

#: name -> its :class:`~dplab.training.models.base.Model`, the ``MODEL`` of its module
MODELS = Registry(
    "model",
    {
        "cnn": "dplab.training.models.cnn:MODEL",
        "logreg": "dplab.training.models.logreg:MODEL",
        "mlp": "dplab.training.models.mlp:MODEL",
        "tanh_cnn": "dplab.training.models.tanh_cnn:MODEL",
    },
)


def get(name: str) -> Model:
    """The built-in model ``name`` (a DPLabError naming the valid ones and the file form)."""
    if name not in MODELS:
        raise DPLabError(
            "model",
            f"must be one of {', '.join(MODELS)} or FILE.py:Class (a class in a file of "
            f"the project); got {name!r}",
        )
    return MODELS[name]


def build(run: RunSettings, input_shape: list[int], classes: int) -> nn.Module:
    """The model of ``run`` (its ``model`` with ``hidden``, ``channels`` or ``model_args``) for
    inputs of ``input_shape`` (without batch dimension), checked by :func:`check_layers`."""
    if model_file.names_file(run.model):
        model = model_file.build(run.model, run.model_args, input_shape, classes)
    else:
        model = get(run.model).build(run, input_shape, classes)
    check_layers(model)
    return model


def parameters(run: RunSettings, input_shape: list[int], classes: int) -> int:
    """The number of parameters of the run's network for inputs of ``input_shape``, checked as
    :func:`build` and :func:`check_output` check it: a built-in model's counted without torch
    (its ``parameters``; its layers and output hold by construction), a model file's built on
    torch's ``meta`` device (shapes only: no memory, no draw from torch's generator)."""
    if not model_file.names_file(run.model):
        return get(run.model).parameters(run, input_shape, classes)
    import torch

    with torch.device("meta"):
        model = build(run, input_shape, classes)
        check_output(model, input_shape, classes)
    return sum(p.numel() for p in model.parameters())


def check_layers(model: nn.Module) -> None:
    """No batch-dependent layer (batch norm; an instance norm that tracks running statistics
    averages them over the batch): DP-SGD's clipping bounds each example's gradient, which such
    a layer does not define."""
    from torch import nn

    for name, module in model.named_modules():
        tracked = (
            isinstance(module, nn.modules.instancenorm._InstanceNorm) and module.track_running_stats
        )
        if isinstance(module, nn.modules.batchnorm._BatchNorm) or tracked:
            raise DPLabError(
                "model",
                f"layer {name!r} ({type(module).__name__}) mixes the examples of a batch, so "
                "per-example gradients are undefined; use GroupNorm (or LayerNorm) instead",
            )


def check_output(model: nn.Module, input_shape: list[int], classes: int) -> None:
    """One example of ``input_shape`` through ``model`` (on its device: ``meta`` costs nothing)
    gives logits of shape (1, ``classes``); a DPLabError on ``model`` otherwise."""
    import torch

    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    try:
        with torch.no_grad():
            out = model(torch.zeros((1, *input_shape), device=device))
    except Exception as err:  # the user's forward pass fails on the data's shape
        raise DPLabError(
            "model",
            f"the forward pass of one example of shape {list(input_shape)} fails: "
            f"{type(err).__name__}: {str(err)[:160]}",
        ) from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (1, classes):
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise DPLabError(
            "model",
            f"must output one logit per class, shape [1, {classes}] for one example of "
            f"shape {list(input_shape)}; got {shape}",
        )


def example_loss(model: nn.Module, l2: float):
    """ℓ(θ; x, y) for ONE example: cross-entropy + (l2/2)·||θ||² (the penalty is part of every
    example's loss, so its gradient is clipped with the rest).  ``loss.model`` and ``loss.l2``
    let :func:`dplab.training.per_example.clipped_grad_sum` take its ghost-clipping path."""
    import torch
    from torch import nn

    def loss(params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = torch.func.functional_call(model, params, (x.unsqueeze(0),))
        value = nn.functional.cross_entropy(logits, y.unsqueeze(0))
        if l2:
            value = value + 0.5 * l2 * sum((p * p).sum() for p in params.values())
        return value

    loss.model, loss.l2 = model, l2
    return loss
