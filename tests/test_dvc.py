"""DVC: the same outputs as the Snakemake DAG, and a push/pull round trip through a remote."""

from __future__ import annotations

import hashlib

import pytest

from conftest import ROOT, run


def snakemake_outputs(cwd) -> set[str]:
    proc = run(["snakemake", "--summary"], cwd=cwd)
    lines = [line.split("\t") for line in proc.stdout.splitlines()]
    return {cols[0] for cols in lines[1:] if cols and cols[0].startswith("results/")}


def dvc_outputs(cwd) -> set[str]:
    from dvc.repo import Repo

    with Repo(str(cwd)) as repo:
        return {out.def_path for stage in repo.index.stages for out in stage.outs}


def test_dvc_config_keeps_analytics_off_and_cache_local():
    text = (ROOT / ".dvc" / "config").read_text()
    assert "analytics = false" in text
    assert "site_cache_dir = .dvc/site_cache" in text


def test_dvc_and_snakemake_name_the_same_outputs():
    """Every DVC out is a Snakemake output or a folder of them (a grid's runs), and every
    Snakemake output is, or lies in, a DVC out."""
    dvc, smk = dvc_outputs(ROOT), snakemake_outputs(ROOT)

    def covered(path: str) -> bool:
        return any(path == out or path.startswith(out + "/") for out in dvc)

    assert all(covered(path) for path in smk), sorted(p for p in smk if not covered(p))
    assert all(any(p == out or p.startswith(out + "/") for p in smk) for out in dvc)


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.pipeline
def test_push_delete_pull_gives_identical_results(project, tmp_path):
    run(["dvc", "repro", "--quiet"], cwd=project)
    outs = [project / out for out in dvc_outputs(project)]
    files = sorted(f for out in outs for f in ([out] if out.is_file() else out.rglob("*")) if f.is_file())
    assert files and all(out.exists() for out in outs)
    before = {p: digest(p) for p in files}
    remote = tmp_path / "remote"
    run(["dvc", "remote", "add", "-d", "local", str(remote)], cwd=project)
    run(["dvc", "push"], cwd=project)
    for p in files:
        p.unlink()
    run(["dvc", "pull"], cwd=project)
    assert {p: digest(p) for p in files} == before
