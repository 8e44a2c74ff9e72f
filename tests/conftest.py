"""Shared fixtures: the repository root, and a throw-away copy of the project for pipeline tests."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import background

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


#: the environment the session started with (not what a test or an in-process run sets meanwhile)
ENVIRON = dict(os.environ)


def tool_env() -> dict:
    """The environment the pipeline's tools run in: the session's (:data:`ENVIRON`, the same for a
    build in the background), this interpreter's bin first on PATH."""
    env = dict(ENVIRON)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


#: the commands :func:`run` is waiting for, each the leader of its own process group
RUNNING: set[subprocess.Popen] = set()


def run(
    cmd: list[str], cwd: Path, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run a command of the pipeline (snakemake, dvc, dplab) and return its completed process; on a
    timeout or an interrupt, the command and every process it started are killed."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=tool_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    RUNNING.add(proc)
    if background.STOP.is_set():  # a background build that goes on after the session ended
        kill(proc)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        kill(proc)
        proc.communicate()
        raise
    finally:
        RUNNING.discard(proc)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stdout}\n{stderr}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL to the process group of ``proc`` (a command of :func:`run`)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


#: the background builds, in the order the collected tests first need them
QUEUE: list[background.Build] = []


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The tests that need a background build run last (background.py); after ``-k`` and ``-m``
    have deselected theirs, so that only the builds of the tests that run are started."""
    QUEUE[:] = background.queue(items)
    background.last(items, QUEUE)


def pytest_collection_finish(session):
    """Start the DAG builds the selected tests need (background.py) while the others run."""
    if not session.config.option.collectonly:
        # DVC binds its log handlers to sys.stdout/sys.stderr when first imported (dvc.logger.setup
        # in dvc/__init__): imported by a background build (test_dvc_remote) while a test held
        # capsys or capfd, they would write to that test's closed streams ever after (a machine
        # without DVC, such as benchmarks/gpu_check.sh's, runs no test that needs it)
        with contextlib.suppress(ImportError):
            import dvc  # noqa: F401

        # pytest makes its base temporary folder on the first call, unlocked: a build's thread and
        # a test making it at once would each make one (mktemp then refuses its own path)
        factory = session.config._tmp_path_factory
        factory.getbasetemp()
        background.start(QUEUE, factory)


def pytest_terminal_summary(terminalreporter):
    """How long each background build took and how long the tests waited for it."""
    lines = background.summary()
    if lines:
        terminalreporter.write_sep("-", "background builds")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session, exitstatus):
    """A background build still running when the session ends (stopped early) is killed."""
    background.STOP.set()
    for proc in list(RUNNING):
        kill(proc)
    while background.UNDO:
        background.UNDO.pop()()


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    )
    return [line for line in out.stdout.splitlines() if line]


#: the figures the pipeline tests build (each figure's table is tested on its own elsewhere)
SMALL_FIGURES = ("accountants_vs_pld", "gaussian_sigma", "claims", "individual_privacy")
#: the runs they train: DP-SGD and its baseline on digits, and on MNIST-5000 the run that records
#: gradient norms and 004's third try (the sweep's run)
SMALL_RUNS = ("nonprivate", "dp_sgd", "gd_nonprivate", "try3_dp_sgd")
#: the datasets those runs, the grid and the audit read (MNIST-5000: the default DAG's real images)
SMALL_DATASETS = ("digits", "mnist5000")
#: a run in phases (dplab.training.phased): DP-SGD on digits, 20 steps at b = 64, σ = 1.2, then 10
#: at b = 128, σ = 2, lr 0.3; its ε that of the phases composed (rdp and pld)
SMALL_PHASED = {
    "method": "dp_sgd",
    "model": "logreg",
    "dataset": "digits",
    "batch_size": 64,
    "lr": 0.5,
    "clip": 1.0,
    "delta": 1.0e-5,
    "accountant": "rdp",
    "accountants": ["rdp", "pld", "naive"],
    "phases": [
        {"steps": 20, "noise_multiplier": 1.2},
        {"steps": 10, "batch_size": 128, "noise_multiplier": 2.0, "lr": 0.3},
    ],
}
#: the grid they train: two variants (DP-MF, whose factorization is a job of its own, and DP-SGD)
SMALL_GRID = "mf_vs_dpsgd"


def small_config() -> dict:
    """The default config cut down to one of each kind of job (every rule of the DAG runs, on
    fewer steps, runs, variants, seeds and figures): the whole DAG in well under a minute."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["datasets"] = {name: config["datasets"][name] for name in SMALL_DATASETS}
    config["runs"] = {name: config["runs"][name] for name in SMALL_RUNS}
    for entry in config["runs"].values():
        entry["steps"] = min(entry.get("steps", 40), 40)
    config["runs"]["dp_sgd_phases"] = SMALL_PHASED
    grid = config["grids"][SMALL_GRID]
    grid["base"]["steps"] = min(grid["base"].get("steps", 20), 20)
    grid.update(
        seeds=grid["seeds"][:1],
        variants=dict(list(grid["variants"].items())[:2]),
        target_epsilon=grid["target_epsilon"][:1],
    )
    config["grids"] = {SMALL_GRID: grid}
    config["audits"] = dict(list(config.get("audits", {}).items())[:1])  # the audit rule runs once
    for audit in config["audits"].values():
        audit.update(runs=8, chunk=8, steps=audit["steps"][:1])
    for entry in config.get("sweeps", {}).values():
        entry["points"] = 5
        entry["accountants"] = [a for a in entry["accountants"] if a in ("rdp", "pld")]
    config["figures"] = {k: v for k, v in config.get("figures", {}).items() if k in SMALL_FIGURES}
    return config


