"""``dplab sweep``: ε vs T of a run's setting for several accountants (a tidy CSV)."""

from __future__ import annotations

from dplab.commands.source import named_entry
from dplab.errors import DPLabError


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="ε vs T of a training run's setting for several accountants",
        description=(
            "Evaluate each accountant's ε(T) on a log-spaced T grid for the setting (σ, q,"
            " sampling, neighbouring, δ, …) recorded in a run's summary.json; write a tidy CSV with"
            " one row per (accountant, T) and its `bound`: upper (a claim), lower (the true ε is at"
            " least this) or comparison (the Poisson claim the run does not earn). Accountants"
            " whose assumptions the setting violates, or whose update is not the one the run made"
            " (the run's own exclusions), get one row with an empty ε and the reason. Give either"
            " --config and --sweep (an entry of the config's `sweeps`) or --summary, --accountants"
            " and --points."
        ),
    )
    p.add_argument("--config", help="pipeline config file (with --sweep)")
    p.add_argument("--sweep", metavar="NAME", help="name of the entry of the config's `sweeps`")
    p.add_argument("--summary", help="the run's summary.json (its setting and δ are used)")
    p.add_argument("--accountants", nargs="+", metavar="NAME", help="accountants to evaluate")
    p.add_argument(
        "--points",
        type=int,
        default=40,
        help="number of log-spaced T values from 1 to the run's steps (2 to POINTS_MAX = 10000)",
    )
    p.add_argument("--out", required=True, help="CSV file to write")
    p.set_defaults(func=run)


def run(args) -> int:
    from dplab.accounting.eligibility import from_summary
    from dplab.accounting.setting import check_delta
    from dplab.accounting.sweep import POINTS_MAX, steps_grid, sweep
    from dplab.inputs import input_file
    from dplab.validate import integer, number
    from dplab.training.summary import RunSummary
    from dplab.io import check_not_input, check_output
    from dplab.tables import write_table

    check_output(args.out, "--out")
    if args.config or args.sweep:
        from dplab import jobs
        from dplab.config import read_config

        if not (args.config and args.sweep):
            raise DPLabError("sweep", "--config and --sweep go together")
        if args.summary or args.accountants:
            raise DPLabError(
                "sweep", "give either --config/--sweep or --summary/--accountants, not both"
            )
        config = read_config(args.config)
        job = named_entry(jobs.plan(config).of("sweep"), args.sweep, "sweep", "sweep")
        summary_path = job.inputs["summary"]
        accountants, points = (
            config["sweeps"][args.sweep]["accountants"],
            config["sweeps"][args.sweep]["points"],
        )
    else:
        if not (args.summary and args.accountants):
            raise DPLabError(
                "summary", "give --summary and --accountants (or --config and --sweep)"
            )
        summary_path, accountants, points = args.summary, args.accountants, args.points
        integer("--points", points, 2, POINTS_MAX, "POINTS_MAX")  # before the summary is read
        input_file(summary_path, "--summary")  # the flag named where the file is missing or empty
    duplicated = sorted({name for name in accountants if accountants.count(name) > 1})
    if duplicated:
        raise DPLabError("--accountants", f"names {', '.join(duplicated)} more than once")
    check_not_input(args.out, "--out", [summary_path])
    summary = RunSummary.read(summary_path)
    try:  # the fields the sweep reads, refused naming the file (a summary edited by hand)
        setting, update = from_summary(summary)
        steps = integer("run.steps", summary.settings.steps)
        if setting is not None:
            check_delta(number("delta", summary.delta, "a number in (0, 1)"))
    except DPLabError as err:
        raise DPLabError("--summary", f"{summary_path}: {err}") from None
    table = sweep(setting, summary.delta, accountants, steps_grid(steps, points), update)
    write_table(args.out, table)
    return 0
