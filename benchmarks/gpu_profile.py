"""Kernels per training step on a CUDA GPU: the non-private step vs the engine's DP step of
``dp_step.py`` (logistic regression, 004's MLP, Tramèr & Boneh's tanh CNN; batch 256), with
torch.profiler: how many kernels each step launches, their summed time, and the ops that take
the host's time.  Where the DP step's time over the non-private one is launches and host work
rather than kernel time, the GPU waits on Python.

    PYTHONPATH=src python benchmarks/gpu_profile.py
"""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from dp_step import Steps

STEPS = 10


def main() -> None:
    device = torch.device("cuda")
    for name in ("logreg", "mlp004", "tanh_cnn"):
        bench = Steps(name, ["non_private", "engine_dp"], 256, device)
        for method in ("non_private", "engine_dp"):
            for _ in range(3):
                bench.fns[method]()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(STEPS):
                    bench.fns[method]()
                torch.cuda.synchronize()
            kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            print(
                f"== {name} {method}: {len(kernels) / STEPS:.0f} kernels per step, "
                f"{sum(e.device_time for e in kernels) / STEPS:.0f} µs of kernel time per step"
            )
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
