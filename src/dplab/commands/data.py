"""``dplab prepare-data``: one dataset of the pipeline config →
DIR/train.npz, test.npz, info.json."""

from __future__ import annotations

from dplab.commands.source import add_source
from dplab.errors import DPLabError
from dplab.validate import json_value


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "prepare-data",
        help="prepare one dataset of the config (train/test npz + info.json)",
        description=(
            "Prepare one entry of the config's `datasets` (a built-in kind, or your own data:"
            " arrays, csv, image_folder, read and checked here; docs/own_experiment.md): a seeded"
            " train/test split written as DIR/train.npz and DIR/test.npz, and DIR/info.json with"
            " sizes, input shape, classes and, where guaranteed, the loss constants. Give --config"
            " with --dataset, or --dataset-json."
        ),
    )
    add_source(
        p,
        "--dataset-json",
        "the dataset entry as a JSON object",
        "pipeline config with a `datasets` section (with --dataset)",
        "--dataset",
        "name of the entry in `datasets` (with --config)",
    )
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args) -> int:
    from dplab.io import check_output, folder_lock
    from dplab.schemas import load_yaml
    from dplab.training import data

    check_output(args.out, "--out", folder=True)
    if args.config is not None:
        datasets = load_yaml(args.config).get("datasets")
        if not args.dataset:
            raise DPLabError("--dataset", "is required with --config")
        if not isinstance(datasets, dict) or args.dataset not in datasets:
            valid = ", ".join(datasets) if isinstance(datasets, dict) else "none"
            raise DPLabError(
                "--dataset", f"no dataset {args.dataset!r} in {args.config}; valid: {valid}"
            )
        name, raw = args.dataset, datasets[args.dataset]
    else:
        raw = json_value("--dataset-json", args.dataset_json)
        name = args.dataset or "dataset"
    cfg = data.resolve_dataset(raw, name)
    with folder_lock(args.out):
        train, test, info = data.prepare(cfg, name)
        data.write(args.out, train, test, info)
    print(
        f"{name}: {info['train_size']} train / {info['test_size']} test, shape"
        f" {info['input_shape']} -> {args.out}"
    )
    if info.get("fitted"):
        print(
            f"note: the encoding of {', '.join(info['fitted'])} was fitted on the training split,"
            " outside ε (the means, stds and categories published in info.json shape every"
            f" record's features); give it under datasets.{name}.encoding (public values) for ε"
            " to cover the training records (docs/own_experiment.md, What ε covers)"
        )
    return 0
