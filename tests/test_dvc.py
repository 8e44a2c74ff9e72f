"""DVC: the repo config, the same outputs as the Snakemake DAG, and what `dvc plots show` draws
(repro, remote, experiments: test_dvc_remote.py)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, dvc_repo, planned_by_snakemake, run, small_config

#: a run of the small DAG with several claimed accountants, and its sweep
RUN, SWEEP = "results/runs/dp_sgd/metrics.csv", "results/accounting/dp_sgd.csv"


def snakemake_outputs(cwd) -> set[str]:
    """What the jobs of the Snakemake DAG in ``cwd`` write."""
    return {path for job in planned_by_snakemake(cwd) for path in job["outputs"]}


def dvc_outputs(cwd) -> set[str]:
    with dvc_repo(cwd) as repo:
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
    """dvc.yaml and its plot templates are `dplab dvc-yaml`'s output for config/config.yaml (CI
    fails when one is stale)."""
    from dplab.config import read_config
    from dplab.dvc_yaml import CONFIG, files

    written = files(read_config(ROOT / CONFIG))
    assert {name for name in written if name.startswith(".dvc/")} == {
        p.relative_to(ROOT).as_posix() for p in (ROOT / ".dvc" / "plots").iterdir()
    }
    assert all((ROOT / name).read_text() == text for name, text in written.items())
    assert run(["dplab", "dvc-yaml", "--check"], cwd=ROOT).returncode == 0


@pytest.fixture(scope="module")
def committed_stages() -> dict[str, dict]:
    """The DVC stages of config/config.yaml (computed once)."""
    from dplab import jobs
    from dplab.dvc_yaml import CONFIG, stages

    return stages(jobs.load(ROOT / CONFIG))


def test_each_dvc_stage_resolves_to_the_entry_its_snakemake_job_passes(committed_stages):
    """Where the Snakemake rule passes run entries as JSON, the DVC stage's `--config` + names give
    `dplab train` the same resolved runs (so both paths compute the same thing): the stage names the
    job's runs (one, or a grid cell's grouped runs) and their folders in the same order, and each
    run (what `dplab train --config --run` takes, checked for a run and a grouped grid run) is the
    rule's JSON entry resolved."""
    import shlex

    from dplab import jobs
    from dplab.cli import build_parser
    from dplab.commands.train import pipeline_runs
    from dplab.dvc_yaml import CONFIG, stage_name
    from dplab.training.resolve import load_runs

    plan = jobs.load(ROOT / CONFIG)
    training = [*plan.of("train").values(), *plan.of("train_runs").values()]
    assert plan.of("train_runs") and sum(
        len(getattr(job, "runs", [job])) for job in training
    ) == len(plan.runs)
    parser = build_parser()
    for job in training:
        runs = getattr(job, "runs", [job])
        args = parser.parse_args(
            shlex.split(
                committed_stages[stage_name(job.rule, job.name.removeprefix("runs/"))]["cmd"]
            )[1:]
        )
        assert (args.config, args.run) == (CONFIG, [run.name.removeprefix("runs/") for run in runs])
        assert args.out == [run.params["out"] for run in runs], job.name
        assert [run.run for run in runs] == load_runs(run_json=job.params["run"]), job.name
    grouped = next(iter(plan.of("train_runs").values())).runs
    for folder in (next(f for f in plan.runs if f.startswith("runs/")), grouped[-1].name):
        assert pipeline_runs(str(ROOT / CONFIG), [folder.removeprefix("runs/")]) == [
            plan.runs[folder].run
        ], folder


def covers(deps: list[str], path: str) -> bool:
    """Whether a stage's ``deps`` name ``path`` or a folder above it."""
    return any(path == dep or path.startswith(dep + "/") for dep in deps)


def module_file(name: str) -> str:
    from dplab import imports

    path = (imports.modules() | imports.extensions())[name]
    return (Path("src") / path.relative_to(imports.PACKAGE.parent)).as_posix()


def test_each_dvc_stage_depends_on_the_module_of_its_command_and_the_schemas(committed_stages):
    """The function each stage's command runs (as the CLI parses it) lies in a file of its deps;
    every stage that reads the config depends on the schemas, the training stages on the MF code
    and every accountant (plug-ins of the registry), the figure tables on every figure module; the
    compiled noise kernel's C source is a dep of the stages that train (through dplab.philox), not
    of those that prepare data or factorize."""
    import shlex

    from dplab.accounting.registry import ACCOUNTANTS
    from dplab.cli import build_parser
    from dplab.dvc_yaml import CONFIG
    from dplab.figures import FIGURES

    parser = build_parser()
    accountant_modules = {target.partition(":")[0] for target in ACCOUNTANTS.entries.values()}
    for name, stage in committed_stages.items():
        func = parser.parse_args(shlex.split(stage["cmd"])[1:]).func
        assert covers(stage["deps"], module_file(func.__module__)), name
        if f"--config {CONFIG}" in stage["cmd"]:
            assert all(
                covers(stage["deps"], f"src/dplab/schemas/{s}.schema.yaml")
                for s in ("config", "run", "dataset")
            )
        if name.startswith("train-"):
            needed = ("dplab.mf.noise", "dplab.mf.factorizations", *accountant_modules)
            assert all(covers(stage["deps"], module_file(m)) for m in needed)
        kernel = covers(stage["deps"], "src/dplab/_philox_normal.c")
        assert kernel == (not name.startswith(("prepare_data-", "factorization-"))), name
        if name.startswith("figure_table-"):
            assert all(covers(stage["deps"], module_file(f"dplab.figures.{f}")) for f in FIGURES)


