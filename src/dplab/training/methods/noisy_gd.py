"""Method ``noisy_gd``: noisy (projected) gradient descent of 002 Alg. 1; its Langevin noise
√(2η)·σ₀₀₂ is the engine's ησC/n (:func:`dplab.units.langevin_sigma`)."""

from dplab.schemes import Sampling
from dplab.training.methods.base import Method

METHOD = Method(
    name="noisy_gd",
    display="noisy GD",
    source="002 Alg. 1",
    rule="w ← Π(w − η·(g + σC·Z)/n); √(2η)σ₀₀₂ = ησC/n",
    samplings=(Sampling.FULL_BATCH,),
    projection="optional",
)
