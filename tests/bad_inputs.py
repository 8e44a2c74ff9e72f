"""The bad-input count: a list of bad inputs run against the ``dplab`` subcommands, each classed
by what went wrong.

    python tests/bad_inputs.py [--timeout S] [--only NAME …] [--round N]

runs every entry in a fresh folder as ``python -m dplab.cli …`` (the ``dplab`` of ``PYTHONPATH``:
point it at another checkout to count that one) under a per-input timeout, and prints one line
per entry and a count per class (docs/reliability.md, "Bad inputs, counted").  It counts, it
does not fail; ``tests/test_bad_inputs.py`` runs the cheap entries in-process and asserts the
classes that are fixed are at 0.

The classes (an entry may fall in several):

- ``silent``: exit 0 where the input must be refused or the run must fail (a silent wrong answer);
- ``late``: refused (exit 2) only after :data:`LATE` CPU seconds of work (CPU time, not wall
  time: on a loaded machine a command waits for a core far longer than it works);
- ``hang``: no answer within the timeout (:data:`probe.CPU_LIMIT` CPU seconds, or ``--timeout`` s of
  wall time for a command that waits without working, e.g. on a FIFO);
- ``exit_code``: an exit code other than the one that says what happened (0 done, 2 bad input,
  3 a valid run that failed);
- ``half_written``: the command failed but left files under its output folder;
- ``lines``: more (or, on success, any) lines on stderr than the one line of a refusal, log lines
  (progress, notes: "YYYY-MM-DD HH:MM:SS …") aside;
- ``message``: a refusal whose line does not say what the entry's ``says`` expects (the right
  key, range or fix).

Entries of ``round`` 3 are the third hostile probe's (JSON duplicates, two runs in one folder,
alias bombs and unbounded work, flags used or refused, inputs checked where they enter, messages);
its ``point`` numbers are that probe's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import yaml

import probe

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
CLASSES = ("silent", "late", "hang", "exit_code", "half_written", "lines", "message")
#: CPU seconds after which a refusal counts as late (a start, imports included, is ~3 s of CPU here)
LATE = 10.0
RUN = {
    "method": "dp_sgd",
    "model": "logreg",
    "dataset": "synthetic",
    "steps": 6,
    "batch_size": 20,
    "lr": 0.5,
    "clip": 1.0,
    "noise_multiplier": 1.0,
    "delta": 1e-5,
    "accountant": "rdp",
    "accountants": ["rdp"],
    "log_every": 3,
    "device": "cpu",
}
SGD = {
    "method": "sgd",
    "model": "logreg",
    "dataset": "synthetic",
    "steps": 6,
    "batch_size": 20,
    "l2": 1.0,
    "log_every": 3,
    "device": "cpu",
}
EPS = ["--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "100", "--delta", "1e-5"]
#: the saved factorization of :data:`BLT` (``dplab.layout.cache_key``)
MF_FILE = "blt_T6_k2_mean.npz"
#: a dp_mf run with a BLT of 2 buffers, refused below with one key changed
BLT = {
    **RUN,
    "method": "dp_mf",
    "strategy": "blt",
    "buffers": 2,
    "min_separation": 10,
    "accountant": "mf",
    "accountants": ["mf"],
}

#: the same with a dense banded C of 3 bands
BANDED = {**BLT, "strategy": "banded", "buffers": None, "bands": 3}
#: the saved factorizations of :data:`BLT` and :data:`BANDED` (cache keys) :func:`prepare` writes
MF_FILES = {
    "blt_T6_k2_mean.npz": "--strategy blt --steps 6 --buffers 2 --objective mean".split(),
    "banded_T6_m3.npz": "--strategy banded --steps 6 --bands 3".split(),
}


def _mf_run(run: dict, cache: str) -> list[str]:
    """`dplab train` of ``run`` with the saved factorizations of folder ``cache``."""
    return [
        "train",
        "--run-json",
        json.dumps(run),
        "--data",
        "DATA",
        "--out",
        "OUTDIR",
        "--mf-cache",
        cache,
    ]


@dataclass
class Entry:
    """One bad input: ``argv`` (placeholders: DATA a prepared dataset, TABLE a figure's table,
    DIGITS prepared digits, OUT… paths under the output folder, FILE:<name> a file of
    :func:`files`), the exit code that says what should happen, and what it exercises
    (``point``: the class of input, docs/reliability.md)."""

    name: str
    point: int
    argv: list[str]
    expect: int = 2
    cheap: bool = True  # run in-process by tests/test_bad_inputs.py
    mount: str | None = None  # a tmpfs of this size holds OUT (skipped where it cannot be mounted)
    extra: dict = field(default_factory=dict)
    round: int = 2  # 1–2: the first probe's list (points of its issue); 3: the third probe's
    says: str | None = None  # a regular expression the refusal's line must match
    hold: str | None = None  # an OUT… folder another process holds (dplab.io.folder_lock) meanwhile
    killed: bool = False  # with hold: that process is killed (SIGKILL) before the entry runs


#: a pipeline config of one small run (planning it is cheap), as YAML text
MINI = """datasets:
  synthetic: {kind: synthetic, train_size: 200, test_size: 50, dim: 5}
runs:
  a:
    method: dp_sgd
    model: logreg
    dataset: synthetic
    steps: 6
    batch_size: 20
    lr: 0.5
    clip: 1.0
    noise_multiplier: 1.0
    delta: 1.0e-5
    accountant: rdp
