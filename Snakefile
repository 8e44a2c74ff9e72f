# dplab: the privacy analysis of DP-SGD as one Snakemake DAG.
#   snakemake --cores all                          (workstation, config/config.yaml)
#   snakemake --cores all --configfile config/paper.yaml    (the source papers' full-size settings)
#   snakemake --profile workflow/profiles/slurm    (the same DAG on a SLURM cluster)
import sys

from snakemake.utils import min_version

from dplab import jobs, layout
from dplab.config import (
    check_command_line,
    load_yaml,
    merge,
    refuse_bad_config,
    validate,
)

min_version("8.0")

# config/config.yaml is the default: a config named on the command line (--configfile) replaces
# it rather than being merged into it, so config/paper.yaml runs its own entries only. Files named
# together are merged in order: --configfile config/paper.yaml config/paper-smoke.yaml.
# Every config problem ends Snakemake with one line naming the key (exit code 2), before a job is
# planned: YAML syntax (with line and column), the schema (workflow/schemas/config.schema.yaml),
# then check_config, which dplab.jobs.plan runs before it makes the jobs every rule reads (PLAN).
# A --configfile is read by Snakemake itself before this file runs, with a
# loader that keeps the last of a key given twice: each is read again here with dplab's loader,
# which refuses a duplicate key (naming both lines), an empty file, a FIFO or a device; and the
# command line is refused where Snakemake would silently keep one of two values: --config or
# --configfile given twice, a --config key given twice, a --config mapping merging into an entry
# of the file (dplab.config.check_command_line).
with refuse_bad_config():
    file_config = {}
    for path in workflow.overwrite_configfiles or ["config/config.yaml"]:
        merge(file_config, load_yaml(path))
    check_command_line(sys.argv, dict(workflow.config_settings.config), file_config)

if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


with refuse_bad_config():
    config.update(validate(config))
    PLAN = jobs.plan(config)


include: "workflow/rules/common.smk"
include: "workflow/rules/prepare_data.smk"
include: "workflow/rules/factorization.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        PLAN.targets,
