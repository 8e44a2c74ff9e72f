rule audit:
    """Membership audit with a canary (issue 9): ε lower bounds per method, T and observation."""
    input:
        audit_data,
    output:
        "results/audit/{audit}.csv",
    log:
        "logs/audit/{audit}.log",
    conda:
        "../envs/dplab.yaml"
    threads: config["threads"]
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        audit=audit_json,
        data=audit_data_dir,
    shell:
        "dplab audit --audit-json {params.audit:q} --data {params.data} --out {output}"
        " --threads {threads} > {log} 2>&1"
