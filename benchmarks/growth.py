"""How a DAG's CPU time grows with its sizes, and whether start-up's share grows with them: the
default DAG's own command lines (``snakemake -n -p``, as ``job_classes.py``) with one size
changed, each job under ``job_profile.py``.

* runs in a grid: a grid run is one job (seed 0, 1, …, n-1 of ``mf_vs_dpsgd``'s DP-SGD cell), so
  n runs cost the sum of n jobs;
* the audit's runs per world (``digits_white_box`` at T = 1, 4);
* T, the steps of a training run (``mf_vs_dpsgd``'s DP-SGD run, seed 0).

One JSON line per job, then a Markdown table (benchmarks/README.md)::

    PYTHONPATH=src python benchmarks/growth.py            # from the repository root
    PYTHONPATH=src python benchmarks/growth.py --grid-runs 1 2 4 --audit-runs 8 32 128 \
        --steps 20 200 2000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from job_classes import COLUMNS, PROFILER, argv_of, dry_run  # noqa: E402

GRID_JOB = ("train", "mf_vs_dpsgd/digits/mlp/dp_sgd/eps1/seed0")
AUDIT_JOB = ("audit", "digits_white_box")


def changed(argv: list[str], flag: str, out: Path, **keys) -> list[str]:
    """``argv`` with the JSON after ``flag`` updated by ``keys``, and ``--out`` ``out``."""
    argv = list(argv)
    at = argv.index(flag) + 1
    argv[at] = json.dumps({**json.loads(argv[at]), **keys}, sort_keys=True)
    argv[argv.index("--out") + 1] = str(out)
    return argv


def profile(argv: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, str(PROFILER), "--", *argv], capture_output=True, text=True
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"command"')]
    if out.returncode or not lines or json.loads(lines[-1])["exit"] != 0:
        raise SystemExit(f"{' '.join(argv)[:200]} failed: {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def total(rows: list[dict]) -> dict:
    return {c: sum(r[c] for r in rows) for c in ("cpu_s", *COLUMNS)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid-runs", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--audit-runs", nargs="+", type=int, default=[8, 32, 128])
    parser.add_argument("--steps", nargs="+", type=int, default=[20, 200, 2000])
    args = parser.parse_args()
    jobs = {
        (rule, part): next(j for j in dry_run() if j["rule"] == rule and part in j["command"])
        for rule, part in (GRID_JOB, AUDIT_JOB)
    }
    inputs = sorted({path for job in jobs.values() for path in job["inputs"]})
    subprocess.run(
        ["snakemake", "--cores", "2", *inputs],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    grid, audit = (argv_of(jobs[key]["command"]) for key in (GRID_JOB, AUDIT_JOB))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        seeds = [
            profile(changed(grid, "--run-json", out / f"seed{s}", seed=s, name=f"seed{s}"))
            for s in range(max(args.grid_runs))
        ]
        for n in args.grid_runs:
            rows.append(("runs in a grid", n, total(seeds[:n])))
        for runs in args.audit_runs:
            argv = changed(
                audit,
                "--audit-json",
                out / f"audit{runs}.csv",
                runs=runs,
                chunk=min(runs, 64),
                steps=[1, 4],
            )
            rows.append(("audit runs per world", runs, total([profile(argv)])))
        for steps in args.steps:
            argv = changed(
                grid,
                "--run-json",
                out / f"steps{steps}",
                steps=steps,
                log_every=max(steps // 10, 1),
            )
            rows.append(("training steps T", steps, total([profile(argv)])))
    for axis, size, row in rows:
        rounded = {k: round(v, 3) for k, v in row.items()}
        print(json.dumps({"axis": axis, "size": size, **rounded}), flush=True)
    print("\n| axis | size | CPU s | imports | planning | accounting | writing | work | start-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for axis, size, m in rows:
        share = (m["imports"] + m["planning"]) / m["cpu_s"]
        parts = " | ".join(f"{m[c]:.2f}" for c in COLUMNS)
        print(f"| {axis} | {size} | {m['cpu_s']:.2f} | {parts} | {share:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
