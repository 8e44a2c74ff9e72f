"""The default DAG's CPU time by job class, split into start-up and work: sampled jobs run with
their exact command lines (``snakemake -n -p``) under ``benchmarks/job_profile.py``.

For each sampled job its inputs are first made by Snakemake (only what that job needs, never the
whole DAG), then its shell command, less the log redirection, runs under the profiler; its
outputs land in results/ as the rule's would. ``dplab provenance`` is given only the outputs that
exist (its inputs are the whole DAG). One JSON line per job, then a Markdown table with each
class's job count in the DAG and its sampled jobs' mean::

    PYTHONPATH=src python benchmarks/job_classes.py            # from the repository root
    PYTHONPATH=src python benchmarks/job_classes.py --only train sweep

A job's sample is chosen by its rule and a part of its command line (:data:`SAMPLES`); a grid
cell's runs are one job (config ``group_runs``) unless the config says ``group_runs: none``.

``--all`` profiles every job of the DAG instead, in the dry run's order (each job's inputs are
made by the jobs before it: run it in a fresh clone), one JSON line per job, then each class's
total CPU seconds and the DAG's::

    PYTHONPATH=src python benchmarks/job_classes.py --all
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

#: job class → (rule, a part of the command line that picks the sampled job), in DAG order
SAMPLES: dict[str, list[tuple[str, str]]] = {
    "prepare-data": [("prepare_data", "--dataset synthetic"), ("prepare_data", "--dataset digits")],
    "mf factorization": [("factorization", "blt_T200_k4_mean")],
    "train (grid cell)": [
        ("train_runs", "privacy_utility/synthetic/logreg/dp_sgd/eps2/seed0"),
        ("train_runs", "mf_vs_dpsgd/digits/mlp/dp_sgd/eps1/seed0"),
    ],
    "train (run)": [("train", "--out results/runs/try3_dp_sgd ")],
    "sweep": [("sweep", "dp_sgd")],
    "audit": [("audit", "digits_input_canary")],
    "figure-table": [("figure_table", "techniques_table"), ("figure_table", "gaussian_sigma")],
    "figure-draw": [("figure", "techniques_table"), ("figure", "gaussian_sigma")],
    "index": [("index", "")],
    "provenance": [("provenance", "")],
}
PROFILER = Path(__file__).with_name("job_profile.py")
COLUMNS = ("imports", "planning", "accounting", "writing", "work")


def dry_run() -> list[dict]:
    """Every job of the default DAG as ``{"rule", "inputs", "command"}``
    (``snakemake -n -p --forceall``)."""
    text = subprocess.run(
        ["snakemake", "-n", "-p", "--forceall"], check=True, capture_output=True, text=True
    ).stdout
    jobs, job = [], None
    for line in text.splitlines():
        if m := re.match(r"(?:local)?rule (\w+):$", line):
            job = {"rule": m[1], "inputs": [], "command": None}
            jobs.append(job)
        elif job is not None and line.startswith("    input: "):
            job["inputs"] = line.removeprefix("    input: ").split(", ")
        elif job is not None and line.startswith("Shell command: "):
            job["command"] = line.removeprefix("Shell command: ")
    return [j for j in jobs if j["command"]]


def class_of(job: dict) -> str:
    """The class of a job of :func:`dry_run` (the keys of :data:`SAMPLES`)."""
    if job["rule"] == "train":
        return "train (grid run)" if " --out results/grids/" in job["command"] else "train (run)"
    return next(
        (name for name, picks in SAMPLES.items() if picks[0][0] == rule_of(job)), job["rule"]
    )


def rule_of(job: dict) -> str:
    """The job's rule, a job of grouped runs' rule ``train_runs__<cell>`` as ``train_runs``."""
    return job["rule"].split("__")[0]


def argv_of(command: str) -> list[str]:
    """The command's words up to its log redirection."""
    words = shlex.split(command)
    return words[: words.index(">")] if ">" in words else words


def profile(job: dict, make_inputs: bool = True) -> dict:
    argv = argv_of(job["command"])
    if job["rule"] == "provenance":
        start = argv.index("--out") + 2
        argv = argv[:start] + [name for name in argv[start:] if Path(name).exists()]
    if make_inputs and job["inputs"] and job["rule"] not in ("index", "provenance"):
        subprocess.run(
            ["snakemake", "--cores", str(os.cpu_count()), *job["inputs"]],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    out = subprocess.run(
        [sys.executable, str(PROFILER), "--", *argv], capture_output=True, text=True
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"command"')]
    if out.returncode or not lines:
        raise SystemExit(f"{job['rule']}: {' '.join(argv)[:200]} failed: {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", nargs="+", choices=sorted(SAMPLES), default=None, help="these classes only"
    )
    parser.add_argument(
        "--all", action="store_true", help="every job of the DAG, in order (a fresh clone)"
    )
    args = parser.parse_args()
    jobs = dry_run()
    counts = Counter(class_of(j) for j in jobs)
    if args.all:
        return profile_all(jobs)
    rows = []
    for name, picks in SAMPLES.items():
        if args.only and name not in args.only:
            continue
        results = []
        for rule, part in picks:
            job = next(j for j in jobs if rule_of(j) == rule and part in j["command"])
            results.append(profile(job))
            print(json.dumps({"class": name, **results[-1]}), flush=True)
        mean = {c: sum(r[c] for r in results) / len(results) for c in ("cpu_s", *COLUMNS)}
        rows.append((name, counts[name], mean))
    table(("jobs in DAG", "CPU s/job"), rows, digits=2)
    return 0


def table(heads: tuple[str, str], rows: list[tuple[str, int, dict]], digits: int) -> None:
    """A Markdown table of ``rows`` (class, jobs, CPU seconds per column) + the start-up share."""
    print(f"\n| class | {' | '.join(heads)} | {' | '.join(COLUMNS)} | start-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, count, m in rows:
        share = (m["imports"] + m["planning"]) / m["cpu_s"]
        cells = " | ".join(f"{m[c]:.{digits}f}" for c in ("cpu_s", *COLUMNS))
        print(f"| {name} | {count} | {cells} | {share:.0%} |")


def profile_all(jobs: list[dict]) -> int:
    """Every job in the dry run's order; each class's totals and the DAG's, as a Markdown table."""
    totals: dict[str, Counter] = {}
    for job in jobs:
        result = profile(job, make_inputs=False)
        name = class_of(job)
        print(json.dumps({"class": name, "rule": job["rule"], **result}), flush=True)
        totals.setdefault(name, Counter()).update(
            {"jobs": 1, **{c: result[c] for c in ("cpu_s", *COLUMNS)}}
        )
    totals["DAG"] = sum(totals.values(), Counter())
    table(("jobs", "CPU s"), [(name, t["jobs"], t) for name, t in totals.items()], digits=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
