"""``dplab train``: one run (pipeline config + --run, a single-run YAML, or --run-json) on a
prepared dataset → DIR/metrics.csv and DIR/summary.json."""

from __future__ import annotations

from dplab.commands.source import add_source


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
        "accountants and why), DIR/metrics.json (final test accuracy, test and train loss, δ and ε per claimed "
        "accountant: what `dvc metrics show` lists), DIR/model.pt and "
        "DIR/grad_norms.csv (the recorded norms with record_grad_norms, else only its header), "
        "DIR/individual_epsilon.csv (each record's individual ε with individual_epsilon, else only its header); resumes from "
        "DIR/checkpoint.pt if a previous attempt was interrupted.",
    )
    add_source(p, "--run-json", "the run as a JSON object", "pipeline config (with --run) or single-run YAML",
               "--run", "with a pipeline --config: the run's name in `runs`, or a grid run's folder "
               "under results/ (grids/<grid>/<dataset>/<model>/<variant>/<eps…>/seed<s>)")
    p.add_argument("--data", required=True, help="folder written by dplab prepare-data")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--mf-cache", default=None,
                   help="folder of saved factorizations: a dp_mf run loads DIR/<key>.npz (dplab.layout.cache_key), "
                   "written by `dplab mf --strategy S --steps T [--bands m | --buffers k] ... --out FILE`")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--cuda-graph", choices=["on", "off"], default="on",
                   help="on a CUDA device, replay each step as a CUDA graph where the run allows "
                   "(dplab.training.graphed; default on)")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch

    from dplab.io import check_output
    from dplab.training.resolve import load_run
    from dplab.validate import MAX_THREADS, integer

    check_output(args.out, "--out", folder=True)
    if args.threads is not None:
        torch.set_num_threads(integer("--threads", args.threads, 1, MAX_THREADS, "MAX_THREADS"))
    cfg = pipeline_run(args.config, args.run) if args.run is not None else load_run(args.config, args.run_json)
    _train_one(cfg, args.data, args.out, args.mf_cache, args.cuda_graph == "on")
    return 0


def pipeline_run(config_file: str | None, name: str) -> dict:
    """The resolved run of the training job ``name`` of a pipeline config — a run of `runs`, or
    a grid run's folder under results/ (``grids/<grid>/<run>``) — as :func:`dplab.jobs.plan`
    resolves it: its entry (:func:`dplab.entries.training_runs`) resolved alone, as
    ``--run-json`` is (the job plans no other entry of the config)."""
    from dplab.config import read_config
    from dplab.entries import training_runs
    from dplab.errors import DPLabError
    from dplab.schemas import load_yaml
    from dplab.training.resolve import resolve_run

    if config_file is None:
        raise DPLabError("--run", "names a run of a pipeline config: give --config FILE too")
    if "runs" not in load_yaml(config_file):
        raise DPLabError("--run", f"{config_file} is a single-run config (no 'runs' section)")
    runs = training_runs(read_config(config_file))
    folder = name if name.startswith("grids/") else f"runs/{name}"
    if folder not in runs:
        kind = "grid run" if name.startswith("grids/") else "run"
        raise DPLabError("--run", f"unknown {kind} {name!r} in {config_file}; defined: "
                                  f"{', '.join(job.removeprefix('runs/') for job in runs)}")
    where = f"runs.{name}" if folder.startswith("runs/") else f"grids.{folder.split('/')[1]}"
    return resolve_run(runs[folder], where)


def _train_one(cfg: dict, data_dir: str, out: str, mf_cache: str | None = None,
               cuda_graph: bool = True) -> None:
    from dplab.accounting.eligibility import labelled
    from dplab.errors import DPLabError
    from dplab.io import output_folder
    from dplab.training import data, loop
    from dplab.training.methods import METHODS
    from dplab.training.settings import RunSettings

    settings = RunSettings.of(cfg)
    dataset = data.load(data_dir)
    if dataset.info["name"] != settings.dataset:
        raise DPLabError("dataset", f"the run names {settings.dataset!r} but {data_dir} holds {dataset.info['name']!r}")
    method = METHODS[settings.method]
    factorization = method.load_factorization(settings, mf_cache) if mf_cache is not None else None
    if settings.phases is not None:
        from dplab.training import phased

        with output_folder(out) as folder:
            record = phased.train(cfg, dataset, folder)
        eps = ", ".join(f"{k}={v:.4g}" for k, v in record["epsilon"].items()) or "none"
        print(f"phases: {len(record['phases'])} epsilon: {eps} -> {out}")
        return
    with output_folder(out) as folder:  # on failure nothing of this attempt stays; summary.json lands last
        summary = loop.train(settings, dataset, folder, factorization=factorization,
                             cuda_graph=cuda_graph)
    eps = ", ".join(f"{k}={v:.4g}" for k, v in summary.epsilon.items()) or "none"
    references = {**summary.epsilon_lower, **summary.epsilon_comparison}  # beside the claims: never the run's ε
    for name, kind in summary.epsilon_bound.items():
        if kind != "upper":
            eps += f"; {labelled(name, references[name])}"
    final = summary.final
    print(f"test_accuracy={final.test_accuracy:.4f} test_loss={final.test_loss:.4f} epsilon: {eps} -> {out}")
