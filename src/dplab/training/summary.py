"""A run's summary.json as one typed object: :class:`RunSummary`, written by the training loop
(:func:`dplab.training.loop.train`) and read back by every command and figure that uses a run
(:meth:`RunSummary.read`); the string keys of the file live here only.

One field per key of the file, one meaning each (``dplab train --help`` lists them); the
method's own entries (dp_mf: ``matrix_factorization``, ``epsilon_accountant``) and a run in
phases' ``phases`` (each phase's setting) and ``event`` (:mod:`dplab.training.phased`) are
:attr:`RunSummary.details`, and ``individual_privacy`` is present only for a run with
``individual_epsilon``, ``validation`` (the final parameters' loss and accuracy on the
dataset's validation split) only for a run on a dataset with one.  :meth:`RunSummary.write`
gives the bytes of :func:`dplab.io.json_text` (sorted keys), so a summary read and written
again is the same file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from dplab.inputs import damaged, read_json, train_command
from dplab.io import json_text, write_text
from dplab.training.settings import RunSettings


@dataclass(frozen=True)
class Final:
    """The last logged step's metrics (metrics.csv's last row)."""

    step: int
    epoch: float
    train_loss: float
    test_loss: float
    test_accuracy: float


@dataclass(frozen=True)
class DatasetInfo:
    """The prepared dataset the run trained on (its info.json)."""

    name: str
    kind: str
    train_size: int
    test_size: int
    input_shape: list[int]
    classes: int


#: the keys a summary.json holds only where they apply
OPTIONAL = ("individual_privacy", "validation")


@dataclass(frozen=True)
class RunSummary:
    # the resolved run (dplab.training.resolve.resolve_run), as the checkpoint fingerprint hashes it
    run: dict
    dplab_version: str
    method_source: str  # the method's source (Method.source)
    dataset: DatasetInfo
    device: str
    environment: (
        dict  # dplab.training.environment: with the run and the data, what the bytes depend on
    )
    dimension: int  # number of parameters d
    final: Final
    setting: (
        dict | None
    )  # the accounting Setting (Setting.as_dict); None for a non-private or dp_mf run
    noise_multiplier: float | None  # σ; None for a non-private run
    noise_multiplier_source: str  # given, or how it was calibrated
    noise_std_on_sum: float | None  # σC
    delta: float | None  # δ of every ε; None for a non-private run
    neighbouring: str
    sampling: str
    batch_size: int  # b (n under full_batch)
    dataset_size: int  # n
    loss_constants_note: str
    epsilon: dict[str, float]  # claims: accountant -> final ε (upper bounds only)
    epsilon_lower: dict[str, float]  # lower bounds beside the claims: never the run's ε
    epsilon_comparison: dict[str, float]  # comparisons beside the claims: never the run's ε
    epsilon_bound: dict[str, str]  # accountant -> upper | lower | comparison
    risk: dict  # dplab.accounting.risk.risk's reading, or {"unavailable": why}
    epsilon_covers: dict[
        str, str
    ]  # claimed accountant -> "every iterate" | "the final parameters only"
    excluded_accountants: dict[str, str]  # accountant -> why the run may not report it
    #: dplab.accounting.eligibility.Update.as_dict: with the setting, what refusal decides from
    update: dict
    note: str
    details: dict = dataclasses.field(default_factory=dict)  # the method's own entries (dp_mf)
    individual_privacy: dict | None = None  # with individual_epsilon (dplab.training.loop)
    validation: dict | None = None  # {loss, accuracy, size} on the data's validation split, if any

    @property
    def settings(self) -> RunSettings:
        """The typed reading of :attr:`run`."""
        return RunSettings.of(self.run)

    def as_dict(self) -> dict:
        """The JSON object of summary.json."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "details":
                out.update(value)
            elif f.name in OPTIONAL:
                if value is not None:
                    out[f.name] = value
            else:
                out[f.name] = (
                    dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
                )
        return out

    def write(self, path: str | Path) -> None:
        """Write summary.json to ``path`` (:func:`dplab.io.write_text`)."""
        write_text(path, self.text())

    def text(self) -> str:
        """The bytes of summary.json (:func:`dplab.io.json_text`)."""
        return json_text(self.as_dict())

    @classmethod
    def of(cls, data: dict) -> RunSummary:
        """The summary of the JSON object ``data``, which holds :data:`KEYS`
        (:meth:`read` checks that)."""
        keys = {f.name for f in dataclasses.fields(cls)}
        return cls(
            **{k: v for k, v in data.items() if k in keys and k not in ("final", "dataset")},
            final=Final(**data["final"]),
            dataset=DatasetInfo(**data["dataset"]),
            details={k: v for k, v in data.items() if k not in keys},
        )

    @classmethod
    def read(cls, path: str | Path) -> RunSummary:
        """The run summary in ``path`` (written by ``dplab train``); a DPLabError naming the file
        if it is missing, damaged or lacks a key of :data:`KEYS` (e.g.
        written by an older dplab)."""
        regenerate = train_command(Path(path).parent)
        data = read_json(path, "run summary", regenerate, KEYS)
        try:
            summary = cls.of(data)
            RunSettings.of(summary.run)  # the run holds every key the readers' RunSettings reads
        except TypeError as err:
            raise damaged(
                path, "run summary", f"holds unexpected entries ({err})", regenerate
            ) from None
        except KeyError as err:
            raise damaged(
                path,
                "run summary",
                f"records a run without key {err} (written by an older dplab?)",
                regenerate,
            ) from None
        return summary


#: the keys every summary.json holds (all of :class:`RunSummary`'s but its optional ones)
KEYS = tuple(f.name for f in dataclasses.fields(RunSummary) if f.name not in ("details", *OPTIONAL))
