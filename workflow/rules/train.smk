rule train:
    """Train one run: an entry of config `runs` (run_dir runs/<name>) or a run of a grid (run_dir
    grids/<grid>/<dataset>/<model>/<variant>/<eps…>/seed<s>). Every training job is this rule, so
    the resources of config `training_resources` (GPUs, memory, time), the profile's retries and
    its set-resources reach all of them. A job cancelled by a time limit or preemption is retried
    and resumes from results/<run_dir>/checkpoint.pt (not an output: Snakemake leaves it).
    """
    input:
        unpack(job_inputs("train")),
    output:
        **layout.training_files("{run_dir}"),
    log:
        "logs/{run_dir}.log",
    conda:
        "../envs/dplab.yaml"
    threads: job_resource("train", "threads")
    resources:
        gpu=job_resource("train", "gpu"),
        mem_mb=job_resource("train", "mem_mb"),
        runtime=job_resource("train", "runtime"),
    params:
        run=job_param("train", "run"),
        data=job_param("train", "data"),
        out=job_param("train", "out"),
        mf_cache=job_param("train", "mf_cache"),
    shell:
        "dplab train --run-json {params.run:q} --data {params.data}"
        " --out {params.out} --mf-cache {params.mf_cache} --threads {threads} > {log} 2>&1"


# The runs of a grid that config `group_runs` trains in one job (dplab.jobs.RunsJob): one rule
# each, its outputs every run's files (a rule's outputs are fixed in number), one after another in
# one `dplab train` process. Each run's folder is byte for byte what rule train would write. A
# retry writes the runs that had finished again from their final checkpoints, without training.
for runs_job in PLAN.of("train_runs").values():

    rule:
        name:
            runs_job.snakemake_rule
        input:
            **runs_job.inputs,
        output:
            runs_job.output_files,
        log:
            f"logs/{runs_job.name}.log",
        conda:
            "../envs/dplab.yaml"
        threads: runs_job.resources.threads
        resources:
            gpu=runs_job.resources.gpu,
            mem_mb=runs_job.resources.mem_mb,
            runtime=runs_job.resources.runtime,
        params:
            # functions, not strings: each rule binds its own job's values (and Snakemake's lint
            # reads a hard-coded path prefix as non-portable)
            run=lambda wildcards, job=runs_job: job.params["run"],
            data=lambda wildcards, job=runs_job: job.params["data"],
            out=lambda wildcards, job=runs_job: job.params["out"],
            mf_cache=lambda wildcards, job=runs_job: job.params["mf_cache"],
        shell:
            "dplab train --run-json {params.run:q} --data {params.data}"
            " --out {params.out:q} --mf-cache {params.mf_cache} --threads {threads} > {log} 2>&1"
