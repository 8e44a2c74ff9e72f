"""The pipeline through `snakemake --profile workflow/profiles/slurm` on a live single-node SLURM
cluster (started by the test, see slurm_cluster.py): same results as a local run; under
config/paper.yaml's `training_resources` every training job is submitted to partition gpu with
one GPU and every other job to partition cpu; a training job cancelled by SLURM is seen as
failed (SLURM's status, no hang), retried, and resumes from its checkpoint.

Skipped, with the reason, where SLURM is not installed and cannot be (no root or no apt-get).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

import pytest
import yaml

import background
from conftest import RUNNING, SMALL_GRID, fresh_copy, run, tool_env
from slurm_cluster import SlurmCluster, Unavailable, install

pytestmark = [pytest.mark.slurm, pytest.mark.pipeline, pytest.mark.slow]

#: the plugin's status checks, quick for a test (the profile keeps squeue and waits longer)
FAST = [
    "--slurm-init-seconds-before-status-checks",
    "1",
    "--seconds-between-status-checks",
    "1",
    "--latency-wait",
    "5",
]
#: every snakemake run is bounded: the plugin can wait forever on a status command that fails
#: (a guard against a hang: the runs share 2 cores with the tests and the other builds)
LIMIT_S = 900


def slurm_runs(factory) -> dict:
    """Both runs on one live cluster, started for them and stopped after them: what each test
    asserts on (:func:`dag_on_slurm`, :func:`cancelled_on_slurm`), or the error it raised.  The
    runs mostly wait for SLURM's status: the session makes them in the
    background (background.py)."""
    try:
        install()
        if os.geteuid() != 0:
            raise Unavailable("starting slurmctld/slurmd/munged needs root")
    except Unavailable as err:
        pytest.skip(f"no live SLURM cluster: {err}")
    built = background.get("built", factory)
    cluster = SlurmCluster(factory.mktemp("slurm"))
    background.UNDO.append(cluster.stop)  # if the session ends first
    runs = {}
    try:
        cluster.start()
        for name, procedure in (("dag", dag_on_slurm), ("cancelled", cancelled_on_slurm)):
            try:
                project = fresh_copy(built, factory.mktemp(name) / "project")
                runs[name] = procedure(cluster, built, project)
            except (Exception, pytest.fail.Exception) as err:  # the other run goes on
                runs[name] = err
    finally:
        try:
            background.UNDO.remove(cluster.stop)
        except ValueError:  # the session has ended, and stops the cluster
            pass
        else:
            cluster.stop()
    return runs


background.register("slurm_results", slurm_runs, lane="slurm")


@pytest.fixture(scope="module")
def slurm_results(tmp_path_factory) -> dict:
    return background.get("slurm_results", tmp_path_factory)


def outcome(slurm_results: dict, name: str) -> dict:
    """What the run ``name`` of :func:`slurm_runs` recorded (its error, raised here)."""
    if isinstance(slurm_results[name], BaseException):
        raise slurm_results[name]
    return slurm_results[name]


def edit_config(project, edit) -> dict:
    """Apply ``edit(config)`` to the project's config/config.yaml; return the new config."""
    path = project / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    edit(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return config


def start_slurm_run(cwd, slurm: SlurmCluster, *args: str) -> subprocess.Popen:
    """snakemake with the SLURM profile, in a process group that the session
    kills if it ends first."""
    cmd = ["snakemake", "--profile", "workflow/profiles/slurm", *FAST, *args]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**tool_env(), **slurm.env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    RUNNING.add(proc)
    return proc


def snakemake_slurm(
    cwd, slurm: SlurmCluster, *args: str, proc: subprocess.Popen | None = None
) -> tuple[int, str]:
    """Run snakemake with the SLURM profile; kill its whole process group after LIMIT_S."""
    proc = proc or start_slurm_run(cwd, slurm, *args)
    try:
        out, _ = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"snakemake on SLURM did not finish in {LIMIT_S} s:\n{out[-5000:]}")
    finally:
        RUNNING.discard(proc)
    return proc.returncode, out


def slurm(cluster: SlurmCluster, *cmd: str) -> str:
    return subprocess.run(
        cmd, env={**tool_env(), **cluster.env()}, capture_output=True, text=True, check=True
    ).stdout


