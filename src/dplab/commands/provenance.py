"""``dplab provenance``: the commit, config hash and package versions behind result files."""

from __future__ import annotations

from dplab.commands.source import add_source
from dplab.errors import DPLabError
from dplab.validate import json_value


def register(sub) -> None:
    p = sub.add_parser(
        "provenance",
        help="record the git commit, config hash and package versions behind result files",
        description=(
            "Write one JSON with the git commit (and whether tracked files had uncommitted"
            " changes), the SHA-256 of the config (canonical JSON), the config, the versions of"
            " dplab, torch, numpy, scipy, dp_accounting, opacus, snakemake, dvc and Python, and the"
            " SHA-256 of every given output (directories: every file below them), and of every data"
            " file the config's own datasets read (kinds arrays, csv, image_folder) and model file"
            " its runs build (model: FILE.py:Class)."
        ),
    )
    add_source(p, "--config-json", "the config as JSON", "pipeline config file (YAML)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument(
        "outputs",
        nargs="*",
        help="result files or directories to cover (default: every result the config's DAG makes)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from dplab import entries
    from dplab.inputs import input_file
    from dplab.io import check_output, write_json
    from dplab.provenance import record
    from dplab.schemas import validate
    from dplab.training import data

    check_output(args.out, "--out")
    # validated with defaults filled in either way, so both give the same config hash
    if args.config_json is not None:
        config = validate(json_value("--config-json", args.config_json))
    else:
        from dplab.config import read_config

        config = read_config(args.config)
    if (
        args.config is not None or not args.outputs
    ):  # a config file is checked as the Snakefile checks it
        from dplab import jobs

        args.outputs = args.outputs or jobs.plan(config).results
    missing = [name for name in args.outputs if not Path(name).exists()]
    if missing:
        raise DPLabError("outputs", f"no such file or directory: {', '.join(missing)}")
    for name in args.outputs:  # a FIFO would block the hash, /dev/zero would never end it
        files = (
            [p for p in Path(name).rglob("*") if not p.is_dir()]
            if Path(name).is_dir()
            else [Path(name)]
        )
        for file in files:
            input_file(file, "outputs", empty_ok=True)
        if not files:
            raise DPLabError(
                "outputs",
                f"{name} is a folder holding no file: nothing to record; make its results first",
            )
    inputs = []
    for name in config.get(
        "datasets", {}
    ):  # the own datasets' files, each checked as the outputs are
        for path in data.source_files(entries.dataset_entry(config, name), name):
            inputs.append(str(input_file(path, f"datasets.{name}.path", empty_ok=True)))
    for path in entries.model_files(config):  # the model files its runs and audits build
        inputs.append(str(input_file(path, "model", empty_ok=True)))
    write_json(args.out, record(config, args.outputs, inputs=inputs))
    return 0
