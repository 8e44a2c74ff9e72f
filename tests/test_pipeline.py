"""The DAG end to end on a copy of the project: lint, run, report, no-op rerun."""

from __future__ import annotations

import pytest

from conftest import run

pytestmark = pytest.mark.pipeline


def test_lint_is_clean(project):
    proc = run(["snakemake", "--lint"], cwd=project)
    assert "Congratulations" in proc.stdout + proc.stderr


def test_whole_dag_runs_then_reruns_nothing(project):
    run(["snakemake", "--cores", "2"], cwd=project)
    results = project / "results"
    for path in ["accounting/dp_sgd.csv", "tables/accountants_vs_pld.csv", "figures/accountants_vs_pld.pdf",
                 "figures/accountants_vs_pld.png", "runs/dp_sgd/summary.json", "index.md"]:
        assert (results / path).stat().st_size > 0, path
    assert "accountants_vs_pld" in (results / "index.md").read_text()

    run(["snakemake", "--report", "results/report.html"], cwd=project)
    assert (results / "report.html").stat().st_size > 10_000

    again = run(["snakemake", "--cores", "2", "--dry-run"], cwd=project)
    assert "Nothing to be done" in again.stdout + again.stderr