"""


#: a valid phase of :data:`MINI`'s run (the bad-phase probes put a bad one after it)
PHASE = "{steps: 3, noise_multiplier: 1.0}"


#: JSON with a key given twice (the last wins in Python: ε = 32830 with σ = 0.01)
DUP_RUN = json.dumps(RUN)[:-1] + ', "noise_multiplier": 0.01}'
DUP_NESTED = json.dumps({**RUN, "accountants": None})[:-1] + ', "grid": {"a": 1, "a": 2}}'
SYNTHETIC = json.dumps({"kind": "synthetic", "train_size": 200, "test_size": 50, "dim": 5})
DUP_DATASET = SYNTHETIC[:-1] + ', "train_size": 20}'


ENTRIES: list[Entry] = [
    # 1. duplicate YAML keys: the last silently wins today
    Entry("duplicate run name in a config", 1, ["check-config", "FILE:dup_run.yaml"]),
    Entry("duplicate key inside a run", 1, ["check-config", "FILE:dup_key.yaml"]),
    Entry(
        "duplicate key in a single-run YAML",
        1,
        ["train", "--config", "FILE:dup_single.yaml", "--data", "DATA", "--out", "OUTDIR"],
    ),
    Entry(
        "duplicate key in a run's config given to train",
        1,
        [
            "train",
            "--config",
            "FILE:dup_key.yaml",
            "--run",
            "a",
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    # 2. whole-file checks on inputs
    Entry(
        "figure table cut at 60 %",
        2,
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            "FILE:cut.csv",
            "--pdf",
            "OUT.pdf",
            "--png",
            "OUT.png",
        ],
    ),
    Entry(
        "figure table cut at a line boundary (2 rows missing)",
        2,
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            "FILE:cut_rows.csv",
            "--pdf",
            "OUT.pdf",
            "--png",
            "OUT.png",
        ],
    ),
    Entry(
        "figure table empty",
        2,
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            "FILE:empty",
            "--pdf",
            "OUT.pdf",
            "--png",
            "OUT.png",
        ],
    ),
    Entry(
        "sweep over a summary cut short",
        2,
        [
            "sweep",
            "--summary",
            "FILE:cut_summary.json",
            "--accountants",
            "rdp",
            "--points",
            "3",
            "--out",
            "OUT.csv",
        ],
    ),
    Entry(
        "provenance reading /dev/zero",
        2,
        ["provenance", "--config", "FILE:mini.yaml", "--out", "OUT.json", "/dev/zero"],
        cheap=False,
    ),
    Entry("check-config reading /dev/zero", 2, ["check-config", "/dev/zero"], cheap=False),
    Entry(
        "dp_mf with a saved BLT whose coefficients are scaled by 0.01 (ε of another C)",
        2,
        _mf_run(BLT, "FILE:mf_scaled"),
    ),
    Entry(
        "dp_mf with a saved BLT whose coefficients are scaled by 100",
        2,
        _mf_run(BLT, "FILE:mf_scaled_up"),
    ),
    Entry(
        "dp_mf with a saved BLT whose filter sections are swapped (noise of another C)",
        2,
        _mf_run(BLT, "FILE:mf_swapped"),
    ),
    Entry(
        "dp_mf with a saved BLT whose filter section is perturbed by 1e-6",
        2,
        _mf_run(BLT, "FILE:mf_perturbed"),
    ),
    Entry(
        "dp_mf with a saved BLT whose info records another loss", 2, _mf_run(BLT, "FILE:mf_loss")
    ),
    Entry(
        "dp_mf with a saved banded C with one entry edited", 2, _mf_run(BANDED, "FILE:mf_edited")
    ),
    Entry(
        "dp_mf with a saved banded C whose bands say 1 (noise without the past)",
        2,
        _mf_run(BANDED, "FILE:mf_bands"),
    ),
    Entry("dp_mf with its saved BLT, untampered, a good run", 2, _mf_run(BLT, "FILE:mf"), expect=0),
    Entry(
        "figure table a FIFO",
        2,
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            "FILE:fifo",
            "--pdf",
            "OUT.pdf",
            "--png",
            "OUT.png",
        ],
        cheap=False,
    ),
    # 3. counts bounded before work
    Entry(
        "pld at T = 1e9",
        3,
        [
            "epsilon",
            "--accountant",
            "pld",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "1000000000",
            "--delta",
            "1e-5",
        ],
        cheap=False,
    ),
    Entry(
        "sweep points 1e9",
        3,
        [
            "sweep",
            "--summary",
            "FILE:summary.json",
            "--accountants",
            "rdp",
            "--points",
            "1000000000",
            "--out",
            "OUT.csv",
        ],
        cheap=False,
    ),
    Entry(
        "sigma_vs_steps up to T = 1e9",
        3,
        [
            "figure-table",
            "sigma_vs_steps",
            "--params-json",
            '{"steps": [10, 1000000000]}',
            "--out",
            "OUT.csv",
        ],
        cheap=False,
    ),
    Entry(
        "mf checks flags only after factorizing",
        3,
        ["mf", "--strategy", "optimal", "--steps", "3000", "--epsilon", "-1", "--delta", "1e-6"],
        cheap=False,
    ),
    Entry(
        "audit runs 1e9",
        3,
        ["audit", "--audit-json", "AUDIT_RUNS", "--data", "DATA", "--out", "OUT.csv"],
        cheap=False,
    ),
    Entry(
        "pld sigma at ε = 1000 (below pld's σ floor)",
        3,
        [
            "sigma",
            "--accountant",
            "pld",
            "--sampling-rate",
            "0.01",
            "--steps",
            "100",
            "--epsilon",
            "1000",
            "--delta",
            "1e-5",
        ],
        cheap=False,
    ),
    # 4. planning refuses what the job refuses
    Entry("lr: .inf passes check-config", 4, ["check-config", "FILE:lr_inf.yaml"]),
    Entry(
        "pld at δ = 1e-300 with σ given (the job answers too, pld excluded with its reason)",
        4,
        ["check-config", "FILE:pld_delta.yaml"],
        expect=0,
    ),
    Entry(
        "pld calibrating σ at δ = 1e-300 passes check-config",
        4,
        ["check-config", "FILE:pld_delta_calibrated.yaml"],
    ),
    Entry(
        "dp_mf blt with cyclic_poisson (a BLT has T bands) passes check-config",
        4,
        ["check-config", "FILE:blt_cyclic_poisson.yaml"],
    ),
    *[
        Entry(name, 4, ["check-config", f"FILE:{file}"], says=says)
        for name, file, says in [
            (
                "dp_mf with cyclic_poisson and replace_one (amplified BandMF: add_remove only) "
                "passes check-config",
                "mf_cyclic_replace_one.yaml",
                r"runs\.a\.neighbouring: .*add_remove only",
            ),
            (
                "dp_mf sqrt (T = 6 bands) with cyclic_poisson over 4 partitions passes "
                "check-config",
                "mf_sqrt_cyclic.yaml",
                r"runs\.a\.strategy: .*at most b bands",
            ),
            (
                "dp_mf banded with 6 bands over b = floor(200/40) = 5 (min_separation null) trains",
                "mf_bands_over_b.yaml",
                r"runs\.a\.bands: must be <= b = .* = 5; got 6",
            ),
            (
                "dp_mf's batch_size refusal suggests the min_separation null already gives",
                "mf_batch_fix.yaml",
                r"runs\.a\.batch_size: .*; set batch_size = 22$",
            ),
        ]
    ],
    Entry(
        "dp_sgd with σ = 1e-320 trains and prints 'epsilon: none'",
        4,
        [
            "train",
            "--run-json",
            json.dumps({**RUN, "noise_multiplier": 1e-320}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "dp_sgd with σ = 1e-320 passes check-config", 4, ["check-config", "FILE:sigma_tiny.yaml"]
    ),
    Entry(
        "dp_sgd with lr = 1e-320: rdp (which does not read lr) was excluded naming lr",
        4,
        [
            "train",
            "--run-json",
            json.dumps({**RUN, "lr": 1e-320}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
        expect=0,
    ),
    Entry(
        "dp_sgd with clip = 1e-320: rdp (which does not read clip) was excluded naming clip",
        4,
        [
            "train",
            "--run-json",
            json.dumps({**RUN, "clip": 1e-320}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
        expect=0,
    ),
    # 5. every flag accepted is used
    Entry(
        "dp_mf blt with bands",
        5,
        [
            "train",
            "--run-json",
            json.dumps({**BLT, "bands": 3}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "dp_mf banded_toeplitz with buffers",
        5,
        [
            "train",
            "--run-json",
            json.dumps({**BLT, "strategy": "banded_toeplitz", "bands": 3}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "dp_mf optimal with an objective",
        5,
        [
            "train",
            "--run-json",
            json.dumps({**BLT, "strategy": "optimal", "buffers": None, "objective": "max"}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "dp_mf blt with 0 buffers",
        5,
        [
            "train",
            "--run-json",
            json.dumps({**BLT, "buffers": 0}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "rdp with --sensitivity", 5, ["epsilon", "--accountant", "rdp", *EPS, "--sensitivity", "3"]
    ),
    Entry(
        "pld with --sensitivity", 5, ["epsilon", "--accountant", "pld", *EPS, "--sensitivity", "3"]
    ),
    Entry("rdp with --clip", 5, ["epsilon", "--accountant", "rdp", *EPS, "--clip", "3"]),
    Entry("pld with --lr", 5, ["epsilon", "--accountant", "pld", *EPS, "--lr", "0.1"]),
    Entry(
        "figure-draw --pdf X --png X",
        5,
        ["figure-draw", "gaussian_sigma", "--table", "TABLE", "--pdf", "OUT.x", "--png", "OUT.x"],
    ),
    Entry(
        "index over missing results",
        5,
        ["index", "--results", "FILE:no_results", "--out", "OUT_index.txt"],
    ),
    Entry(
        "index over missing results, with the config",
        5,
        [
            "index",
            "--results",
            "FILE:no_results",
            "--config",
            "FILE:mini.yaml",
            "--out",
            "OUT_index.txt",
        ],
    ),
    # 6. exit codes mean one thing
    Entry(
        "train diverging to inf (lr 1e20, l2 1)",
        6,
        [
            "train",
            "--run-json",
            json.dumps({**SGD, "lr": 1e20}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
        expect=3,
    ),
    Entry(
        "train with lr 1e250 (past float32)",
        6,
        [
            "train",
            "--run-json",
            json.dumps({**RUN, "lr": 1e250}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
        expect=3,
    ),
    Entry(
        "a good run exits 0",
        6,
        ["train", "--run-json", json.dumps(RUN), "--data", "DATA", "--out", "OUTDIR"],
        expect=0,
    ),
    # 7. nothing half-written on a full disk
    Entry(
        "train on a full disk",
        7,
        ["train", "--run-json", json.dumps(RUN), "--data", "DATA", "--out", "OUTDIR"],
        expect=3,
        mount="8k",
    ),
    Entry(
        "figure-draw on a full disk",
        7,
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            "TABLE",
            "--pdf",
            "OUT.pdf",
            "--png",
            "OUT.png",
        ],
        expect=3,
        mount="24k",
    ),
    Entry(
        "prepare-data on a full disk",
        7,
        [
            "prepare-data",
            "--dataset-json",
            json.dumps({"kind": "synthetic", "train_size": 2000, "test_size": 500, "dim": 10}),
            "--out",
            "OUTDIR",
        ],
        expect=3,
        mount="24k",
    ),
    Entry(
        "figure-table on a full disk",
        7,
        ["figure-table", "gaussian_sigma", "--params-json", "{}", "--out", "OUT.csv"],
        expect=3,
        mount="8k",
    ),
    # 8. one line of error, and none on a good run
    Entry("epsilon rdp, a good run", 8, ["epsilon", "--accountant", "rdp", *EPS], expect=0),
    Entry("epsilon pld, a good run", 8, ["epsilon", "--accountant", "pld", *EPS], expect=0),
    Entry(
        "figure-table, a good run",
        8,
        ["figure-table", "langevin_rdp", "--params-json", "{}", "--out", "OUT.csv"],
        expect=0,
    ),
    Entry(
        "audit, a good run",
        8,
        ["audit", "--audit-json", "AUDIT_GOOD", "--data", "DIGITS", "--out", "OUT.csv"],
        expect=0,
    ),
    Entry(
        "figure-draw, a good run",
        8,
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            "TABLE",
            "--pdf",
            "OUT.pdf",
            "--png",
            "OUT.png",
        ],
        expect=0,
    ),
    Entry(
        "epsilon at q = 0.1 (dp_accounting warns: every later log line printed twice)",
        8,
        [
            "epsilon",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.1",
            "--steps",
            "6",
            "--delta",
            "1e-5",
        ],
        expect=0,
    ),
    Entry(
        "epsilon at q = 1e-16 (dp_accounting's warnings)",
        8,
        [
            "epsilon",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "2",
            "--sampling-rate",
            "1e-16",
            "--steps",
            "10",
            "--delta",
            "1e-5",
        ],
        expect=0,
    ),
    Entry(
        "train on a folder that is no dataset",
        8,
        ["train", "--run-json", json.dumps(RUN), "--data", "FILE:no_results", "--out", "OUTDIR"],
    ),
    Entry("unknown accountant", 8, ["epsilon", "--accountant", "nope", *EPS]),
    # 9. the user's own data: each refused in one line naming the key, before any training
    Entry(
        "prepare-data: a CSV without the label column",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "csv_no_label",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: a CSV without a feature column",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "csv_no_feature",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: a CSV with an empty cell",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "csv_empty_cell",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: arrays with a label outside 0..K-1",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "arrays_test_label",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: arrays of a single class",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "arrays_one_class",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: arrays with NaN features",
        9,
        ["prepare-data", "--config", "FILE:own.yaml", "--dataset", "arrays_nan", "--out", "OUTDIR"],
    ),
    Entry(
        "prepare-data: arrays with inf features",
        9,
        ["prepare-data", "--config", "FILE:own.yaml", "--dataset", "arrays_inf", "--out", "OUTDIR"],
    ),
    Entry(
        "prepare-data: arrays with x and y of different lengths",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "arrays_length",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: arrays of dtype object",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "arrays_object",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: an image of another size",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "images_size",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: an image of another mode",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "images_mode",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: an empty class folder",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "images_empty_class",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: a test class not in train",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "images_test_class",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "prepare-data: a missing data file",
        9,
        [
            "prepare-data",
            "--config",
            "FILE:own.yaml",
            "--dataset",
            "missing_file",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry(
        "check-config: a CSV without the label column",
        9,
        ["check-config", "FILE:own_plan_column.yaml"],
    ),
    Entry("check-config: an image of another size", 9, ["check-config", "FILE:own_plan_size.yaml"]),
    # 10. the user's own model files and optimizers
    Entry("model file that does not import", 10, ["check-config", "FILE:model_import.yaml"]),
    Entry(
        "model file without the class named",
        10,
        ["train", "--config", "FILE:model_class.yaml", "--data", "DATA", "--out", "OUTDIR"],
    ),
    Entry(
        "model with model_args its class does not take",
        10,
        ["check-config", "FILE:model_args.yaml"],
    ),
    Entry(
        "model whose output size is not the number of classes",
        10,
        ["check-config", "FILE:model_output.yaml"],
    ),
    Entry(
        "model whose output size is not the number of classes, trained",
        10,
        ["train", "--config", "FILE:model_output_run.yaml", "--data", "DATA", "--out", "OUTDIR"],
    ),
    Entry(
        "model with a BatchNorm layer",
        10,
        ["train", "--config", "FILE:model_bn.yaml", "--data", "DATA", "--out", "OUTDIR"],
    ),
    Entry(
        "betas with optimizer sgd",
        10,
        [
            "train",
            "--run-json",
            json.dumps({**RUN, "betas": [0.9, 0.99]}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    Entry("momentum with optimizer adam", 10, ["check-config", "FILE:adam_momentum.yaml"]),
    Entry(
        "a phase with a key a phase does not set",
        10,
        [
            "train",
            "--run-json",
            json.dumps({**RUN, "phases": [{"steps": 2, "sampling": "shuffle"}]}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
        says=r"phases\[0\]\.sampling",
    ),
    Entry(
        "phases of a non-private method",
        10,
        [
            "train",
            "--run-json",
            json.dumps({**SGD, "phases": [{"steps": 2}]}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
        says="phases: method sgd",
    ),
    *[
        Entry(
            f"a pipeline run's phase with {what}",
            10,
            ["check-config", f"FILE:phase_{key}.yaml"],
            says=rf"runs\.a\.phases\[1\]\.{key}: .*{valid}",
        )
        for what, key, valid in [
            ("steps: 0", "steps", "minimum of 1"),
            ("a batch larger than the data", "batch_size", r"\[1, dataset_size=200\]"),
            ("σ = -1", "noise_multiplier", "minimum of 0"),
            ("lr = 0", "lr", "minimum of 0"),
        ]
    ],
    Entry(
        "a sweep of a run in phases",
        10,
        ["check-config", "FILE:phase_sweep.yaml"],
        says=r"sweeps\.s\.run: run 'a' is a run in phases",
    ),
    Entry(
        "lr_schedule step without lr_step_size",
        10,
        [
            "train",
            "--run-json",
            json.dumps({**RUN, "lr_schedule": "step"}),
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
        ],
    ),
    *[
        Entry(name, point, argv, expect, round=3, says=says, hold=hold, killed=killed, cheap=cheap)
        for name, point, argv, expect, says, hold, killed, cheap in [
            # 1. duplicate keys in every JSON dplab reads
            (
                "--run-json with noise_multiplier twice",
                1,
                ["train", "--run-json", DUP_RUN, "--data", "DATA", "--out", "OUTDIR"],
                2,
                "noise_multiplier' given twice",
                None,
                False,
                True,
            ),
            (
                "--run-json with a key twice inside a nested object",
                1,
                ["train", "--run-json", DUP_NESTED, "--data", "DATA", "--out", "OUTDIR"],
                2,
                "given twice",
                None,
                False,
                True,
            ),
            (
                "--dataset-json with a key twice",
                1,
                ["prepare-data", "--dataset-json", DUP_DATASET, "--out", "OUTDIR"],
                2,
                "train_size' given twice",
                None,
                False,
                True,
            ),
            (
                "--params-json with a key twice",
                1,
                [
                    "figure-table",
                    "sigma_vs_steps",
                    "--params-json",
                    '{"steps": [10, 20], "steps": [10, 30]}',
                    "--out",
                    "OUT.csv",
                ],
                2,
                "steps' given twice",
                None,
                False,
                True,
            ),
            (
                "--config-json with a key twice",
                1,
                [
                    "provenance",
                    "--config-json",
                    '{"seed": 1, "seed": 2}',
                    "--out",
                    "OUT.json",
                    "FILE:mini.yaml",
                ],
                2,
                "seed' given twice",
                None,
                False,
                True,
            ),
            (
                "--audit-json with a key twice",
                1,
                [
                    "audit",
                    "--audit-json",
                    '{"runs": 2, "runs": 4}',
                    "--data",
                    "DATA",
                    "--out",
                    "OUT.csv",
                ],
                2,
                "runs' given twice",
                None,
                False,
                True,
            ),
            (
                "sweep --summary with a second setting",
                1,
                [
                    "sweep",
                    "--summary",
                    "FILE:dup_summary.json",
                    "--accountants",
                    "rdp",
                    "--points",
                    "3",
                    "--out",
                    "OUT.csv",
                ],
                2,
                "setting' given twice",
                None,
                False,
                True,
            ),
            # 2. one run per output folder
            (
                "train into a folder another train holds",
                2,
                ["train", "--run-json", json.dumps(RUN), "--data", "DATA", "--out", "OUTDIR"],
                2,
                r"outDIR is being written by .*pid \d+",
                "OUTDIR",
                False,
                True,
            ),
            (
                "prepare-data into a folder another command holds",
                2,
                ["prepare-data", "--dataset-json", SYNTHETIC, "--out", "OUTDIR"],
                2,
                r"being written by .*pid \d+",
                "OUTDIR",
                False,
                True,
            ),
            (
                "train into a folder whose holder was killed (kill -9)",
                2,
                ["train", "--run-json", json.dumps(RUN), "--data", "DATA", "--out", "OUTDIR"],
                0,
                None,
                "OUTDIR",
                True,
                True,
            ),
            # 3. bounded before work
            (
                "check-config: alias bomb of 9 levels",
                3,
                ["check-config", "FILE:bomb9.yaml"],
                2,
                "YAML_NODES_MAX",
                None,
                False,
                True,
            ),
            (
                "check-config: alias bomb of 6 levels",
                3,
                ["check-config", "FILE:bomb6.yaml"],
                2,
                "YAML_NODES_MAX",
                None,
                False,
                True,
            ),
            (
                "check-config: alias bomb of 5 levels under an unknown key",
                3,
                ["check-config", "FILE:bomb5.yaml"],
                2,
                "unknown key",
                None,
                False,
                True,
            ),
            (
                "check-config: an alias inside its own anchor",
                3,
                ["check-config", "FILE:recursive.yaml"],
                2,
                "recursive",
                None,
                False,
                True,
            ),
            (
                "check-config: 100 000 nested [",
                3,
                ["check-config", "FILE:deep.yaml"],
                2,
                "DEPTH_MAX",
                None,
                False,
                True,
            ),
            (
                "--run-json of 100 000 nested [",
                3,
                ["train", "--run-json", "[" * 100_000, "--data", "DATA", "--out", "OUTDIR"],
                2,
                "DEPTH_MAX",
                None,
                False,
                True,
            ),
            (
                "mf banded_toeplitz T = 1e6, bands = 1e5",
                3,
                ["mf", "--strategy", "banded_toeplitz", "--steps", "1000000", "--bands", "100000"],
                2,
                "MAX_WORK",
                None,
                False,
                True,
            ),
            (
                "train dp_mf banded_toeplitz T = 1e6, bands = 1e5",
                3,
                ["check-config", "FILE:toeplitz_work.yaml"],
                2,
                "MAX_WORK",
                None,
                False,
                True,
            ),
            # 4. every flag and key used, or refused
            *[
                (
                    f"individual_order {order} without individual_budget",
                    4,
                    [
                        "train",
                        "--run-json",
                        json.dumps({**RUN, "individual_order": order, **more}),
                        "--data",
                        "DATA",
                        "--out",
                        "OUTDIR",
                    ],
                    2,
                    "individual_order: .*individual_budget",
                    None,
                    False,
                    True,
                )
                for order, more in ((1.0, {}), (-3, {}), (32, {"individual_epsilon": True}))
            ],
            *[
                (
                    f"mf {' '.join(flags)} without --delta",
                    4,
                    ["mf", "--strategy", "banded", "--steps", "100", "--bands", "4", *flags],
                    2,
                    "only with --delta",
                    None,
                    False,
                    True,
                )
                for flags in (
                    ["--sampling-rate", "0.1"],
                    ["--sampling", "cyclic_poisson"],
                    ["--neighbouring", "replace_one"],
                    ["--dataset-size", "1000", "--batch-size", "10"],
                )
            ],
            (
                "mf --dataset-size with --delta but no cyclic_poisson",
                4,
                [
                    "mf",
                    "--strategy",
                    "banded",
                    "--steps",
                    "100",
                    "--bands",
                    "4",
                    "--noise-multiplier",
                    "1",
                    "--delta",
                    "1e-5",
                    "--dataset-size",
                    "1000",
                ],
                2,
                "cyclic_poisson",
                None,
                False,
                True,
            ),
            (
                "mf --participations 50 --min-separation 10 --steps 100",
                4,
                [
                    "mf",
                    "--strategy",
                    "sqrt",
                    "--steps",
                    "100",
                    "--participations",
                    "50",
                    "--min-separation",
                    "10",
                ],
                2,
                r"participations: .*=10\]",
                None,
                False,
                True,
            ),
            (
                "mf --out dir/",
                4,
                ["mf", "--strategy", "sqrt", "--steps", "10", "--out", "OUTDIR/"],
                2,
                "ends with '/'",
                None,
                False,
                True,
            ),
            # 5. checked where it enters
            (
                "prepare-data: Fashion-MNIST with labels 200",
                5,
                ["prepare-data", "--dataset-json", "FASHION", "--out", "OUTDIR"],
                2,
                "labels hold .*200",
                None,
                False,
                True,
            ),
            *[
                (
                    f"prepare-data digits test_fraction {fraction}",
                    5,
                    [
                        "prepare-data",
                        "--dataset-json",
                        json.dumps({"kind": "digits", "test_fraction": fraction}),
                        "--out",
                        "OUTDIR",
                    ],
                    2,
                    "test_fraction: must leave",
                    None,
                    False,
                    True,
                )
                for fraction in (0.0001, 0.9999)
            ],
            (
                "check-config digits test_fraction 0.999, batch 1",
                5,
                ["check-config", "FILE:digits_999.yaml"],
                2,
                "test_fraction: must leave",
                None,
                False,
                True,
            ),
            (
                "train: saved factorization whose info is not JSON",
                5,
                [
                    "train",
                    "--run-json",
                    json.dumps(BLT),
                    "--data",
                    "DATA",
                    "--out",
                    "OUTDIR",
                    "--mf-cache",
                    "FILE:mf_bad_info",
                ],
                2,
                "not a JSON object",
                None,
                False,
                True,
            ),
            (
                "index over a claims.csv without the claims columns",
                5,
                ["index", "--results", "FILE:bad_claims", "--out", "OUT_index.txt"],
                2,
                "no 'verdict' column",
                None,
                False,
                True,
            ),
            (
                "provenance over a folder holding only a FIFO",
                5,
                ["provenance", "--config", "FILE:mini.yaml", "--out", "OUT.json", "FILE:fifo_only"],
                2,
                "FIFO",
                None,
                False,
                True,
            ),
            (
                "provenance over an empty folder",
                5,
                [
                    "provenance",
                    "--config",
                    "FILE:mini.yaml",
                    "--out",
                    "OUT.json",
                    "FILE:no_results",
                ],
                2,
                "holding no file",
                None,
                False,
                True,
            ),
            # 6. messages that say the right thing
            (
                "sigma: a risk target no σ reaches",
                6,
                [
                    "sigma",
                    "--accountant",
                    "pld",
                    "--sampling-rate",
                    "0.5",  # at 1 the closed form names the σ it needs (2.7e11)
                    "--steps",
                    "1",
                    "--tpr",
                    "0.0100000000001",
                    "--fpr",
                    "0.01",
                ],
                2,
                "no σ ≤ 1e\\+07 meets",
                None,
                False,
                True,
            ),
            (
                "mf blt --steps 1 --buffers 1",
                6,
                ["mf", "--strategy", "blt", "--steps", "1", "--buffers", "1"],
                2,
                "steps: must be >= 2",
                None,
                False,
                True,
            ),
            (
                "train target_tpr without target_fpr",
                6,
                [
                    "train",
                    "--run-json",
                    json.dumps({**RUN, "noise_multiplier": None, "target_tpr": 0.5}),
                    "--data",
                    "DATA",
                    "--out",
                    "OUTDIR",
                ],
                2,
                "target_tpr and target_fpr go together",
                None,
                False,
                True,
            ),
            (
                "train target_tpr below target_fpr",
                6,
                [
                    "train",
                    "--run-json",
                    json.dumps(
                        {**RUN, "noise_multiplier": None, "target_tpr": 0.05, "target_fpr": 0.1}
                    ),
                    "--data",
                    "DATA",
                    "--out",
                    "OUTDIR",
                ],
                2,
                "exceed target_fpr",
                None,
                False,
                True,
            ),
            (
                "train --data DIR/train.npz",
                6,
                [
                    "train",
                    "--run-json",
                    json.dumps(RUN),
                    "--data",
                    "DATA/train.npz",
                    "--out",
                    "OUTDIR",
                ],
                2,
                r"is a file; give the folder",
                None,
                False,
                True,
            ),
            (
                "figure-table --inputs of a path outside results/",
                6,
                [
                    "figure-table",
                    "accountants_vs_pld",
                    "--params-json",
                    '{"sweep": "dp_sgd"}',
                    "--inputs",
                    "sweep=nope.csv",
                    "summary=nope.json",
                    "--out",
                    "OUT.csv",
                ],
                2,
                "under results/",
                None,
                False,
                True,
            ),
            (
                "index --results of a missing path",
                6,
                ["index", "--results", "OUT_missing", "--out", "OUT_index.txt"],
                2,
                "does not exist",
                None,
                False,
                True,
            ),
            (
                "index --results of a file",
                6,
                ["index", "--results", "FILE:mini.yaml", "--out", "OUT_index.txt"],
                2,
                "is a file",
                None,
                False,
                True,
            ),
        ]
    ],
]

#: a model file of the list: a network on the synthetic data's 5 features, and three bad ones
MODELS = """from torch import nn


