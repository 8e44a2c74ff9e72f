"""Method ``dp_sgd_fixed_batches``: DP-SGD over disjoint fixed batches cycled (000 Alg. 2),
accounted by privacy amplification by iteration (pabi) by default."""

from dplab.schemes import Sampling
from dplab.training.methods.base import Method, Row

METHOD = Method(
    name="dp_sgd_fixed_batches",
    display="DP-SGD, fixed batches",
    source="000 Alg. 2",
    rule="w ← w − η·(g + σC·Z)/b, fixed batches cycled",
    samplings=(Sampling.SHUFFLE,),
    accountant="pabi",
    row=Row(
        samplings="shuffle (one fixed partition, cycled; `reshuffle: true` redraws it per epoch)"
    ),
)
