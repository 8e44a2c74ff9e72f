"""Progress in logs: lines at a bounded interval off a terminal, with the
count, the job's status, elapsed and time left; every long job (train, sweep,
audit, mf) writes them."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from dplab import progress
from dplab.accounting import Setting
from dplab.accounting.sweep import sweep
from dplab.audit import membership
from dplab.errors import DPLabError
from dplab.mf import factorizations
from dplab.mf.workload import prefix_sum
from dplab.progress import INTERVAL_ENV, Progress
from dplab.training import data


def _lines(caplog, what: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"dplab {what}")]


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.INFO, logger="dplab")
    return caplog


def test_lines_only_every_interval_with_elapsed_and_time_left(monkeypatch, logs):
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    monkeypatch.setenv(INTERVAL_ENV, "30")
    job = Progress("job", 100, done=10)  # a resumed job: the rate counts from step 10
    for done, t in [(20, 110.0), (30, 129.0), (40, 131.0), (50, 150.0), (60, 161.5), (70, 170.0)]:
        now[0] = t
        job.update(done, f"status at {done}")
    now[0] = 175.0
    job.update(100)
    job.close()
    lines = _lines(logs, "job")
    assert lines[0] == "dplab job: starting at step 10/100"
    # 31 s after the start, 30 steps done: 60 left at 31/30 s each = 62 s
    assert (
        lines[1] == "dplab job: step 40/100 (40.0%) | status at 40 | elapsed 0:00:31, left ~0:01:02"
    )
    # 61.5 s for 50 steps: 40 left = 49.2 s
    assert (
        lines[2] == "dplab job: step 60/100 (60.0%) | status at 60 | elapsed 0:01:02, left ~0:00:49"
    )
    assert lines[3].startswith(
        "dplab job: step 100/100 (100.0%) | status at 70 | elapsed 0:01:15, left ~0:00:00"
    )
    assert len(lines) == 4  # the end was written by update: close adds nothing


def test_close_writes_the_last_count_and_bad_interval_names_the_variable(monkeypatch, logs):
    monkeypatch.setenv(INTERVAL_ENV, "3600")
    job = Progress("solver", 1000, unit="iteration")
    job.update(17, "gap 1e-9")
    job.close()  # an iterative solver stopping early still logs where it stopped
    assert _lines(logs, "solver")[-1].startswith(
        "dplab solver: iteration 17/1000 (1.7%) | gap 1e-9 | elapsed"
    )
    for bad in ("-1", "soon", "nan"):
        monkeypatch.setenv(INTERVAL_ENV, bad)
        with pytest.raises(DPLabError, match=f"{INTERVAL_ENV}: must be a number of seconds >= 0"):
            Progress("x", 1)


def test_sweep_logs_each_accountant_with_its_epsilon(monkeypatch, logs):
    monkeypatch.setenv(INTERVAL_ENV, "0")
    setting = Setting(noise_multiplier=1.0, sampling_rate=0.01, steps=100)
    table = sweep(setting, 1e-5, ["rdp", "pabi"], np.array([1, 10, 100]))
    lines = _lines(logs, "sweep")
    eps = table[(table.accountant == "rdp") & (table.steps == 100)].epsilon.item()
    assert (
        f"accountant 1/2 (50.0%) | rdp: ε at T=100 = {eps:.4g} (upper bound, δ=1e-05, add_remove,"
        " poisson sampling)" in lines[1]
    )
    assert "accountant 2/2 (100.0%) | pabi: excluded (" in lines[2]


def test_factorizations_log_their_iterations(monkeypatch, logs):
    monkeypatch.setenv(INTERVAL_ENV, "0")
    fact = factorizations.optimal(prefix_sum(30))
    lines = _lines(logs, "mf optimal T=30")
    assert len(lines) == fact.info["iterations"] + 1
    gap = fact.info["gap_history"][-1]
    assert (
        f"iteration {fact.info['iterations']}/1000" in lines[-1]
        and f"relative duality gap {gap:.3g}" in lines[-1]
    )
    fact = factorizations.banded(prefix_sum(30), 3)
    lines = _lines(logs, "mf banded T=30 bands=3")
    assert (
        len(lines) == fact.info["iterations"] + 1
        and "mean squared error per unit noise" in lines[-1]
    )


def test_audit_logs_run_steps_per_variant_and_chunk(monkeypatch, logs, tmp_path):
    cfg = data.resolve_dataset({"kind": "digits"}, "digits")
    data.write(tmp_path, *data.prepare(cfg, "digits"))
    monkeypatch.setenv(INTERVAL_ENV, "0")
    monkeypatch.setattr(
        membership, "upper_bounds", lambda *args: ({}, {}, {})
    )  # not under test here
    entry = {
        "name": "tiny",
        "threat_model": "input_canary",
        "dataset": "digits",
        "dataset_size": 16,
        "runs": 4,
        "chunk": 2,
        "steps": [2],
        "run": {
            "model": "logreg",
            "lr": 0.5,
            "clip": 1.0,
            "noise_multiplier": 1.0,
            "batch_size": 4,
            "delta": 1e-5,
        },
        "methods": {"dp_sgd": {}},
        "confidence": 0.95,
        "canary_norm": 16.0,
        "canary_label": 0,
    }
    membership.run_audit(entry, data.load(tmp_path), 0)
    lines = _lines(logs, "audit tiny")
    counts = [int(re.search(r"run-step (\d+)/8 ", line).group(1)) for line in lines[1:]]
    assert counts == [2, 4, 6, 8, 8]  # 2 chunks × 2 steps, 2 runs each; then the variant's summary
    assert "variant dp_sgd, runs 3–4 of 4, step 2/2" in lines[-2]
    assert "variant dp_sgd (input_canary) done: 4 runs × 2 steps" in lines[-1]
