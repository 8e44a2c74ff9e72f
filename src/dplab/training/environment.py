"""What a run's bytes depend on besides its config and its data (docs/training.md, Determinism).

Measured with this project's CPU build of torch (MKL for BLAS): the same full-batch MLP run on
digits ends with different metrics.csv, summary.json and model.pt bytes with 1 and with 2 torch
threads, and with torch's or MKL's kernels held to another instruction set
(``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``) or MKL's reproducibility mode
(``MKL_CBWR``).  :func:`environment` records these, as torch reports them when the run starts:
summary.json states them, and a checkpoint is resumed only under the same ones
(:mod:`dplab.training.checkpoint`).  On a GPU the numbers come from the device's kernels
instead: its name and the CUDA version, not the CPU's thread count, are recorded.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

#: environment variables that change which CPU kernels run (recorded only when set)
KERNEL_VARIABLES = ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS")


def environment(device: torch.device) -> dict:
    """torch's version and the device; on the CPU the threads torch uses, the CPU's model, the
    instruction set torch dispatches to and any of :data:`KERNEL_VARIABLES` that is set; on a GPU
    its name and the CUDA version."""
    env = {"torch": str(torch.__version__), "device": device.type}
    if device.type == "cuda":
        return {**env, "gpu": torch.cuda.get_device_name(device), "cuda": torch.version.cuda}
    env.update(
        threads=torch.get_num_threads(),
        cpu=cpu_model(),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
    )
    env.update({k.lower(): os.environ[k] for k in KERNEL_VARIABLES if k in os.environ})
    return env


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what :mod:`platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def differences(recorded: dict | None, current: dict) -> str:
    """``key=recorded`` for every entry in which ``recorded`` differs from ``current``."""
    recorded = recorded or {}
    keys = sorted(set(recorded) | set(current))
    return ", ".join(
        f"{k}={recorded.get(k)} (now {current.get(k)})"
        for k in keys
        if recorded.get(k) != current.get(k)
    )
