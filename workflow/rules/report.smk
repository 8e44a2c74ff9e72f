# The HTML report is built by `snakemake --report results/report.html` (see the Makefile):
# every figure marked with report() in figures.smk appears with its caption.
report: "../report/workflow.rst"


rule index:
    """results/index.md: every figure and table of this run, with where to find it."""
    input:
        pipeline.figure_files(config),
    output:
        "results/index.md",
    log:
        "logs/index.log",
    conda:
        "../envs/dplab.yaml"
    shell:
        "dplab index --results results --out {output} > {log} 2>&1"
