rule sweep:
    """ε vs T of a run's setting for each accountant of config `sweeps` (tidy table)."""
    input:
        summary=sweep_summary,
    output:
        "results/accounting/{sweep}.csv",
    log:
        "logs/accounting/{sweep}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        accountants=sweep_accountants,
        points=sweep_points,
    shell:
        "dplab sweep --summary {input.summary} --accountants {params.accountants}"
        " --points {params.points} --out {output} > {log} 2>&1"
