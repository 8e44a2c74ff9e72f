"""004's tries 3 (DP-SGD) and 4 (DP-MF) of config/config.yaml at several learning rates and seeds:
writes a config layer that adds one run per (try, η, seed), for Snakemake to train beside the
default runs, then (``--report``) prints each variant's mean test accuracy over the seeds.

    python benchmarks/tries_lr.py --layer /tmp/tries.yaml            # then:
    snakemake --cores all --configfile config/config.yaml /tmp/tries.yaml \\
        $(python benchmarks/tries_lr.py --targets)
    python benchmarks/tries_lr.py --report

The accuracies are test accuracies (004 and this project have no validation split): a learning
rate picked from them is tuned on the test data, which the report says.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import yaml

RUNS = ("try3_dp_sgd", "try4_dp_mf")
LRS = (0.003, 0.01, 0.03, 0.1, 0.3)
SEEDS = (0, 1)


def name(run: str, lr: float, seed: int) -> str:
    """Run names are letters, digits and underscores: η = 0.03 is lr0p03."""
    return f"{run}_lr{lr:g}_s{seed}".replace(".", "p")


def variants():
    return [(run, lr, seed) for run in RUNS for lr in LRS for seed in SEEDS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layer", type=Path, help="write the config layer here")
    ap.add_argument("--targets", action="store_true", help="print the summary.json targets")
    ap.add_argument("--report", action="store_true", help="print mean test accuracy per (run, η)")
    args = ap.parse_args()
    if args.layer:
        base = yaml.safe_load(Path("config/config.yaml").read_text())["runs"]
        runs = {name(r, lr, s): {**base[r], "lr": lr, "seed": s} for r, lr, s in variants()}
        args.layer.write_text(yaml.safe_dump({"runs": runs, "threads": 1}, sort_keys=False))
    if args.targets:
        print(" ".join(f"results/runs/{name(*v)}/summary.json" for v in variants()))
    if args.report:
        for run in RUNS:
            for lr in LRS:
                acc = [
                    json.loads(Path(f"results/runs/{name(run, lr, s)}/summary.json").read_text())[
                        "final"
                    ]["test_accuracy"]
                    for s in SEEDS
                ]
                print(f"{run} η={lr:g}: test accuracy {statistics.mean(acc):.3f} (seeds {acc})")
        print("(test accuracies: η chosen from them is tuned on the test data)")


if __name__ == "__main__":
    main()
