rule factorization:
    """A factorization of the prefix-sum workload, computed once for every dp_mf run and figure using it."""
    output:
        "results/mf/{factorization}.npz",
    log:
        "logs/mf/{factorization}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        args=factorization_args,
    shell:
        "dplab mf {params.args} --out {output} > {log} 2>&1"
