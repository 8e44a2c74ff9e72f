"""Two runs of one config with ``noise_rng: portable``, one on the CPU and one on a GPU: the ε and
σ they print, and how far their metrics and final parameters lie apart (docs/training.md,
Determinism; ``benchmarks/gpu_check.sh`` runs it).

    PYTHONPATH=src python benchmarks/gpu_compare.py CPU_RUN_DIR GPU_RUN_DIR
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import torch


def main(cpu_dir: str, gpu_dir: str) -> None:
    dirs = {"cpu": Path(cpu_dir), "gpu": Path(gpu_dir)}
    summary = {d: json.loads((p / "summary.json").read_text()) for d, p in dirs.items()}
    print("devices:", summary["cpu"]["environment"], summary["gpu"]["environment"])
    print(
        "same ε:", summary["cpu"]["epsilon"] == summary["gpu"]["epsilon"], summary["cpu"]["epsilon"]
    )
    print(
        "same σ:",
        summary["cpu"]["noise_multiplier"] == summary["gpu"]["noise_multiplier"],
        summary["cpu"]["noise_multiplier"],
    )
    rows = {d: list(csv.DictReader((p / "metrics.csv").open())) for d, p in dirs.items()}
    for key in ("train_loss", "test_loss", "test_accuracy"):
        a, b = (np.array([float(r[key]) for r in rows[d]]) for d in ("cpu", "gpu"))
        print(
            f"{key}: max |cpu − gpu| {np.abs(a - b).max():.3g}, max relative"
            f" {(np.abs(a - b) / np.abs(a)).max():.3g}; final {a[-1]!r} vs {b[-1]!r}"
        )
    weights = {
        d: torch.load(p / "model.pt", map_location="cpu", weights_only=True)
        for d, p in dirs.items()
    }
    if isinstance(weights["cpu"], dict):
        tensors = {k: v for k, v in weights["cpu"].items() if isinstance(v, torch.Tensor)}
        gap = max(float((v - weights["gpu"][k]).abs().max()) for k, v in tensors.items())
        scale = max(float(v.abs().max()) for v in tensors.values())
        print(
            f"final parameters: max |Δw| {gap:.3g} (largest |w| {scale:.3g}) over {len(tensors)}"
            " tensors"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
