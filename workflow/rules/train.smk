rule train:
    """Train one run of config `runs` (private or not): metrics.csv and summary.json."""
    wildcard_constraints:
        run=PLAIN_RUNS,
    input:
        run_inputs,
    output:
        metrics="results/runs/{run}/metrics.csv",
        summary="results/runs/{run}/summary.json",
        model="results/runs/{run}/model.pt",
    params:
        run=run_json,
        data=run_data_dir,
    threads: config["threads"]
    resources:
        gpu=run_gpus,
        mem_mb=4000,
        runtime=60,
    log:
        "logs/train/{run}.log",
    conda:
        "../envs/dplab.yaml"
    shell:
        "dplab train --run-json {params.run:q} --data {params.data}"
        " --out results/runs/{wildcards.run} --mf-cache results/mf --threads {threads} > {log} 2>&1"


rule train_recording:
    """A run with `record_grad_norms: true`: also the per-example gradient norms (grad_norms.csv)."""
    wildcard_constraints:
        run=RECORDING_RUNS,
    input:
        run_inputs,
    output:
        metrics="results/runs/{run}/metrics.csv",
        summary="results/runs/{run}/summary.json",
        model="results/runs/{run}/model.pt",
        grad_norms="results/runs/{run}/grad_norms.csv",
    params:
        run=run_json,
        data=run_data_dir,
    threads: config["threads"]
    resources:
        gpu=run_gpus,
        mem_mb=4000,
        runtime=60,
    log:
        "logs/train/{run}.log",
    conda:
        "../envs/dplab.yaml"
    shell:
        "dplab train --run-json {params.run:q} --data {params.data}"
        " --out results/runs/{wildcards.run} --mf-cache results/mf --threads {threads} > {log} 2>&1"


rule train_grid_run:
    """Train one run of a grid of config `grids` (variant × target ε × seed)."""
    input:
        grid_run_inputs,
    output:
        metrics="results/grids/{grid}/{grid_run}/metrics.csv",
        summary="results/grids/{grid}/{grid_run}/summary.json",
        model="results/grids/{grid}/{grid_run}/model.pt",
    params:
        run=grid_run_json,
        data=grid_run_data_dir,
    threads: config["threads"]
    resources:
        gpu=grid_run_gpus,
        mem_mb=4000,
        runtime=60,
    log:
        "logs/grids/{grid}/{grid_run}.log",
    conda:
        "../envs/dplab.yaml"
    shell:
        "dplab train --run-json {params.run:q} --data {params.data}"
        " --out results/grids/{wildcards.grid}/{wildcards.grid_run} --mf-cache results/mf --threads {threads}"
        " > {log} 2>&1"