class Net(nn.Module):
    def __init__(self, input_shape, classes):
        super().__init__()
        self.out = nn.Linear(input_shape[0], classes)

    def forward(self, x):
        return self.out(x)


class Seven(Net):
    def __init__(self, input_shape):
        super().__init__(input_shape, 7)


class Normed(nn.Module):
    def __init__(self, input_shape, classes):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(input_shape[0], 4), nn.BatchNorm1d(4), nn.Linear(4, classes)
        )

    def forward(self, x):
        return self.layers(x)
"""


def files(folder: Path, data: Path, table: Path) -> dict[str, Path]:
    """The input files the list names (FILE:<name>), written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    single = yaml.safe_dump(RUN, sort_keys=False)
    texts = {
        "dup_run.yaml": MINI
        + "  a: {method: sgd, model: logreg, dataset: synthetic, steps: 6, batch_size: 20}\n",
        "dup_key.yaml": MINI + "    steps: 3\n",
        "dup_single.yaml": single + "lr: 5.0\n",
        "mini.yaml": MINI,
        "cut.csv": table.read_text()[: int(0.6 * len(table.read_text()))],
        "cut_rows.csv": "".join(table.read_text().splitlines(keepends=True)[:-2]),
        "empty": "",
        "cut_summary.json": (data.parent / "run" / "summary.json").read_text()[:300],
        "lr_inf.yaml": MINI.replace("lr: 0.5", "lr: .inf"),
        "blt_cyclic_poisson.yaml": MINI.replace(
            "method: dp_sgd",
            "method: dp_mf\n    strategy: blt\n    buffers: 2\n    sampling: cyclic_poisson",
        ).replace("accountant: rdp", "accountant: mf"),
        **{
            f"mf_{name}.yaml": MINI.replace("method: dp_sgd", "method: dp_mf\n    " + keys)
            .replace("accountant: rdp", "accountant: mf")
            .replace("batch_size: 20", f"batch_size: {batch}")
            for name, keys, batch in [
                (
                    "cyclic_replace_one",
                    "strategy: banded\n    bands: 2\n    sampling: cyclic_poisson\n"
                    "    min_separation: 4\n    neighbouring: replace_one",
                    20,
                ),
                (
                    "sqrt_cyclic",
                    "strategy: sqrt\n    sampling: cyclic_poisson\n    min_separation: 4",
                    20,
                ),
                (
                    "bands_over_b",
                    "strategy: banded\n    bands: 6\n    neighbouring: replace_one",
                    40,
                ),
                ("batch_fix", "strategy: banded\n    bands: 2", 21),
            ]
        },
        "pld_delta.yaml": MINI.replace("delta: 1.0e-5", "delta: 1.0e-300").replace(
            "accountant: rdp", "accountant: pld"
        ),
        "sigma_tiny.yaml": MINI.replace("noise_multiplier: 1.0", "noise_multiplier: 1.0e-320"),
        **{
            f"phase_{key}.yaml": MINI.replace(
                "    noise_multiplier: 1.0\n", f"    phases: [{PHASE}, {{{phase}}}]\n"
            )
            for key, phase in [
                ("steps", "steps: 0, noise_multiplier: 1.0"),
                ("batch_size", "steps: 3, batch_size: 500, noise_multiplier: 2.0"),
                ("noise_multiplier", "steps: 3, noise_multiplier: -1.0"),
                ("lr", "steps: 2, lr: 0, noise_multiplier: 1.0"),
            ]
        },
        "phase_sweep.yaml": MINI.replace("    noise_multiplier: 1.0\n", f"    phases: [{PHASE}]\n")
        + "sweeps:\n  s: {run: a, accountants: [rdp], points: 3}\n",
        "pld_delta_calibrated.yaml": MINI.replace("delta: 1.0e-5", "delta: 1.0e-300")
        .replace("accountant: rdp", "accountant: pld")
        .replace("noise_multiplier: 1.0", "target_epsilon: 1.0"),
    }
    models = folder / "models.py"
    models.write_text(MODELS)
    (folder / "broken.py").write_text(
        "import torch\nfrom torch import nn\nraise ImportError('no module named tensorflow')\n"
    )
    texts.update(
        {
            "model_import.yaml": MINI.replace(
                "model: logreg", f"model: {folder / 'broken.py'}:Net"
            ),
            "model_class.yaml": single.replace("model: logreg", f"model: {models}:Network"),
            "model_args.yaml": MINI.replace(
                "model: logreg", f"model: {models}:Net\n    model_args: {{depth: 3}}"
            ),
            "model_output.yaml": MINI.replace("model: logreg", f"model: {models}:Seven"),
            "model_output_run.yaml": single.replace("model: logreg", f"model: {models}:Seven"),
            "model_bn.yaml": single.replace("model: logreg", f"model: {models}:Normed"),
            "adam_momentum.yaml": MINI.replace(
                "lr: 0.5", "lr: 0.5\n    optimizer: adam\n    momentum: 0.9"
            ),
            "bomb9.yaml": bomb(9),
            "bomb6.yaml": bomb(6),
            "bomb5.yaml": bomb(5),
            "recursive.yaml": "datasets: &a [*a]\n",
            "deep.yaml": "datasets: " + "[" * 100_000 + "\n",
            "toeplitz_work.yaml": MINI.replace(
                "method: dp_sgd",
                "method: dp_mf\n    strategy: banded_toeplitz\n"
                "    bands: 100000\n    min_separation: 100000",
            )
            .replace("steps: 6", "steps: 1000000")
            .replace("accountant: rdp", "accountant: mf"),
            "digits_999.yaml": MINI.replace(
                "synthetic: {kind: synthetic, train_size: 200, test_size: 50, dim: 5}",
                "synthetic: {kind: digits, test_fraction: 0.999}",
            ).replace("batch_size: 20", "batch_size: 1"),
            "dup_summary.json": '{"setting": {"noise_multiplier": 100},'
            + (data.parent / "run" / "summary.json").read_text()[1:],
        }
    )
    paths = {}
    for name, text in texts.items():
        (folder / name).write_text(text)
        paths[name] = folder / name
    paths["summary.json"] = data.parent / "run" / "summary.json"  # prepare() trains it
    paths.update(own_files(folder / "own"))
    (folder / "no_results").mkdir(exist_ok=True)
    paths["no_results"] = folder / "no_results"
    paths["mf"] = data.parent / "mf"
    for name, (key, change) in _tampered().items():  # a --mf-cache folder of one saved file each
        with np.load(data.parent / "mf" / key) as saved:
            arrays = dict(saved)
        arrays.update({array: edit(arrays[array]) for array, edit in change.items()})
        (folder / name).mkdir(exist_ok=True)
        np.savez(folder / name / key, **arrays)
        paths[name] = folder / name
    fifo = folder / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    paths["fifo"] = fifo
    (folder / "fifo_only").mkdir(exist_ok=True)
    if not (folder / "fifo_only" / "fifo").exists():
        os.mkfifo(folder / "fifo_only" / "fifo")
    paths["fifo_only"] = folder / "fifo_only"
    paths["fashion"] = fashion(folder / "fashion")
    paths["bad_claims"] = folder / "bad_claims"
    (folder / "bad_claims" / "tables").mkdir(parents=True, exist_ok=True)
    (folder / "bad_claims" / "tables" / "claims.csv").write_text("a,table_rows\n1,1\n")
    (folder / "bad_claims" / "figures").mkdir(exist_ok=True)
    for drawing in ("claims.pdf", "claims.png"):  # complete but for the table's columns
        (folder / "bad_claims" / "figures" / drawing).write_bytes(b"drawn")
    paths["mf_bad_info"] = folder / "mf_bad_info"
    paths["mf_bad_info"].mkdir(exist_ok=True)
    with np.load(data.parent / "mf" / MF_FILE) as saved:
        np.savez(paths["mf_bad_info"] / MF_FILE, **{**saved, "info": np.array("{not JSON")})
    return paths


