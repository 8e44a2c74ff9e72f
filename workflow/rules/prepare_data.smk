rule prepare_data:
    """Prepare a dataset of config `datasets` (train/test split) under results/data/; the user's
    own data files are its inputs, so a change to one reruns what depends on it."""
    input:
        unpack(job_inputs("prepare_data")),
    output:
        **layout.data_files("{dataset}"),
    log:
        "logs/data/{dataset}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        dataset=job_param("prepare_data", "dataset"),
        out=job_param("prepare_data", "out"),
    shell:
        "dplab prepare-data --dataset-json {params.dataset:q} --dataset {wildcards.dataset} --out {params.out}"
        " > {log} 2>&1"
