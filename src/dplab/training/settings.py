"""The engine's typed reading of a resolved run (:func:`dplab.training.resolve.resolve_run`).

:class:`RunSettings` holds every engine-wide key of a resolved run (``run.schema.yaml``), one
typed field per key with one meaning, read once from the resolved dict by :meth:`RunSettings.of`:
the string-key lookups stay at this edge (and in :mod:`dplab.training.resolve`, which fills the
dict).  The engine — the loop, the methods' plug-ins, the privacy plan, the preflight checks,
the model, the audit — reads these fields.  A method's own keys (dp_mf's strategy, bands,
buffers …) are no field here: the method's options type reads them
(:meth:`dplab.training.methods.base.Method.options`).  The frozen dict itself
(:attr:`RunSettings.record`) is what ``summary.json`` records (``run``,
:class:`dplab.training.summary.RunSummary`) and what the checkpoint fingerprint hashes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from dplab.schemes import Sampling
from dplab.training.optimizers import CONSTANT, SGD, OptimizerOptions


@dataclass(frozen=True, kw_only=True)
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
    #: the resolved run :meth:`of` read, frozen: what summary.json records, what the checkpoint
    #: fingerprint hashes and where a method reads its own keys (:meth:`Method.options
    #: <dplab.training.methods.base.Method.options>`); :func:`dataclasses.replace` leaves it as
    #: read (:meth:`check_record`)
    record: Mapping[str, object] = field(compare=False, repr=False)
    #: a run in phases: each phase's own keys (:mod:`dplab.training.phased`)
    phases: tuple[dict, ...] | None = None

    @classmethod
    def of(cls, cfg: Mapping) -> RunSettings:
        """The settings of resolved run ``cfg``: each field its key's value, but those of
        :data:`_DERIVED`."""
        accountants = cfg["accountants"]
        return cls(
            **{f.name: cfg[f.name] for f in dataclasses.fields(cls) if f.name not in _DERIVED},
            name=cfg.get("name"),
            label=cfg.get("name") or cfg["method"],
            model_args=cfg.get("model_args"),
            optimizer=_optimizer(cfg),
            accountants=tuple(accountants) if accountants is not None else None,
            phases=tuple(cfg["phases"]) if cfg.get("phases") is not None else None,
            record=MappingProxyType(copy.deepcopy(dict(cfg))),
        )

    def method_key(self, key: str):
        """The value of one of the method's own keys (dp_mf's ``strategy`` …) as the run records
        it, for readers that do not load the methods (the figures: no torch); the engine reads
        the method's options type (:meth:`dplab.training.methods.base.Method.options`)."""
        return self.record[key]

    def check_record(self) -> None:
        """ValueError unless :attr:`record` reads back as these settings (a field replaced after
        :meth:`of` would make summary.json record another run than the one trained)."""
        if RunSettings.of(self.record) != self:
            raise ValueError(
                "the run's settings differ from its record: build them with RunSettings.of"
            )

    @property
    def shrink(self) -> float:
        """λ of the update (1 − λ)·w (001 eq. 17): ``regularization``, 0.0 without one."""
        return self.regularization or 0.0

    def b(self, n: int) -> int:
        """The batch size b on ``n`` examples: n under full_batch, else ``batch_size``."""
        return n if self.sampling == Sampling.FULL_BATCH else self.batch_size


#: the fields :meth:`RunSettings.of` does not read as their key's value (absent keys, tuples,
#: the optimizer's keys gathered, the record)
_DERIVED = ("name", "label", "model_args", "optimizer", "accountants", "phases", "record")


def _optimizer(cfg: Mapping) -> OptimizerOptions:
    """The optimizer options of resolved run ``cfg`` (keys absent: plain SGD at a constant η)."""
    keys = ("momentum", "eps", "weight_decay", "warmup_steps", "lr_step_size", "lr_gamma")
    given = {k: cfg[k] for k in keys if cfg.get(k) is not None}
    if cfg.get("betas") is not None:
        given["betas"] = tuple(cfg["betas"])
    return OptimizerOptions(
        name=cfg.get("optimizer") or SGD, schedule=cfg.get("lr_schedule") or CONSTANT, **given
    )
