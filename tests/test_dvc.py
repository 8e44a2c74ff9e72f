"""DVC: the repo config, and the same outputs as the Snakemake DAG (runs: test_dvc_remote.py)."""

from __future__ import annotations

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
