"""What a model plugs into the engine: a :class:`Model`, the ``MODEL`` of one module of
:mod:`dplab.training.models` (the same registration as the training methods' ``METHOD``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from dplab.training.settings import RunSettings


@dataclass(frozen=True)
class Model:
    """One built-in model: its name (the run's ``model``), the name figures and tables show, its
    source, its network in a line (the docs' tables of models), and ``build(run, input_shape,
    classes)``, the network for inputs of ``input_shape`` (no batch dimension), initialised from
    torch's global generator (seeded by the caller)."""

    name: str
    display: str
    source: str
    network: str
    build: Callable[[RunSettings, list[int], int], nn.Module]
