rule audit:
    """Membership audit with a canary: ε lower bounds per method, T and observation."""
    input:
        unpack(job_inputs("audit")),
    output:
        layout.audit_file("{audit}"),
    log:
        "logs/audit/{audit}.log",
    conda:
        "../envs/dplab.yaml"
    threads: job_resource("audit", "threads")
    resources:
        gpu=job_resource("audit", "gpu"),
        mem_mb=job_resource("audit", "mem_mb"),
        runtime=job_resource("audit", "runtime"),
    params:
        audit=job_param("audit", "audit"),
        data=job_param("audit", "data"),
    shell:
        "dplab audit --audit-json {params.audit:q} --data {params.data} --out {output}"
        " --threads {threads} > {log} 2>&1"
