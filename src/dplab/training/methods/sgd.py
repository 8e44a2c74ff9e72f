"""Method ``sgd``: non-private minibatch SGD (003 Alg. 1): no clipping, no noise, no accountant."""

from dplab.schemes import Sampling
from dplab.training.methods.base import Method

METHOD = Method(
    name="sgd",
    display="SGD (non-private)",
    source="003 Alg. 1",
    rule="w ← w − η·mean(∇ℓ_i)  (no clip, no noise)",
    samplings=(
        Sampling.SHUFFLE,
        Sampling.WITHOUT_REPLACEMENT,
        Sampling.POISSON,
        Sampling.FULL_BATCH,
        Sampling.BALLS_IN_BINS,
    ),
    noise="none",
    accountant=None,
)
