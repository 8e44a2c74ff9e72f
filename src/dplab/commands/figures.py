"""``dplab figure-table``, ``dplab figure-draw`` and ``dplab index``."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

from dplab.errors import DPLabError
from dplab.validate import json_value


def register(sub) -> None:
    from dplab.figures import FIGURES

    t = sub.add_parser(
        "figure-table",
        help="compute the tidy table of a figure from result files",
        description="Compute results/tables/<figure>.csv (one row per plotted point) from the "
        "result tables the figure needs.",
    )
    t.add_argument("figure", choices=FIGURES, help="figure id (README.md, Figures)")
    t.add_argument(
        "--config", help="pipeline config file: take the figure's parameters and inputs from it"
    )
    t.add_argument(
        "--params-json", help="the figure's entry of config `figures`, as JSON (with --inputs)"
    )
    t.add_argument(
        "--inputs",
        nargs="*",
        default=[],
        metavar="NAME=PATH",
        help=(
            "result files the table is made from, by the figure's input names (a name of a list of "
            "files once per file, in order), e.g. sweep=results/accounting/dp_sgd.csv"
        ),
    )
    t.add_argument("--out", required=True, help="CSV file to write")
    t.set_defaults(func=run_table)

    d = sub.add_parser(
        "figure-draw",
        help="draw a figure from its table alone",
        description=(
            "Draw a figure as PDF and PNG from its tidy table, without recomputing anything."
        ),
    )
    d.add_argument("figure", choices=FIGURES, help="figure id (README.md, Figures)")
    d.add_argument("--table", required=True, help="the figure's CSV table")
    d.add_argument("--pdf", required=True, help="PDF file to write")
    d.add_argument("--png", required=True, help="PNG file to write")
    d.set_defaults(func=run_draw)

    i = sub.add_parser(
        "index",
        help="write results/index.md listing every figure and table",
        description=(
            "List every figure and table found under the results folder, with titles and sources."
        ),
    )
    i.add_argument("--results", default="results", help="the results folder")
    i.add_argument(
        "--config",
        help="pipeline config file: every result its DAG makes must exist (else the "
        "missing ones are named)",
    )
    i.add_argument("--out", required=True, help="Markdown file to write")
    i.set_defaults(func=run_index)


def run_table(args) -> int:
    from dplab.startup import settled_imports

    with settled_imports():  # the figure's module (pandas, its accountants' modules)
        from dplab.figures import figure, input_args, input_files, parse_input_args
        from dplab.inputs import input_file
        from dplab.io import check_not_input, check_output
        from dplab.tables import write_table

        module = figure(args.figure)

    check_output(args.out, "--out")
    if args.config is not None:
        from dplab import jobs
        from dplab.config import read_config

        if args.params_json or args.inputs:
            raise DPLabError("config", "give either --config or --params-json/--inputs, not both")
        config = read_config(args.config)
        tables = jobs.plan(config).of("figure_table")
        if args.figure not in tables:
            raise DPLabError("figure", f"{args.figure!r} is not in the config's `figures`")
        params, inputs = config["figures"][args.figure], tables[args.figure].inputs
    else:
        from dplab.schemas import load_schema, validate

        params = json_value("--params-json", args.params_json or "{}")
        params = validate(
            params,
            load_schema("config")["properties"]["figures"]["properties"][args.figure],
            f"figures.{args.figure}",
        )
        inputs = parse_input_args(args.figure, args.inputs)
    for path in input_files(inputs):
        if not Path(path).exists():
            raise DPLabError("--inputs", f"no such file: {path}" + _maker(path))
        input_file(path, "--inputs")
    check_not_input(args.out, "--out", input_files(inputs))
    what = (
        f"the inputs ({' '.join(input_args(inputs))}) are not the result files figure {args.figure}"
        " is made from"
    )
    with _bad_input("--inputs", what):
        table = module.table(inputs, params)
    write_table(args.out, table)
    return 0


def run_draw(args) -> int:
    from dplab.startup import settled_imports

    with settled_imports():  # the figure's module (pandas) and matplotlib
        from dplab.figures import figure, style
        from dplab.io import check_not_input, check_output
        from dplab.tables import read_table

        module = figure(args.figure)
        style.pyplot()

    pdf, png = check_output(args.pdf, "--pdf"), check_output(args.png, "--png")
    if pdf.resolve() == png.resolve():
        raise DPLabError(
            "--png",
            f"is the same file as --pdf ({args.pdf}): one would overwrite the other; give two"
            " paths",
        )
    check_not_input(args.pdf, "--pdf", [args.table])
    check_not_input(args.png, "--png", [args.table])
    make = f"dplab figure-table {args.figure} … --out {args.table}"
    try:
        table = read_table(args.table, f"table of figure {args.figure}", make)
    except DPLabError as err:
        raise DPLabError("--table", str(err)) from None
    what = (
        f"{args.table} is not the table of figure {args.figure} (another figure's? `{make}`"
        " makes it)"
    )
    with _bad_input("--table", what):
        drawing = module.draw(table)
    style.save(drawing, args.pdf, args.png)
    return 0


def _maker(path: str) -> str:
    """How to make the missing result file ``path``: Snakemake makes the files under results/ (in
    the folder it runs in), nothing makes another path."""
    from dplab.layout import RESULTS

    if Path(path).parts[:1] == (RESULTS,):
        return f" (the pipeline makes it: snakemake {path})"
    return (
        f" (the pipeline writes result files under {RESULTS}/: give one of them, or a file that"
        " exists)"
    )


@contextlib.contextmanager
def _bad_input(flag: str, what: str):
    """What a figure's ``table``/``draw`` raises on input files that do not hold what it reads —
    a missing file entry, key or column, text that is not CSV/JSON, an unreadable archive — as
    one :class:`DPLabError` naming ``flag``.  Its own DPLabErrors pass through."""
    import zipfile

    import pandas as pd

    try:
        yield
    except DPLabError:
        raise
    except KeyError as err:
        raise DPLabError(flag, f"{what}: no {err.args[0]!r} in them") from None
    except AttributeError as err:  # frame.column or row.column of a column that is not there
        obj = getattr(err, "obj", None)
        row = isinstance(obj, tuple) and hasattr(obj, "_fields")  # a row of frame.itertuples()
        if not (row or isinstance(obj, (pd.DataFrame, pd.Series))):
            raise
        raise DPLabError(flag, f"{what}: no column {err.name!r}") from None
    except (ValueError, TypeError, IndexError, EOFError, zipfile.BadZipFile) as err:
        raise DPLabError(flag, f"{what}: {type(err).__name__}: {err}") from None


def _check_complete(results: Path, config_file: str | None) -> None:
    """Refuse an index over missing results, naming them: a figure with some of its table, PDF
    and PNG but not all; with ``config_file``, any result of its DAG
    (:attr:`dplab.jobs.JobList.results`,
    paths under ``results/`` read under ``results``); without it, a folder holding no file at all
    (an index of nothing, where every result is missing)."""
    from dplab.figures import FIGURES
    from dplab.layout import RESULTS, figure_files

    def under(paths: list[str]) -> list[str]:  # the layout's paths, relative to results/
        return [Path(p).relative_to(RESULTS).as_posix() for p in paths]

    wanted = []
    for figure_id in FIGURES:
        files = under(figure_files(figure_id))
        if any((results / f).exists() for f in files):
            wanted += files
    if not results.is_dir():
        what = "is a file" if results.exists() else "does not exist"
        raise DPLabError(
            "--results", f"{results} {what}; give the results folder (default results)"
        )
    if not config_file and not any(p.is_file() for p in results.rglob("*")):
        raise DPLabError(
            "--results",
            f"{results} holds no result files; make them first (snakemake), or give --config "
            "to name the missing ones",
        )
    if config_file:
        from dplab import jobs

        wanted += under(jobs.load(config_file).results)
    missing = sorted({f for f in wanted if not (results / f).exists()})
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise DPLabError(
            "--results",
            f"{len(missing)} result(s) missing under {results}: {shown}; make them first "
            "(snakemake), the index lists complete results only",
        )


def run_risks(results: Path) -> list[str]:
    """The index's table of the runs of config `runs`: each one's ε (its claims) and beside it the
    attack risk its summary.json records (TPR at FPR 0.01, advantage), or why it has none."""
    from dplab.figures.runs import risk_columns
    from dplab.training.summary import RunSummary

    lines = [
        "",
        "## Runs: ε and the attack risk beside it",
        "",
        (
            "Risk: any membership attacker's TPR at FPR 0.01 and advantage TPR − FPR over the run's"
            " steps, from the pld privacy-loss distribution (docs/risk.md)."
        ),
        "",
        "| run | ε claimed (δ) | TPR at FPR 0.01 | advantage | |",
        "| --- | --- | --- | --- | --- |",
    ]
    for path in sorted(results.glob("runs/*/summary.json")):
        summary = RunSummary.read(path)
        eps = ", ".join(f"{k} {v:.4g}" for k, v in summary.epsilon.items()) or "none"
        delta = f" (δ = {summary.delta:g})" if summary.delta else ""
        risk = risk_columns(summary)
        cells = (
            ["—", "—", risk["risk_note"]]
            if math.isnan(risk["advantage"])
            else [f"{risk['tpr_at_fpr_0.01']:.4g}", f"{risk['advantage']:.4g}", ""]
        )
        lines.append(f"| {path.parent.name} | {eps}{delta} | " + " | ".join(cells) + " |")
    return lines


def run_index(args) -> int:
    from dplab.figures import FIGURES, figure
    from dplab.inputs import damaged
    from dplab.io import check_output, write_text
    from dplab.tables import read_table

    check_output(args.out, "--out")
    results = Path(args.results)
    _check_complete(results, args.config)
    lines = [
        "# Results index",
        "",
        "Every figure is drawn only from its table; redraw one with "
        "`dplab figure-draw ID --table results/tables/ID.csv --pdf … --png …`.",
        "",
    ]
    claims = results / "tables" / "claims.csv"
    if claims.exists():  # the claims table first (docs/claims.md)
        make = f"dplab figure-table claims --config CONFIG --out {claims}"
        table = read_table(claims, "claims table", make)
        if "verdict" not in table.columns:
            raise damaged(
                claims, "claims table", "has no 'verdict' column (not the claims table)", make
            )
        counts = table.verdict.value_counts()
        lines += [
            "**Claims of the sources, checked** ([tables/claims.csv](tables/claims.csv),"
            " docs/claims.md): "
            + ", ".join(
                f"{counts.get(v, 0)} {v}" for v in ("holds", "differs", "not checkable here")
            )
            + ".",
            "",
        ]
    lines += ["| figure | reproduces | figure files | table |", "| --- | --- | --- | --- |"]
    for figure_id in FIGURES:
        if not (results / "tables" / f"{figure_id}.csv").exists():
            continue
        module = figure(figure_id)
        lines.append(
            f"| {module.TITLE} | {module.SOURCE} | [pdf](figures/{figure_id}.pdf), "
            f"[png](figures/{figure_id}.png) | [tables/{figure_id}.csv](tables/{figure_id}.csv) |"
        )
    lines += run_risks(results)
    tables = sorted(p.relative_to(results).as_posix() for p in results.glob("accounting/*.csv"))
    tables += sorted(p.relative_to(results).as_posix() for p in results.glob("runs/*/metrics.csv"))
    lines += ["", "## Result tables", ""] + [f"- [{t}]({t})" for t in tables]
    write_text(args.out, "\n".join(lines) + "\n")
    return 0
