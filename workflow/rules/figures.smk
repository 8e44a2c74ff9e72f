rule figure_table:
    """The tidy table a figure is drawn from (one row per plotted point)."""
    input:
        unpack(job_inputs("figure_table")),
    output:
        layout.table_file("{figure}"),
    log:
        "logs/figures/{figure}_table.log",
    conda:
        "../envs/dplab.yaml"
    params:
        figure=job_param("figure_table", "figure"),
        inputs=job_param("figure_table", "inputs"),
    shell:
        "dplab figure-table {wildcards.figure} --params-json {params.figure:q}"
        " --inputs {params.inputs:q} --out {output} > {log} 2>&1"


rule figure:
    """Draw a figure from its table only (so it can be redrawn without recomputing)."""
    input:
        unpack(job_inputs("figure")),
    output:
        pdf=layout.drawing_files("{figure}")["pdf"],
        png=report(
            layout.drawing_files("{figure}")["png"],
            caption="../report/figure.rst",
            category=figure_category,
            labels={"figure": "{figure}"},
        ),
    log:
        "logs/figures/{figure}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        caption=job_param("figure", "caption"),
    shell:
        "dplab figure-draw {wildcards.figure} --table {input} --pdf {output.pdf}"
        " --png {output.png} > {log} 2>&1"
