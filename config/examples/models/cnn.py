"""A small CNN with GroupNorm for images (c, h, w) with h, w ≥ 4: the model file of the image
variant of config/examples/own_experiment.yaml (docs/own_experiment.md).

GroupNorm in place of the usual BatchNorm: it normalizes each example over groups of its own
channels, so per-example gradients (and DP-SGD's clipping) are defined.
"""

from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, input_shape, classes, channels=8, groups=4):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(input_shape[0], channels, 3, padding=1),
            nn.GroupNorm(groups, channels),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.GroupNorm(groups, channels),
            nn.Tanh(),
            nn.AdaptiveAvgPool2d(2),
            nn.Flatten(),
            nn.Linear(4 * channels, classes),
        )

    def forward(self, x):
        return self.layers(x)
