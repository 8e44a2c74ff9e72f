# dplab: the privacy analysis of DP-SGD as one Snakemake DAG.
#   snakemake --cores all                          (workstation, config/config.yaml)
#   snakemake --cores all --configfile config/paper.yaml    (the seeds' full-size settings)
#   snakemake --profile workflow/profiles/slurm    (the same DAG on a SLURM cluster)
from snakemake.utils import min_version, validate

min_version("8.0")


# config/config.yaml is the default: a config named on the command line (--configfile) replaces
# it rather than being merged into it, so config/paper.yaml runs its own entries only. Files named
# together are merged in order: --configfile config/paper.yaml config/paper-smoke.yaml.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


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