def synthetic_data(folder: Path, train_size: int, test_size: int):
    """A small synthetic dataset (dim 5, 3 classes, ‖x‖ ≤ 1) prepared in ``folder`` and loaded."""
    from dplab.training import data

    cfg = data.resolve_dataset(
        {
            "kind": "synthetic",
            "train_size": train_size,
            "test_size": test_size,
            "dim": 5,
            "classes": 3,
            "feature_norm": 1.0,
        },
        "synthetic",
    )
    data.write(folder, *data.prepare(cfg, "synthetic"))
    return data.load(folder)


def idx_bytes(array, code: int = 0x08) -> bytes:
    """``array`` as an IDX file of data type ``code``: 0x08 unsigned bytes (MNIST's format), 0x09
    signed bytes, 0x0D float32."""
    import struct

    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    return header + array.astype({0x08: "u1", 0x09: "i1", 0x0D: ">f4"}[code]).tobytes()


def write_mnist(
    folder: Path, n_train: int = 30, n_test: int = 12, gz: bool = True
) -> tuple[dict, dict]:
    """Tiny MNIST-format files (random images, labels 0..9 in turn) in ``folder``, gzipped or raw:
    (the arrays by file stem, the MD5 of each .gz)."""
    import gzip
    import hashlib

    import numpy as np

    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte": np.arange(n_test) % 10,
    }
    folder.mkdir(parents=True, exist_ok=True)
    sums = {}
    for stem, arr in arrays.items():
        blob = idx_bytes(arr)
        if gz:
            blob = gzip.compress(blob, mtime=0)
            (folder / f"{stem}.gz").write_bytes(blob)
            sums[stem] = hashlib.md5(blob).hexdigest()
        else:
            (folder / stem).write_bytes(blob)
    return arrays, sums


def dvc_repo(root: Path | str = "."):
    """DVC's ``Repo`` of the project at ``root`` with its site cache pinned there: the repo's
    config names a relative ``.dvc/site_cache``, which DVC resolves against the process's working
    directory, and tests change that directory while background builds use DVC in other threads."""
    from dvc.repo import Repo

    root = Path(root).resolve()
    return Repo(str(root), config={"core": {"site_cache_dir": str(root / ".dvc" / "site_cache")}})


def copy_project(dest: Path, dvc: bool = False) -> Path:
    """A copy of the project's tracked files at ``dest`` (a git repo of its own, one commit)
    with the small config (and, with ``dvc``, the dvc.yaml `dplab dvc-yaml` writes for it)."""
    for rel in tracked_files():
        src = ROOT / rel
        if src.is_symlink() or src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target, follow_symlinks=False)
    (dest / "config" / "config.yaml").write_text(yaml.safe_dump(small_config(), sort_keys=False))
    if dvc:
        run(["dplab", "dvc-yaml"], cwd=dest)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"],
        cwd=dest,
        check=True,
    )
    return dest


@functools.cache
def planned_by_snakemake(cwd: Path) -> tuple[dict, ...]:
    """Every job of `snakemake --dry-run --forceall --printshellcmds` in ``cwd`` (the repository:
    one Snakemake start-up for the tests of the job model and of DVC) but rule ``all``: rule,
    inputs, outputs, resources and shell command."""
    proc = run(
        ["snakemake", "--dry-run", "--forceall", "--printshellcmds", "--cores", "1"], cwd=cwd
    )
    found = []
    for rule, body, shell in re.findall(
        r"^(?:local)?rule (\w+):\n((?: {4}.*\n)+)Shell command: (.*)$",
        proc.stdout + proc.stderr,
        re.MULTILINE,
    ):
        if rule == "all":
            continue
        fields = dict(line.strip().split(": ", 1) for line in body.splitlines())
        resources = dict(
            item.split("=", 1) for item in fields.get("resources", "").split(", ") if "=" in item
        )
        found.append(
            {
                "rule": rule,
                "inputs": set(fields.get("input", "").split(", ")) - {""},
                "wildcards": fields.get("wildcards"),
                "outputs": set(fields["output"].split(", ")),
                "resources": resources,
                "shell": shell,
            }
        )
    return tuple(found)


