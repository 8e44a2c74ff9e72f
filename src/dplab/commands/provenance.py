"""``dplab provenance``: the commit, config hash and package versions behind result files."""

from __future__ import annotations

from dplab.commands.source import add_source
from dplab.errors import DPLabError
from dplab.validate import json_value


def register(sub) -> None:
    p = sub.add_parser(
        "provenance",
        help="record the git commit, config hash and package versions behind result files",
        description="Write one JSON with the git commit (and whether tracked files had uncommitted "
        "changes), the SHA-256 of the config (canonical JSON), the config, the versions of dplab, "
        "torch, numpy, scipy, dp_accounting, opacus, snakemake, dvc and Python, and the SHA-256 of "
        "every given output (directories: every file below them).",
    )
    add_source(p, "--config-json", "the config as JSON", "pipeline config file (YAML)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("outputs", nargs="*",
                   help="result files or directories to cover (default: every result the config's DAG makes)")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from dplab import jobs
    from dplab.config import read_config, validate
    from dplab.inputs import input_file
    from dplab.io import check_output, write_json
    from dplab.provenance import record

    check_output(args.out, "--out")
    # validated with defaults filled in either way, so both give the same config hash
    if args.config_json is not None:
        config = validate(json_value("--config-json", args.config_json))
    else:
        config = read_config(args.config)
    if args.config is not None or not args.outputs:  # a config file is checked as the Snakefile checks it
        args.outputs = args.outputs or jobs.plan(config).results
    missing = [name for name in args.outputs if not Path(name).exists()]
    if missing:
        raise DPLabError("outputs", f"no such file or directory: {', '.join(missing)}")
    for name in args.outputs:  # a FIFO would block the hash, /dev/zero would never end it
        entries = [p for p in Path(name).rglob("*") if not p.is_dir()] if Path(name).is_dir() else [Path(name)]
        for entry in entries:
            input_file(entry, "outputs", empty_ok=True)
        if not entries:
            raise DPLabError("outputs", f"{name} is a folder holding no file: nothing to record; make its results first")
    data = record(config, args.outputs)
    write_json(args.out, data)
    return 0
