# Helpers shared by the rules: cross-reference checks, wildcard constraints, and the
# functions that turn config entries into rule params (no lambdas in rules).
import json

from dplab import pipeline

pipeline.check_config(config)


wildcard_constraints:
    dataset=pipeline.name_pattern(config["datasets"]),
    run=pipeline.name_pattern(config["runs"]),
    grid=pipeline.name_pattern(config["grids"]),
    grid_run=pipeline.GRID_RUN_PATTERN,
    sweep=pipeline.name_pattern(config["sweeps"]),
    figure=pipeline.name_pattern(config["figures"]),
    audit=pipeline.name_pattern(config.get("audits", {})),
    factorization=pipeline.name_pattern(pipeline.factorizations(config)),


def dataset_json(wildcards):
    """The dataset entry, with the global seed filled in, as JSON (tracked by Snakemake)."""
    return json.dumps(pipeline.dataset_entry(config, wildcards.dataset), sort_keys=True)


def run_json(wildcards):
    """The run entry, with the global seed filled in, as JSON (tracked by Snakemake)."""
    return json.dumps(pipeline.run_entry(config, wildcards.run), sort_keys=True)


def grid_run_json(wildcards):
    """One run of a grid, with its seed and ε filled in, as JSON (tracked by Snakemake)."""
    return json.dumps(pipeline.grid_runs(config, wildcards.grid)[wildcards.grid_run]["run"], sort_keys=True)


def _grid_run_dataset(wildcards):
    return pipeline.grid_runs(config, wildcards.grid)[wildcards.grid_run]["run"]["dataset"]


def grid_run_inputs(wildcards):
    """The prepared data of the grid run's dataset, and its saved factorization (dp_mf)."""
    run = pipeline.grid_runs(config, wildcards.grid)[wildcards.grid_run]["run"]
    key = pipeline.run_factorization(run)
    return list(pipeline.data_files(run["dataset"]).values()) + ([pipeline.mf_file(key)] if key else [])


def grid_run_data_dir(wildcards):
    return pipeline.data_dir(_grid_run_dataset(wildcards))


def grid_run_gpus(wildcards):
    run = pipeline.grid_runs(config, wildcards.grid)[wildcards.grid_run]["run"]
    return int(run.get("device", "auto") == "cuda")


#: runs that record per-example gradient norms (rule train_recording) and the others (rule train)
RECORDING_RUNS = pipeline.name_pattern(pipeline.recording_runs(config))
PLAIN_RUNS = pipeline.name_pattern({k: v for k, v in config["runs"].items() if k not in pipeline.recording_runs(config)})



def run_inputs(wildcards):
    """The prepared data files of the run's dataset, and its saved factorization (dp_mf)."""
    run = config["runs"][wildcards.run]
    key = pipeline.run_factorization(run)
    return list(pipeline.data_files(run["dataset"]).values()) + ([pipeline.mf_file(key)] if key else [])


def run_data_dir(wildcards):
    return pipeline.data_dir(config["runs"][wildcards.run]["dataset"])


def run_gpus(wildcards):
    """1 when the run asks for CUDA (the `gpu` resource caps GPU jobs), else 0."""
    return pipeline.run_gpus(config, wildcards.run)


def sweep_summary(wildcards):
    return pipeline.run_files(config["sweeps"][wildcards.sweep]["run"])["summary"]


def sweep_accountants(wildcards):
    return " ".join(config["sweeps"][wildcards.sweep]["accountants"])


def sweep_points(wildcards):
    return config["sweeps"][wildcards.sweep]["points"]


def figure_inputs(wildcards):
    """The result tables a figure's table is made from."""
    return pipeline.figure_inputs(config, wildcards.figure)


def figure_json(wildcards):
    return json.dumps(config["figures"][wildcards.figure], sort_keys=True)


def audit_json(wildcards):
    """The audit entry, with the global seed filled in, as JSON (tracked by Snakemake)."""
    return json.dumps(pipeline.audit_entry(config, wildcards.audit), sort_keys=True)


def audit_data(wildcards):
    return list(pipeline.data_files(config["audits"][wildcards.audit]["dataset"]).values())


def audit_data_dir(wildcards):
    return pipeline.data_dir(config["audits"][wildcards.audit]["dataset"])


def factorization_args(wildcards):
    """`dplab mf` flags of a factorization the DAG uses (pipeline.factorizations)."""
    spec = pipeline.factorizations(config)[wildcards.factorization]
    bands = f" --bands {spec['bands']}" if spec["bands"] is not None else ""
    return f"--strategy {spec['strategy']} --steps {spec['steps']}{bands}"
