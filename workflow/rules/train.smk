rule train:
    """Train one run: an entry of config `runs` (run_dir runs/<name>) or a run of a grid (run_dir
    grids/<grid>/<dataset>/<model>/<variant>/<eps…>/seed<s>). Every training job is this rule, so
    the resources of config `training_resources` (GPUs, memory, time), the profile's retries and
    its set-resources reach all of them. A job cancelled by a time limit or preemption is retried
    and resumes from results/<run_dir>/checkpoint.pt (not an output: Snakemake leaves it).
    """
    input:
        train_inputs,
    output:
        metrics="results/{run_dir}/metrics.csv",
        summary="results/{run_dir}/summary.json",
        model="results/{run_dir}/model.pt",
        grad_norms="results/{run_dir}/grad_norms.csv",
        individual_epsilon="results/{run_dir}/individual_epsilon.csv",
        metrics_json="results/{run_dir}/metrics.json",
    log:
        "logs/{run_dir}.log",
    conda:
        "../envs/dplab.yaml"
    threads: config["threads"]
    resources:
        gpu=config["training_resources"]["gpus"],
        mem_mb=config["training_resources"]["mem_mb"],
        runtime=config["training_resources"]["runtime"],
    params:
        run=train_json,
        data=train_data_dir,
    shell:
        "dplab train --run-json {params.run:q} --data {params.data}"
        " --out results/{wildcards.run_dir} --mf-cache results/mf --threads {threads} > {log} 2>&1"
