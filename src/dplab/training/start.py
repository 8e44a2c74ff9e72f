"""What every run of a config starts from, the same for :func:`dplab.training.loop.train` and
the runs stepped in lockstep (:class:`dplab.training.stacked.StackedRuns`): b, the initialised
model, W₀ and the per-example loss."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from dplab.errors import DPLabError
from dplab.layout import model_path
from dplab.training import model_file, models
from dplab.training.settings import RunSettings


@dataclass
class Start:
    """What every run of a config starts from (:func:`initial`)."""

    model: nn.Module
    params: dict[str, torch.Tensor]
    loss: Callable
    b: int
    code: dict  # file -> SHA-256 of the run's own code (a model file), empty for a built-in model


def initial(
    settings: RunSettings,
    n: int,
    input_shape: list[int],
    classes: int,
    seed: int,
    device: torch.device | str = "cpu",
) -> Start:
    """The start of one run of ``settings`` on ``n`` examples: b (:meth:`RunSettings.b`, at most n),
    the model initialised with torch's global generator seeded with ``seed`` inside ``fork_rng``
    (its output checked: :func:`models.check_output`, a model file's also
    :func:`models.check_batch`) and moved to ``device``, a copy of its parameters (W₀, not yet
    projected) and its per-example loss (a model file's network: each example's gradient from
    that example alone, as no check of a network's batches can prove it per-example:
    :func:`models.example_loss`)."""
    b = settings.b(n)
    if b > n:
        raise DPLabError("batch_size", f"must be <= the {n} training examples; got {b}")
    own = model_file.names_file(settings.model)  # a built-in model holds by construction
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = models.build(settings, input_shape, classes)
        models.check_output(model, input_shape, classes)
        if own:
            models.check_batch(model, input_shape, classes)
    model = model.to(device)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    path = model_path(settings.model)
    code = {path: model_file.sha256(settings.model)} if path else {}
    loss = models.example_loss(model, settings.l2, batched=not own)
    return Start(model, params, loss, b, code)
