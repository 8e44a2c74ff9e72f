rule figure_table:
    """The tidy table a figure is drawn from (one row per plotted point)."""
    input:
        unpack(figure_inputs),
    output:
        "results/tables/{figure}.csv",
    log:
        "logs/figures/{figure}_table.log",
    conda:
        "../envs/dplab.yaml"
    params:
        figure=figure_json,
        inputs=figure_input_args,
    shell:
        "dplab figure-table {wildcards.figure} --params-json {params.figure:q}"
        " --inputs {params.inputs:q} --out {output} > {log} 2>&1"


rule figure:
    """Draw a figure from its table only (so it can be redrawn without recomputing)."""
    input:
        "results/tables/{figure}.csv",
    output:
        pdf="results/figures/{figure}.pdf",
        png=report(
            "results/figures/{figure}.png",
            caption="../report/figure.rst",
            category=figure_category,
            labels={"figure": "{figure}"},
        ),
    log:
        "logs/figures/{figure}.log",
    conda:
        "../envs/dplab.yaml"
    params:
        caption=figure_caption,
    shell:
        "dplab figure-draw {wildcards.figure} --table {input} --pdf {output.pdf}"
        " --png {output.png} > {log} 2>&1"
