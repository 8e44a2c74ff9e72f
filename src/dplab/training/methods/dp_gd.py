"""Method ``dp_gd``: full-batch DP gradient descent (004 §3.1–3.3), optionally projected."""

from dplab.schemes import Sampling
from dplab.training.methods.base import Method, Row

METHOD = Method(
    name="dp_gd",
    display="DP-GD",
    source="004 §3.1–3.3",
    rule="w ← w − η·(g + σC·Z)/n, full batch",
    samplings=(Sampling.FULL_BATCH,),
    projection="optional",
    row=Row(cited="004 §3"),
)
