"""``dplab audit``: the membership audit of one `audits` entry → results/audit/<name>.csv."""

from __future__ import annotations

from dplab.commands.source import add_source, named_entry
from dplab.validate import json_value


def register(sub) -> None:
    p = sub.add_parser(
        "audit",
        help=(
            "canary audit of one threat model: empirical ε lower bounds per variant, estimator"
            " and T"
        ),
        description=(
            "Train many runs per variant through the engine, each canary in or out with probability"
            " 1/2, and turn the attack's scores into ε lower bounds (estimators clopper_pearson,"
            " gdp, one_run, one_run_gdp, one_run_independent); one row per variant, observation,"
            " estimator and T, with the upper bound of every accountant valid for the run and for"
            " what the attack observes."
        ),
    )
    add_source(
        p,
        "--audit-json",
        "the audit entry as JSON",
        "pipeline config (with --audit)",
        "--audit",
        "name of the entry of the config's `audits`",
    )
    p.add_argument("--data", required=True, help="folder written by dplab prepare-data")
    p.add_argument("--out", required=True, help="CSV file to write")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.set_defaults(func=run)


def _audit_entry(text: str) -> dict:
    """The entry of ``--audit-json`` validated with the config schema's `audits` entry (defaults
    filled), with its ``seed`` (required: the pipeline passes the global seed) and ``name``."""
    from dplab.schemas import load_schema, validate
    from dplab.errors import DPLabError

    entry = json_value("--audit-json", text)
    if not isinstance(entry, dict):
        raise DPLabError("--audit-json", f"must be a JSON object; got {type(entry).__name__}")
    entry = dict(entry)
    extra = {key: entry.pop(key) for key in ("seed", "name") if key in entry}
    schema = load_schema("config")["properties"]
    extra = validate(
        extra,
        {
            "type": "object",
            "required": ["seed"],
            "properties": {"seed": schema["seed"], "name": {"type": "string", "default": "audit"}},
        },
        "--audit-json",
    )
    return {**validate(entry, schema["audits"]["additionalProperties"], "--audit-json"), **extra}


def run(args) -> int:
    from dplab.startup import settled_imports

    with settled_imports():
        import torch

        from dplab.audit.entries import check_entry
        from dplab.audit.membership import run_audit
        from dplab.errors import DPLabError
        from dplab.io import check_output
        from dplab.tables import write_table
        from dplab.training import data
        from dplab.validate import MAX_THREADS, integer

    check_output(args.out, "--out")
    if args.audit_json is not None:
        entry = _audit_entry(args.audit_json)
    else:
        from dplab import entries
        from dplab.config import load_config

        config = load_config(args.config)
        named_entry(config.get("audits", {}), args.audit, "--audit", "audit")
        entry = entries.audit_entry(config, args.audit)
    check_entry(entry)
    if args.threads is not None:
        torch.set_num_threads(integer("--threads", args.threads, 1, MAX_THREADS, "MAX_THREADS"))
    dataset = data.load(args.data)
    if dataset.info["name"] != entry["dataset"]:
        raise DPLabError(
            "dataset",
            f"the audit names {entry['dataset']!r} but {args.data} holds {dataset.info['name']!r}",
        )
    table = run_audit(entry, dataset, entry["seed"])
    write_table(args.out, table)
    print(f"{len(table)} rows -> {args.out}")
    return 0
