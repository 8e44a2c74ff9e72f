"""Method ``dp_sgd``: DP-SGD with Poisson batches by default (003 Alg. 2; 000 Alg. 1, Abadi et
al.): clip, sum, add N(0, σ²C²), divide by the expected batch size b."""

from dplab.schemes import Sampling
from dplab.training.methods.base import Method, Row

METHOD = Method(
    name="dp_sgd",
    display="DP-SGD",
    source="003 Alg. 2; 000 Alg. 1",
    rule="w ← w − η·(g + σC·Z)/b, Poisson batches",
    samplings=(
        Sampling.POISSON,
        Sampling.WITHOUT_REPLACEMENT,
        Sampling.SHUFFLE,
        Sampling.BALLS_IN_BINS,
    ),
    row=Row(
        source="003 Alg. 2; 000 Alg. 1 (Abadi et al.)",
        accountant="rdp (pld for replace_one; fixed_batches for shuffle; balls_in_bins for "
        "balls_in_bins, fixed_batches with replace_one)",
    ),
)