@pytest.mark.parametrize(
    "argv",
    [
        ["mf", "--strategy", "banded", "--steps", "16", "--bands", "4", "--out", "{tmp}/f.npz"],
        [
            "figure-table",
            "gaussian_sigma",
            "--config",
            "config/config.yaml",
            "--out",
            "{tmp}/t.csv",
        ],
    ],
)
def test_the_code_deps_hold_every_module_a_command_loads(tmp_path, argv):
    """Run for real (the commands of a factorization stage and of a figure table's stage): every
    dplab module loaded is among the command's code deps."""
    from dplab.dvc_yaml import code

    argv = [arg.format(tmp=tmp_path) for arg in argv]
    script = (
        "import json, sys; from dplab.cli import main; main(sys.argv[1:]); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'dplab')))"
    )
    loaded = json.loads(
        run([sys.executable, "-c", script, *argv], cwd=ROOT).stdout.splitlines()[-1]
    )
    deps = code(argv[0])
    assert (
        "dplab.commands.train" in loaded
        and [m for m in loaded if not covers(deps, module_file(m))] == []
    )


def dvc_status() -> dict[str, list]:
    """What `dvc status` reports in the current folder (DVC's Python API, as `--json`): each changed
    stage -> what changed."""
    with dvc_repo() as repo:
        return repo.status()


@pytest.mark.pipeline
def test_a_change_to_imported_code_makes_its_stages_stale(built, tmp_path, monkeypatch):
    """After `dvc commit` of the built DAG, a change to the MF noise code (which `dplab train`
    imports, `dplab mf` does not) makes the training stages stale in `dvc status`, the
    factorizations not."""
    project = shutil.copytree(built, tmp_path / "project", symlinks=True)
    monkeypatch.chdir(project)
    with dvc_repo() as repo:
        repo.commit(None, force=True)
    assert dvc_status() == {}
    noise = project / "src" / "dplab" / "mf" / "noise.py"
    noise.write_text(noise.read_text() + "\n# changed\n")
    stale = dvc_status()
    dp_mf = "train-grids-mf_vs_dpsgd-digits-mlp-dp_mf-eps1-seed0"
    assert {dp_mf, "train-dp_sgd", "train-nonprivate"} <= set(stale), sorted(stale)
    changed = [
        change.get("changed deps") for change in stale[dp_mf]
    ]  # the sub-package, or its file where listed
    assert {"src/dplab/mf": "modified"} in changed or {
        "src/dplab/mf/noise.py": "modified"
    } in changed, stale[dp_mf]
    assert not [name for name in stale if name.startswith("factorization-")], sorted(stale)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def plots(built) -> dict[str, dict]:
    """`dvc plots show --json` on the built small DAG: plot id -> the filled Vega-Lite spec."""
    shown = json.loads(run(["dvc", "plots", "show", "--json"], cwd=built).stdout)
    assert not shown.get("errors"), shown["errors"]
    return {plot: entries[0]["content"] for plot, entries in shown["data"].items()}


def template_columns(spec: dict) -> dict[str, dict]:
    """The ε columns a run's plot folds: column -> its accountant and bound."""
    fold = next(t["fold"] for t in spec["transform"] if "fold" in t)
    lookup = next(t for t in spec["transform"] if t.get("lookup") == "column")["from"]["data"][
        "values"
    ]
    return {row["column"]: row for row in lookup if row["column"] in fold}


@pytest.mark.pipeline
def test_dvc_plots_show_each_runs_epsilon_per_accountant(built, plots):
    """A private run's plot holds the ε vs step of every accountant its summary.json reports, the
    values of its metrics.csv, each column folded into a line named after its accountant; its title
    names δ, the neighbouring relation and the sampling.  A non-private run's
    plot is its accuracy."""
    from dplab.accounting.eligibility import column

    summary = json.loads((built / RUN).with_name("summary.json").read_text())
    rows, spec = read_csv(built / RUN), plots[RUN]
    reported = summary["epsilon_bound"]  # every accountant with an ε column: name -> bound
    assert len(summary["epsilon"]) >= 3 and set(summary["epsilon"]) <= set(reported)
    assert {c for c in rows[0] if c.startswith("epsilon")} == {column(name) for name in reported}
    columns, values = template_columns(spec), spec["data"]["values"]
    assert [v["step"] for v in values] == [r["step"] for r in rows]
    for name, kind in reported.items():
        assert columns[column(name)] == {"column": column(name), "accountant": name, "bound": kind}
        assert [float(v[column(name)]) for v in values] == [float(r[column(name)]) for r in rows]
    assert {name: float(values[-1][column(name)]) for name in summary["epsilon"]} == summary[
        "epsilon"
    ]
    assert spec["encoding"]["color"]["field"] == "accountant"
    assert all(
        part in spec["title"]["text"]
        for part in (
            f"δ={summary['delta']:g}",
            summary["neighbouring"],
            f"{summary['sampling']} sampling",
        )
    )
    private = plots["results/runs/nonprivate/metrics.csv"]
    assert "non-private: no ε" in private["title"]["text"] and "fold" not in json.dumps(private)


