"""Method ``projected_dp_sgd``: projected noisy SGD of 001 eq. (1), (12): divide by the realized
batch size |B|, project onto the ball of diameter D; noise σ_A = ησC/b
(:func:`dplab.units.asoodeh_sigma`)."""

from dplab.schemes import Sampling
from dplab.training.methods.base import Method, Row

METHOD = Method(
    name="projected_dp_sgd",
    display="projected DP-SGD",
    source="001 eq. (1), (12)",
    rule="w ← Π_D(w − η·g/|B| + σ_A·Z), σ_A = ησC/b",
    samplings=(Sampling.POISSON, Sampling.WITHOUT_REPLACEMENT),
    normalize="realized",
    projection="required",
    accountant="asoodeh_projected",
    row=Row(cited="001 eq. 1"),
)
