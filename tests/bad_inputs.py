"""Issue 25's count: a list of bad inputs run against the ``dplab`` subcommands, each classed
by what went wrong.

    python tests/bad_inputs.py [--timeout S] [--only NAME …]

runs every entry in a fresh folder as ``python -m dplab.cli …`` (the ``dplab`` of ``PYTHONPATH``:
point it at another checkout to count that one) under a per-input timeout, and prints one line
per entry and a count per class (docs/reliability.md, "Bad inputs, counted").  It counts, it
does not fail; ``tests/test_bad_inputs.py`` runs the cheap entries in-process and asserts the
classes that are fixed are at 0.

The classes, as issue 25 names them (an entry may fall in several):

- ``silent``: exit 0 where the input must be refused or the run must fail (a silent wrong answer);
- ``late``: refused (exit 2) only after :data:`LATE` CPU seconds of work (CPU time, not wall
  time: on a loaded machine a command waits for a core far longer than it works);
- ``hang``: no answer within the timeout (:data:`CPU_LIMIT` CPU seconds, or ``--timeout`` s of
  wall time for a command that waits without working, e.g. on a FIFO);
- ``exit_code``: an exit code other than the one that says what happened (0 done, 2 bad input,
  3 a valid run that failed);
- ``half_written``: the command failed but left files under its output folder;
- ``lines``: more (or, on success, any) lines on stderr than the one line of a refusal, log lines
  (progress, notes: "YYYY-MM-DD HH:MM:SS …") aside.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"
CLASSES = ("silent", "late", "hang", "exit_code", "half_written", "lines")
#: CPU seconds after which a refusal counts as late (a start, imports included, is ~3 s of CPU here)
LATE = 10.0
#: CPU seconds after which a command counts as hanging; wall seconds (default of --timeout)
CPU_LIMIT, TIMEOUT = 60, 600.0
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")

RUN = {"method": "dp_sgd", "model": "logreg", "dataset": "synthetic", "steps": 6, "batch_size": 20, "lr": 0.5,
       "clip": 1.0, "noise_multiplier": 1.0, "delta": 1e-5, "accountant": "rdp", "accountants": ["rdp"],
       "log_every": 3, "device": "cpu"}
SGD = {"method": "sgd", "model": "logreg", "dataset": "synthetic", "steps": 6, "batch_size": 20, "l2": 1.0,
       "log_every": 3, "device": "cpu"}
EPS = ["--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "100", "--delta", "1e-5"]
#: a dp_mf run with a BLT of 2 buffers (issue 27), refused below with one key changed
BLT = {**RUN, "method": "dp_mf", "strategy": "blt", "buffers": 2, "min_separation": 10, "accountant": "mf",
       "accountants": ["mf"]}


@dataclass
class Entry:
    """One bad input: ``argv`` (placeholders: DATA a prepared dataset, TABLE a figure's table,
    DIGITS prepared digits, OUT… paths under the output folder, FILE:<name> a file of :func:`files`), the exit code that
    says what should happen, and what it exercises (issue 25's point)."""

    name: str
    point: int
    argv: list[str]
    expect: int = 2
    cheap: bool = True  # run in-process by tests/test_bad_inputs.py
    mount: str | None = None  # a tmpfs of this size holds OUT (skipped where it cannot be mounted)
    extra: dict = field(default_factory=dict)


#: a pipeline config of one small run (planning it is cheap), as YAML text
MINI = """datasets:
  synthetic: {kind: synthetic, train_size: 200, test_size: 50, dim: 5}
runs:
  a:
    method: dp_sgd
    model: logreg
    dataset: synthetic
    steps: 6
    batch_size: 20
    lr: 0.5
    clip: 1.0
    noise_multiplier: 1.0
    delta: 1.0e-5
    accountant: rdp
"""


ENTRIES: list[Entry] = [
    # 1. duplicate YAML keys: the last silently wins today
    Entry("duplicate run name in a config", 1, ["check-config", "FILE:dup_run.yaml"]),
    Entry("duplicate key inside a run", 1, ["check-config", "FILE:dup_key.yaml"]),
    Entry("duplicate key in a single-run YAML", 1, ["train", "--config", "FILE:dup_single.yaml", "--data", "DATA",
                                                      "--out", "OUTDIR"]),
    Entry("duplicate key in a run's config given to train", 1, ["train", "--config", "FILE:dup_key.yaml", "--run", "a",
                                                                "--data", "DATA", "--out", "OUTDIR"]),
    # 2. whole-file checks on inputs
    Entry("figure table cut at 60 %", 2, ["figure-draw", "gaussian_sigma", "--table", "FILE:cut.csv", "--pdf",
                                         "OUT.pdf", "--png", "OUT.png"]),
    Entry("figure table cut at a line boundary (2 rows missing)", 2, ["figure-draw", "gaussian_sigma", "--table",
                                                                     "FILE:cut_rows.csv", "--pdf", "OUT.pdf", "--png",
                                                                     "OUT.png"]),
    Entry("figure table empty", 2, ["figure-draw", "gaussian_sigma", "--table", "FILE:empty", "--pdf", "OUT.pdf",
                                   "--png", "OUT.png"]),
    Entry("sweep over a summary cut short", 2, ["sweep", "--summary", "FILE:cut_summary.json", "--accountants", "rdp",
                                               "--points", "3", "--out", "OUT.csv"]),
    Entry("provenance reading /dev/zero", 2, ["provenance", "--config", "FILE:mini.yaml", "--out", "OUT.json", "/dev/zero"],
          cheap=False),
    Entry("check-config reading /dev/zero", 2, ["check-config", "/dev/zero"], cheap=False),
    Entry("figure table a FIFO", 2, ["figure-draw", "gaussian_sigma", "--table", "FILE:fifo", "--pdf", "OUT.pdf",
                                    "--png", "OUT.png"], cheap=False),
    # 3. counts bounded before work
    Entry("pld at T = 1e9", 3, ["epsilon", "--accountant", "pld", "--noise-multiplier", "1", "--sampling-rate", "0.01",
                                "--steps", "1000000000", "--delta", "1e-5"], cheap=False),
    Entry("sweep points 1e9", 3, ["sweep", "--summary", "FILE:summary.json", "--accountants", "rdp", "--points",
                                  "1000000000", "--out", "OUT.csv"], cheap=False),
    Entry("sigma_vs_steps up to T = 1e9", 3, ["figure-table", "sigma_vs_steps", "--params-json",
                                               '{"steps": [10, 1000000000]}', "--out", "OUT.csv"], cheap=False),
    Entry("mf checks flags only after factorizing", 3, ["mf", "--strategy", "optimal", "--steps", "3000", "--epsilon",
                                                        "-1", "--delta", "1e-6"], cheap=False),
    Entry("audit runs 1e9", 3, ["audit", "--audit-json", "AUDIT_RUNS", "--data", "DATA", "--out", "OUT.csv"],
          cheap=False),
    Entry("pld sigma at ε = 1000 (below pld's σ floor)", 3, ["sigma", "--accountant", "pld", "--sampling-rate", "0.01",
                                                              "--steps", "100", "--epsilon", "1000", "--delta", "1e-5"],
          cheap=False),
    # 4. planning refuses what the job refuses
    Entry("lr: .inf passes check-config", 4, ["check-config", "FILE:lr_inf.yaml"]),
    Entry("pld at δ = 1e-300 with σ given (the job answers too, pld excluded with its reason)", 4,
          ["check-config", "FILE:pld_delta.yaml"], expect=0),
    Entry("pld calibrating σ at δ = 1e-300 passes check-config", 4, ["check-config", "FILE:pld_delta_calibrated.yaml"]),
    Entry("dp_mf blt with cyclic_poisson (a BLT has T bands) passes check-config", 4,
          ["check-config", "FILE:blt_cyclic_poisson.yaml"]),
    # 5. every flag accepted is used
    Entry("dp_mf blt with bands", 5, ["train", "--run-json", json.dumps({**BLT, "bands": 3}), "--data", "DATA",
                                      "--out", "OUTDIR"]),
    Entry("dp_mf banded_toeplitz with buffers", 5, ["train", "--run-json", json.dumps(
        {**BLT, "strategy": "banded_toeplitz", "bands": 3}), "--data", "DATA", "--out", "OUTDIR"]),
    Entry("dp_mf optimal with an objective", 5, ["train", "--run-json", json.dumps(
        {**BLT, "strategy": "optimal", "buffers": None, "objective": "max"}), "--data", "DATA", "--out", "OUTDIR"]),
    Entry("dp_mf blt with 0 buffers", 5, ["train", "--run-json", json.dumps({**BLT, "buffers": 0}), "--data", "DATA",
                                          "--out", "OUTDIR"]),
    Entry("rdp with --sensitivity", 5, ["epsilon", "--accountant", "rdp", *EPS, "--sensitivity", "3"]),
    Entry("pld with --sensitivity", 5, ["epsilon", "--accountant", "pld", *EPS, "--sensitivity", "3"]),
    Entry("rdp with --clip", 5, ["epsilon", "--accountant", "rdp", *EPS, "--clip", "3"]),
    Entry("pld with --lr", 5, ["epsilon", "--accountant", "pld", *EPS, "--lr", "0.1"]),
    Entry("figure-draw --pdf X --png X", 5, ["figure-draw", "gaussian_sigma", "--table", "TABLE", "--pdf", "OUT.x",
                                             "--png", "OUT.x"]),
    Entry("index over missing results", 5, ["index", "--results", "FILE:no_results", "--out", "OUT_index.txt"]),
    Entry("index over missing results, with the config", 5, ["index", "--results", "FILE:no_results", "--config",
                                                             "FILE:mini.yaml", "--out", "OUT_index.txt"]),
    # 6. exit codes mean one thing
    Entry("train diverging to inf (lr 1e20, l2 1)", 6, ["train", "--run-json", json.dumps({**SGD, "lr": 1e20}), "--data",
                                                        "DATA", "--out", "OUTDIR"], expect=3),
    Entry("train with lr 1e250 (past float32)", 6, ["train", "--run-json", json.dumps({**RUN, "lr": 1e250}), "--data",
                                                    "DATA", "--out", "OUTDIR"], expect=3),
    Entry("a good run exits 0", 6, ["train", "--run-json", json.dumps(RUN), "--data", "DATA", "--out", "OUTDIR"],
          expect=0),
    # 7. nothing half-written on a full disk
    Entry("train on a full disk", 7, ["train", "--run-json", json.dumps(RUN), "--data", "DATA", "--out", "OUTDIR"],
          expect=3, mount="8k"),
    Entry("figure-draw on a full disk", 7, ["figure-draw", "gaussian_sigma", "--table", "TABLE", "--pdf", "OUT.pdf",
                                            "--png", "OUT.png"], expect=3, mount="24k"),
    Entry("prepare-data on a full disk", 7, ["prepare-data", "--dataset-json", json.dumps(
        {"kind": "synthetic", "train_size": 2000, "test_size": 500, "dim": 10}), "--out", "OUTDIR"], expect=3,
          mount="24k"),
    Entry("figure-table on a full disk", 7, ["figure-table", "gaussian_sigma", "--params-json", "{}", "--out",
                                             "OUT.csv"], expect=3, mount="8k"),
    # 8. one line of error, and none on a good run
    Entry("epsilon rdp, a good run", 8, ["epsilon", "--accountant", "rdp", *EPS], expect=0),
    Entry("epsilon pld, a good run", 8, ["epsilon", "--accountant", "pld", *EPS], expect=0),
    Entry("figure-table, a good run", 8, ["figure-table", "langevin_rdp", "--params-json", "{}", "--out", "OUT.csv"],
          expect=0),
    Entry("audit, a good run", 8, ["audit", "--audit-json", "AUDIT_GOOD", "--data", "DIGITS", "--out", "OUT.csv"],
          expect=0),
    Entry("figure-draw, a good run", 8, ["figure-draw", "gaussian_sigma", "--table", "TABLE", "--pdf", "OUT.pdf",
                                         "--png", "OUT.png"], expect=0),
    Entry("epsilon at q = 0.1 (dp_accounting warns: every later log line printed twice)", 8,
          ["epsilon", "--accountant", "rdp", "--noise-multiplier", "1", "--sampling-rate", "0.1", "--steps", "6",
           "--delta", "1e-5"], expect=0),
    Entry("epsilon at q = 1e-16 (dp_accounting's warnings)", 8, ["epsilon", "--accountant", "rdp", "--noise-multiplier",
                                                                 "2", "--sampling-rate", "1e-16", "--steps", "10",
                                                                 "--delta", "1e-5"], expect=0),
    Entry("train on a folder that is no dataset", 8, ["train", "--run-json", json.dumps(RUN), "--data", "FILE:no_results",
                                                      "--out", "OUTDIR"]),
    Entry("unknown accountant", 8, ["epsilon", "--accountant", "nope", *EPS]),
    # 9. the doors of the user's own experiment: model files and optimizers
    Entry("model file that does not import", 9, ["check-config", "FILE:model_import.yaml"]),
    Entry("model file without the class named", 9, ["train", "--config", "FILE:model_class.yaml", "--data", "DATA",
                                                    "--out", "OUTDIR"]),
    Entry("model with model_args its class does not take", 9, ["check-config", "FILE:model_args.yaml"]),
    Entry("model whose output size is not the number of classes", 9, ["check-config", "FILE:model_output.yaml"]),
    Entry("model whose output size is not the number of classes, trained", 9, [
        "train", "--config", "FILE:model_output_run.yaml", "--data", "DATA", "--out", "OUTDIR"]),
    Entry("model with a BatchNorm layer", 9, ["train", "--config", "FILE:model_bn.yaml", "--data", "DATA", "--out",
                                              "OUTDIR"]),
    Entry("betas with optimizer sgd", 9, ["train", "--run-json", json.dumps({**RUN, "betas": [0.9, 0.99]}), "--data",
                                          "DATA", "--out", "OUTDIR"]),
    Entry("momentum with optimizer adam", 9, ["check-config", "FILE:adam_momentum.yaml"]),
    Entry("lr_schedule step without lr_step_size", 9, ["train", "--run-json", json.dumps(
        {**RUN, "lr_schedule": "step"}), "--data", "DATA", "--out", "OUTDIR"]),
]

#: a model file of the list: a network on the synthetic data's 5 features, and three bad ones
MODELS = """from torch import nn


class Net(nn.Module):
    def __init__(self, input_shape, classes):
        super().__init__()
        self.out = nn.Linear(input_shape[0], classes)

    def forward(self, x):
        return self.out(x)


class Seven(Net):
    def __init__(self, input_shape):
        super().__init__(input_shape, 7)


class Normed(nn.Module):
    def __init__(self, input_shape, classes):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(input_shape[0], 4), nn.BatchNorm1d(4), nn.Linear(4, classes))

    def forward(self, x):
        return self.layers(x)
"""


def files(folder: Path, data: Path, table: Path) -> dict[str, Path]:
    """The input files the list names (FILE:<name>), written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    single = yaml.safe_dump(RUN, sort_keys=False)
    texts = {
        "dup_run.yaml": MINI + "  a: {method: sgd, model: logreg, dataset: synthetic, steps: 6, batch_size: 20}\n",
        "dup_key.yaml": MINI + "    steps: 3\n",
        "dup_single.yaml": single + "lr: 5.0\n",
        "mini.yaml": MINI,
        "cut.csv": table.read_text()[: int(0.6 * len(table.read_text()))],
        "cut_rows.csv": "".join(table.read_text().splitlines(keepends=True)[:-2]),
        "empty": "",
        "cut_summary.json": (data.parent / "run" / "summary.json").read_text()[:300],
        "lr_inf.yaml": MINI.replace("lr: 0.5", "lr: .inf"),
        "blt_cyclic_poisson.yaml": MINI.replace("method: dp_sgd", "method: dp_mf\n    strategy: blt\n    buffers: 2\n"
                                                "    sampling: cyclic_poisson").replace("accountant: rdp", "accountant: mf"),
        "pld_delta.yaml": MINI.replace("delta: 1.0e-5", "delta: 1.0e-300").replace("accountant: rdp", "accountant: pld"),
        "pld_delta_calibrated.yaml": MINI.replace("delta: 1.0e-5", "delta: 1.0e-300").replace(
            "accountant: rdp", "accountant: pld").replace("noise_multiplier: 1.0", "target_epsilon: 1.0"),
    }
    models = folder / "models.py"
    models.write_text(MODELS)
    (folder / "broken.py").write_text("import torch\nfrom torch import nn\nraise ImportError('no module named tensorflow')\n")
    texts.update({
        "model_import.yaml": MINI.replace("model: logreg", f"model: {folder / 'broken.py'}:Net"),
        "model_class.yaml": single.replace("model: logreg", f"model: {models}:Network"),
        "model_args.yaml": MINI.replace("model: logreg", f"model: {models}:Net\n    model_args: {{depth: 3}}"),
        "model_output.yaml": MINI.replace("model: logreg", f"model: {models}:Seven"),
        "model_output_run.yaml": single.replace("model: logreg", f"model: {models}:Seven"),
        "model_bn.yaml": single.replace("model: logreg", f"model: {models}:Normed"),
        "adam_momentum.yaml": MINI.replace("lr: 0.5", "lr: 0.5\n    optimizer: adam\n    momentum: 0.9"),
    })
    paths = {}
    for name, text in texts.items():
        (folder / name).write_text(text)
        paths[name] = folder / name
    paths["summary.json"] = data.parent / "run" / "summary.json"  # prepare() trains it
    (folder / "no_results").mkdir(exist_ok=True)
    paths["no_results"] = folder / "no_results"
    fifo = folder / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    paths["fifo"] = fifo
    return paths


def _audit(**change) -> dict:
    audit = yaml.safe_load(CONFIG.read_text())["audits"]["digits_last_iterate_convex"]
    return {**audit, "dataset": "synthetic", "steps": [2], "runs": 2, "seed": 0, **change}


@contextmanager
def fresh_stderr() -> Iterator[list[str]]:
    """What a fresh ``dplab`` process would also print on stderr for the block, which an
    in-process call under pytest does not show: the first line of each Python warning (under the
    interpreter's default filters: pytest's own record every warning and print none) and each
    library log record of level WARNING or above (which a fresh process prints through logging's
    last-resort handler: under pytest the root logger has handlers that print nothing).  dplab's
    own log lines are printed by its handler, and counted from stderr as they are."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            if not record.name.startswith("dplab"):
                lines.append(f"{record.levelname}:{record.name}:{record.getMessage()}")

    root, handler = logging.getLogger(), Collect(logging.WARNING)
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.resetwarnings()
            warnings.simplefilter("default")
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", category)
            try:
                yield lines
            finally:
                lines += [f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}" for w in caught]
    finally:
        root.removeHandler(handler)


class Hang(BaseException):
    """A call past its time limit (not an Exception: the CLI's handlers do not turn it into exit 1)."""


@contextmanager
def time_limit(cpu_seconds: float, wall_seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in this process once it has used ``cpu_seconds`` of CPU (a busy loop,
    however loaded the machine) or waited ``wall_seconds`` (a blocking read)."""

    def stop(signum, frame):
        raise Hang

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    signal.setitimer(signal.ITIMER_REAL, wall_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class Result:
    code: int | None  # None: timed out
    stderr: str
    seconds: float  # CPU seconds
    left: list[str]


def classify(entry: Entry, result: Result) -> list[str]:
    """The classes ``result`` falls in (empty: as it should be)."""
    if result.code is None:
        return ["hang"]
    found = []
    if result.code == 0 and entry.expect != 0:
        found.append("silent")
    elif result.code != entry.expect:
        found.append("exit_code")
    if result.code == 2 and entry.expect == 2 and result.seconds > LATE:
        found.append("late")
    if result.code != 0 and result.left:
        found.append("half_written")
    lines = [line for line in result.stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
    if len(lines) > (0 if result.code == 0 else 1):
        found.append("lines")
    return found


def resolve(argv: list[str], out: Path, data: Path, table: Path, paths: dict[str, Path]) -> list[str]:
    resolved = []
    for token in argv:
        if token.startswith("OUT"):
            token = str(out / ("out" + token[3:]))
        elif token.startswith("FILE:"):
            name = token[5:]
            token = name if name.startswith("/") else str(paths[name])
        resolved.append({"DATA": str(data), "DIGITS": str(data.parent / "digits"), "TABLE": str(table),
                         "AUDIT_RUNS": json.dumps(_audit(runs=10**9)),
                         "AUDIT_GOOD": json.dumps(_audit(dataset="digits", steps=[1, 4], runs=4))}.get(token, token))
    return resolved


def mount(folder: Path, size: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def umount(folder: Path) -> None:
    subprocess.run(["umount", str(folder)], capture_output=True, timeout=30)


def run_entry(entry: Entry, work: Path, data: Path, table: Path, paths: dict[str, Path],
              call: Callable[[list[str], float], tuple[int | None, str, float]], timeout: float) -> Result | None:
    """Run ``entry`` with ``call(argv, timeout)`` → (exit code or None, stderr, CPU seconds);
    ``None`` where its full disk cannot be mounted."""
    out = work / f"out_{ENTRIES.index(entry)}"
    shutil.rmtree(out, ignore_errors=True)
    if entry.mount and not mount(out, entry.mount):
        return None
    try:
        code, stderr, seconds = call(resolve(entry.argv, out, data, table, paths), timeout)
        left = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []
    finally:
        if entry.mount:
            umount(out)
    return Result(code, stderr, seconds, left)


#: `dplab ARGV` that then appends its CPU seconds to the file $BAD_INPUTS_CPU
CHILD = """import os, resource, sys
from dplab.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
usage = resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["BAD_INPUTS_CPU"], "a") as out:
    out.write(f"{usage.ru_utime + usage.ru_stime}\\n")
sys.exit(code)
"""


def subprocess_call(argv: list[str], timeout: float) -> tuple[int | None, str, float]:
    """``dplab ARGV`` in a child limited to :data:`CPU_LIMIT` CPU seconds and ``timeout`` wall
    seconds: (exit code, or None where a limit stopped it; stderr; the child's CPU seconds)."""

    def limit_cpu():
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT + 5))

    with tempfile.NamedTemporaryFile("r", suffix=".cpu") as cpu:
        try:
            done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=limit_cpu,
                                  env={**os.environ, "BAD_INPUTS_CPU": cpu.name})
        except subprocess.TimeoutExpired as err:
            stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
            return None, stderr, float(CPU_LIMIT)
        seconds = float(cpu.read().strip() or CPU_LIMIT)
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return None, done.stderr, seconds
    return done.returncode, done.stderr, seconds


