"""What a model plugs into the engine: a :class:`Model`, the ``MODEL`` of one module of
:mod:`dplab.training.models` (the same registration as the training methods' ``METHOD``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from dplab.training.settings import RunSettings

if TYPE_CHECKING:  # torch is imported by build: a plan counts parameters without it
    from torch import nn


@dataclass(frozen=True)
class Model:
    """One built-in model: its name (the run's ``model``), the name figures and tables show, its
    source, its network in a line (the docs' tables of models), ``build(run, input_shape,
    classes)``, the network for inputs of ``input_shape`` (no batch dimension), initialised from
    torch's global generator (seeded by the caller), and ``parameters(run, input_shape,
    classes)``, the number of parameters of that network counted without building it (what a
    config's plan needs: :mod:`dplab.training.preflight` imports no torch), refusing the shapes
    ``build`` refuses."""

    name: str
    display: str
    source: str
    network: str
    build: Callable[[RunSettings, list[int], int], nn.Module]
    parameters: Callable[[RunSettings, list[int], int], int]
