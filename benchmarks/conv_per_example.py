"""Per-example Conv2d weight gradients: unfold + bmm vs one grouped convolution (batch as groups).

    PYTHONPATH=src python benchmarks/conv_per_example.py [--threads 2] [--batch 128]

Prints one JSON object per layer shape (input channels, input side, output channels; 3×3,
padding 1): the median ms of each way and their ratio.  ``per_example._grouped_cheaper`` takes the
grouped convolution on CPU for 8–32 input channels, where this measured it faster.
"""

import argparse
import json
import statistics
import time

import torch
from torch import nn

from dplab.training.per_example import _conv_per_example, _unfold

SHAPES = [(1, 28, 16), (3, 32, 16), (4, 28, 8), (8, 16, 16), (16, 14, 32), (32, 8, 64), (64, 8, 64)]


def median_ms(fn, rounds: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for c, side, p in SHAPES:
        conv = nn.Conv2d(c, p, 3, padding=1)
        a, g = torch.randn(args.batch, c, side, side), torch.randn(args.batch, p, side, side)
        unfold = median_ms(lambda: torch.bmm(g.flatten(2), _unfold(a, conv).transpose(1, 2)), args.rounds)
        grouped = median_ms(lambda: _conv_per_example(a, g, conv), args.rounds)
        print(json.dumps({"in_channels": c, "side": side, "out_channels": p, "batch": args.batch,
                          "unfold_bmm_ms": round(unfold, 2), "grouped_ms": round(grouped, 2),
                          "unfold_over_grouped": round(unfold / grouped, 2)}))


if __name__ == "__main__":
    main()
