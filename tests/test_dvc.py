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


def test_dvc_yaml_is_generated_from_the_config_and_current():
    """dvc.yaml is `dplab dvc-yaml`'s output for config/config.yaml (CI fails when it is stale)."""
    from dplab.config import load_config
    from dplab.dvc_yaml import CONFIG, render

    assert (ROOT / "dvc.yaml").read_text() == render(load_config(ROOT / CONFIG))
    assert run(["dplab", "dvc-yaml", "--check"], cwd=ROOT).returncode == 0


def test_each_dvc_stage_resolves_to_the_entry_its_snakemake_job_passes():
    """Where the Snakemake rule passes a run entry as JSON, the DVC stage's `--config` + name gives
    `dplab train` the same resolved run (so both paths compute the same thing)."""
    import shlex

    from dplab import jobs as dplab_jobs
    from dplab.commands.train import _grid_run
    from dplab.config import load_config
    from dplab.dvc_yaml import CONFIG, stages
    from dplab.training.config import load_run, resolve_run

    config = load_config(ROOT / CONFIG)
    jobs = dplab_jobs.training_runs(config)
    dvc = stages(config)
    for folder, entry in jobs.items():
        argv = shlex.split(dvc["train-" + folder.removeprefix("runs/").replace("/", "-").replace(".", "-")]["cmd"])
        name = argv[argv.index("--run") + 1]
        path = str(ROOT / CONFIG)
        got = _grid_run(path, name) if name.startswith("grids/") else load_run(path, name)
        assert got == resolve_run(entry), folder
