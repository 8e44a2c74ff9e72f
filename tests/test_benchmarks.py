"""The benchmarks run (their smallest setting): benchmarks/README.md's commands must not rot unseen."""

import json
import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_dp_step_times_every_model_it_builds(monkeypatch, capsys):
    """One round of the engine's DP step beside the non-private step, on the CPU, for the models
    built through the run settings (as `dplab train` builds them)."""
    monkeypatch.setattr(sys, "argv", ["dp_step.py", "--device", "cpu", "--batch", "4", "--rounds", "1", "--warmup", "0",
                                      "--no-memory", "--models", "logreg", "mlp004", "cnn", "tanh_cnn",
                                      "--methods", "non_private", "engine_dp"])
    runpy.run_path(str(BENCHMARKS / "dp_step.py"), run_name="__main__")
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["model"] for r in rows] == ["logreg", "mlp004", "cnn", "tanh_cnn"]
    assert [r["parameters"] for r in rows] == [7850, 101770, 6090, 26010]
    for r in rows:
        ms = r["median_ms"]
        assert ms["non_private"] > 0  # the ratio of the unrounded medians, printed to 3 decimals
        assert r["ratio"]["engine_dp"] == pytest.approx(ms["engine_dp"] / ms["non_private"], rel=1e-2, abs=2e-3)
