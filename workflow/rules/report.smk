# The HTML report is built by `snakemake --report results/report.html` (see the Makefile):
# every figure marked with report() in figures.smk appears with its caption.
report: "../report/workflow.rst"


rule index:
    """results/index.md: every figure and table of this run, with where to find it (after every
    result it lists exists, so the index does not depend on job order, e.g. on a cluster).
    """
    input:
        **PLAN.job("index").inputs,
    output:
        **PLAN.job("index").outputs,
    log:
        "logs/index.log",
    conda:
        "../envs/dplab.yaml"
    shell:
        "dplab index --results results --out {output} > {log} 2>&1"


rule provenance:
    """results/provenance.json: git commit, config hash and package versions behind every result,
    and the hash of every data file of the user's own datasets and model file of its runs (its
    inputs too)."""
    input:
        **PLAN.job("provenance").inputs,
    output:
        report(
            layout.PROVENANCE,
            caption="../report/provenance.rst",
            category="Provenance",
        ),
    log:
        "logs/provenance.log",
    conda:
        "../envs/dplab.yaml"
    params:
        config=PLAN.job("provenance").params["config"],
    shell:
        "dplab provenance --config-json {params.config:q} --out {output} {input.results} > {log} 2>&1"
