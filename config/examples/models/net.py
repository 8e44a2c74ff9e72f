"""An MLP with LayerNorm for any input shape (tabular (d,) or images (c, h, w)): the example
model file of config/examples/own_experiment.yaml (docs/own_experiment.md).

dplab builds it as ``Net(input_shape=…, classes=…, **model_args)``: ``input_shape`` and
``classes`` come from the prepared dataset, ``hidden`` from the run's ``model_args``.
LayerNorm normalizes each example on its own, so per-example clipping is defined (a BatchNorm
layer would be refused: it mixes the examples of a batch).
"""

import math

from torch import nn


class Net(nn.Module):
    def __init__(self, input_shape, classes, hidden=64):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(math.prod(input_shape), hidden),
            nn.LayerNorm(hidden),
            nn.Tanh(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x):
        return self.layers(x)
