"""Method ``dp_sgd``: DP-SGD with Poisson batches by default (003 Alg. 2; 000 Alg. 1, Abadi et
al.): clip, sum, add N(0, σ²C²), divide by the expected batch size b."""

from dplab.training.methods.base import Method

METHOD = Method(
    name="dp_sgd",
    display="DP-SGD",
    source="003 Alg. 2; 000 Alg. 1",
    rule="w ← w − η·(g + σC·Z)/b, Poisson batches",
    samplings=("poisson", "without_replacement", "shuffle", "balls_in_bins"),
)
