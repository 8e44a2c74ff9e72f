"""``dplab dvc-yaml``: write dvc.yaml from the config and the Snakefile's job list
(:mod:`dplab.dvc_yaml`)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "dvc-yaml",
        help="write dvc.yaml: one DVC stage per job of the Snakemake DAG",
        description=(
            "Write dvc.yaml from config/config.yaml: one stage per job of the Snakemake DAG (the"
            " same command, inputs and outputs), each run's metrics.json as a DVC metric and its"
            " metrics.csv and each sweep's CSV as DVC plots, with the plot templates they name"
            " (.dvc/plots/ beside --out). Rerun it after adding or removing entries of the config;"
            " --check only compares (exit 2 when a file is not current)."
        ),
    )
    p.add_argument("--out", default="dvc.yaml", help="file to write (default: dvc.yaml)")
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail if --out or a template differs from what it would be",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from dplab.config import read_config
    from dplab.dvc_yaml import CONFIG, files
    from dplab.errors import DPLabError
    from dplab.io import check_output, write_text

    written = files(
        read_config(CONFIG)
    )  # dvc.yaml, then the templates (beside --out, as DVC looks them up)
    texts = {
        args.out: written.pop("dvc.yaml"),
        **{str(Path(args.out).parent / name): text for name, text in written.items()},
    }
    if args.check:
        for path, text in texts.items():
            if not Path(path).is_file() or Path(path).read_text() != text:
                raise DPLabError(
                    "--out",
                    f"{path} is not current for {CONFIG}: run `dplab dvc-yaml --out {args.out}`",
                )
        return 0
    for path in texts:  # every path checked before anything is written
        check_output(path, "--out")
    for path, text in texts.items():
        write_text(path, text)
    return 0
