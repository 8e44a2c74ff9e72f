"""CPU time of a grid cell's runs trained in one job (config ``group_runs``) against one job per
run, on the default config's own jobs, and the same for the default DAG's training by extrapolation.

For each sampled job of grouped runs (:class:`dplab.jobs.RunsJob`) the script runs, in turn for
``--rounds`` rounds, its ``dplab train`` command (as the Snakemake rule gives it) and the command
of each of its runs alone (as rule train gives it with ``group_runs: none``), into a scratch
folder, and takes the process CPU time (user + system, ``RUSAGE_CHILDREN``) of each; the least of
the rounds counts. Every grouped run's folder is compared byte for byte with the same run trained
alone. The inputs (prepared data, factorizations) are read from ``--inputs`` (a results/ folder
where they were made, e.g. by ``snakemake results/data/digits/train.npz results/mf/...``)::

    PYTHONPATH=src python benchmarks/group_runs.py --inputs results --rounds 2

With ``--baseline-src OTHER/src`` the grouped job is timed against the same grouped job run with
another commit's ``src`` (interleaved), every run's folder compared byte for byte between them.

The DAG's estimate: each grid's runs cost, alone, the sampled mean per run of that grid; grouped,
the sampled mean per job of that grid times its number of jobs.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dplab import jobs, layout

#: one grouped job of each grid of config/config.yaml (its name: the folder above the runs)
SAMPLES = (
    "grids/privacy_utility/synthetic/logreg/dp_sgd",
    "grids/mf_vs_dpsgd/digits/mlp/dp_sgd",
    "grids/mf_vs_dpsgd/digits/mlp/dp_mf",
    "grids/privacy_utility_sgd/synthetic/logreg/sgd",
)


def cpu(argv: list[str], src: Path | None = None) -> float:
    """The CPU seconds (user + system) of running ``argv`` to its end (with ``src`` first on
    PYTHONPATH: another commit's ``dplab``)."""
    env = None if src is None else {**os.environ, "PYTHONPATH": str(src.resolve())}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def command(job, inputs: Path, outs: list[str]) -> list[str]:
    """``dplab train`` of ``job`` (a run's or a group's params, as its rule
    passes them) into ``outs``."""

    def moved(path: str) -> str:
        return str(inputs / Path(path).relative_to(layout.RESULTS))

    return [
        "dplab",
        "train",
        "--run-json",
        job.params["run"],
        "--data",
        moved(job.params["data"]),
        "--out",
        *outs,
        "--mf-cache",
        moved(job.params["mf_cache"]),
        "--threads",
        str(job.resources.threads),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument(
        "--inputs", type=Path, default=Path("results"), help="results/ folder holding data/ and mf/"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--samples", nargs="+", default=SAMPLES, help="names of grouped jobs")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="instead of the runs alone: the same grouped job with this src/ (another commit's)",
    )
    args = parser.parse_args()
    plan = jobs.load(args.config)
    groups = plan.of("train_runs")
    rows = {}
    other = "alone" if args.baseline_src is None else "baseline"
    scratch = Path(tempfile.mkdtemp(prefix="group_runs_"))
    try:
        for name in args.samples:
            job = groups[name]
            grouped, alone = [], []
            for r in range(args.rounds):
                outs = [str(scratch / f"grouped{r}" / run.name) for run in job.runs]
                grouped.append(cpu(command(job, args.inputs, outs)))
                others = [str(scratch / f"alone{r}" / run.name) for run in job.runs]
                if args.baseline_src is not None:
                    alone.append(cpu(command(job, args.inputs, others), args.baseline_src))
                else:
                    alone.append(
                        sum(cpu(command(run, args.inputs, [o])) for run, o in zip(job.runs, others))
                    )
                for run, out in zip(job.runs, outs):
                    match, differ, errors = filecmp.cmpfiles(
                        out,
                        scratch / f"alone{r}" / run.name,
                        [Path(p).name for p in run.output_files],
                        shallow=False,
                    )
                    if differ or errors:
                        raise SystemExit(
                            f"{run.name}: {differ + errors} differ between grouped and {other}"
                        )
            rows[name] = (len(job.runs), min(alone), min(grouped))
            print(
                f"{name}: {len(job.runs)} runs, {other} {min(alone):.2f} s, "
                f"grouped {min(grouped):.2f} s",
                flush=True,
            )
    finally:
        shutil.rmtree(scratch)
    if args.baseline_src is not None:
        print("\n| grouped job | runs | CPU s, baseline | CPU s, this branch | saved |")
        print("|---|---:|---:|---:|---:|")
        for name, (k, alone, grouped) in rows.items():
            print(f"| `{name}` | {k} | {alone:.2f} | {grouped:.2f} | {alone - grouped:.2f} |")
    else:
        print(
            "\n| grouped job | runs | CPU s, one job per run | CPU s, one job "
            "| saved per run after the first |"
        )
        print("|---|---:|---:|---:|---:|")
        for name, (k, alone, grouped) in rows.items():
            print(
                f"| `{name}` | {k} | {alone:.2f} | {grouped:.2f} |"
                f" {(alone - grouped) / (k - 1):.2f} |"
            )
    by_grid: dict[str, list] = {}
    for name, (k, alone, grouped) in rows.items():
        by_grid.setdefault(name.split("/")[1], []).append((k, alone, grouped))
    before = after = 0.0
    for grid, samples in by_grid.items():
        count = [job for job in groups.values() if job.name.split("/")[1] == grid]
        runs = sum(len(job.runs) for job in count)
        if args.baseline_src is not None:  # the baseline's grouped jobs
            cost = sum(a for _, a, _ in samples) / len(samples) * len(count)
        else:  # each run its own job
            cost = sum(a for _, a, _ in samples) / sum(k for k, _, _ in samples) * runs
        per_job = sum(g for _, _, g in samples) / len(samples)
        before, after = before + cost, after + per_job * len(count)
        print(
            f"grid {grid}: {runs} runs in {len(count)} jobs: ≈ {cost:.0f} s {other}, "
            f"≈ {per_job * len(count):.0f} s grouped"
        )
    print(f"grids sampled: ≈ {before:.0f} s → ≈ {after:.0f} s of CPU ({after / before - 1:+.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
