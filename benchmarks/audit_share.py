"""A config's audits timed on a share of their runs, and their full time extrapolated.

    python benchmarks/audit_share.py --config config/paper.yaml --data results/data \
        [--runs chunk|N] [--device auto|cpu|cuda] [--threads 2] [--jobs 7] [--only NAME ...] \
        [--logs DIR]

Each audit of the config is run by ``dplab audit`` on ``--runs`` of its runs (``chunk``, the
default: one chunk, the runs its lockstep runner steps together; or N), all audits at once (at most
``--jobs`` processes, like ``snakemake --cores``), each with the run key ``device`` set to
``--device``.  An audit's chunks are stepped one after the other with the same shapes and work, so
its full time is extrapolated as the share's training seconds (each variant's, from the log's
``done:`` lines) × runs / share, plus the rest of its wall time once (start-up, data, upper bounds,
estimators: these grow little with the runs).  Prints one line per audit and writes nothing
outside a temporary folder; the data folder holds the datasets the audits name
(``dplab prepare-data``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dplab import entries  # noqa: E402
from dplab.config import load_config  # noqa: E402


def shares(config: dict, runs: str, device: str, only: list[str]) -> dict[str, tuple[dict, int]]:
    """name → (the audit entry on its share of runs, its full number of runs)."""
    out = {}
    for name in config.get("audits", {}):
        if only and name not in only:
            continue
        entry = entries.audit_entry(config, name)
        share = entry["chunk"] if runs == "chunk" else int(runs)
        share = min(share, entry["runs"])
        out[name] = (
            {**entry, "runs": share, "run": {**entry["run"], "device": device}},
            entry["runs"],
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/paper.yaml")
    parser.add_argument("--data", default="results/data", help="folder of the prepared datasets")
    parser.add_argument("--runs", default="chunk", help="'chunk' or a number of runs per audit")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--logs", help="folder to copy each audit's log to")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    todo = shares(config, args.runs, args.device, args.only)
    tmp = Path(tempfile.mkdtemp(prefix="audit-share-"))
    waiting, running, done = list(todo), {}, {}
    while waiting or running:
        while waiting and len(running) < args.jobs:
            name = waiting.pop(0)
            entry = todo[name][0]
            cmd = [
                sys.executable,
                "-c",
                "import sys; from dplab.cli import main; sys.exit(main())",
                "audit",
                "--audit-json",
                json.dumps(entry),
                "--data",
                f"{args.data}/{entry['dataset']}",
                "--out",
                str(tmp / f"{name}.csv"),
                "--threads",
                str(args.threads),
            ]
            log = open(tmp / f"{name}.log", "w")
            env = {**os.environ, "DPLAB_PROGRESS_SECONDS": "0"}  # every variant's "done:" line
            proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env)
            running[name] = (proc, time.perf_counter())
        for name, (proc, start) in list(running.items()):
            if proc.poll() is not None:
                done[name] = (proc.returncode, time.perf_counter() - start)
                del running[name]
        time.sleep(0.2)
    print(f"# {args.config}, device {args.device}, {args.threads} threads, {args.jobs} at once")
    print("audit | runs | share | wall s (share) | training s (share) | full s (extrapolated) | rc")
    for name, (rc, seconds) in done.items():
        entry, full = todo[name]
        log = (tmp / f"{name}.log").read_text()
        training = sum(float(s) for s in re.findall(r" done: [^|]*?, ([\d.]+) s", log))
        tail = log.strip().splitlines()[-1:] if rc else []
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            (Path(args.logs) / f"{name}.log").write_text(log)
        print(
            f"{name} | {full} | {entry['runs']} | {seconds:.1f} | {training:.1f} |"
            f" {seconds + training * (full / entry['runs'] - 1):.0f} | {rc} {' '.join(tail)}"
        )


if __name__ == "__main__":
    main()
