"""``dplab prepare-data``: one dataset of the pipeline config → DIR/train.npz, test.npz, info.json."""

from __future__ import annotations

from dplab.errors import DPLabError


def register(subparsers) -> None:
    p = subparsers.add_parser("prepare-data", help="prepare one dataset of the config (train/test npz + info.json)")
    p.add_argument("--config", required=True, help="pipeline config with a `datasets` section")
    p.add_argument("--dataset", required=True, help="name of the entry in `datasets`")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args) -> int:
    from dplab.training import data
    from dplab.training.config import read_yaml

    datasets = read_yaml(args.config).get("datasets")
    if not isinstance(datasets, dict) or args.dataset not in datasets:
        valid = ", ".join(datasets) if isinstance(datasets, dict) else "none"
        raise DPLabError("--dataset", f"no dataset {args.dataset!r} in {args.config}; valid: {valid}")
    cfg = data.resolve_dataset(datasets[args.dataset], args.dataset)
    train, test, info = data.prepare(cfg, args.dataset)
    data.write(args.out, train, test, info)
    print(f"{args.dataset}: {info['train_size']} train / {info['test_size']} test, shape {info['input_shape']} -> {args.out}")
    return 0