def own_files(folder: Path) -> dict[str, Path]:
    """Bad data of the own dataset kinds (arrays, csv, image_folder) under ``folder`` and the
    configs naming them: own.yaml (one dataset each, for prepare-data), own_plan_*.yaml (one bad
    dataset with a run on it, for check-config)."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    x, y = np.zeros((6, 2)), np.array([0, 1] * 3)
    arrays = {
        "arrays_test_label": dict(x_train=x, y_train=y, x_test=x[:2], y_test=np.array([0, 5])),
        "arrays_one_class": dict(x_train=x, y_train=0 * y),
        "arrays_length": dict(x_train=x, y_train=y[:4]),
        "arrays_nan": dict(x_train=x + np.nan, y_train=y),
        "arrays_inf": dict(x_train=x - np.inf, y_train=y),
        "arrays_object": dict(x_train=x.astype(object), y_train=y),
    }
    datasets = {"missing_file": {"kind": "arrays", "path": str(folder / "none.npz")}}
    for name, content in arrays.items():
        np.savez(folder / f"{name}.npz", **content)
        datasets[name] = {"kind": "arrays", "path": str(folder / f"{name}.npz")}
    tables = {
        "csv_no_label": ("a,b\n1,x\n2,y\n", {"label": "y"}),
        "csv_no_feature": ("a,y\n1,0\n2,1\n", {"label": "y", "features": ["a", "b"]}),
        "csv_empty_cell": ("a,y\n1,0\n,1\n", {"label": "y"}),
    }
    for name, (text, keys) in tables.items():
        (folder / f"{name}.csv").write_text(text)
        datasets[name] = {"kind": "csv", "path": str(folder / f"{name}.csv"), **keys}
    layouts = {
        "images_size": ({"train": {"a": 2, "b": 2}}, (5, 5), "L"),
        "images_mode": ({"train": {"a": 2, "b": 2}}, (4, 4), "RGB"),
        "images_empty_class": ({"train": {"a": 2, "b": 0}}, (4, 4), "L"),
        "images_test_class": ({"train": {"a": 2, "b": 2}, "test": {"c": 1}}, (4, 4), "L"),
    }
    for name, (layout, size, mode) in layouts.items():
        for part, classes in layout.items():
            for cls, count in classes.items():
                (folder / name / part / cls).mkdir(parents=True, exist_ok=True)
                for i in range(count):
                    Image.new(mode, size).save(folder / name / part / cls / f"{i}.png")
        datasets[name] = {
            "kind": "image_folder",
            "path": str(folder / name),
            "size": [4, 4],
            "channels": 1,
        }
    paths = {"own.yaml": folder / "own.yaml"}
    paths["own.yaml"].write_text(yaml.safe_dump({"datasets": datasets}))
    run = {"method": "sgd", "model": "logreg", "steps": 1, "batch_size": 1}
    for plan, name in (
        ("own_plan_column.yaml", "csv_no_label"),
        ("own_plan_size.yaml", "images_size"),
    ):
        paths[plan] = folder / plan
        paths[plan].write_text(
            yaml.safe_dump(
                {"datasets": {name: datasets[name]}, "runs": {"r": {**run, "dataset": name}}}
            )
        )
    return paths


def _tampered() -> dict:
    """--mf-cache folders of one saved factorization, edited: name → (file, {array: edit})."""

    def swap(rows):
        return rows[::-1].copy()

    def perturb(rows):
        rows = rows.copy()
        rows[0, 1] *= 1 + 1e-6
        return rows

    def info(text):
        return json.dumps({**json.loads(str(text)), "loss": 1.0})

    def edit(C):
        C = C.copy()
        C[2, 1] *= 1.01
        return C

    blt, banded = MF_FILES
    return {
        "mf_scaled": (blt, {"coefficients": lambda c: c * 0.01}),
        "mf_scaled_up": (blt, {"coefficients": lambda c: c * 100}),
        "mf_swapped": (blt, {"section_numerators": swap, "section_denominators": swap}),
        "mf_perturbed": (blt, {"section_denominators": perturb}),
        "mf_loss": (blt, {"info": info}),
        "mf_edited": (banded, {"encoder": edit}),
        "mf_bands": (banded, {"bands": lambda bands: bands * 0 + 1}),
    }


def bomb(levels: int) -> str:
    """A YAML "billion laughs": ``levels`` anchors, each a list of 9 aliases of the one before
    (9^levels strings once expanded), under keys of no pipeline config."""
    lines = ["lol0: &a0 [" + ", ".join(['"lol"'] * 9) + "]"]
    lines += [f"lol{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def fashion(folder: Path) -> Path:
    """The four IDX files of a (Fashion-)MNIST folder of 20 training and 10 test images whose
    training labels are 200, not a class 0..9."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, count, label in (("train", 20, 200), ("t10k", 10, 1)):
        (folder / f"{stem}-images-idx3-ubyte").write_bytes(
            struct.pack(">4I", 0x803, count, 28, 28) + bytes(count * 28 * 28)
        )
        (folder / f"{stem}-labels-idx1-ubyte").write_bytes(
            struct.pack(">2I", 0x801, count) + bytes([label]) * count
        )
    return folder


