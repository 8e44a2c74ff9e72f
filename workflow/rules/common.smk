# Helpers shared by the rules: wildcard constraints, and the functions that turn config entries
# into rule params (no lambdas in rules). The Snakefile has checked the config.
import json

from dplab import figures, jobs, layout, pipeline
from dplab.training import methods

#: every training job: its folder under results/ (wildcard run_dir of rule train) -> its run entry
TRAINING_RUNS = jobs.training_runs(config)


wildcard_constraints:
    dataset=pipeline.name_pattern(config["datasets"]),
    run_dir=pipeline.name_pattern(TRAINING_RUNS),
    sweep=pipeline.name_pattern(config["sweeps"]),
    figure=pipeline.name_pattern(config["figures"]),
    audit=pipeline.name_pattern(config.get("audits", {})),
    factorization=pipeline.name_pattern(pipeline.factorizations(config)),


def dataset_json(wildcards):
    """The dataset entry, with the global seed filled in, as JSON (tracked by Snakemake)."""
    return json.dumps(jobs.dataset_entry(config, wildcards.dataset), sort_keys=True)


def train_json(wildcards):
    """The run entry of a training job, seeds filled in, as JSON (tracked by Snakemake)."""
    return json.dumps(TRAINING_RUNS[wildcards.run_dir], sort_keys=True)


def train_inputs(wildcards):
    """The prepared data of the run's dataset, and its saved factorization (dp_mf)."""
    run = TRAINING_RUNS[wildcards.run_dir]
    key = methods.run_factorization(run)
    return list(layout.data_files(run["dataset"]).values()) + (
        [layout.mf_file(key)] if key else []
    )


def train_data_dir(wildcards):
    return layout.data_dir(TRAINING_RUNS[wildcards.run_dir]["dataset"])


def sweep_summary(wildcards):
    return layout.run_files(config["sweeps"][wildcards.sweep]["run"])["summary"]


def sweep_accountants(wildcards):
    return " ".join(config["sweeps"][wildcards.sweep]["accountants"])


def sweep_points(wildcards):
    return config["sweeps"][wildcards.sweep]["points"]


def figure_inputs(wildcards):
    """The result files a figure's table is made from, by name (for unpack)."""
    return pipeline.figure_inputs(config, wildcards.figure)


def figure_input_args(wildcards):
    """The same files as `dplab figure-table --inputs` arguments, NAME=PATH."""
    return figures.input_args(pipeline.figure_inputs(config, wildcards.figure))


def figure_caption(wildcards):
    """The figure's caption, from its module (the report shows it: workflow/report/figure.rst)."""
    return figures.figure(wildcards.figure).CAPTION


def figure_category(wildcards):
    """The report's category of a figure: the claims table first ("Claims" sorts before "Figures")."""
    return "Claims" if wildcards.figure == "claims" else "Figures"


def figure_json(wildcards):
    return json.dumps(config["figures"][wildcards.figure], sort_keys=True)


def audit_json(wildcards):
    """The audit entry, with the global seed filled in, as JSON (tracked by Snakemake)."""
    return json.dumps(jobs.audit_entry(config, wildcards.audit), sort_keys=True)


def audit_data(wildcards):
    return list(
        layout.data_files(config["audits"][wildcards.audit]["dataset"]).values()
    )


def audit_data_dir(wildcards):
    return layout.data_dir(config["audits"][wildcards.audit]["dataset"])


def factorization_args(wildcards):
    """`dplab mf` flags of a factorization the DAG uses (pipeline.factorizations)."""
    return pipeline.mf_args(pipeline.factorizations(config)[wildcards.factorization])
