rule train:
    """Train one run of config `runs` (private or not): metrics.csv and summary.json."""
    input:
        run_data,
    output:
        metrics="results/runs/{run}/metrics.csv",
        summary="results/runs/{run}/summary.json",
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
        " --out results/runs/{wildcards.run} --threads {threads} > {log} 2>&1"
