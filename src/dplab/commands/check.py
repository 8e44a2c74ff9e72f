"""``dplab check-config``: the checks Snakemake runs on the config before it plans a job."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "check-config",
        help="check a pipeline config as Snakemake does before planning (schema and cross-checks)",
        description=(
            "Merge the given config files in order (each over the previous ones, as Snakemake"
            " merges the --configfile files it is given, which replace config/config.yaml),"
            " validate them against the schema and run every cross-check the Snakefile runs before"
            " planning a job (dplab.config.check_config). Prints the number of jobs' entries"
            " checked; a problem is one line naming the dotted key (a YAML syntax error: the file,"
            " line and column), exit code 2."
        ),
    )
    p.add_argument(
        "files",
        nargs="*",
        default=["config/config.yaml"],
        help="config files, merged in order (default: config/config.yaml)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dplab import jobs
    from dplab.config import read_config

    config = read_config(*args.files)
    plan = jobs.plan(config)
    training = [job for job in plan.jobs if isinstance(job, (jobs.RunJob, jobs.RunsJob))]
    print(
        f"{' + '.join(args.files)}: ok ({len(plan.runs)} training runs in {len(training)} jobs, "
        f"{len(config.get('audits', {}))} audits, {len(config.get('sweeps', {}))} sweeps, "
        f"{len(config.get('figures', {}))} figures)"
    )
    return 0
