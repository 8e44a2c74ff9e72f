# The rules' functions (no lambdas in rules): each gives a rule what its job of PLAN (the
# Snakefile's dplab.jobs.plan(config)) holds, so the rules and dvc.yaml are made from one job list.


wildcard_constraints:
    dataset=PLAN.pattern("prepare_data"),
    run_dir=PLAN.pattern("train"),
    sweep=PLAN.pattern("sweep"),
    figure=PLAN.pattern("figure"),
    audit=PLAN.pattern("audit"),
    factorization=PLAN.pattern("factorization"),


def _job(rule, wildcards):
    """The job of ``rule`` that these wildcards name (each rule has one wildcard)."""
    (name,) = wildcards
    return PLAN.job(rule, name)


def job_inputs(rule):
    """The input function of ``rule``: its job's inputs by name (for unpack)."""

    def inputs(wildcards):
        return _job(rule, wildcards).inputs

    return inputs


def job_param(rule, key):
    """The params function of ``rule``'s param ``key``."""

    def param(wildcards):
        return _job(rule, wildcards).params[key]

    return param


def job_resource(rule, key):
    """The function of ``rule``'s resource ``key`` (``threads``, ``gpu``, ``mem_mb``, ``runtime``)."""

    def resource(wildcards):
        return getattr(_job(rule, wildcards).resources, key)

    return resource


def figure_category(wildcards):
    """The report's category of a figure (its job's)."""
    return _job("figure", wildcards).category
