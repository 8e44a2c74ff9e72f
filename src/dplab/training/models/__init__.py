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
batch (batch norm: per-example gradients are undefined), at least one parameter and every one
trained, and one example's output is a vector of one logit per class (:func:`check_output`).  A
model file's forward pass is also run on a batch before training (:func:`check_batch`): row i of
its output is example i's output alone, deterministic, with no buffer changed.
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
    check_parameters(model)
    return model


def parameters(run: RunSettings, input_shape: list[int], classes: int) -> int:
    """The number of parameters of the run's network for inputs of ``input_shape``, checked as
    :func:`build` and :func:`check_output` check it: a built-in model's counted without torch
    (its ``parameters``; its layers and output hold by construction), a model file's built on
    torch's ``meta`` device (shapes only: no memory, no draw from torch's generator)."""
    if not model_file.names_file(run.model):
        return get(run.model).parameters(run, input_shape, classes)
    import torch

    try:
        with torch.device("meta"):
            model = build(run, input_shape, classes)
            check_output(model, input_shape, classes)
    except DPLabError:  # a forward pass that reads values (``.item()``) runs on real tensors only
        with torch.random.fork_rng(devices=[]):
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


def check_parameters(model: nn.Module) -> None:
    """At least one parameter, and every one trained: DP-SGD's update and ε cover every
    parameter, and a frozen one (``requires_grad=False``) would be trained all the same."""
    named = list(model.named_parameters())
    if not named:
        raise DPLabError("model", "has no parameter: DP-SGD trains a model's parameters")
    frozen = [name for name, p in named if not p.requires_grad]
    if frozen:
        raise DPLabError(
            "model",
            f"parameter {frozen[0]!r} is frozen (requires_grad=False); dplab trains every "
            "parameter, so register a fixed tensor as a buffer (register_buffer) instead",
        )


def check_output(model: nn.Module, input_shape: list[int], classes: int) -> None:
    """One example of ``input_shape`` through ``model`` (on its device: ``meta`` costs nothing)
    gives logits of shape (1, ``classes``); a DPLabError on ``model`` otherwise."""
    import torch

    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    one = f"one example of shape {list(input_shape)}"
    out = _forward(lambda: model(torch.zeros((1, *input_shape), device=device)), one)
    _check_logits(out, 1, classes, f"one logit per class, shape [1, {classes}] for {one}")


def _forward(passes, what: str):
    """``passes()`` (the user's forward passes) without autograd; a DPLabError on ``model``
    naming ``what`` was passed where it fails."""
    import torch

    try:
        with torch.no_grad():
            return passes()
    except Exception as err:  # the user's forward pass fails on the data's shape
        raise DPLabError(
            "model", f"the forward pass of {what} fails: {type(err).__name__}: {str(err)[:160]}"
        ) from None


def _check_logits(out, rows: int, classes: int, wanted: str) -> None:
    """A DPLabError on ``model`` unless ``out`` is a tensor of shape (``rows``, ``classes``)
    (``wanted``: that shape in words)."""
    import torch

    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, classes):
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise DPLabError("model", f"must output {wanted}; got {shape}")


#: the examples of the batch :func:`check_batch` runs through a model file's network
CHECK_ROWS = 4


def check_batch(model: nn.Module, input_shape: list[int], classes: int) -> None:
    """A batch of :data:`CHECK_ROWS` random 0/1 inputs (its own generator: no draw from torch's)
    through ``model`` as it trains: logits of shape (rows, ``classes``), row i equal to example
    i's output alone, the same again on the same batch, each example's gradient taken alone as
    training takes it, and no buffer changed.  DP-SGD bounds
    one example's influence by clipping its own gradient, which holds only if the forward pass
    treats each example alone (no batch statistics), draws nothing (dropout: unsupported) and keeps
    no state computed from the data outside the parameters; a DPLabError on ``model``
    otherwise."""
    import torch

    bits = torch.randint(2, (CHECK_ROWS, *input_shape), generator=torch.Generator().manual_seed(0))
    x = bits.float()  # 0/1 features: valid token ids too, for a model that embeds its inputs
    before = {name: b.clone() for name, b in model.named_buffers()}
    out, again, alone = _forward(
        lambda: (model(x), model(x), [model(x[i : i + 1]) for i in range(CHECK_ROWS)]),
        f"a batch of {CHECK_ROWS} examples of shape {list(input_shape)}",
    )
    _check_logits(
        out,
        CHECK_ROWS,
        classes,
        f"one row of {classes} logits per example, shape [{CHECK_ROWS}, {classes}] for a batch "
        f"of {CHECK_ROWS}",
    )
    _check_buffers(model, before)
    if not torch.allclose(out, again, rtol=0.0, atol=0.0, equal_nan=True):
        raise DPLabError(
            "model",
            "two forward passes of the same batch differ: the model draws random numbers "
            "(dropout?), which dplab's per-example gradients do not support",
        )
    _check_gradients(model, x, classes, before)
    alone = torch.cat(alone)
    scale = 1e-5 * (1.0 + float(out.abs().nan_to_num().max()))
    if not torch.allclose(out, alone, rtol=1e-4, atol=scale, equal_nan=True):
        row = int((out - alone).abs().nan_to_num(nan=float("inf")).amax(1).argmax())
        raise DPLabError(
            "model",
            f"row {row} of a batch's output differs from example {row}'s output alone: the "
            "forward pass mixes the examples of a batch (batch statistics?), so clipping one "
            "example's gradient does not bound its influence; normalise each example alone "
            "(LayerNorm, GroupNorm)",
        )


