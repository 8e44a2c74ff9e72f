"""The one job model (dplab.jobs): the Snakemake rules and dvc.yaml hold exactly its jobs, a
pipeline's run is resolved in one place, once, and a figure of the registry becomes its jobs."""

from __future__ import annotations

import ast
import re
import shlex
import sys
import types

import pytest
import yaml

from conftest import ROOT, planned_by_snakemake
from dplab import jobs
from dplab.config import read_config
from dplab.dvc_yaml import CONFIG

#: rule params that the report reads, not the shell command
REPORT_PARAMS = {"caption"}


@pytest.fixture(scope="module")
def plan() -> jobs.JobList:
    return jobs.load(ROOT / CONFIG)


def test_the_snakemake_rules_plan_exactly_the_jobs(plan):
    """One Snakemake job per job of the plan (the same rule, outputs and inputs, its name the rule's
    wildcard; a job of grouped runs its own rule), no output made by two; the shell command
    carries each of the job's params as the rule passes them, and training and audit jobs ask
    for the job's resources."""
    planned = planned_by_snakemake(ROOT)
    by_outputs = {frozenset(job["outputs"]): job for job in planned}
    assert len(by_outputs) == len(planned) == len(plan.jobs)
    outputs = [path for job in planned for path in job["outputs"]]
    assert len(outputs) == len(set(outputs))
    for job in plan.jobs:
        smk = by_outputs[frozenset(job.output_files)]
        rule = (
            job.snakemake_rule if isinstance(job, jobs.RunsJob) else job.rule
        )  # a rule of its own
        assert (smk["rule"], smk["inputs"]) == (rule, set(job.input_files)), job.name
        assert smk["wildcards"] == (f"{job.wildcard}={job.name}" if job.wildcard else None), (
            job.name
        )
        tokens = shlex.split(smk["shell"])
        for key, value in job.params.items():
            if key not in REPORT_PARAMS:
                assert all(
                    str(v) in tokens or str(v) in smk["shell"]
                    for v in (value if isinstance(value, list) else [value])
                ), (job.name, key)
        for key in ("gpu", "mem_mb", "runtime"):
            want = getattr(job.resources, key)
            assert smk["resources"].get(key) == (None if want is None else str(want)), (
                job.name,
                key,
            )


def test_dvc_yaml_holds_exactly_the_jobs(plan):
    """The committed dvc.yaml: one stage per job, whose outputs (outs, metrics, plots) are the
    job's, whose deps are the job's inputs and the code under src/, and whose params are the config
    entries the job reads."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    made = {}
    for name, stage in stages.items():
        paths = [
            *stage.get("outs", []),
            *stage.get("metrics", []),
            *(p for plot in stage.get("plots", []) for p in plot),
        ]
        made[frozenset(paths)] = name
        assert len(paths) == len(set(paths)), name
    assert len(made) == len(stages) == len(plan.jobs)
    for job in plan.jobs:
        stage = stages[made[frozenset(job.output_files)]]
        assert [d for d in stage["deps"] if not d.startswith("src/")] == job.input_files, job.name
        reads = None if job.reads is None else list(job.reads)
        assert stage.get("params") == ([{CONFIG: reads}] if job.reads != () else None), job.name


def _callers(function: str) -> set[str]:
    """Every ``module:function`` of the package whose body calls ``function`` by name."""
    found = set()
    for path in (ROOT / "src" / "dplab").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                if any(
                    isinstance(call, ast.Call)
                    and getattr(call.func, "id", getattr(call.func, "attr", None)) == function
                    for call in ast.walk(node)
                ):
                    found.add(f"{module}:{node.name}")
    return found


def test_a_run_is_resolved_in_one_place_for_each_source_of_runs():
    """resolve_run is called by exactly four functions: the pipeline's runs (check_config, whose
    resolved runs the jobs hold), a run given alone (--run-json, a single-run YAML), an audit's
    method variants, and `dplab train --config F --run NAME` (the DVC form), which resolves its
    own entries alone rather than planning the config; the rules take the job's run."""
    assert _callers("resolve_run") == {
        "dplab.config:_check_run",
        "dplab.commands.train:pipeline_runs",
        "dplab.training.resolve:load_runs",
        "dplab.audit.entries:method_config",
    }


def test_planning_and_writing_dvc_yaml_resolve_each_run_once(monkeypatch):
    """`dplab dvc-yaml` (plan and stages) resolves each training job's run once, and each audited
    method once: the stages read the runs the jobs hold."""
    import dplab.config
    import dplab.training.resolve
    from dplab import dvc_yaml, entries

    calls = []
    # the config's own name, and the module's, which the audit's method_config imports when called
    for module in (dplab.config, dplab.training.resolve):
        real = module.resolve_run
        monkeypatch.setattr(
            module,
            "resolve_run",
            lambda raw, where="", real=real: calls.append(raw) or real(raw, where),
        )
    config = read_config(ROOT / CONFIG)
    dvc_yaml.render(config)
    training = entries.training_runs(config)
    audited = sum(len(entry["methods"]) for entry in config["audits"].values())
    assert len(calls) == len(training) + audited
    assert sorted(raw["name"] for raw in calls[: len(training)]) == sorted(
        entry["name"] for entry in training.values()
    )


def test_a_figure_of_the_registry_becomes_its_two_jobs_with_no_other_edit(monkeypatch):
    """A figure added to the registry (one line of its table) and named in the config's `figures`
    is a table job and a figure job (rule wildcard pattern included) and two DVC stages."""
    import dplab.figures
    from dplab import dvc_yaml, layout

    fake = types.ModuleType("dplab.figures.new_figure")
    fake.TITLE, fake.SOURCE, fake.CAPTION, fake.INPUTS = (
        "new",
        "new",
        "a new figure",
        {"summary": str},
    )
    fake.check = lambda config, params: None
    fake.inputs = lambda config, params: {"summary": layout.run_files(params["run"])["summary"]}
    monkeypatch.setitem(dplab.figures.FIGURES.entries, "new_figure", "dplab.figures.new_figure")
    monkeypatch.setitem(sys.modules, "dplab.figures.new_figure", fake)
    config = read_config(ROOT / CONFIG)
    config["figures"]["new_figure"] = {"run": "dp_sgd"}
    plan = jobs.plan(config)
    table, drawing = plan.job("figure_table", "new_figure"), plan.job("figure", "new_figure")
    assert table.inputs == {"summary": "results/runs/dp_sgd/summary.json"}
    assert table.output_files + drawing.output_files == layout.figure_files("new_figure")
    assert (
        re.fullmatch(plan.pattern("figure"), "new_figure")
        and drawing.params["caption"] == "a new figure"
    )
    assert set(layout.figure_files("new_figure")) <= set(plan.targets)
    stages = dvc_yaml.stages(jobs.JobList((table, drawing)))
    assert stages["figure_table-new_figure"]["deps"][0] == "results/runs/dp_sgd/summary.json"
    assert stages["figure-new_figure"]["outs"] == drawing.output_files
