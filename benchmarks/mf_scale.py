r"""Banded Toeplitz and BLT at large T: dplab against jax_privacy.

For each T, optimizes the strategy with dplab (``dplab.mf.toeplitz.banded_toeplitz`` or
``dplab.mf.blt.blt``) and with jax_privacy (``toeplitz.optimize_banded_toeplitz``, its default 250
L-BFGS steps; or ``buffered_toeplitz.optimize_loss`` with the loss its ``optimize`` picks for single
participation: the closed form for max, the materialized one for mean) on the same T, bands or
buffers and objective, each in a fresh subprocess (so the peak resident memory, ``ru_maxrss``, is
that one optimization's, imports included; jax's time includes its compilation), and prints seconds,
peak MB, the error each reached (sens²·mean or max of the per-row squared error, single
participation) and the ratios dplab / jax_privacy::

    PYTHONPATH=src python benchmarks/mf_scale.py --steps 1000 10000 100000 --bands 32 \
        --objective mean
    PYTHONPATH=src python benchmarks/mf_scale.py --strategy blt --buffers 5 --objective max \
        --steps 1000 100000

``--noise-steps N --dim d`` (BLT) also times the per-step noise generation of the BLT dplab found
(draw z_t, return w_t of C⁻¹Z): dplab's ``FilterNoise`` (torch, float64) against jax_privacy's
``inverse_as_streaming_matrix`` (its ``multiply_next`` jitted, ``jax.random.normal`` draws), both on
the CPU (torch with one thread), mean seconds per step after 10 warm-up steps.

jax_privacy is the ``mfpeer`` extra (``pip install -c constraints.txt jax-privacy``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
strategy, T, size, objective, who = (
    sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
)
if who == "dplab":
    from dplab.mf import blt, toeplitz
    start = time.perf_counter()
    fact = (
        toeplitz.banded_toeplitz(T, size, objective)
        if strategy == "banded_toeplitz"
        else blt.blt(T, size, objective)
    )
    seconds = time.perf_counter() - start
    error = fact.errors()[objective + "_error"]
else:
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax_privacy.matrix_factorization import buffered_toeplitz, toeplitz
    reduction = jnp.mean if objective == "mean" else jnp.max
    start = time.perf_counter()
    if strategy == "banded_toeplitz":
        coef = toeplitz.optimize_banded_toeplitz(T, size, reduction_fn=reduction)
        coef.block_until_ready()
        seconds = time.perf_counter() - start
        per_query = toeplitz.per_query_error(strategy_coef=coef, n=T)
        error = float(toeplitz.sensitivity_squared(coef, T)) * float(reduction(per_query))
    else:
        LossFn = buffered_toeplitz.LossFn
        loss_fn = (
            LossFn.build_closed_form_single_participation(n=T)
            if objective == "max"
            else LossFn.build_min_sep(n=T, error=objective, min_sep=T, max_participations=1)
        )
        _, loss = buffered_toeplitz.optimize_loss(loss_fn, num_buffers=size)
        error = float(loss)
        seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "error": error}))
"""

NOISE_CHILD = r"""
import json, sys, time
T, buffers, objective = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
steps, dim, who = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
from dplab.mf import blt
fact = blt.blt(T, buffers, objective)
if who == "dplab":
    import torch
    from dplab.mf.noise import FilterNoise
    # as a training run with --threads 1; more threads only contend on a loaded machine
    torch.set_num_threads(1)
    noise, like = FilterNoise(fact, 1.0), torch.zeros(dim, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    for t in range(10):
        w = noise.sample(t, like, g)
    start = time.perf_counter()
    for t in range(10, 10 + steps):
        w = noise.sample(t, like, g)
    seconds = (time.perf_counter() - start) / steps
else:
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax_privacy.matrix_factorization import buffered_toeplitz
    peer = buffered_toeplitz.BufferedToeplitz.build(
        buf_decay=fact.info["buf_decay"], output_scale=fact.info["output_scale"]
    )
    M = peer.inverse_as_streaming_matrix()
    state = M.init_multiply(jnp.zeros(dim))

    @jax.jit
    def step(key, state):
        key, sub = jax.random.split(key)
        return key, *M.multiply_next(jax.random.normal(sub, (dim,), dtype=jnp.float64), state)

    key = jax.random.PRNGKey(0)
    for t in range(10):
        key, w, state = step(key, state)
    w.block_until_ready()
    start = time.perf_counter()
    for t in range(steps):
        key, w, state = step(key, state)
    w.block_until_ready()
    seconds = (time.perf_counter() - start) / steps
print(json.dumps({"seconds_per_step": seconds}))
"""


def _child(script: str, *args) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=("banded_toeplitz", "blt"), default="banded_toeplitz")
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--bands", type=int, default=32)
    parser.add_argument("--buffers", type=int, default=5)
    parser.add_argument("--objective", choices=("mean", "max"), default="mean")
    parser.add_argument(
        "--noise-steps", type=int, default=0, help="BLT: also time this many noise steps per T"
    )
    parser.add_argument("--dim", type=int, default=100_000, help="d of the noise vectors")
    args = parser.parse_args()
    size = args.bands if args.strategy == "banded_toeplitz" else args.buffers
    name = "bands" if args.strategy == "banded_toeplitz" else "buffers"
    print(
        f"| strategy | T | {name} | objective | dplab s | jax_privacy s | time ratio | dplab MB |"
        " jax_privacy MB | memory ratio | dplab error | jax_privacy error | error ratio |"
    )
    print("| --- " * 13 + "|")
    for steps in args.steps:
        ours, theirs = (
            _child(CHILD, args.strategy, steps, size, args.objective, who)
            for who in ("dplab", "jax_privacy")
        )
        print(
            f"| {args.strategy} | {steps} | {size} | {args.objective} | {ours['seconds']:.2f} |"
            f" {theirs['seconds']:.2f} | {ours['seconds'] / theirs['seconds']:.3f} |"
            f" {ours['peak_mb']:.0f} | {theirs['peak_mb']:.0f} |"
            f" {ours['peak_mb'] / theirs['peak_mb']:.3f} | {ours['error']:.10g} |"
            f" {theirs['error']:.10g} | {ours['error'] / theirs['error']:.12f} |",
            flush=True,
        )
    if args.noise_steps and args.strategy == "blt":
        print(
            "\n| T | buffers | d | steps timed | dplab s/step | jax_privacy s/step | time ratio |\n"
            + "| --- " * 7
            + "|"
        )
        for steps in args.steps:
            ours, theirs = (
                _child(NOISE_CHILD, steps, size, args.objective, args.noise_steps, args.dim, who)
                for who in ("dplab", "jax_privacy")
            )
            print(
                f"| {steps} | {size} | {args.dim} | {args.noise_steps} |"
                f" {ours['seconds_per_step']:.3g} | {theirs['seconds_per_step']:.3g} |"
                f" {ours['seconds_per_step'] / theirs['seconds_per_step']:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