def _check_buffers(model: nn.Module, before: dict) -> None:
    """A DPLabError on ``model`` where a buffer differs from ``before`` (name → tensor)."""
    import torch

    for name, b in model.named_buffers():
        if name not in before or not torch.equal(b, before[name]):
            raise DPLabError("model", _STATE.format(what=f"the buffer {name!r}"))


#: why a network that keeps state in its forward pass is refused
_STATE = (
    "the forward pass changes {what}: a network that keeps state outside its parameters"
    " (running statistics in a buffer, an attribute or a global, a cache, a counter, spectral"
    " norm's power iteration) is not supported: that state is no part of the clipped, noised"
    " update, and where it depends on the training data no ε covers it"
)


def _check_gradients(model: nn.Module, x, classes: int, before: dict) -> None:
    """Each example's gradient of the batch ``x``, as training takes it (:func:`example_loss`,
    one example at a time), then again after other inputs (``x``·1000 + 7) went through the
    network: a DPLabError on ``model`` where that fails, where a buffer then differs from
    ``before``, or where the second gradients differ from the first: the network keeps state
    from what it has seen (an attribute, a global), which no check can rule out in general but
    this one finds for a running statistic."""
    import torch

    from dplab.training.per_example import clipped_grad_sum

    params = {k: v.detach() for k, v in model.named_parameters()}
    y = torch.arange(len(x)) % classes
    loss = example_loss(model, 0.0, batched=False)

    def gradients(inputs):
        return clipped_grad_sum(loss, params, inputs, y, None).grad_sum

    try:
        first = gradients(x)
        try:
            gradients(x * 1000.0 + 7.0)
        except Exception:  # noqa: BLE001 (inputs it does not take, e.g. token ids: no probe)
            pass
        again = gradients(x)
    except RuntimeError as err:
        raise DPLabError(
            "model",
            f"one example's gradient fails: {type(err).__name__}: {str(err)[:160]}",
        ) from None
    _check_buffers(model, before)
    same = (torch.allclose(first[k], again[k], 1e-6, 1e-12, equal_nan=True) for k in first)
    if not all(same):
        raise DPLabError(
            "model",
            _STATE.format(
                what="what the network computes next (the same examples' gradients differed after"
                " other inputs went through it)"
            ),
        )


def example_loss(model: nn.Module, l2: float, batched: bool = True):
    """ℓ(θ; x, y) for ONE example: cross-entropy + (l2/2)·||θ||² (the penalty is part of every
    example's loss, so its gradient is clipped with the rest).  ``batched``: ``loss.model`` and
    ``loss.l2`` let :func:`dplab.training.per_example.clipped_grad_sum` take its ghost-clipping
    path, one forward and backward pass of the whole batch, exact only where row i of every
    layer's input and output gradient depends on example i alone: a built-in model's, by
    construction.  Without it (a model file's network) each example's gradient is taken from that
    example alone (torch.func), whatever the network does to a batch."""
    import torch
    from torch import nn

    def loss(params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = torch.func.functional_call(model, params, (x.unsqueeze(0),))
        value = nn.functional.cross_entropy(logits, y.unsqueeze(0))
        if l2:
            value = value + 0.5 * l2 * sum((p * p).sum() for p in params.values())
        return value

    if batched:
        loss.model, loss.l2 = model, l2
    return loss
