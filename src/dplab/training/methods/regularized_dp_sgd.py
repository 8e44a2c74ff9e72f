"""Method ``regularized_dp_sgd``: regularized noisy SGD of 001 eq. (16)–(17): the weights shrink
by (1 − λ) each step; divide by the realized batch size |B|."""

from dplab.schemes import Sampling
from dplab.training.methods.base import Method, Row

METHOD = Method(
    name="regularized_dp_sgd",
    display="regularized DP-SGD",
    source="001 eq. (16)-(17)",
    rule="w ← (1−λ)w − η·g/|B| + σ_A·Z",
    samplings=(Sampling.WITHOUT_REPLACEMENT, Sampling.POISSON),
    normalize="realized",
    regularized=True,
    accountant="asoodeh_regularized",
    row=Row(cited="001 eq. 16–17"),
)
