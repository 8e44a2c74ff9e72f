"""Method ``sgd``: non-private minibatch SGD (003 Alg. 1): no clipping, no noise, no accountant."""

from dplab.training.methods.base import Method

METHOD = Method(
    name="sgd",
    display="SGD (non-private)",
    source="003 Alg. 1",
    rule="w ← w − η·mean(∇ℓ_i)  (no clip, no noise)",
    samplings=("shuffle", "without_replacement", "poisson", "full_batch", "balls_in_bins"),
    noise="none",
    accountant=None,
)
