"""Per-example Conv2d weight gradients: unfold + bmm vs one grouped convolution (batch as groups).

    PYTHONPATH=src python benchmarks/conv_per_example.py [--threads 2] [--batch 128] [--device cuda]

Prints one JSON object per layer shape (input channels, input side, output channels; 3×3,
padding 1): the median ms of each way, their ratio, and the way ``per_example.grouped_wins``
takes on this device.  It takes the grouped convolution on CPU for 8–32 input channels, where
this measured it faster, and on CUDA from compute capability 7.0 on (not yet measured here).
"""

import argparse
import json
import statistics
import time

import torch
from torch import nn

from dplab.training.per_example import _conv_per_example, _unfold, grouped_wins

SHAPES = [(1, 28, 16), (3, 32, 16), (4, 28, 8), (8, 16, 16), (16, 14, 32), (32, 8, 64), (64, 8, 64)]


def median_ms(fn, rounds: int, device: torch.device) -> float:
    def timed():
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    timed()
    return 1e3 * statistics.median(timed() for _ in range(rounds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    for c, side, p in SHAPES:
        conv = nn.Conv2d(c, p, 3, padding=1).to(device)
        a = torch.randn(args.batch, c, side, side, device=device)
        g = torch.randn(args.batch, p, side, side, device=device)
        unfold = median_ms(
            lambda: torch.bmm(g.flatten(2), _unfold(a, conv).transpose(1, 2)), args.rounds, device
        )
        grouped = median_ms(lambda: _conv_per_example(a, g, conv), args.rounds, device)
        print(
            json.dumps(
                {
                    "device": name,
                    "in_channels": c,
                    "side": side,
                    "out_channels": p,
                    "batch": args.batch,
                    "unfold_bmm_ms": round(unfold, 2),
                    "grouped_ms": round(grouped, 2),
                    "unfold_over_grouped": round(unfold / grouped, 2),
                    "engine_takes": "grouped" if grouped_wins(device, c) else "unfold_bmm",
                }
            )
        )


if __name__ == "__main__":
    main()
