"""The pipeline through `snakemake --profile workflow/profiles/slurm` on a live single-node SLURM
cluster (started by the test, see slurm_cluster.py): same results as a local run, CPU jobs on
the CPU partition, a CUDA run on the GPU partition with a GPU request, and a failing job that
ends the run with SLURM's status instead of hanging.

Skipped, with the reason, where SLURM is not installed and cannot be (no root or no apt-get).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess

import pytest
import yaml

from conftest import run, tool_env
from slurm_cluster import SlurmCluster, Unavailable, install

pytestmark = [pytest.mark.slurm, pytest.mark.pipeline, pytest.mark.slow]

#: the plugin's status checks, quick for a test (the profile keeps squeue and waits longer)
FAST = ["--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "5"]
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
def slurm_project(project):
    """The small test config with one figure (accountants_vs_pld) and every rule of the DAG, so
    that the live-cluster runs stay within minutes on 2 cores."""
    path = project / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    if set(config["figures"]) != {"accountants_vs_pld"}:
        config["figures"] = {"accountants_vs_pld": config["figures"]["accountants_vs_pld"]}
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "one figure"], cwd=project)
    return project


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
    """Every numeric result (tables, CSVs, JSON, data) with its bytes; figures are drawn from tables."""
    files = {}
    for path in sorted((root / "results").rglob("*")):
        if path.suffix in {".csv", ".json", ".npz", ".md"}:
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


def test_slurm_run_equals_local_run(slurm_project, cluster, tmp_path):
    project = slurm_project
    local = tmp_path / "local"
    shutil.copytree(project, local, symlinks=True)
    slurm_run = start_slurm_run(project, cluster)  # the local reference runs while SLURM jobs wait
    run(["snakemake", "--cores", "2"], cwd=local)
    rc, out = snakemake_slurm(project, cluster, proc=slurm_run)
    assert rc == 0, out[-5000:]
    submitted = re.findall(r"Auto-selected partition '(\w+)' for job (\w+)", out)
    assert {rule for _, rule in submitted} >= {"prepare_data", "train", "sweep", "figure_table", "figure", "index"}
    assert {partition for partition, _ in submitted} == {"cpu"}  # no CUDA run: nothing on GPU nodes

    commit = run(["git", "rev-parse", "HEAD"], cwd=project).stdout.strip()
    for root in (project, local):
        provenance = json.loads((root / "results" / "provenance.json").read_text())
        assert provenance["git"] == {"commit": commit, "dirty": False}
        assert {f"results/tables/{f}.csv" for f in provenance["config"]["figures"]} <= set(provenance["outputs"])

    slurm_results, local_results = result_files(project), result_files(local)
    assert set(slurm_results) == set(local_results)
    assert len(slurm_results) >= 8, sorted(slurm_results)
    differ = [name for name in local_results if slurm_results[name] != local_results[name]]
    assert differ in ([], ["results/provenance.json"]), differ
    # the provenance records agree but for the hashes of PDFs (a PDF stores its creation time)
    # and of model.pt (torch.save stores the name of the temporary file it wrote to)
    records = [json.loads(files["results/provenance.json"]) for files in (slurm_results, local_results)]
    for record in records:
        record["outputs"] = {k: v for k, v in record["outputs"].items() if not k.endswith((".pdf", ".pt"))}
    assert records[0] == records[1]

    again = run(["snakemake", "--profile", "workflow/profiles/slurm", "-n"], cwd=project)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_cuda_run_asks_for_a_gpu_and_its_failure_ends_the_run(slurm_project, cluster):
    """A run with device: cuda goes to partition gpu with --gpus=1; on this GPU-less machine (the
    node's GPU is a count-only GRES) dplab train refuses, and snakemake stops with the job's SLURM
    status and log instead of waiting."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the training job would succeed")
    project = slurm_project
    config_path = project / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["runs"]["dp_sgd"]["device"] = "cuda"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    rc, out = snakemake_slurm(project, cluster, "results/runs/dp_sgd/summary.json")
    assert rc != 0, out[-5000:]
    assert re.search(r"Auto-selected partition 'gpu' for job train", out), out[-5000:]
    assert re.search(r"Auto-selected partition 'cpu' for job prepare_data", out), out[-5000:]
    failed = re.search(r"SLURM-job '(\d+)' failed, SLURM status is: 'FAILED'", out)
    assert failed, out[-5000:]
    job = subprocess.run(["scontrol", "show", "job", failed.group(1)], env={**tool_env(), **cluster.env()},
                         capture_output=True, text=True).stdout
    assert "Partition=gpu" in job and re.search(r"TresPerJob=\S*gpu:1", job), job
    assert "cuda requested" in (project / "logs" / "train" / "dp_sgd.log").read_text()
    assert not (project / "results" / "runs" / "dp_sgd" / "summary.json").exists()