def _audit(**change) -> dict:
    audit = yaml.safe_load(CONFIG.read_text())["audits"]["digits_last_iterate_convex"]
    return {**audit, "dataset": "synthetic", "steps": [2], "runs": 2, "seed": 0, **change}


@dataclass
class Result:
    code: int | None  # None: timed out
    stderr: str
    seconds: float  # CPU seconds
    left: list[str]


def classify(entry: Entry, result: Result) -> list[str]:
    """The classes ``result`` falls in (empty: as it should be)."""
    if result.code is None:
        return ["hang"]
    found = []
    if result.code == 0 and entry.expect != 0:
        found.append("silent")
    elif result.code != entry.expect:
        found.append("exit_code")
    if result.code == 2 and entry.expect == 2 and result.seconds > LATE:
        found.append("late")
    if result.code != 0 and result.left:
        found.append("half_written")
    lines = probe.error_lines(result.stderr)
    if len(lines) > (0 if result.code == 0 else 1):
        found.append("lines")
    if entry.says and not (lines and re.search(entry.says, lines[-1])):
        found.append("message")
    return found


def resolve(
    argv: list[str], out: Path, data: Path, table: Path, paths: dict[str, Path]
) -> list[str]:
    resolved = []
    for token in argv:
        if token.startswith("OUT"):
            token = str(out / ("out" + token[3:])) + ("/" if token.endswith("/") else "")
        elif token.startswith("DATA/"):
            token = str(data / token[5:])
        elif token.startswith("FILE:"):
            name = token[5:]
            token = name if name.startswith("/") else str(paths[name])
        resolved.append(
            {
                "DATA": str(data),
                "DIGITS": str(data.parent / "digits"),
                "TABLE": str(table),
                "AUDIT_RUNS": json.dumps(_audit(runs=10**9)),
                "AUDIT_GOOD": json.dumps(_audit(dataset="digits", steps=[1, 4], runs=4)),
                "FASHION": json.dumps(
                    {"kind": "fashion_mnist", "path": str(paths.get("fashion", ""))}
                ),
            }.get(token, token)
        )
    return resolved


