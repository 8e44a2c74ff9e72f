# dplab: the privacy analysis of DP-SGD as one Snakemake DAG.
#   snakemake --cores all                          (workstation, config/config.yaml)
#   snakemake --cores all --configfile config/paper.yaml    (the seeds' full-size settings)
#   snakemake --profile workflow/profiles/slurm    (the same DAG on a SLURM cluster)
from snakemake.utils import min_version

from dplab import pipeline
from dplab.config import load_yaml, validate

min_version("8.0")

# Every config problem ends Snakemake here with one line naming the key (exit code 2), before a
# job is planned: the schema (workflow/schemas/config.schema.yaml), then pipeline.check_config.
with pipeline.refuse_bad_config():
    load_yaml("config/config.yaml")  # a YAML syntax error with its line and column


configfile: "config/config.yaml"


with pipeline.refuse_bad_config():
    config.update(validate(config))
    pipeline.check_config(config)


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/mf.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/accounting.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        pipeline.targets(config),
    default_target: True
