"""``dplab train``: one run (pipeline config + --run, a single-run YAML, or --run-json) on a
prepared dataset → DIR/metrics.csv and DIR/summary.json; or several runs on one dataset, one after
another in one process, each into its own DIR (a job of grouped grid runs:
config ``group_runs``)."""

from __future__ import annotations

from dplab.commands.source import add_source


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train one run (or several, one after another); write metrics.csv and summary.json",
        description=(
            "Train one run (a pipeline config with --run, a single-run YAML, or --run-json) on a"
            " dataset prepared by `dplab prepare-data`. Writes DIR/metrics.csv (one row per logged"
            " step, with ε from every upper-bound accountant valid for the run, and"
            " epsilon_lower_*/epsilon_comparison_* columns for lower bounds and the Poisson"
            " comparison, which are not guarantees), DIR/summary.json (final metrics, the setting"
            " in canonical names, σ, δ, ε per valid accountant: `epsilon` the claims,"
            " `epsilon_lower`/`epsilon_comparison` beside them, `epsilon_bound` each one's label;"
            " excluded accountants and why), DIR/metrics.json (final test accuracy, test and train"
            " loss, δ and ε per claimed accountant: what `dvc metrics show` lists), DIR/model.pt"
            " and DIR/grad_norms.csv (the recorded norms with record_grad_norms, else only its"
            " header), DIR/individual_epsilon.csv (each record's individual ε with"
            " individual_epsilon, else only its header); resumes from DIR/checkpoint.pt if a"
            " previous attempt was interrupted. Several runs (--run NAME NAME …, or --run-json with"
            " a list of runs) train one after another in this process, each into its --out DIR (one"
            " per run, in order), each exactly as it trains alone. A run with `phases` trains them"
            " into DIR/phase<i> and writes the same files into DIR, its ε that of the phases"
            " composed (docs/training.md, Runs in phases)."
        ),
    )
    add_source(
        p,
        "--run-json",
        "the run as a JSON object, or a list of runs",
        "pipeline config (with --run) or single-run YAML",
        "--run",
        "with a pipeline --config: the run's name in `runs`, or a grid run's folder under results/"
        " (grids/<grid>/<dataset>/<model>/<variant>/<eps…>/seed<s>); several names: those runs, one"
        " after another",
        nargs="+",
    )
    p.add_argument("--data", required=True, help="folder written by dplab prepare-data")
    p.add_argument("--out", required=True, nargs="+", help="output folder, one per run")
    p.add_argument(
        "--mf-cache",
        default=None,
        help=(
            "folder of saved factorizations: a dp_mf run loads DIR/<key>.npz"
            " (dplab.layout.cache_key), written by `dplab mf --strategy S --steps T [--bands m |"
            " --buffers k] ... --out FILE`"
        ),
    )
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    p.add_argument(
        "--cuda-graph",
        choices=["on", "off"],
        default="on",
        help="on a CUDA device, replay each step as a CUDA graph where the run allows "
        "(dplab.training.graphed; default on)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dplab.startup import settled_imports

    with settled_imports():
        import torch

        from dplab.errors import DPLabError
        from dplab.io import check_output
        from dplab.training.resolve import load_runs
        from dplab.validate import MAX_THREADS, integer

    for out in args.out:
        check_output(out, "--out", folder=True)
    if len(set(args.out)) < len(args.out):
        raise DPLabError("--out", "names a folder twice; give one folder per run")
    if args.threads is not None:
        torch.set_num_threads(integer("--threads", args.threads, 1, MAX_THREADS, "MAX_THREADS"))
    cfgs = (
        pipeline_runs(args.config, args.run)
        if args.run is not None
        else load_runs(args.config, args.run_json)
    )
    if len(cfgs) != len(args.out):
        raise DPLabError(
            "--out", f"give one folder per run: {len(cfgs)} run(s), {len(args.out)} folder(s)"
        )
    _train(cfgs, args.data, args.out, args.mf_cache, args.cuda_graph == "on")
    return 0


def pipeline_runs(config_file: str | None, names: list[str]) -> list[dict]:
    """The resolved runs of a pipeline config's training runs ``names`` — runs of `runs`, or grid
    runs' folders under results/ (``grids/<grid>/<run>``) — as :func:`dplab.jobs.plan` resolves
    them: each entry (:func:`dplab.entries.training_runs`) resolved alone, as ``--run-json`` is
    (the job plans no other entry of the config)."""
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
    folders = [name if name.startswith("grids/") else f"runs/{name}" for name in names]
    for name, folder in zip(names, folders):
        if folder not in runs:
            kind = "grid run" if name.startswith("grids/") else "run"
            defined = [job.removeprefix("runs/") for job in runs]
            shown = ", ".join(defined[:10]) + (
                f" and {len(defined) - 10} more" if len(defined) > 10 else ""
            )
            raise DPLabError(
                "--run",
                f"unknown {kind} {name!r} in {config_file}; defined: {shown or 'none'} (a "
                "dvc.yaml stage naming it is older than the config: `dplab dvc-yaml --out "
                "dvc.yaml` writes it again)",
            )
    return [
        resolve_run(
            runs[folder],
            f"runs.{name}" if folder.startswith("runs/") else f"grids.{folder.split('/')[1]}",
        )
        for name, folder in zip(names, folders)
    ]


def _train(
    cfgs: list[dict],
    data_dir: str,
    outs: list[str],
    mf_cache: str | None = None,
    cuda_graph: bool = True,
) -> None:
    """Train each run of ``cfgs`` on the dataset ``data_dir`` (read once) into its folder of
    ``outs``, one after another; every run's dataset and factorization are checked before the first
    trains. The accountants' answers are kept for the job (:mod:`dplab.accounting.memo`): runs
    asking the same — a grid cell's seeds — compute them once. With several runs, each finished
    run's final state stays as its checkpoint until the last run is done: a retry of the job, whose
    results Snakemake deleted, writes those runs' results again without training them."""
    from pathlib import Path

    from dplab.accounting.memo import kept_answers
    from dplab.errors import DPLabError
    from dplab.io import output_folder
    from dplab.training import checkpoint, data, loop
    from dplab.training.methods import METHODS, run_factorization
    from dplab.training.settings import RunSettings

    dataset = data.load(data_dir)
    runs = [RunSettings.of(cfg) for cfg in cfgs]
    factorizations = {}  # by cache key: the runs of one job share theirs
    for cfg, settings in zip(cfgs, runs):
        if dataset.info["name"] != settings.dataset:
            raise DPLabError(
                "dataset",
                f"the run names {settings.dataset!r} but {data_dir} holds {dataset.info['name']!r}",
            )
        if mf_cache is not None and (key := run_factorization(cfg)) not in factorizations:
            factorizations[key] = METHODS[settings.method].load_factorization(settings, mf_cache)
    keep_final = len(cfgs) > 1  # each run's final state, until the last run is done
    with kept_answers():
        for cfg, settings, out in zip(cfgs, runs, outs):
            if settings.phases is not None:
                _train_phases(cfg, dataset, out)
                continue
            factorization = (
                factorizations.get(run_factorization(cfg)) if mf_cache is not None else None
            )
            # on failure nothing of this attempt stays; summary.json lands last
            with output_folder(out) as folder:
                summary = loop.train(
                    settings,
                    dataset,
                    folder,
                    factorization=factorization,
                    cuda_graph=cuda_graph,
                    keep_final=keep_final,
                )
            _report(summary, out)
    for out in outs if keep_final else ():
        checkpoint.discard(Path(out))


def _report(summary, out: str) -> None:
    """The line a trained run prints: test accuracy and loss, its ε and the references beside."""
    from dplab.accounting.eligibility import labelled

    eps = ", ".join(f"{k}={v:.4g}" for k, v in summary.epsilon.items()) or "none"
    references = {
        **summary.epsilon_lower,
        **summary.epsilon_comparison,
    }  # beside the claims: never the run's ε
    for name, kind in summary.epsilon_bound.items():
        if kind != "upper":
            eps += f"; {labelled(name, references[name])}"
    final = summary.final
    print(
        f"test_accuracy={final.test_accuracy:.4f} test_loss={final.test_loss:.4f} epsilon: {eps} ->"
        f" {out}"
    )


def _train_phases(cfg: dict, dataset, out: str) -> None:
    """A run in phases (:mod:`dplab.training.phased`) into ``out``."""
    from dplab.io import output_folder
    from dplab.training import phased

    with output_folder(out) as folder:
        summary = phased.train(cfg, dataset, folder)
    eps = ", ".join(f"{k}={v:.4g}" for k, v in summary.epsilon.items()) or "none"
    final = summary.final
    print(
        f"phases: {len(summary.details['phases'])} test_accuracy={final.test_accuracy:.4f} "
        f"test_loss={final.test_loss:.4f} epsilon: {eps} -> {out}"
    )
