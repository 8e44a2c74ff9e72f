"""``dplab train``: one run (pipeline config + --run, a single-run YAML, or --run-json) on a
prepared dataset → DIR/metrics.csv and DIR/summary.json."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train one run; write metrics.csv and summary.json",
        description="Train one run (a pipeline config with --run, a single-run YAML, or --run-json) on a "
        "dataset prepared by `dplab prepare-data`. Writes DIR/metrics.csv (one row per logged step, with "
        "ε from every upper-bound accountant valid for the run, and epsilon_lower_*/epsilon_comparison_* "
        "columns for lower bounds and the Poisson comparison, which are not guarantees), DIR/summary.json "
        "(final metrics, the setting in canonical names, σ, δ, ε per valid accountant: `epsilon` the claims, "
        "`epsilon_lower`/`epsilon_comparison` beside them, `epsilon_bound` each one's label; excluded "
        "accountants and why), DIR/model.pt and "
        "DIR/grad_norms.csv (the recorded norms with record_grad_norms, else only its header); resumes from "
        "DIR/checkpoint.pt if a previous attempt was interrupted.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="pipeline config (with --run) or single-run YAML")
    src.add_argument("--run-json", help="the run as a JSON object (what the Snakemake rule passes)")
    p.add_argument("--run", help="name of the run in the config's `runs` section")
    p.add_argument("--grid", help="with a pipeline --config: train every run of this entry of `grids` into OUT/<run>/ "
                   "(then --data is the folder holding one prepared folder per dataset, e.g. results/data)")
    p.add_argument("--data", required=True, help="folder written by dplab prepare-data")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--mf-cache", default=None,
                   help="folder of saved factorizations: a dp_mf run loads DIR/<strategy>_T<steps>[_m<bands>].npz, "
                   "written by `dplab mf --strategy S --steps T [--bands m] --out FILE`")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch

    from dplab.errors import DPLabError
    from dplab.io import check_output
    from dplab.training.config import load_run

    check_output(args.out, "--out", folder=True)
    if args.threads is not None:
        if args.threads < 1:
            raise DPLabError("--threads", f"must be >= 1; got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.grid:
        return _train_grid(args)
    _train_one(load_run(args.config, args.run, args.run_json), args.data, args.out, args.mf_cache)
    return 0


def _train_grid(args) -> int:
    from pathlib import Path

    from dplab import jobs
    from dplab.config import load_config
    from dplab.errors import DPLabError
    from dplab.training.config import resolve_run

    if not args.config or args.run:
        raise DPLabError("--grid", "goes with a pipeline --config and without --run")
    config = load_config(args.config)
    if args.grid not in config["grids"]:
        raise DPLabError("--grid", f"unknown grid {args.grid!r}; defined: {', '.join(sorted(config['grids']))}")
    for name, item in jobs.grid_runs(config, args.grid).items():
        cfg = resolve_run(item["run"], where=f"grids.{args.grid}.{name}")
        _train_one(cfg, str(Path(args.data) / cfg["dataset"]), str(Path(args.out) / name), args.mf_cache)
    return 0


def _train_one(cfg: dict, data_dir: str, out: str, mf_cache: str | None = None) -> None:
    from pathlib import Path

    from dplab.accounting.claims import KEYS, labelled
    from dplab.errors import DPLabError
    from dplab.io import write_text
    from dplab.training import data, loop

    dataset = data.load(data_dir)
    if dataset.info["name"] != cfg["dataset"]:
        raise DPLabError("dataset", f"the run names {cfg['dataset']!r} but {data_dir} holds {dataset.info['name']!r}")
    factorization = None
    if mf_cache is not None and cfg["method"] == "dp_mf":
        from dplab.training.dp_mf import load_factorization

        factorization = load_factorization(cfg, mf_cache)
    summary = loop.train(cfg, dataset, out, factorization=factorization)
    if not cfg["record_grad_norms"]:  # every run folder has the same files: one Snakemake rule trains them all
        write_text(Path(out) / "grad_norms.csv", ",".join(loop.GRAD_NORM_COLUMNS) + "\n")
    eps = ", ".join(f"{k}={v:.4g}" for k, v in summary["epsilon"].items()) or "none"
    for name, kind in summary["epsilon_bound"].items():  # beside the claims: never the run's ε
        if kind != "upper":
            eps += f"; {labelled(name, summary[KEYS[kind]][name])}"
    final = summary["final"]
    print(f"test_accuracy={final['test_accuracy']:.4f} test_loss={final['test_loss']:.4f} epsilon: {eps} -> {out}")