def run_entry(
    entry: Entry,
    work: Path,
    data: Path,
    table: Path,
    paths: dict[str, Path],
    call: Callable[[list[str], float], tuple[int | None, str, float]],
    timeout: float,
) -> Result | None:
    """Run ``entry`` with ``call(argv, timeout)`` → (exit code or None, stderr, CPU seconds);
    ``None`` where its full disk cannot be mounted."""
    out = work / f"out_{ENTRIES.index(entry)}"
    shutil.rmtree(out, ignore_errors=True)
    if entry.mount and not probe.mount(out, entry.mount):
        return None
    holder = (
        probe.hold(resolve([entry.hold], out, data, table, paths)[0], entry.killed)
        if entry.hold
        else None
    )
    try:
        code, stderr, seconds = call(resolve(entry.argv, out, data, table, paths), timeout)
    finally:
        if holder is not None:
            holder.communicate()  # its stdin closed: it lets go of the folder and ends
    try:
        left = probe.written(out)
    finally:
        if entry.mount:
            probe.umount(out)
    return Result(code, stderr, seconds, left)


#: `dplab ARGV` that then appends its CPU seconds to the file $BAD_INPUTS_CPU
CHILD = """import os, resource, sys
from dplab.cli import main
try:
    sys.exit(main(sys.argv[1:]))
finally:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["BAD_INPUTS_CPU"], "a") as out:
        out.write(f"{usage.ru_utime + usage.ru_stime}\\n")
"""


