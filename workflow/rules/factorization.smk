rule factorization:
    """A factorization of the prefix-sum workload, computed once for every dp_mf run and figure using it."""
    output:
        layout.mf_file("{factorization}"),
    log:
        "logs/mf/{factorization}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        args=job_param("factorization", "args"),
    shell:
        "dplab mf {params.args} --out {output} > {log} 2>&1"