@pytest.mark.pipeline
def test_dvc_plots_show_one_line_per_accountant_of_a_sweep(built, plots):
    """A sweep's plot colours by accountant (dashed by bound) and holds every accountant of the
    sweep with the ε(T) of its CSV."""
    rows, spec = read_csv(built / SWEEP), plots[SWEEP]
    assert spec["encoding"]["color"]["field"] == "accountant"
    assert (
        spec["layer"][0]["mark"] == "line"
        and spec["layer"][0]["encoding"]["strokeDash"]["field"] == "meaning"
    )
    accountants = small_config()["sweeps"]["dp_sgd"]["accountants"]
    assert len(accountants) >= 2 and {v["accountant"] for v in spec["data"]["values"]} == set(
        accountants
    )
    for name in accountants:
        got = [
            (v["steps"], v["epsilon"]) for v in spec["data"]["values"] if v["accountant"] == name
        ]
        assert got and got == [(r["steps"], r["epsilon"]) for r in rows if r["accountant"] == name]


def drawn_lines(specs: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """The lines Vega draws for each spec (tests/vega_lines.js in node, with the Vega and Vega-Lite
    that Snakemake ships for its report): id -> accountant -> {meaning, dash,
    points [(x, ε)], placed}."""
    import snakemake

    node = shutil.which("node") or pytest.skip(
        "node is missing: install nodejs to render the plot templates"
    )
    assets = Path(snakemake.__file__).parent / "assets" / "data"
    proc = subprocess.run(
        [node, str(ROOT / "tests" / "vega_lines.js"), str(assets)],
        input=json.dumps(specs),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return {
        plot: {line["accountant"]: line for line in lines}
        for plot, lines in json.loads(proc.stdout).items()
    }


@pytest.mark.pipeline
def test_dvc_plot_templates_draw_one_line_per_accountant(built, plots):
    """Rendered by Vega: the run's plot draws one line per accountant its metrics.csv has, through
    its values; the sweep's one line per accountant with an ε; a lower bound and a comparison
    (rows made up here, one ε of 0: still on the chart) are drawn dashed, under their meaning."""
    from dvc_render import VegaRenderer

    from dplab.accounting.eligibility import column
    from dplab.dvc_yaml import DASH, MEANING, RUN_TEMPLATE, TEMPLATE_DIR

    steps = ["10", "20"]
    made_up = [
        {
            "step": t,
            "rev": "workspace",
            column("pabi"): "1.5",
            column("shuffle_lower"): lower,
            column("as_if_poisson"): "0.5",
        }
        for t, lower in zip(steps, ["0", "0.25"])
    ]
    filled = VegaRenderer(
        made_up,
        "references",
        template=RUN_TEMPLATE,
        template_dir=str(ROOT / TEMPLATE_DIR),
        x="step",
        title="references",
    ).get_filled_template()
    drawn = drawn_lines({RUN: plots[RUN], SWEEP: plots[SWEEP], "references": filled})

    summary = json.loads((built / RUN).with_name("summary.json").read_text())
    rows = read_csv(built / RUN)
    assert set(drawn[RUN]) == set(summary["epsilon_bound"])
    for name, line in drawn[RUN].items():
        assert line["points"] == [[int(r["step"]), float(r[column(name)])] for r in rows]
        assert line["meaning"] == MEANING[summary["epsilon_bound"][name]]
    sweep = read_csv(built / SWEEP)
    assert set(drawn[SWEEP]) == {r["accountant"] for r in sweep if r["epsilon"]}
    for name, line in drawn[SWEEP].items():
        assert line["points"] == [
            [int(r["steps"]), float(r["epsilon"])] for r in sweep if r["accountant"] == name
        ]
    references = drawn["references"]
    kinds = {"pabi": "upper", "shuffle_lower": "lower", "as_if_poisson": "comparison"}
    assert {name: (line["meaning"], line["dash"]) for name, line in references.items()} == {
        name: (MEANING[kind], DASH[kind]) for name, kind in kinds.items()
    }
    assert references["shuffle_lower"]["points"] == [[10, 0.0], [20, 0.25]]
    assert all(line["placed"] for lines in drawn.values() for line in lines.values())
