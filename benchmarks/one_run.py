"""How close the one-run estimators come to the exact ε of the Gaussian mechanism, against the
number of canaries m.

One run of m canaries, each in with probability 1/2; scores N(μ, 1) in and N(0, 1) out, with μ
chosen so that the Gaussian mechanism's exact ε at δ = 1e-5 is 1, 2 or 4
(:func:`dplab.accounting.gaussian.gaussian_epsilon`).  Prints the certified 95 % lower bound of
``one_run`` (Steinke et al. 2023; skipped above 10⁵ canaries, where its binomial tails get slow),
``one_run_gdp`` (Mahloujifar et al. 2024) and ``one_run_independent`` (independent canaries, the
order-statistics test of :mod:`dplab.audit.estimators`) as ratios to the exact ε, and the ratio of
what one_run_gdp's analysis rejects at level 1/2 (its point estimate)::

    PYTHONPATH=src python benchmarks/one_run.py --canaries 1000 10000 100000 1000000 10000000

``--finest K`` extends the Bonferroni family of guess counts down to m/2^K (the estimators use
m/64, K = 6), to see what fewer guesses would buy at large m.  ``--seeds N`` (N > 1) adds a table of
one_run_independent over N seeds per cell: its least, median and largest ratio to the exact ε, and
how many of the N certified bounds lie above it (at 95 %, about 5 % may).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import brentq

from dplab.accounting.gaussian import gaussian_epsilon
from dplab.audit import estimators


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--canaries", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000]
    )
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--finest", type=int, default=6, help="smallest guess fraction 2^-K")
    parser.add_argument(
        "--seeds", type=int, default=1, help="seeds per cell of the one_run_independent table"
    )
    args = parser.parse_args()
    estimators.GUESS_FRACTIONS = tuple(2.0**-k for k in range(args.finest + 1))
    print(
        "| exact ε | m | one_run / exact | one_run_gdp / exact | at level 1/2 / exact | guesses"
        " (one_run_gdp) | seconds | one_run_independent / exact | guesses (one_run_independent) |"
        " seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for eps in args.epsilons:
        mu = brentq(lambda x: float(gaussian_epsilon(1e-5, x)) - eps, 1e-3, 20)
        for m in args.canaries:
            scores, members = _canaries(mu, m, [args.seed, m])
            started = time.perf_counter()
            fdp = estimators.one_run_gdp_bound(scores, members, 1e-5)
            seconds = time.perf_counter() - started
            steinke = (
                estimators.one_run_bound(scores, members, 1e-5).epsilon_lower / eps
                if m <= 100_000
                else np.nan
            )
            started = time.perf_counter()
            independent = estimators.one_run_independent_bound(scores, members, 1e-5)
            seconds_independent = time.perf_counter() - started
            print(
                f"| {eps:g} | {m} | {steinke:.3f} | {fdp.epsilon_lower / eps:.3f} |"
                f" {fdp.epsilon_estimate / eps:.3f} | {fdp.detail.split(';')[0]} | {seconds:.2f} |"
                f" {independent.epsilon_lower / eps:.3f} | {independent.detail.split(';')[0]} |"
                f" {seconds_independent:.2f} |",
                flush=True,
            )
    if args.seeds > 1:
        spread(args)


def _canaries(mu: float, m: int, seed) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    members = rng.random(m) < 0.5
    return rng.normal(0.0, 1.0, m) + mu * members, members


def spread(args) -> None:
    """one_run_independent over ``args.seeds`` seeds per (ε, m)."""
    print(
        f"\n| exact ε | m | one_run_independent / exact over {args.seeds} seeds: least, median,"
        " largest | above exact |"
    )
    print("| --- | --- | --- | --- |")
    for eps in args.epsilons:
        mu = brentq(lambda x: float(gaussian_epsilon(1e-5, x)) - eps, 1e-3, 20)
        for m in args.canaries:
            ratios = np.array(
                [
                    estimators.one_run_independent_bound(
                        *_canaries(mu, m, [args.seed, m, s]), 1e-5
                    ).epsilon_lower
                    / eps
                    for s in range(args.seeds)
                ]
            )
            print(
                f"| {eps:g} | {m} | {ratios.min():.3f}, {np.median(ratios):.3f}, {ratios.max():.3f}"
                f" | {(ratios > 1).sum()} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
