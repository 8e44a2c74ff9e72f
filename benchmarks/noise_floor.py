"""What one DP step's Gaussian noise costs on this CPU, against the non-private step.

    PYTHONPATH=src python benchmarks/noise_floor.py [--threads 2] [--rounds 300]

For each model of ``--models`` (:func:`dp_step.build_model`: logistic regression, 004's MLP), one
noise vector of the model's size is drawn by each way below, each draw right after one
non-private step (what a training step's draw follows), the ways interleaved round by round.
One JSON line per model: the medians in ms, their ratio to the non-private step's median, and ns
per number.

- ``dplab_philox``: :class:`dplab.philox.CpuGenerator`, the engine's draw since dplab 0.2.0
  (Philox4x32-10 and float32 Box–Muller in one vectorized C pass);
- ``torch_normal``: ``normal_`` on a CPU ``torch.Generator`` (MT19937, Box–Muller), the engine's
  draw until dplab 0.1.0;
- ``torch_uniform``: ``uniform_`` on it: the MT19937 stream alone, no Gaussian yet;
- ``numpy_normal``: numpy's ziggurat (``Generator(PCG64).standard_normal``, float32);
- ``numpy_bits``: ``SFC64.random_raw``, 32 random bits a number: no Gaussian yet;
- ``bits_box_muller``: those bits made Gaussian by Box–Muller in torch operations (24-bit
  uniforms, then log, sqrt, cos and sin on tensors, in place where torch allows);
- ``two_threads``: two generators, each filling one half, one half on a worker thread (torch
  releases the GIL while it draws).

A DP step costs its clipped sum and update (``dp_step.py``) plus one Gaussian draw: the cheapest
``GAUSSIAN`` way's ratio is what the noise adds to it at the least (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from dp_step import Steps, build_model

from dplab.philox import CpuGenerator

WAYS = (
    "dplab_philox",
    "torch_normal",
    "torch_uniform",
    "numpy_normal",
    "numpy_bits",
    "bits_box_muller",
    "two_threads",
)
#: the ways that draw Gaussian numbers
GAUSSIAN = ("dplab_philox", "torch_normal", "numpy_normal", "bits_box_muller", "two_threads")


def draws(n: int, pool: ThreadPoolExecutor) -> dict:
    """Each way's draw of ``n`` numbers, as a function of no argument."""
    buffer = torch.empty(n)
    generators = [torch.Generator().manual_seed(s) for s in (0, 1)]
    halves = buffer[: n // 2], buffer[n // 2 :]
    ziggurat = np.random.Generator(np.random.PCG64(0))
    out = np.empty(n, dtype=np.float32)
    bits = np.random.SFC64(0)
    half = (n + 1) // 2
    angle = torch.empty(half)

    def bits_box_muller():
        words = torch.from_numpy(bits.random_raw(half).view(np.int32))  # 2·half numbers
        u = (words >> 8).bitwise_and_(0xFFFFFF).float().add_(0.5).mul_(2.0**-24)  # in (0, 1)
        radius = u[:half].log_().mul_(-2.0).sqrt_()
        torch.mul(u[half:], 2 * math.pi, out=angle)
        torch.mul(radius, angle.cos(), out=buffer[:half])
        torch.mul(radius[: n - half], angle[: n - half].sin_(), out=buffer[half:])

    def two_threads():
        later = pool.submit(halves[1].normal_, generator=generators[1])
        halves[0].normal_(generator=generators[0])
        later.result()

    philox = CpuGenerator(0)
    return {
        "dplab_philox": lambda: philox.normal(buffer.shape, out=buffer),
        "torch_normal": lambda: buffer.normal_(generator=generators[0]),
        "torch_uniform": lambda: buffer.uniform_(generator=generators[0]),
        "numpy_normal": lambda: ziggurat.standard_normal(out=out, dtype=np.float32),
        "numpy_bits": lambda: bits.random_raw(half),
        "bits_box_muller": bits_box_muller,
        "two_threads": two_threads,
    }


def measure(name: str, batch: int, rounds: int, pool: ThreadPoolExecutor) -> dict:
    bench = Steps(name, ["non_private"], batch, torch.device("cpu"))
    plain = bench.fns["non_private"]
    n = sum(p.numel() for p in build_model(name).parameters())
    ways = draws(n, pool)
    times = {w: [] for w in ("non_private", *WAYS)}
    for r in range(rounds + 10):
        for way, draw in ways.items():
            t0 = time.perf_counter()
            plain()
            if r >= 10:
                times["non_private"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            draw()
            if r >= 10:
                times[way].append(time.perf_counter() - t0)
    ms = {w: 1e3 * statistics.median(v) for w, v in times.items()}
    ratio = {w: ms[w] / ms["non_private"] for w in WAYS}
    return {
        "model": name,
        "numbers": n,
        "median_ms": {w: round(v, 4) for w, v in ms.items()},
        "ratio": {w: round(v, 3) for w, v in ratio.items()},
        "ns_per_number": {w: round(1e6 * ms[w] / n, 2) for w in WAYS},
        "cheapest_gaussian": min(GAUSSIAN, key=ratio.get),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--models", nargs="+", default=["logreg", "mlp004"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with ThreadPoolExecutor(1) as pool:
        for name in args.models:
            print(json.dumps(measure(name, args.batch, args.rounds, pool)), flush=True)


if __name__ == "__main__":
    main()
