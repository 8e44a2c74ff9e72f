"""What a 1-step ``dplab train`` costs against ``python -c "import torch"``: the start-up a job
pays before its work.

Prepares the synthetic dataset of config/config.yaml in a temporary folder, then runs, ``--rounds``
times interleaved, ``python -c "import torch"``, ``python -c "import torch, dplab,
dp_accounting.rdp"`` (what a job that calibrates σ with rdp cannot avoid importing:
dp_accounting's rdp part, by :mod:`dplab.package_parts`), the same with the whole
``dp_accounting`` package and scipy.optimize (what a job imported before it) and ``dplab
train`` of the default DAG's grid run ``privacy_utility/synthetic/logreg/dp_sgd/eps2/seed0`` cut
to one step (``--run-json`` as the rule hands it). Prints each command's least wall time and
least CPU time (user + system, a measure less disturbed by other processes) over the rounds, and
their ratios to ``import torch``::

    PYTHONPATH=src python benchmarks/startup.py --rounds 5

``--baseline-src DIR`` adds the same 1-step train run with ``PYTHONPATH=DIR`` (another commit's
``src``, e.g. from ``git archive``), interleaved with the others: before and after under one load.
It also splits the 1-step train's CPU time in one process (least of the rounds, each part on its
own): the floor (``import torch, dplab, dp_accounting.rdp``), the imports of
``dplab`` beyond it, and the run itself (σ calibrated for the target ε, one step, ε, the files
written).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYNTHETIC = {
    "classes": 2,
    "dim": 10,
    "feature_norm": 1.0,
    "kind": "synthetic",
    "margin": 4.0,
    "seed": 0,
    "test_size": 500,
    "train_size": 1000,
}
RUN = {
    "accountant": "rdp",
    "accountants": ["rdp"],
    "batch_size": 50,
    "clip": 3.0,
    "dataset": "synthetic",
    "delta": 1e-05,
    "log_every": 200,
    "lr": 0.5,
    "method": "dp_sgd",
    "model": "logreg",
    "name": "synthetic/logreg/dp_sgd/eps2/seed0",
    "noise_multiplier": None,
    "seed": 0,
    "steps": 1,
    "target_epsilon": 2,
}
DPLAB = [sys.executable, "-m", "dplab.cli"]
#: the 1-step train in one process, printing the CPU seconds of its three parts as JSON
SPLIT = """
import json, sys, time
t0 = time.process_time()
import torch, dplab, dp_accounting.rdp
t1 = time.process_time()
import dplab.cli, dplab.commands.train, dplab.training.loop, dplab.training.resolve
from dplab.accounting.registry import get
from dplab.training.methods import METHODS
from dplab.training.models import MODELS
get("rdp"), list(METHODS.values()), MODELS["logreg"]
t2 = time.process_time()
dplab.cli.main(["train", "--run-json", sys.argv[1], "--data", sys.argv[2], "--out", sys.argv[3],
                "--threads", "1"])
t3 = time.process_time()
print(json.dumps({"floor": t1 - t0, "dplab imports": t2 - t1, "run": t3 - t2}))
"""


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved runs of each command (default 5)"
    )
    parser.add_argument(
        "--baseline-src", default=None, help="also time the train run with PYTHONPATH=DIR"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp, "synthetic")
        subprocess.run(
            [
                *DPLAB,
                "prepare-data",
                "--dataset-json",
                json.dumps(SYNTHETIC),
                "--dataset",
                "synthetic",
                "--out",
                str(data),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        out = Path(tmp, "run")
        commands = {
            "import torch": [sys.executable, "-c", "import torch"],
            "import torch, dplab, dp_accounting.rdp": [
                sys.executable,
                "-c",
                "import torch, dplab, dp_accounting.rdp",
            ],
            "import torch, dp_accounting, scipy.optimize": [
                sys.executable,
                "-c",
                "import torch, dp_accounting, scipy.optimize",
            ],
            "dplab train (1 step)": [
                *DPLAB,
                "train",
                "--run-json",
                json.dumps(RUN),
                "--data",
                str(data),
                "--out",
                str(out),
                "--threads",
                "1",
            ],
        }
        envs = {name: None for name in commands}
        if args.baseline_src is not None:
            commands["dplab train (1 step), baseline"] = commands["dplab train (1 step)"]
            envs["dplab train (1 step), baseline"] = {**os.environ, "PYTHONPATH": args.baseline_src}
        best: dict[str, tuple[float, float]] = {}
        parts: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                if out.exists():
                    shutil.rmtree(out)
                wall, cpu = timed(cmd, envs[name])
                least = best.get(name, (wall, cpu))
                best[name] = (min(wall, least[0]), min(cpu, least[1]))
            if out.exists():
                shutil.rmtree(out)
            split = subprocess.run(
                [sys.executable, "-c", SPLIT, json.dumps(RUN), str(data), str(out)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            for part, cpu in json.loads(split.splitlines()[-1]).items():
                parts[part] = min(cpu, parts.get(part, cpu))
    torch_wall, torch_cpu = best["import torch"]
    for name, (wall, cpu) in best.items():
        print(
            json.dumps(
                {
                    "command": name,
                    "wall_s": round(wall, 3),
                    "cpu_s": round(cpu, 3),
                    "wall_ratio": round(wall / torch_wall, 3),
                    "cpu_ratio": round(cpu / torch_cpu, 3),
                }
            )
        )
    print(
        json.dumps(
            {
                "split of 1-step train, cpu_s": {k: round(v, 3) for k, v in parts.items()},
                "cpu_ratio": {k: round(v / torch_cpu, 3) for k, v in parts.items()},
            }
        )
    )
    print(
        json.dumps(
            {
                "rounds": args.rounds,
                "cpus": os.cpu_count(),
                "load_1min": round(os.getloadavg()[0], 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
