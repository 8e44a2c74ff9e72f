"""The optimizer a run applies to its privatized gradient, and its learning-rate schedule
(docs/training.md, Optimizers): the run keys ``optimizer`` (sgd | momentum | adam | adamw) with
``momentum``, ``betas``, ``eps``, ``weight_decay``, and ``lr_schedule`` (constant | cosine | step
| warmup_cosine) with ``warmup_steps``, ``lr_step_size``, ``lr_gamma``.

Whatever the optimizer, it reads only the privatized gradient ĝ_t = g_t/m + Z_t/b (and its own
past outputs): post-processing of the Gaussian mechanism's output, so the run's ε is that of
plain DP-SGD with the same σ, q, T (Dwork & Roth, "The Algorithmic Foundations of Differential
Privacy", Prop. 2.1).  The arithmetic is :func:`dplab.training.step.apply`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dplab.accounting.eligibility import PLAIN_SGD

#: the default optimizer, plain SGD (named like the non-private method ``sgd``, another thing)
SGD = "sgd"
#: the default schedule
CONSTANT = "constant"
#: optimizer -> the keys it reads, with their defaults (torch.optim's)
OPTIMIZER_KEYS: dict[str, dict[str, object]] = {
    SGD: {"weight_decay": 0.0},
    "momentum": {"momentum": 0.9, "weight_decay": 0.0},
    "adam": {"betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0},
    "adamw": {"betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01},
}
#: schedule -> the keys it reads, with their defaults (None: required)
SCHEDULE_KEYS: dict[str, dict[str, object]] = {
    CONSTANT: {},
    "cosine": {},
    "step": {"lr_step_size": None, "lr_gamma": 0.1},
    "warmup_cosine": {"warmup_steps": None},
}


@dataclass(frozen=True)
class OptimizerOptions:
    """A run's optimizer and schedule (the defaults: plain SGD at a constant η)."""

    name: str = SGD
    momentum: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    schedule: str = CONSTANT
    warmup_steps: int = 0
    lr_step_size: int = 1
    lr_gamma: float = 0.1

    @property
    def plain(self) -> bool:
        """Plain SGD: w ← w − η_t·ĝ (the update of :func:`dplab.training.step.update`)."""
        return self.name == SGD and not self.weight_decay

    @property
    def label(self) -> str:
        """:data:`~dplab.accounting.eligibility.PLAIN_SGD` for plain SGD at a constant η, else
        the optimizer, its weight decay and schedule (what the hidden-state accountants refuse)."""
        if self.plain and self.schedule == CONSTANT:
            return PLAIN_SGD
        decay = f" (weight_decay {self.weight_decay:g})" if self.weight_decay else ""
        schedule = f", lr_schedule {self.schedule}" if self.schedule != CONSTANT else ""
        return f"optimizer {self.name}{decay}{schedule}"

    def lr(self, lr: float, step: int, steps: int) -> float:
        """η_t at step t = 1..T: constant η; cosine η·(1 + cos(π(t−1)/T))/2; step η·γ^⌊(t−1)/s⌋;
        warmup_cosine η·t/w for t ≤ w, then the cosine over the T − w steps left (Loshchilov &
        Hutter, "SGDR: Stochastic Gradient Descent with Warm Restarts", ICLR 2017, eq. 5)."""
        if self.schedule == CONSTANT:
            return lr
        if self.schedule == "step":
            return lr * self.lr_gamma ** ((step - 1) // self.lr_step_size)
        warm = self.warmup_steps if self.schedule == "warmup_cosine" else 0
        if step <= warm:
            return lr * step / warm
        return lr * 0.5 * (1.0 + math.cos(math.pi * (step - warm - 1) / (steps - warm)))
