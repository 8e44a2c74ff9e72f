"""The pipeline through `snakemake --profile workflow/profiles/slurm` on a live single-node SLURM
cluster (started by the test, see slurm_cluster.py): same results as a local run, CPU jobs on
the CPU partition, a CUDA run on the GPU partition with a GPU request, and a failing job that
ends the run with SLURM's status instead of hanging.

Skipped, with the reason, where SLURM is not installed and cannot be (no root or no apt-get).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess

import pytest
import yaml

from conftest import fresh_copy, run, tool_env
from slurm_cluster import SlurmCluster, Unavailable, install

pytestmark = [pytest.mark.slurm, pytest.mark.pipeline, pytest.mark.slow]

#: the plugin's status checks, quick for a test (the profile keeps squeue and waits longer)
FAST = ["--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "1", "--latency-wait", "5"]
#: every snakemake run is bounded: the plugin can wait forever on a status command that fails
LIMIT_S = 360


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        install()
        if os.geteuid() != 0:
            raise Unavailable("starting slurmctld/slurmd/munged needs root")
    except Unavailable as err:
        pytest.skip(f"no live SLURM cluster: {err}")
    slurm = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        slurm.start()
        yield slurm
    finally:
        slurm.stop()


@pytest.fixture
def slurm_project(built, tmp_path):
    """The built small project (same commit and config) with no results: the whole DAG again, on
    the cluster.  ``built`` (the local run of the same DAG) is the reference."""
    return fresh_copy(built, tmp_path / "project")


def start_slurm_run(cwd, slurm: SlurmCluster, *args: str) -> subprocess.Popen:
    cmd = ["snakemake", "--profile", "workflow/profiles/slurm", *FAST, *args]
    return subprocess.Popen(
        cmd, cwd=cwd, env={**tool_env(), **slurm.env()}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )


def snakemake_slurm(cwd, slurm: SlurmCluster, *args: str, proc: subprocess.Popen | None = None) -> tuple[int, str]:
    """Run snakemake with the SLURM profile; kill its whole process group after LIMIT_S."""
    proc = proc or start_slurm_run(cwd, slurm, *args)
    try:
        out, _ = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"snakemake on SLURM did not finish in {LIMIT_S} s:\n{out[-5000:]}")
    return proc.returncode, out


def result_files(root) -> dict[str, bytes]:
    """Every result file (tables, CSVs, JSON, data, figures, models) with its bytes."""
    files = {}
    for path in sorted((root / "results").rglob("*")):
        if path.suffix in {".csv", ".json", ".npz", ".md", ".pdf", ".png", ".pt"}:
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


#: what the cluster builds: one job of each of six rules, in two DAG levels (the SLURM plugin
#: polls job status at growing intervals, 1 + 11 + 21 + … s, so every level costs ~12–33 s)
TARGETS = {
    "prepare_data": "results/data/digits/train.npz",
    "factorization": "results/mf/banded_T20_m16.npz",
    "train": "results/runs/dp_sgd/summary.json",
    "train_grid_run": "results/grids/mf_vs_dpsgd/digits/mlp/dp_mf/eps1/seed0/summary.json",
    "figure_table": "results/tables/gaussian_sigma.csv",
    "figure": "results/figures/gaussian_sigma.png",
}


def test_slurm_run_equals_local_run(slurm_project, built, cluster):
    project, local = slurm_project, built
    rc, out = snakemake_slurm(project, cluster, *TARGETS.values())
    assert rc == 0, out[-5000:]
    submitted = re.findall(r"Auto-selected partition '(\w+)' for job (\w+)", out)
    assert {rule for _, rule in submitted} == set(TARGETS)
    assert {partition for partition, _ in submitted} == {"cpu"}  # no CUDA run: nothing on GPU nodes

    slurm_results = result_files(project)
    assert set(TARGETS.values()) <= set(slurm_results), sorted(slurm_results)
    local_results = {name: data for name, data in result_files(local).items() if name in slurm_results}
    assert set(slurm_results) == set(local_results)
    differ = [name for name in local_results if slurm_results[name] != local_results[name]]
    assert differ == [], differ  # model.pt, metrics, summaries, tables and figures, byte for byte

    again = run(["snakemake", "--profile", "workflow/profiles/slurm", "-n", *TARGETS.values()], cwd=project)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_cuda_run_asks_for_a_gpu_and_its_failure_ends_the_run(slurm_project, built, cluster):
    """A run with device: cuda goes to partition gpu with --gpus=1; on this GPU-less machine (the
    node's GPU is a count-only GRES) dplab train refuses, and snakemake stops with the job's SLURM
    status and log instead of waiting.  (The data is copied from ``built``: only train runs.)"""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the training job would succeed")
    project = slurm_project
    shutil.copytree(built / "results" / "data", project / "results" / "data")
    config_path = project / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["runs"]["dp_sgd"]["device"] = "cuda"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    rc, out = snakemake_slurm(project, cluster, "results/runs/dp_sgd/summary.json")
    assert rc != 0, out[-5000:]
    assert re.search(r"Auto-selected partition 'gpu' for job train", out), out[-5000:]
    failed = re.search(r"SLURM-job '(\d+)' failed, SLURM status is: 'FAILED'", out)
    assert failed, out[-5000:]
    job = subprocess.run(["scontrol", "show", "job", failed.group(1)], env={**tool_env(), **cluster.env()},
                         capture_output=True, text=True).stdout
    assert "Partition=gpu" in job and re.search(r"TresPerJob=\S*gpu:1", job), job
    assert "cuda requested" in (project / "logs" / "train" / "dp_sgd.log").read_text()
    assert not (project / "results" / "runs" / "dp_sgd" / "summary.json").exists()
