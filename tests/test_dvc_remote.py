"""DVC for real: `dvc repro` from scratch gives Snakemake's results byte for byte; push, delete and
pull back; a fresh clone that pulls byte-identical results and that Snakemake then considers up to
date; and an experiment that reruns only the stages a changed value affects."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import pytest

import background
from conftest import dvc_repo, fresh_copy, run

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def digests(root, paths) -> dict[str, str]:
    """SHA-256 of each file of ``paths`` (directory outputs: of every file below them)."""
    files = []
    for p in paths:
        path = root / p
        files += sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    return {
        f.relative_to(root).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files
    }


def dvc_graph(cwd):
    """DVC's stages (addressing names) and, for each, the stages downstream of it."""
    with dvc_repo(cwd) as repo:
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        names = {stage: stage.name for stage in graph.nodes}
        outs = sorted(out.def_path for stage in graph.nodes for out in stage.outs)
        downstream = {names[s]: set() for s in graph.nodes}
        for stage in graph.nodes:
            for dep in _ancestors(graph, stage):
                downstream[names[dep]].add(names[stage])
        return outs, downstream


def _ancestors(graph, stage):
    import networkx as nx

    return nx.descendants(graph, stage)


def ran_stages(output: str) -> tuple[set[str], set[str]]:
    """(stages DVC ran, stages it skipped as unchanged) from `dvc exp run` / `dvc repro` output."""
    ran = set(re.findall(r"Running stage '([^']+)'", output))
    skipped = set(re.findall(r"Stage '([^']+)' didn't change, skipping", output))
    return ran, skipped


def check_metrics_and_plots(project):
    """`dvc metrics show` lists every run's metrics.json with the numbers of its summary.json, and
    `dvc plots show` writes its HTML page (no network)."""
    shown = json.loads(run(["dvc", "metrics", "show", "--json"], cwd=project).stdout)[""]["data"]
    # a run in phases keeps each phase's own files in phase<j>/ (not DVC metrics: the run's are)
    runs = sorted(
        p
        for p in project.glob("results/*/**/summary.json")
        if not re.fullmatch(r"phase\d+", p.parent.name)
    )
    assert runs and {
        p.relative_to(project).as_posix().replace("summary.json", "metrics.json") for p in runs
    } == set(shown)
    for path in runs:
        summary = json.loads(path.read_text())
        numbers = shown[
            path.relative_to(project).as_posix().replace("summary.json", "metrics.json")
        ]["data"]
        # DVC lists numbers only: a non-private run's δ (null) and ε ({}) are absent
        assert (
            numbers.get("epsilon", {}) == summary["epsilon"]
            and numbers.get("delta") == summary["delta"]
        )
        assert {k: numbers[k] for k in ("test_accuracy", "test_loss", "train_loss")} == {
            k: summary["final"][k] for k in ("test_accuracy", "test_loss", "train_loss")
        }
    assert any(v["data"].get("epsilon") for v in shown.values())  # a private run's ε is listed
    run(["dvc", "plots", "show", "-o", "plots"], cwd=project)
    page = (project / "plots" / "index.html").read_text()
    assert "results/runs/dp_sgd/metrics.csv" in page and "results/accounting/dp_sgd.csv" in page
    shutil.rmtree(project / "plots")


def repro_push_pull_clone_then_experiment(factory):
    """The whole check, made in the background (background.py: it is mostly DVC's and Snakemake's
    start-up); what fails in it fails the test below."""
    built, tmp_path = background.get("built", factory), factory.mktemp("dvc_remote")
    project = fresh_copy(built, tmp_path / "project")
    commit = run(["git", "rev-parse", "HEAD"], cwd=project).stdout.strip()
    run(["dvc", "repro", "--quiet"], cwd=project, timeout=background.LIMIT_S)
    outs, _ = dvc_graph(project)
    before = digests(project, outs)
    assert before == digests(built, outs)  # DVC's stages give Snakemake's results, byte for byte
    check_metrics_and_plots(project)
    provenance = json.loads((project / "results" / "provenance.json").read_text())
    assert provenance["git"] == {"commit": commit, "dirty": False}
    covered = {
        p: h
        for p, h in before.items()
        if p not in {"results/provenance.json", "results/index.md"}
        and not p.startswith("results/data/")
    }
    assert {p: provenance["outputs"][p]["sha256"] for p in covered} == covered
    remote = tmp_path / "remote"
    run(["dvc", "remote", "add", "-d", "shared", str(remote)], cwd=project)
    run(["git", "add", "dvc.lock", ".dvc/config"], cwd=project)
    run([*GIT, "commit", "-qm", "results"], cwd=project)
    run(["dvc", "push"], cwd=project)
    for name in before:  # delete every result, pull them back in place
        (project / name).unlink()
    run(["dvc", "pull"], cwd=project)
    assert digests(project, outs) == before

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(project), str(clone)], cwd=tmp_path)
    assert not (clone / "results").exists()
    run(["dvc", "pull"], cwd=clone)
    assert digests(clone, outs) == before
    status = run(["dvc", "status"], cwd=clone)
    assert "Data and pipelines are up to date" in status.stdout, status.stdout

    # A checkout gives every pulled file a new mtime in no particular order, and the clone has no
    # .snakemake metadata, so Snakemake may see inputs newer than outputs. dvc status (above)
    # proves the results match this commit's code and params; --touch records that for Snakemake.
    run(["snakemake", "--touch", "--cores", "1"], cwd=clone)
    plan = run(["snakemake", "-n"], cwd=clone)
    assert "Nothing to be done" in plan.stdout + plan.stderr, plan.stdout
    assert digests(clone, outs) == before  # --touch changed times only

    # and the touched metadata still catches a real change: a new learning rate reruns training
    config = (clone / "config" / "config.yaml").read_text()
    (clone / "config" / "config.yaml").write_text(config.replace("lr: 0.5", "lr: 0.25", 1))
    plan = run(["snakemake", "-n"], cwd=clone)
    assert "Params have changed since last execution" in plan.stdout, plan.stdout

    # an experiment with another learning rate for one run reruns only what depends on it
    # (-S needs the params file: without it DVC looks for params.yaml)
    _, downstream = dvc_graph(project)
    proc = run(
        ["dvc", "exp", "run", "-S", "config/config.yaml:runs.dp_sgd.lr=0.25"],
        cwd=project,
        timeout=background.LIMIT_S,
    )
    ran, skipped = ran_stages(proc.stdout + proc.stderr)
    assert "train-dp_sgd" in ran
    # everything that ran is train-dp_sgd or downstream of it; the rest was skipped as unchanged
    assert ran <= {"train-dp_sgd"} | downstream["train-dp_sgd"], ran
    assert {"prepare_data-digits", "train-nonprivate"} <= skipped, skipped
    assert ran | skipped == set(downstream), (ran, skipped)

    assert (
        "sweep-dp_sgd" in downstream["train-try3_dp_sgd"]
    )  # the graph is read the right way round (the sweep is of try 3)


background.register("dvc_remote", repro_push_pull_clone_then_experiment)


@pytest.fixture(scope="module")
def dvc_remote(tmp_path_factory):
    """A call that waits for :func:`repro_push_pull_clone_then_experiment`, raising what failed."""
    return lambda: background.get("dvc_remote", tmp_path_factory)


def test_repro_push_pull_clone_then_experiment(dvc_remote):
    """`dvc repro` gives Snakemake's bytes; push, pull, a clone, an
    experiment (the module's text)."""
    dvc_remote()