def subprocess_call(argv: list[str], timeout: float) -> tuple[int | None, str, float]:
    """``dplab ARGV`` in a child limited to :data:`probe.CPU_LIMIT` CPU seconds and ``timeout`` wall
    seconds: (exit code, or None where a limit stopped it; stderr; the child's CPU seconds)."""

    def limit_cpu():
        resource.setrlimit(resource.RLIMIT_CPU, (probe.CPU_LIMIT, probe.CPU_LIMIT + 5))

    with tempfile.NamedTemporaryFile("r", suffix=".cpu") as cpu:
        try:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                preexec_fn=limit_cpu,
                env={**os.environ, "BAD_INPUTS_CPU": cpu.name},
            )
        except subprocess.TimeoutExpired as err:
            stderr = (
                err.stderr.decode(errors="replace")
                if isinstance(err.stderr, bytes)
                else (err.stderr or "")
            )
            return None, stderr, float(probe.CPU_LIMIT)
        seconds = float(cpu.read().strip() or probe.CPU_LIMIT)
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return None, done.stderr, seconds
    return done.returncode, done.stderr, seconds


def prepare(
    work: Path, call: Callable[[list[str], float], tuple[int | None, str, float]]
) -> tuple[Path, Path, dict]:
    """A prepared synthetic dataset (and digits, beside it), a figure table and the list's files
    under ``work``."""
    data, table = work / "data", work / "table.csv"
    spec = json.dumps({"kind": "synthetic", "train_size": 200, "test_size": 50, "dim": 5})
    for argv in (
        ["prepare-data", "--dataset-json", spec, "--dataset", "synthetic", "--out", str(data)],
        [
            "prepare-data",
            "--dataset-json",
            '{"kind": "digits"}',
            "--dataset",
            "digits",
            "--out",
            str(work / "digits"),
        ],
        ["figure-table", "gaussian_sigma", "--params-json", "{}", "--out", str(table)],
        ["train", "--run-json", json.dumps(RUN), "--data", str(data), "--out", str(work / "run")],
        *(["mf", *flags, "--out", str(work / "mf" / key)] for key, flags in MF_FILES.items()),
    ):
        code, err, _ = call(argv, 600)
        if code != 0:
            raise SystemExit(f"setup failed: dplab {' '.join(argv)}: {err}")
    return data, table, files(work / "files", data, table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--timeout",
        type=float,
        default=probe.WALL_LIMIT,
        help="seconds per input (default %(default)s)",
    )
    parser.add_argument(
        "--only", nargs="*", default=None, help="run only entries whose name contains one of these"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="entries run at once (default %(default)s)"
    )
    parser.add_argument(
        "--round", type=int, default=None, help="run only the entries of this round (2 or 3)"
    )
    args = parser.parse_args(argv)
    entries = [
        e
        for e in ENTRIES
        if (not args.only or any(s in e.name for s in args.only)) and args.round in (None, e.round)
    ]
    counts = dict.fromkeys(CLASSES, 0)
    with tempfile.TemporaryDirectory(prefix="bad_inputs.") as tmp:
        work = Path(tmp)
        data, table, paths = prepare(work, subprocess_call)
        pool = ThreadPoolExecutor(args.jobs)
        results = pool.map(
            lambda e: run_entry(e, work, data, table, paths, subprocess_call, args.timeout), entries
        )
        for entry, result in zip(entries, results):  # printed as they come, in order
            if result is None:
                where = f"round {entry.round} point {entry.point}  {entry.name}"
                print(f"skip      {where} (cannot mount a tmpfs here)")
                continue
            found = classify(entry, result)
            for name in found:
                counts[name] += 1
            last = (probe.error_lines(result.stderr) or [""])[-1][:110]
            print(
                f"{','.join(found) or 'ok':<12} round {entry.round} point {entry.point}  "
                f"exit {result.code}  {result.seconds:5.1f} s CPU  {entry.name}  | {last}",
                flush=True,
            )
        pool.shutdown()
    print(f"\n{len(entries)} inputs; " + ", ".join(f"{name}: {counts[name]}" for name in CLASSES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
