"""Recovery after a crash of Snakemake (README, Recovering from a crash): `make resume`."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
import yaml

import background
from conftest import BIN, copy_project, run, small_config, tool_env

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

#: the files of the tiny DAG below, which the built small DAG also makes from the same entries
SHARED = [
    "data/digits/train.npz",
    "data/digits/test.npz",
    "data/digits/info.json",
    "runs/dp_sgd/metrics.csv",
    "runs/dp_sgd/summary.json",
    "runs/dp_sgd/model.pt",
    "runs/dp_sgd/grad_norms.csv",
]


def crash_then_resume(factory) -> dict:
    """A tiny DAG (prepare_data, one training run) in a copy of the project: Snakemake and its
    running job killed with SIGKILL (a crash) while it trains, after prepare_data finished, and
    the model file it was writing left half written; then a plain rerun, then `make resume`. What
    each step left, for the test to check (in the background: background.py)."""
    project = copy_project(factory.mktemp("recovery") / "project")
    config = small_config()
    config.update(
        runs={"dp_sgd": config["runs"]["dp_sgd"]}, grids={}, audits={}, figures={}, sweeps={}
    )  # the sweep: try3
    (project / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    proc = subprocess.Popen(
        ["snakemake", "--cores", "1"],
        cwd=project,
        env=tool_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = project / "logs" / "runs" / "dp_sgd.log"
    # Snakemake marks a job's outputs incomplete (files under .snakemake/incomplete) as it starts
    # it, and its log may appear first: killed between the two, the rerun meets only the stale
    # lock (a race that failed this test once in CI).  prepare_data's marks are gone by then.
    marks = project / ".snakemake" / "incomplete"
    deadline = time.monotonic() + 300
    while not (
        log.exists()
        and any(p.is_file() and p.name != "migration_underway" for p in marks.rglob("*"))
    ):
        assert proc.poll() is None and time.monotonic() < deadline, "the training job never started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = {
        rel: (project / "results" / rel).exists()
        for rel in ("data/digits/info.json", "runs/dp_sgd/summary.json")
    }
    (project / "results" / "runs" / "dp_sgd" / "model.pt").write_bytes(
        b"half a model"
    )  # killed after this write

    plain = run(
        ["snakemake", "--cores", "1"], cwd=project, check=False
    )  # IncompleteFiles, then the lock
    stamps = {p.name: p.stat().st_mtime_ns for p in BIN.parent.glob(".installed-*")}
    run(
        ["make", f"VENV={BIN.parent}", "INSTALL=", "resume"], cwd=project
    )  # the venv as it is: no reinstall into it
    return {
        "project": project,
        "killed": killed,
        "plain": plain,
        "stamps": stamps,
        "stamps_after": {p.name: p.stat().st_mtime_ns for p in BIN.parent.glob(".installed-*")},
    }


background.register("recovered", crash_then_resume)


@pytest.fixture(scope="module")
def recovered(tmp_path_factory) -> dict:
    return background.get("recovered", tmp_path_factory)


def test_kill_9_of_snakemake_then_make_resume_gives_the_clean_results(recovered, built):
    """After the crash (:func:`crash_then_resume`) a plain rerun stops at the interrupted job's
    files (and then at the stale lock); `make resume` (one command) unlocks, makes the interrupted
    job's outputs again (--rerun-incomplete; one it had written is garbage) and finishes the DAG
    with the bytes a clean run gives."""
    project, plain = recovered["project"], recovered["plain"]
    assert recovered["killed"] == {"data/digits/info.json": True, "runs/dp_sgd/summary.json": False}
    assert plain.returncode != 0 and "--rerun-incomplete" in plain.stderr
    assert recovered["stamps_after"] == recovered["stamps"], (
        "make resume reinstalled the package into the venv the tests run in (from the copy)"
    )
    for rel in SHARED:
        assert (project / "results" / rel).read_bytes() == (built / "results" / rel).read_bytes(), (
            rel
        )
    assert (project / "results" / "report.html").exists() and (
        project / "results" / "provenance.json"
    ).exists()
