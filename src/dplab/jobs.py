"""The jobs of a pipeline config: the one list the Snakemake rules and dvc.yaml are made from.

:func:`plan` resolves a validated config once: :func:`dplab.config.check_config` checks it and
resolves every training run (the one place a pipeline's runs are resolved), and each job is then
a frozen record of what its command needs: its inputs and outputs (paths from
:mod:`dplab.layout`), its params (what the Snakemake rule passes the command), the config entries
it reads (the DVC stage's params) and its resources.  The rules (``workflow/rules/*.smk``) look
their job up by rule and wildcard (:meth:`JobList.job`); :mod:`dplab.dvc_yaml` writes one stage per
job.  A grid's runs that config ``group_runs`` pools are one job (:class:`RunsJob`) of their own
rule; :attr:`JobList.runs` holds every run either way.  A figure of the registry
(:data:`dplab.figures.FIGURES`) named in the config's ``figures`` becomes its two jobs here
with no other edit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import ClassVar

from dplab import entries, layout
from dplab.config import check_config, read_config
from dplab.errors import DPLabError
from dplab.figures import figure as figure_module, input_args, input_files
from dplab.training import data, methods


def _json(value) -> str:
    """A config entry as the rules pass it (``--…-json``; Snakemake tracks the text)."""
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Resources:
    """What a job asks the scheduler for (Snakemake's ``threads:`` and ``resources:``)."""

    threads: int = 1
    gpu: int | None = None  #: GPUs (training jobs: config ``training_resources.gpus``)
    mem_mb: int | None = None
    runtime: int | None = None  #: minutes


@dataclass(frozen=True)
class Job:
    """One job: a rule (class attribute) applied to ``name``, the value of the rule's wildcard."""

    rule: ClassVar[str]  #: the Snakemake rule, and the DVC stage's prefix
    wildcard: ClassVar[str | None]  #: the rule's wildcard (None: the rule makes one job)

    name: str
    inputs: dict[str, str | list[str]]  #: by name, as the rule unpacks them (DVC: deps)
    outputs: dict[str, str]  #: by name, as the rule names them
    params: dict[str, object] = field(default_factory=dict)  #: the rule's params
    reads: (
        tuple[str, ...] | None
    ) = ()  #: dotted config keys the command reads (None: the whole config)
    resources: Resources = Resources()

    @property
    def input_files(self) -> list[str]:
        return input_files(self.inputs)

    @property
    def output_files(self) -> list[str]:
        return list(self.outputs.values())


@dataclass(frozen=True)
class DataJob(Job):
    rule, wildcard = "prepare_data", "dataset"


@dataclass(frozen=True)
class FactorizationJob(Job):
    """One factorization of the prefix-sum workload, computed once for every user."""

    rule, wildcard = "factorization", "factorization"
    spec: dict = field(
        default_factory=dict
        #: {strategy, steps, bands, buffers, objective, min_separation}
        #: (:func:`dplab.layout.mf_spec`)
    )


@dataclass(frozen=True)
class RunJob(Job):
    """A training job: ``name`` is its folder under results/ (``runs/<run>`` or
    ``grids/<grid>/<run>``)."""

    rule, wildcard = "train", "run_dir"
    entry: dict = field(default_factory=dict)  #: the entry as ``dplab train --run-json`` gets it
    run: dict = field(default_factory=dict)  #: resolved (defaults, σ's accountant, claims checked)


@dataclass(frozen=True)
class RunsJob(Job):
    """Runs of one grid trained one after another in one process (config ``group_runs``): ``name``
    is the folder above theirs under results/, ``runs`` the job each would be on its own; each
    writes its own folder, byte for byte what its own job writes.  Each is its own Snakemake rule
    (:attr:`snakemake_rule`), a rule's outputs being fixed in number."""

    rule, wildcard = "train_runs", None
    runs: tuple[RunJob, ...] = ()

    @property
    def snakemake_rule(self) -> str:
        return self.rule + "__" + re.sub(r"\W", "_", self.name)


@dataclass(frozen=True)
class SweepJob(Job):
    rule, wildcard = "sweep", "sweep"
    run: str = ""  #: the name of the run in `runs` whose setting is swept


@dataclass(frozen=True)
class AuditJob(Job):
    rule, wildcard = "audit", "audit"


@dataclass(frozen=True)
class TableJob(Job):
    """A figure's tidy table (``name``: the figure id)."""

    rule, wildcard = "figure_table", "figure"


@dataclass(frozen=True)
class FigureJob(Job):
    """A figure drawn from its table alone (``name``: the figure id)."""

    rule, wildcard = "figure", "figure"
    #: its category in the report: the claims table first ("Claims" sorts before "Figures")
    category: str = "Figures"


@dataclass(frozen=True)
class IndexJob(Job):
    rule, wildcard = "index", None


@dataclass(frozen=True)
class ProvenanceJob(Job):
    rule, wildcard = "provenance", None


@dataclass(frozen=True)
class JobList:
    """Every job of a config, in the order of dvc.yaml's stages."""

    jobs: tuple[Job, ...]

    def of(self, rule: str) -> dict[str, Job]:
        """The jobs of ``rule`` by name."""
        return {job.name: job for job in self.jobs if job.rule == rule}

    def job(self, rule: str, name: str = "") -> Job:
        return self.of(rule)[name]

    @property
    def runs(self) -> dict[str, RunJob]:
        """Every training run by its folder under results/, in the config's order: the run jobs
        and the runs of each :class:`RunsJob`."""
        return {
            run.name: run
            for job in self.jobs
            if isinstance(job, (RunJob, RunsJob))
            for run in (job.runs if isinstance(job, RunsJob) else (job,))
        }

    def pattern(self, rule: str) -> str:
        """The Snakefile's wildcard constraint of ``rule``: exactly its jobs' names
        (never matches if none)."""
        names = sorted(self.of(rule))
        return "|".join(map(re.escape, names)) if names else "(?!x)x"

    @property
    def results(self) -> list[str]:
        """Every result the index and the provenance record cover: runs, factorizations, sweeps,
        audits, then each figure's table, pdf and png."""
        return (
            [path for job in self.runs.values() for path in job.output_files]
            + [
                path
                for rule in ("factorization", "sweep", "audit")
                for job in self.of(rule).values()
                for path in job.output_files
            ]
            + [path for figure in self.of("figure") for path in layout.figure_files(figure)]
        )

    @property
    def targets(self) -> list[str]:
        """Every final output of the default target: the results, the index and their provenance."""
        return self.results + [layout.INDEX, layout.PROVENANCE]


def factorizations(config: dict, runs: dict[str, dict]) -> dict[str, dict]:
    """Every factorization the DAG uses (the resolved dp_mf ``runs``, and figures'
    ``factorizations(config, params)``): cache key -> spec (:func:`dplab.layout.mf_spec`)."""
    specs = dict(
        spec for run in runs.values() if (spec := methods.get(run["method"]).factorization(run))
    )
    for figure, params in config.get("figures", {}).items():
        specs.update(
            getattr(figure_module(figure), "factorizations", lambda c, p: {})(config, params)
        )
    return specs


def _model_input(run: dict) -> dict[str, str]:
    """``{"model_file": FILE}`` where the run (or an audit's shared run keys) names a model file
    of the project (:func:`dplab.layout.model_path`): an input of the job, as its data is."""
    path = layout.model_path(run.get("model", ""))
    return {"model_file": path} if path else {}


def _run_job(config: dict, folder: str, entry: dict, run: dict) -> RunJob:
    key = methods.run_factorization(run)
    grid = folder.split("/")[1] if folder.startswith("grids/") else None
    train = config["training_resources"]
    return RunJob(
        name=folder,
        inputs={
            **layout.data_files(run["dataset"]),
            **({"factorization": layout.mf_file(key)} if key else {}),
            **_model_input(run),
        },
        outputs=layout.training_files(folder),
        params={
            "run": _json(entry),
            "data": layout.data_dir(run["dataset"]),
            "out": layout.training_dir(folder),
            "mf_cache": layout.MF_DIR,
        },
        reads=("seed", f"grids.{grid}" if grid else f"runs.{folder.removeprefix('runs/')}"),
        resources=Resources(config["threads"], train["gpus"], train["mem_mb"], train["runtime"]),
        entry=entry,
        run=run,
    )


#: how many folders at the end of a grid run's name (``…/<variant>/<privacy>/seed<s>``) differ
#: between the runs of one job, by config ``group_runs``
GROUP_DEPTH = {"none": 0, "seed": 1, "epsilon": 2}


def _training_jobs(config: dict, runs: dict[str, dict]) -> list[Job]:
    """The training jobs: a run of `runs` alone; a grid's runs pooled by the folder above their
    last :data:`GROUP_DEPTH` folders (config ``group_runs``), a pool of one being a run job."""
    depth = GROUP_DEPTH[config["group_runs"]]
    pools: dict[str, list[RunJob]] = {}
    for folder, entry in entries.training_runs(config).items():
        job = _run_job(config, folder, entry, runs[folder])
        key = folder.rsplit("/", depth)[0] if folder.startswith("grids/") and depth else folder
        pools.setdefault(key, []).append(job)
    jobs = [pool[0] if len(pool) == 1 else _runs_job(name, pool) for name, pool in pools.items()]
    rules: dict[str, str] = {}
    for job in jobs:  # a rule name maps "/" and "_" alike: grid a_b on d, grid a on b_d
        if isinstance(job, RunsJob):
            other = rules.setdefault(job.snakemake_rule, job.name)
            if other != job.name:
                raise DPLabError(
                    "grids",
                    f"the grouped runs of {other} and of {job.name} get the same Snakemake rule"
                    f" name {job.snakemake_rule}; rename a grid or a dataset",
                )
    return jobs


def _runs_job(name: str, runs: list[RunJob]) -> RunsJob:
    """The job of ``runs`` (one grid, one variant: one dataset): every run's inputs and outputs,
    the resources of one with k times its runtime."""
    first = runs[0]
    inputs = {key: value for run in runs for key, value in run.inputs.items()}
    resources = first.resources
    return RunsJob(
        name=name,
        inputs=inputs,
        outputs={f"{run.name}:{key}": path for run in runs for key, path in run.outputs.items()},
        params={
            "run": _json([run.entry for run in runs]),
            "data": first.params["data"],
            "out": [run.params["out"] for run in runs],
            "mf_cache": first.params["mf_cache"],
        },
        reads=first.reads,
        runs=tuple(runs),
        resources=Resources(
            resources.threads, resources.gpu, resources.mem_mb, resources.runtime * len(runs)
        ),
    )


def plan(config: dict) -> JobList:
    """The jobs of ``config`` (validated, defaults filled), checked by
    :func:`dplab.config.check_config` first (a :class:`~dplab.errors.DPLabError` naming the key)."""
    runs = check_config(config)
    sources = {
        name: data.source_files(entries.dataset_entry(config, name), name)
        for name in config["datasets"]
    }
    out: list[Job] = [
        DataJob(
            name=name,
            inputs={"data": sources[name]} if sources[name] else {},
            outputs=layout.data_files(name),
            params={
                "dataset": _json(entries.dataset_entry(config, name)),
                "out": layout.data_dir(name),
            },
            reads=("seed", f"datasets.{name}"),
        )
        for name in config["datasets"]
    ]
    out += [
        FactorizationJob(
            name=key,
            inputs={},
            outputs={"factorization": layout.mf_file(key)},
            params={"args": layout.mf_args(spec)},
            spec=spec,
        )
        for key, spec in factorizations(config, runs).items()
    ]
    out += _training_jobs(config, runs)
    out += [
        SweepJob(
            name=name,
            inputs={"summary": layout.run_files(entry["run"])["summary"]},
            outputs={"table": layout.sweep_file(name)},
            reads=(f"sweeps.{name}",),
            run=entry["run"],
            params={"accountants": " ".join(entry["accountants"]), "points": entry["points"]},
        )
        for name, entry in config.get("sweeps", {}).items()
    ]
    out += [
        AuditJob(
            name=name,
            inputs={**layout.data_files(entry["dataset"]), **_model_input(entry["run"])},
            outputs={"table": layout.audit_file(name)},
            params={
                "audit": _json(entries.audit_entry(config, name)),
                "data": layout.data_dir(entry["dataset"]),
            },
            reads=("seed", f"audits.{name}"),
            resources=Resources(
                config["threads"], config["training_resources"]["gpus"], mem_mb=4000, runtime=30
            ),
        )
        for name, entry in config.get("audits", {}).items()
    ]
    for figure, params in config.get("figures", {}).items():
        module = figure_module(figure)
        inputs = module.inputs(config, params)
        table = layout.table_file(figure)
        out.append(
            TableJob(
                name=figure,
                inputs=inputs,
                outputs={"table": table},
                reads=(f"figures.{figure}",),
                params={"figure": _json(params), "inputs": input_args(inputs)},
            )
        )
        out.append(
            FigureJob(
                name=figure,
                inputs={"table": table},
                outputs=layout.drawing_files(figure),
                params={"caption": module.CAPTION},
                category="Claims" if figure == "claims" else "Figures",
            )
        )
    results = JobList(tuple(out)).results
    out.append(IndexJob(name="", inputs={"results": results}, outputs={"index": layout.INDEX}))
    data_files = [path for files in sources.values() for path in files]
    model_files = entries.model_files(config)
    out.append(
        ProvenanceJob(
            name="",
            inputs={
                "results": results,
                **({"data": data_files} if data_files else {}),
                **({"models": model_files} if model_files else {}),
            },
            outputs={"provenance": layout.PROVENANCE},
            params={"config": _json(config)},
            reads=None,
        )
    )
    _check_case(out)
    return JobList(tuple(out))


def _check_case(jobs: list[Job]) -> None:
    """No two outputs differ only in case: on a case-insensitive file system (macOS's and
    Windows' default) they are one file, and one job's results would overwrite the other's
    (runs ``Base`` and ``base``)."""
    seen: dict[str, tuple[str, Job]] = {}
    for job in jobs:
        for path in job.output_files:
            other, first = seen.setdefault(path.casefold(), (path, job))
            if other != path:
                names = [j.reads[-1] if j.reads else j.rule for j in (first, job)]
                raise DPLabError(
                    names[1],
                    f"writes {path}, which differs from {other} ({names[0]}) only in case: one"
                    " file on a case-insensitive file system (macOS, Windows); rename one",
                )


def load(*paths) -> JobList:
    """The jobs of the pipeline config ``paths`` (merged as
    :func:`dplab.config.read_config` merges them)."""
    return plan(read_config(*paths))