def submitted_jobs(out: str, cluster: SlurmCluster) -> list[dict]:
    """What SLURM holds for every job snakemake submitted (``scontrol show job``; finished jobs
    stay listed for MinJobAge = 300 s): rule (from the plugin's --comment), partition, TRES."""
    jobs = []
    for job_id in re.findall(r"has been submitted with SLURM jobid (\d+)", out):
        line = slurm(cluster, "scontrol", "show", "job", "--oneliner", job_id)
        jobs.append(
            {
                "id": job_id,
                "rule": re.search(r"Comment=rule_(\w+?)(_wildcards_\S*)?\s", line).group(1),
                "partition": re.search(r"Partition=(\S+)", line).group(1),
                "gpus": re.search(r"TresPerJob=\S*gres:gpu:(\d+)", line),
                "time_limit": re.search(r"TimeLimit=(\S+)", line).group(1),
            }
        )
    return jobs


def result_files(root) -> dict[str, bytes]:
    """Every result file (tables, CSVs, JSON, data, figures, models) with its bytes."""
    files = {}
    for path in sorted((root / "results").rglob("*")):
        if path.suffix in {".csv", ".json", ".npz", ".md", ".pdf", ".png", ".pt"}:
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


#: what the cluster builds: one job of each of five rules, training both kinds of run (an entry of
#: `runs` that records gradient norms, a grid's run: with two seeds, a job of both, config
#: group_runs), in two DAG levels (the SLURM plugin polls
#: job status at growing intervals, 1 + 11 + 21 + … s, so every level costs ~12–33 s)
TARGETS = [
    "results/data/digits/train.npz",  # prepare_data
    "results/mf/banded_T20_m16.npz",  # factorization
    # train (a run of `runs`, record_grad_norms; on MNIST-5000: a 2nd prepare_data)
    "results/runs/gd_nonprivate/grad_norms.csv",
    "results/grids/mf_vs_dpsgd/digits/mlp/dp_mf/eps1/seed0/summary.json",  # train (a grid's run)
    "results/tables/gaussian_sigma.csv",  # figure_table
    "results/figures/gaussian_sigma.png",  # figure
]


def dag_on_slurm(cluster: SlurmCluster, local, project) -> dict:
    """:data:`TARGETS` built on the cluster in ``project`` (a copy of the built project ``local``,
    without results) under config/paper.yaml's training_resources: snakemake's return code and
    output, and what SLURM holds for each job it submitted."""
    paper = yaml.safe_load((project / "config" / "paper.yaml").read_text())
    edit_config(
        project,
        lambda c: (
            c.update(training_resources=paper["training_resources"]),
            c["grids"][SMALL_GRID].update(seeds=[0, 1]),
        ),
    )
    rc, out = snakemake_slurm(project, cluster, *TARGETS)
    return {
        "project": project,
        "training_resources": paper["training_resources"],
        "rc": rc,
        "out": out,
        "jobs": submitted_jobs(out, cluster),
    }


def test_slurm_run_equals_local_run_and_training_jobs_get_a_gpu(slurm_results, built):
    """With config/paper.yaml's training_resources (device stays auto: the node's GPUs are fake,
    so training runs on its CPU), every training job goes to partition gpu with --gpus=1 and
    every other job to partition cpu; the grid's two seeds are one job (group_runs: epsilon, the
    variant's runs) with twice a run's time limit; the results are the local run's, byte for
    byte (the second seed, which the local run lacks, aside)."""
    record = outcome(slurm_results, "dag")
    project, local, jobs = record["project"], built, record["jobs"]
    assert record["training_resources"]["gpus"] == 1
    assert record["rc"] == 0, record["out"][-5000:]
    cell = "train_runs__grids_mf_vs_dpsgd_digits_mlp_dp_mf"
    assert sorted(job["rule"] for job in jobs) == sorted(
        ["prepare_data", "prepare_data", "factorization", "train", cell, "figure_table", "figure"]
    ), jobs
    hours = record["training_resources"]["runtime"] // 60
    for job in jobs:
        if job["rule"] in ("train", cell):
            assert job["partition"] == "gpu" and job["gpus"] and job["gpus"].group(1) == "1", job
            assert job["time_limit"] == f"{hours * (2 if job['rule'] == cell else 1):02d}:00:00", (
                job
            )
        else:
            assert job["partition"] == "cpu" and job["gpus"] is None, job
    assert (project / TARGETS[3].replace("seed0", "seed1")).exists()

    on_slurm = {name: data for name, data in result_files(project).items() if "/seed1/" not in name}
    assert set(TARGETS) <= set(on_slurm), sorted(on_slurm)
    local_results = {name: data for name, data in result_files(local).items() if name in on_slurm}
    assert set(on_slurm) == set(local_results)
    differ = [name for name in local_results if on_slurm[name] != local_results[name]]
    assert differ == [], (
        differ
    )  # model.pt, metrics, gradient norms, summaries, tables and figures, byte for byte
    assert len(on_slurm["results/runs/gd_nonprivate/grad_norms.csv"].splitlines()) > 100

    again = run(["snakemake", "--profile", "workflow/profiles/slurm", "-n", *TARGETS], cwd=project)
    assert "Nothing to be done" in again.stdout + again.stderr


