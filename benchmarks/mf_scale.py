"""Banded Toeplitz optimization at large T: dplab against jax_privacy (issue 27 point 5).

For each T, runs ``dplab.mf.toeplitz.banded_toeplitz`` and jax_privacy's
``optimize_banded_toeplitz`` (CPU jax, float64, its default 250 L-BFGS steps) on the same T, bands
and objective, each in a fresh subprocess (so the peak resident memory, ``ru_maxrss``, is that one
optimization's, imports included; jax's time includes its compilation), and prints seconds, peak
MB, the error each reached (sens²·mean or max of the per-row squared error, single participation)
and the ratios dplab / jax_privacy::

    PYTHONPATH=src python benchmarks/mf_scale.py --steps 1000 10000 100000 --bands 32 --objective mean

jax_privacy is the ``mfpeer`` extra (``pip install -c constraints.txt jax-privacy``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
T, bands, objective, who = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if who == "dplab":
    import numpy as np
    from dplab.mf import toeplitz
    start = time.perf_counter()
    fact = toeplitz.banded_toeplitz(T, bands, objective)
    seconds = time.perf_counter() - start
    error = fact.errors()[objective + "_error"]
else:
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax_privacy.matrix_factorization import toeplitz
    reduction = jnp.mean if objective == "mean" else jnp.max
    start = time.perf_counter()
    coef = toeplitz.optimize_banded_toeplitz(T, bands, reduction_fn=reduction)
    coef.block_until_ready()
    seconds = time.perf_counter() - start
    error = float(toeplitz.sensitivity_squared(coef, T)) * float(reduction(toeplitz.per_query_error(strategy_coef=coef, n=T)))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "error": error}))
"""


def measure(steps: int, bands: int, objective: str, who: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(steps), str(bands), objective, who],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--bands", type=int, default=32)
    parser.add_argument("--objective", choices=("mean", "max"), default="mean")
    args = parser.parse_args()
    print("| T | bands | objective | dplab s | jax_privacy s | time ratio | dplab MB | jax_privacy MB | memory ratio "
          "| dplab error | jax_privacy error | error ratio |")
    print("| --- " * 12 + "|")
    for steps in args.steps:
        ours, theirs = (measure(steps, args.bands, args.objective, who) for who in ("dplab", "jax_privacy"))
        print(f"| {steps} | {args.bands} | {args.objective} | {ours['seconds']:.2f} | {theirs['seconds']:.2f} "
              f"| {ours['seconds'] / theirs['seconds']:.3f} | {ours['peak_mb']:.0f} | {theirs['peak_mb']:.0f} "
              f"| {ours['peak_mb'] / theirs['peak_mb']:.3f} | {ours['error']:.10g} | {theirs['error']:.10g} "
              f"| {ours['error'] / theirs['error']:.12f} |", flush=True)


if __name__ == "__main__":
    main()
