"""``dplab prepare-data``: one dataset of the pipeline config → DIR/train.npz, test.npz, info.json."""

from __future__ import annotations

import json

from dplab.errors import DPLabError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "prepare-data",
        help="prepare one dataset of the config (train/test npz + info.json)",
        description="Prepare one entry of the config's `datasets` (digits, mnist or synthetic): a seeded "
        "train/test split written as DIR/train.npz and DIR/test.npz, and DIR/info.json with sizes, "
        "input shape, classes and, where guaranteed, the loss constants. Give --config with --dataset, "
        "or --dataset-json.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="pipeline config with a `datasets` section (with --dataset)")
    src.add_argument("--dataset-json", help="the dataset entry as a JSON object (what the Snakemake rule passes)")
    p.add_argument("--dataset", help="name of the entry in `datasets` (with --config)")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args) -> int:
    from dplab.config import load_yaml
    from dplab.io import check_output
    from dplab.training import data

    check_output(args.out, "--out", folder=True)
    if args.config:
        datasets = load_yaml(args.config).get("datasets")
        if not args.dataset:
            raise DPLabError("--dataset", "is required with --config")
        if not isinstance(datasets, dict) or args.dataset not in datasets:
            valid = ", ".join(datasets) if isinstance(datasets, dict) else "none"
            raise DPLabError("--dataset", f"no dataset {args.dataset!r} in {args.config}; valid: {valid}")
        name, raw = args.dataset, datasets[args.dataset]
    else:
        try:
            raw = json.loads(args.dataset_json)
        except json.JSONDecodeError as err:
            raise DPLabError("--dataset-json", f"not valid JSON: {err}") from None
        name = args.dataset or "dataset"
    cfg = data.resolve_dataset(raw, name)
    train, test, info = data.prepare(cfg, name)
    data.write(args.out, train, test, info)
    print(f"{name}: {info['train_size']} train / {info['test_size']} test, shape {info['input_shape']} -> {args.out}")
    return 0
