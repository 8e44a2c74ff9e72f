"""Where one ``dplab`` job's CPU time goes: start-up (the interpreter, imports, argument parsing
and config planning) against its work, its accounting and its writing.

Runs the command in this process under a CPU-time sampler (``setitimer(ITIMER_PROF)``, every
5 ms of process CPU time): each interval of CPU time is charged to the stack it ends in, by the
first of these that matches a frame of that stack — *imports* (a frame of importlib's bootstrap),
*planning* (argparse and the parser's build, the config, job and schema modules, ``resolve_run``),
*accounting* (:mod:`dplab.accounting`, :mod:`dplab.mf.accounting`, dp_accounting), *writing*
(:mod:`dplab.io`, ``torch.save``, matplotlib's ``savefig``) — else *work*. The interpreter's own
start (before this script runs) is charged to imports. One JSON line per job::

    PYTHONPATH=src python benchmarks/job_profile.py -- dplab train --run-json '{…}' --data … --out …

``benchmarks/job_classes.py`` runs it on sampled jobs of the default DAG (benchmarks/README.md).
"""

from __future__ import annotations

import json
import resource
import signal
import sys
import time
from collections import Counter

#: (category, test on a frame's file name and function name), first match of a stack wins
CATEGORIES = (
    ("imports", lambda f, n: f.startswith("<frozen importlib")),
    (
        "planning",
        lambda f, n: (
            f.endswith(
                (
                    "/argparse.py",
                    "/dplab/config.py",
                    "/dplab/jobs.py",
                    "/dplab/entries.py",
                    "/dplab/training/resolve.py",
                )
            )
            or n == "build_parser"
            or "/dplab/schemas/" in f
            or "/jsonschema/" in f
            or "/yaml/" in f
        ),
    ),
    (
        "accounting",
        lambda f, n: (
            "/dplab/accounting/" in f
            or "/dp_accounting/" in f
            or f.endswith("/dplab/mf/accounting.py")
        ),
    ),
    (
        "writing",
        lambda f, n: (
            f.endswith("/dplab/io.py")
            or (f.endswith("/torch/serialization.py") and n == "save")
            or n in ("savefig", "print_figure")
        ),
    ),
)
INTERVAL = 0.005


def category(frame) -> str:
    """The category of the stack that ends in ``frame`` (the outermost
    matching test of any frame)."""
    files = []
    while frame is not None:
        files.append((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    for name, test in CATEGORIES:
        if any(test(f, n) for f, n in files):
            return name
    return "work"


def profile(argv: list[str]) -> dict:
    """CPU seconds of ``dplab argv`` by category, run in this process."""
    spent: Counter[str] = Counter()
    last = [time.process_time()]
    spent["imports"] += last[0]  # the interpreter's start, before this script

    def sample(signum, frame):
        now = time.process_time()
        spent[category(frame)] += now - last[0]
        last[0] = now

    signal.signal(signal.SIGPROF, sample)
    signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)
    from dplab.cli import main  # imported under the sampler: its imports are start-up

    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    spent["work"] += time.process_time() - last[0]  # the tail after the last sample
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    seconds = {
        name: round(spent[name], 3)
        for name in ("imports", "planning", "accounting", "writing", "work")
    }
    return {
        "command": argv[0],
        "exit": code,
        "cpu_s": round(total, 3),
        **seconds,
        "startup_share": round((spent["imports"] + spent["planning"]) / max(total, 1e-9), 3),
    }


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if argv[:1] == ["dplab"]:
        argv = argv[1:]
    if not argv:
        print("usage: job_profile.py -- dplab COMMAND ARGS...", file=sys.stderr)
        return 2
    print(json.dumps(profile(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
