"""The engine's typed reading of a resolved run (:func:`dplab.training.resolve.resolve_run`).

:class:`RunSettings` holds, one typed field per key, what the loop (:mod:`dplab.training.loop`)
and the audit's lockstep runs (:func:`dplab.audit.runner.train_many`) read of a run, read once
from the resolved dict by :meth:`RunSettings.of`: the string-key lookups stay at this edge.  The
dict itself is what ``summary.json`` records (``run``) and what the checkpoint fingerprint hashes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunSettings:
    method: str
    label: str  # the run's name, else its method (progress display)
    device: str  # auto | cpu | cuda
    noise_rng: str  # device | portable (dplab.philox)
    seed: int
    steps: int  # T
    log_every: int
    checkpoint_every: int  # 0: never
    record_grad_norms: bool
    sampling: str
    reshuffle: bool  # shuffle sampling: a new partition every epoch
    batch_size: int | None  # b; None under full_batch (b = n, :meth:`b`)
    normalize: str  # expected (÷ b) | realized (÷ |B|)
    lr: float  # η
    clip: float | None  # C; None: no clipping (sgd)
    noise_multiplier: float | None  # σ when given (else calibrated by the method's mechanism)
    regularization: float  # λ of 001 eq. (17); 0.0 without one
    diameter: float | None  # D of the projection; None: none
    l2: float
    delta: float
    neighbouring: str

    @classmethod
    def of(cls, cfg: dict) -> RunSettings:
        """The settings of resolved run ``cfg``."""
        return cls(
            method=cfg["method"], label=cfg.get("name") or cfg["method"], device=cfg["device"], noise_rng=cfg["noise_rng"],
            seed=cfg["seed"],
            steps=cfg["steps"], log_every=cfg["log_every"], checkpoint_every=cfg["checkpoint_every"],
            record_grad_norms=cfg["record_grad_norms"], sampling=cfg["sampling"], reshuffle=cfg["reshuffle"],
            batch_size=cfg["batch_size"],
            normalize=cfg["normalize"], lr=cfg["lr"], clip=cfg["clip"], noise_multiplier=cfg["noise_multiplier"],
            regularization=cfg["regularization"] or 0.0, diameter=cfg["diameter"], l2=cfg["l2"],
            delta=cfg["delta"], neighbouring=cfg["neighbouring"],
        )

    def b(self, n: int) -> int:
        """The batch size b on ``n`` examples: n under full_batch, else ``batch_size``."""
        return n if self.sampling == "full_batch" else self.batch_size
