"""The engine's typed reading of a resolved run (:func:`dplab.training.resolve.resolve_run`).

:class:`RunSettings` holds every key of a resolved run (``run.schema.yaml``), one typed field
per key with one meaning, read once from the resolved dict by :meth:`RunSettings.of`: the
string-key lookups stay at this edge (and in :mod:`dplab.training.resolve`, which fills the
dict).  The engine — the loop, the methods' plug-ins, the privacy plan, the preflight checks,
the model, the audit — reads these fields.  The dict itself is what ``summary.json`` records
(``run``, :class:`dplab.training.summary.RunSummary`) and what the checkpoint fingerprint hashes.
"""

from __future__ import annotations

from dataclasses import dataclass

from dplab.training.optimizers import CONSTANT, SGD, OptimizerOptions


@dataclass(frozen=True)
class RunSettings:
    method: str
    name: str | None  # free label of the run
    label: str  # the run's name, else its method (progress display)
    model: str  # a built-in model (dplab.training.models) or FILE.py:Class
    model_args: dict | None  # FILE.py:Class: the constructor's keyword arguments
    dataset: str  # the name of an entry of the pipeline config's datasets
    hidden: int  # MLP hidden width
    channels: int  # CNN channels of the first conv layer
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
    lr: float  # η (at step t: optimizer.lr(η, t, T))
    optimizer: OptimizerOptions  # what the privatized gradient updates (optimizer, lr_schedule, …)
    clip: float | None  # C; None: no clipping (sgd)
    noise_multiplier: float | None  # σ when given (else calibrated by the method's mechanism)
    target_epsilon: float | None  # calibrate σ to this ε at δ with `accountant`
    target_tpr: float | None  # or so that no attacker's TPR at target_fpr exceeds this (pld)
    target_fpr: float | None
    accountant: str | None  # the accountant calibrating σ; None for a non-private method
    accountants: tuple[str, ...] | None  # the accountants to report; None: every registered one
    regularization: float | None  # λ of 001 eq. (17); None without one (:attr:`shrink`)
    diameter: float | None  # D of the projection; None: none
    l2: float
    delta: float
    neighbouring: str
    individual_epsilon: bool  # every record's individual ε (docs/individual_privacy.md)
    individual_budget: float | None  # the Rényi filter's ε budget; None: no filter
    individual_order: float | None  # the filter's Rényi order α (with individual_budget)
    strategy: str | None  # dp_mf: the factorization's strategy
    bands: int | None  # dp_mf, strategy banded: bands of C
    min_separation: int | None  # dp_mf: b, fixed batches or partitions; None: ⌊n/batch_size⌋
    participations: int | None  # dp_mf: k, participations per example; None: derived
    buffers: int | None  # dp_mf, strategy blt: buffers of the BLT
    objective: str | None  # dp_mf, strategies banded_toeplitz and blt: mean | max error the optimizer minimizes
    phases: tuple[dict, ...] | None = None  # a run in phases: each phase's own keys (dplab.training.phased)

    @classmethod
    def of(cls, cfg: dict) -> RunSettings:
        """The settings of resolved run ``cfg``."""
        accountants = cfg["accountants"]
        return cls(
            method=cfg["method"], name=cfg.get("name"), label=cfg.get("name") or cfg["method"], model=cfg["model"],
            model_args=cfg.get("model_args"), optimizer=_optimizer(cfg),
            dataset=cfg["dataset"], hidden=cfg["hidden"], channels=cfg["channels"], device=cfg["device"],
            noise_rng=cfg["noise_rng"], seed=cfg["seed"],
            steps=cfg["steps"], log_every=cfg["log_every"], checkpoint_every=cfg["checkpoint_every"],
            record_grad_norms=cfg["record_grad_norms"], sampling=cfg["sampling"], reshuffle=cfg["reshuffle"],
            batch_size=cfg["batch_size"],
            normalize=cfg["normalize"], lr=cfg["lr"], clip=cfg["clip"], noise_multiplier=cfg["noise_multiplier"],
            target_epsilon=cfg["target_epsilon"], target_tpr=cfg["target_tpr"], target_fpr=cfg["target_fpr"],
            accountant=cfg["accountant"], accountants=tuple(accountants) if accountants is not None else None,
            regularization=cfg["regularization"], diameter=cfg["diameter"], l2=cfg["l2"],
            delta=cfg["delta"], neighbouring=cfg["neighbouring"],
            individual_epsilon=cfg["individual_epsilon"], individual_budget=cfg["individual_budget"],
            individual_order=cfg["individual_order"],
            strategy=cfg["strategy"], bands=cfg["bands"], min_separation=cfg["min_separation"],
            participations=cfg["participations"], buffers=cfg["buffers"], objective=cfg["objective"],
            phases=tuple(cfg["phases"]) if cfg.get("phases") is not None else None,
        )

    @property
    def shrink(self) -> float:
        """λ of the update (1 − λ)·w (001 eq. 17): ``regularization``, 0.0 without one."""
        return self.regularization or 0.0

    def b(self, n: int) -> int:
        """The batch size b on ``n`` examples: n under full_batch, else ``batch_size``."""
        return n if self.sampling == "full_batch" else self.batch_size


def _optimizer(cfg: dict) -> OptimizerOptions:
    """The optimizer options of resolved run ``cfg`` (keys absent: plain SGD at a constant η)."""
    given = {k: cfg[k] for k in ("momentum", "eps", "weight_decay", "warmup_steps", "lr_step_size", "lr_gamma")
             if cfg.get(k) is not None}
    if cfg.get("betas") is not None:
        given["betas"] = tuple(cfg["betas"])
    return OptimizerOptions(name=cfg.get("optimizer") or SGD, schedule=cfg.get("lr_schedule") or CONSTANT,
                            **given)