def prepare(work: Path, call: Callable[[list[str], float], tuple[int | None, str, float]]) -> tuple[Path, Path, dict]:
    """A prepared synthetic dataset (and digits, beside it), a figure table and the list's files
    under ``work``."""
    data, table = work / "data", work / "table.csv"
    spec = json.dumps({"kind": "synthetic", "train_size": 200, "test_size": 50, "dim": 5})
    for argv in (["prepare-data", "--dataset-json", spec, "--dataset", "synthetic", "--out", str(data)],
                 ["prepare-data", "--dataset-json", '{"kind": "digits"}', "--dataset", "digits", "--out",
                  str(work / "digits")],
                 ["figure-table", "gaussian_sigma", "--params-json", "{}", "--out", str(table)],
                 ["train", "--run-json", json.dumps(RUN), "--data", str(data), "--out", str(work / "run")]):
        code, err, _ = call(argv, 600)
        if code != 0:
            raise SystemExit(f"setup failed: dplab {' '.join(argv)}: {err}")
    return data, table, files(work / "files", data, table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per input (default %(default)s)")
    parser.add_argument("--only", nargs="*", default=None, help="run only entries whose name contains one of these")
    parser.add_argument("--jobs", type=int, default=2, help="entries run at once (default %(default)s)")
    args = parser.parse_args(argv)
    entries = [e for e in ENTRIES if not args.only or any(s in e.name for s in args.only)]
    counts = dict.fromkeys(CLASSES, 0)
    with tempfile.TemporaryDirectory(prefix="bad_inputs.") as tmp:
        work = Path(tmp)
        data, table, paths = prepare(work, subprocess_call)
        with ThreadPoolExecutor(args.jobs) as pool:
            results = pool.map(lambda e: run_entry(e, work, data, table, paths, subprocess_call, args.timeout), entries)
        for entry, result in zip(entries, results):
            if result is None:
                print(f"skip      point {entry.point}  {entry.name} (cannot mount a tmpfs here)")
                continue
            found = classify(entry, result)
            for name in found:
                counts[name] += 1
            last = ([line for line in result.stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
                    or [""])[-1][:110]
            print(f"{','.join(found) or 'ok':<12} point {entry.point}  exit {result.code}  {result.seconds:5.1f} s CPU  "
                  f"{entry.name}  | {last}", flush=True)
    print(f"\n{len(entries)} inputs; " + ", ".join(f"{name}: {counts[name]}" for name in CLASSES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