@pytest.fixture
def project(tmp_path) -> Path:
    """A fresh copy of the project (small config, nothing built), for a test to change."""
    return copy_project(tmp_path / "project")


def build_small(factory) -> Path:
    """A copy of the project whose whole small DAG Snakemake has run locally (then the report)."""
    path = copy_project(factory.mktemp("built") / "project", dvc=True)
    run(["snakemake", "--cores", "2"], cwd=path, timeout=background.LIMIT_S)
    run(["snakemake", "--report", "results/report.html"], cwd=path)
    return path


background.register("built", build_small)


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """One copy of the project whose whole small DAG Snakemake has run locally (then the report):
    the reference the pipeline, report, DVC and SLURM tests read (built in the background from the
    start of the session: background.py).  Tests must not change it; one that needs to, copies it
    (``shutil.copytree(built, dest, symlinks=True)``: same commit)."""
    return background.get("built", tmp_path_factory)


def fresh_copy(built_path: Path, dest: Path) -> Path:
    """A copy of the built project (same commit and config) without its results, logs or
    Snakemake metadata: the DAG from scratch."""
    shutil.copytree(
        built_path,
        dest,
        symlinks=True,
        ignore=shutil.ignore_patterns("results", "logs", ".snakemake"),
    )
    return dest


@pytest.fixture
def step_loops(monkeypatch):
    """What the training loop is asked to step while a test runs: ``.calls``, one (run folder's
    name, first step, number of steps) per run or phase that reaches its step loop; setting
    ``.crash = (folder name, step)`` raises KeyboardInterrupt after that step (a killed job)."""
    from types import SimpleNamespace

    from dplab.training import loop

    record, step_loop = SimpleNamespace(calls=[], crash=None), loop._step_loop

    def recorded(run, out, progress, hook):
        steps = []

        def seen(step):
            steps.append(step)
            if record.crash == (out.name, step):
                raise KeyboardInterrupt

        try:
            return step_loop(run, out, progress, seen)
        finally:
            record.calls.append((out.name, steps[0] if steps else None, len(steps)))

    monkeypatch.setattr(loop, "_step_loop", recorded)
    return record


# Property tests draw the same examples on every run (CI must not be flaky).
@pytest.fixture(scope="module")
def synth():
    """60 training and 20 test points of the synthetic kind (5 features), as tensors: a dataset
    for training-loop tests that need no files (modules with their own ``synth`` override it)."""
    import torch

    from dplab.training import data

    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 60, "test_size": 20, "dim": 5}, "s"
    )
    train, test, info = data.prepare(cfg, "s")
    return data.Dataset(
        torch.from_numpy(train["x"]),
        torch.from_numpy(train["y"]),
        torch.from_numpy(test["x"]),
        torch.from_numpy(test["y"]),
        info,
    )


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
    """The digits dataset prepared by `dplab prepare-data` (read-only: tests train on it)."""
    from dplab.cli import main

    folder = tmp_path_factory.mktemp("digits")
    cfg = tmp_path_factory.mktemp("cfg") / "config.yaml"
    cfg.write_text(yaml.safe_dump({"datasets": {"digits": {"kind": "digits"}}}))
    assert (
        main(["prepare-data", "--config", str(cfg), "--dataset", "digits", "--out", str(folder)])
        == 0
    )
    return folder


from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("dplab", derandomize=True, deadline=None)
_hypothesis_settings.load_profile("dplab")


def model_settings(model: str, **keys):
    """The settings of a non-private run of ``model`` (what
    :func:`dplab.training.models.build` reads)."""
    from dplab.training.resolve import resolve_run
    from dplab.training.settings import RunSettings

    return RunSettings.of(resolve_run({"method": "sgd", "model": model, **keys}))


def summary_json(raw_run: dict, final: dict | None = None, **fields) -> dict:
    """A complete summary.json object (every key :class:`dplab.training.summary.RunSummary` reads)
    of the run ``raw_run`` (resolved here), neutral values but for ``final`` and ``fields``."""
    import dataclasses

    from dplab.training.resolve import resolve_run
    from dplab.training.summary import RunSummary

    out = {
        f.name: None
        for f in dataclasses.fields(RunSummary)
        if f.name not in ("details", "individual_privacy")
    }
    out.update(
        run=resolve_run(raw_run),
        dataset={
            "name": "synthetic",
            "kind": "synthetic",
            "train_size": 100,
            "test_size": 20,
            "input_shape": [5],
            "classes": 3,
        },
        final={
            "step": 10,
            "epoch": 1.0,
            "train_loss": 0.5,
            "test_loss": 0.5,
            "test_accuracy": 0.5,
            **(final or {}),
        },
        epsilon={},
        epsilon_lower={},
        epsilon_comparison={},
        epsilon_bound={},
        epsilon_covers={},
        excluded_accountants={},
        risk={"unavailable": "a test's summary"},
    )
    out.update(fields)
    return out
