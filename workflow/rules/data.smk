rule prepare_data:
    """Prepare a dataset of config `datasets` (train/test split) under results/data/."""
    output:
        train="results/data/{dataset}/train.npz",
        test="results/data/{dataset}/test.npz",
        info="results/data/{dataset}/info.json",
    log:
        "logs/data/{dataset}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        dataset=dataset_json,
    shell:
        "dplab prepare-data --dataset-json {params.dataset:q} --dataset {wildcards.dataset} --out results/data/{wildcards.dataset}"
        " > {log} 2>&1"
