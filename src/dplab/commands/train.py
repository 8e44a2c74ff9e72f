"""``dplab train``: one run (pipeline config + --run, a single-run YAML, or --run-json) on a
prepared dataset → DIR/metrics.csv and DIR/summary.json."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train one run; write metrics.csv and summary.json",
        description="Train one run (a pipeline config with --run, a single-run YAML, or --run-json) on a "
        "dataset prepared by `dplab prepare-data`. Writes DIR/metrics.csv (one row per logged step, with "
        "ε from every accountant valid for the run), DIR/summary.json (final metrics, the setting in "
        "canonical names, σ, δ, ε per valid accountant, excluded accountants and why) and DIR/model.pt; "
        "resumes from DIR/checkpoint.pt if a previous attempt was interrupted.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="pipeline config (with --run) or single-run YAML")
    src.add_argument("--run-json", help="the run as a JSON object (what the Snakemake rule passes)")
    p.add_argument("--run", help="name of the run in the config's `runs` section")
    p.add_argument("--data", required=True, help="folder written by dplab prepare-data")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--mf-cache", default=None,
                   help="folder of cached factorizations (`dplab mf --cache`); dp_mf runs load theirs from it")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch

    from dplab.errors import DPLabError
    from dplab.training import data, loop
    from dplab.training.config import load_run

    cfg = load_run(args.config, args.run, args.run_json)
    if args.threads is not None:
        if args.threads < 1:
            raise DPLabError("--threads", f"must be >= 1; got {args.threads}")
        torch.set_num_threads(args.threads)
    dataset = data.load(args.data)
    if dataset.info["name"] != cfg["dataset"]:
        raise DPLabError("dataset", f"the run names {cfg['dataset']!r} but {args.data} holds {dataset.info['name']!r}")
    factorization = None
    if args.mf_cache is not None and cfg["method"] == "dp_mf":
        from dplab.training.dp_mf import load_factorization

        factorization = load_factorization(cfg, args.mf_cache)
    summary = loop.train(cfg, dataset, args.out, factorization=factorization)
    eps = ", ".join(f"{k}={v:.4g}" for k, v in summary["epsilon"].items()) or "none"
    final = summary["final"]
    print(f"test_accuracy={final['test_accuracy']:.4f} test_loss={final['test_loss']:.4f} epsilon: {eps} -> {args.out}")
    return 0