#: a run long enough (~5 s of training) to be cancelled between two checkpoints
CHECKPOINT_EVERY = 100
LONG_RUN = {
    "method": "dp_sgd",
    "model": "logreg",
    "dataset": "digits",
    "steps": 4000,
    "batch_size": 64,
    "lr": 0.5,
    "clip": 1.0,
    "noise_multiplier": 3.0,  # at 1.0 the CPU stream's δ floor (1.7e-4) exceeds δ: refused
    "accountants": ["rdp"],
    "log_every": 400,
    "checkpoint_every": CHECKPOINT_EVERY,
}


def checkpoint_step(path) -> int | None:
    """The step of a training checkpoint, None while there is none (writes are atomic renames)."""
    from dplab.training import checkpoint

    try:
        return int(checkpoint.read(path)["step"])
    except FileNotFoundError:
        return None


def cancelled_on_slurm(cluster: SlurmCluster, built, project) -> dict:
    """A long training job on the cluster, in ``project`` (a copy of the built project ``built``
    with its data), scancelled (what SLURM does to a job at its time limit or on preemption:
    SIGTERM, then SIGKILL) once it has checkpointed twice, beside the same run uninterrupted
    (locally): what snakemake and the two runs left, the checkpoint steps
    seen, the step at scancel."""
    shutil.copytree(built / "results" / "data", project / "results" / "data")
    edit_config(project, lambda c: c["runs"].update(long=LONG_RUN))
    proc = start_slurm_run(project, cluster, "results/runs/long/summary.json")
    reference = project.parent / "reference"  # uninterrupted, meanwhile, locally (DVC's command)
    uninterrupted = subprocess.Popen(
        [
            "dplab",
            "train",
            "--config",
            "config/config.yaml",
            "--run",
            "long",
            "--data",
            "results/data/digits",
            "--out",
            str(reference),
            "--threads",
            "1",
        ],
        cwd=project,
        env=tool_env(),
        stdout=subprocess.DEVNULL,
    )

    run_dir = project / "results" / "runs" / "long"
    seen, cancelled_at, job_id = [], None, None  # checkpoint steps as observed; the step at scancel
    deadline = time.monotonic() + LIMIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        step = checkpoint_step(run_dir / "checkpoint.pt")
        if step is not None and seen[-1:] != [step]:
            seen.append(step)
        if cancelled_at is None and step is not None and step >= 2 * CHECKPOINT_EVERY:
            running = slurm(
                cluster, "squeue", "--noheader", "--states=RUNNING", "--format=%i %Z"
            ).splitlines()
            [job_id] = [line.split()[0] for line in running if line.endswith(f" {project}")]
            slurm(cluster, "scancel", job_id)
            cancelled_at = step
        time.sleep(0.05)
    rc, out = snakemake_slurm(project, cluster, proc=proc)
    return {
        "rc": rc,
        "out": out,
        "seen": seen,
        "cancelled_at": cancelled_at,
        "job_id": job_id,
        "rules": [job["rule"] for job in submitted_jobs(out, cluster)],
        "run_dir": run_dir,
        "reference": reference,
        "uninterrupted": uninterrupted.wait(timeout=LIMIT_S),
    }


def test_a_cancelled_training_job_is_retried_and_resumes_from_its_checkpoint(slurm_results):
    """The job scancelled once the run has checkpointed twice (:func:`cancelled_on_slurm`):
    snakemake reports SLURM's status CANCELLED, submits the job again (the profile's retries),
    the new attempt continues from checkpoint.pt (its steps never go back), and the finished run
    is byte-identical to an uninterrupted one."""
    record = outcome(slurm_results, "cancelled")
    out, seen, cancelled_at = record["out"], record["seen"], record["cancelled_at"]
    run_dir = record["run_dir"]
    assert record["rc"] == 0, out[-5000:]
    assert cancelled_at is not None, seen
    job_id = record["job_id"]
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'CANCELLED'" in out, out[-5000:]
    assert record["rules"] == ["train", "train"]  # the retry
    assert seen == sorted(seen) and seen[-1] > cancelled_at, (
        seen,
        cancelled_at,
    )  # resumed, not restarted
    assert not (run_dir / "checkpoint.pt").exists()
    assert record["uninterrupted"] == 0
    for name in ("metrics.csv", "summary.json", "model.pt", "grad_norms.csv"):
        assert (run_dir / name).read_bytes() == (record["reference"] / name).read_bytes(), name
