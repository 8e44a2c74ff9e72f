rule sweep:
    """ε vs T of a run's setting for each accountant of config `sweeps` (tidy table)."""
    input:
        unpack(job_inputs("sweep")),
    output:
        layout.sweep_file("{sweep}"),
    log:
        "logs/accounting/{sweep}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        accountants=job_param("sweep", "accountants"),
        points=job_param("sweep", "points"),
    shell:
        "dplab sweep --summary {input.summary} --accountants {params.accountants}"
        " --points {params.points} --out {output} > {log} 2>&1"
