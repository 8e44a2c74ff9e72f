"""The DAG end to end on a copy of the project: lint, run, report, no-op rerun."""

from __future__ import annotations

import re

import pytest

from conftest import run

pytestmark = pytest.mark.pipeline


def test_lint_is_clean(project):
    proc = run(["snakemake", "--lint"], cwd=project)
    assert "Congratulations" in proc.stdout + proc.stderr


def test_whole_dag_runs_then_reruns_nothing(built):
    """``built`` ran ``snakemake --cores 2`` and ``snakemake --report`` on the small config."""
    results = built / "results"
    for path in ["accounting/dp_sgd.csv", "tables/accountants_vs_pld.csv", "figures/accountants_vs_pld.pdf",
                 "figures/accountants_vs_pld.png", "runs/dp_sgd/summary.json", "index.md"]:
        assert (results / path).stat().st_size > 0, path
    assert "accountants_vs_pld" in (results / "index.md").read_text()

    assert (results / "report.html").stat().st_size > 10_000
    listed = {line.split()[0] for line in run(["snakemake", "--list-rules"], cwd=built).stdout.splitlines() if line[:1].isalnum()}
    log = "".join(p.read_text() for p in (built / ".snakemake" / "log").glob("*.snakemake.log"))
    ran = set(re.findall(r"^(?:local)?rule (\w+):", log, re.MULTILINE))
    assert listed == ran and len(listed) >= 12, (listed, ran)  # the small config runs every rule
    again = run(["snakemake", "--cores", "2", "--dry-run"], cwd=built)
    assert "Nothing to be done" in again.stdout + again.stderr
