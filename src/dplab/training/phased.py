"""A run in phases (the run's ``phases:``): T₁ steps at (b₁, σ₁, C₁, η₁), then T₂ steps at
(b₂, σ₂, C₂, η₂), …  Each phase is one call of the training loop (:func:`dplab.training.loop.train`)
into DIR/phase<i>, started from the previous phase's final parameters, with its own seed
(seed + i: fresh batches and noise).  A rerun goes on from the first phase not completed for
this run (its run config, data and start: :func:`dplab.training.checkpoint.completed`), resuming
that phase from its checkpoint where it has one.  A phase reports no ε of its own: the run's
privacy is the composition of the phases' events (:func:`dplab.accounting.events.phases`),
accounted by every accountant the run reports that supports it (rdp and pld; the others say why
not, :func:`dplab.accounting.eligibility.phases_exclusion`).  With ``target_epsilon`` the phases' σ
are scaled by one factor (:func:`dplab.accounting.phases.calibrate`, with the run's
``accountant``).

DIR then holds what every training job writes (:func:`dplab.layout.training_files`), so a run in
phases is a run of the pipeline like any other: model.pt (the last phase's parameters),
metrics.csv and grad_norms.csv (the phases' rows, steps and epochs counted from the run's start;
metrics.csv with ε at each logged step, of the phases up to it, per accountant that composes them),
an empty individual_epsilon.csv, metrics.json, and summary.json: the last phase's, with the run,
its final step, the phases' ε per accountant and why the others do not apply, and the attack
risk of the composition where pld accounts it (:func:`dplab.accounting.risk.phases_risk`);
``setting`` and σ are null (no one setting) and ``phases`` lists each phase's setting.
DIR/phases.json keeps the plan (:func:`plan`) and each phase's final metrics.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import asdict
from pathlib import Path

import torch

from dplab.accounting import events
from dplab.accounting import phases as accounting_phases
from dplab.accounting.eligibility import column, phases_exclusion
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError
from dplab.io import atomic_writes, json_text, text_file
from dplab.training import loop, noise_floor, privacy
from dplab.training.data import Dataset
from dplab.training.loop import INDIVIDUAL_COLUMNS
from dplab.training.methods import METHODS, update_of
from dplab.training.resolve import phase_runs
from dplab.training.run_metrics import metrics
from dplab.training.settings import RunSettings
from dplab.training.start import initial
from dplab.training.summary import RunSummary


def plan(cfg: dict, n: int, dimension: int) -> tuple[list[dict], dict, list[Setting]]:
    """(the phases' runs, σ calibrated where asked), the run's privacy: its event, ε per
    accountant that supports it, why the others do not (DPLabError if none does), the attack risk
    of the composition (pld's, :func:`dplab.accounting.risk.phases_risk`) and each phase's
    setting; and those settings."""
    top, runs = RunSettings.of(cfg), phase_runs(cfg)
    typed = [RunSettings.of(r) for r in runs]
    update = update_of(typed[0])
    settings = [
        privacy.build_setting(s, n, s.b(n), dimension, s.noise_multiplier, {}) for s in typed
    ]
    if top.target_epsilon is not None:
        factor = accounting_phases.calibrate(
            top.accountant, settings, top.target_epsilon, top.delta
        )
        settings = accounting_phases.scaled(settings, factor)
        runs = phase_runs(cfg, [s.noise_multiplier for s in settings])
    event = events.phases(settings)
    epsilon, excluded = {}, {}
    for name in privacy.requested_accountants(top):
        why = phases_exclusion(name, settings, update)
        if why is None:
            epsilon[name] = accounting_phases.epsilon(name, settings, top.delta)
        else:
            excluded[name] = why
    if not epsilon and top.accountants != ():
        raise DPLabError(
            "phases",
            "no accountant the run reports composes its phases: "
            + "; ".join(f"{k}: {v}" for k, v in list(excluded.items())[:3]),
        )
    if epsilon:  # the float noise's δ floor of the phases together (noise_floor)
        noise_floor.check(*_floor_args(top, settings))
    return (
        runs,
        {
            "delta": top.delta,
            "noise_multipliers": [s.noise_multiplier for s in settings],
            "event": str(event),
            "epsilon": epsilon,
            "excluded_accountants": excluded,
            "risk": privacy.pld_risk(settings, epsilon, excluded),
            "settings": [s.as_dict() for s in settings],
        },
        settings,
    )


def _floor_args(top: RunSettings, settings: list[Setting]) -> tuple:
    """The arguments of :func:`dplab.training.noise_floor.check` and ``note`` for the phases
    together: each phase's exposure, δ, the noise source and its device type."""
    exposures = [noise_floor.Exposure.of_setting(s) for s in settings]
    return exposures, top.delta, top.noise_rng, loop.resolve_device(top.device).type


def train(cfg: dict, data: Dataset, out: str | Path) -> RunSummary:
    """Train the phases in sequence into ``out``/phase<i>, then write the run's own files into
    ``out`` (module docstring), summary.json last; return the run's summary."""
    out = Path(out)
    top = RunSettings.of(cfg)
    method = METHODS[top.method]
    if method.noise != "independent":
        raise DPLabError(
            "phases",
            f"method {method.name} has no independent-noise phases to compose (DP-SGD "
            "methods only)",
        )
    first = RunSettings.of(phase_runs(cfg)[0])
    start = initial(
        first, len(data.y_train), data.info["input_shape"], data.info["classes"], first.seed
    )
    dimension = sum(p.numel() for p in start.params.values())
    runs, record, settings = plan(cfg, len(data.y_train), dimension)
    params, summaries = None, []
    for i, run in enumerate(runs):
        folder = out / f"phase{i}"
        summaries.append(
            loop.train(RunSettings.of(run), data, folder, start=params, keep_record=True)
        )
        params = torch.load(folder / "model.pt", weights_only=True)
    record["phases"] = [
        {
            "steps": s.settings.steps,
            "noise_multiplier": s.noise_multiplier,
            "final": asdict(s.final),
        }
        for s in summaries
    ]
    folders = [out / f"phase{i}" for i in range(len(runs))]
    rows, epochs = _joined(folders, "metrics.csv", summaries)
    rows = _with_epsilon(rows, settings, record["epsilon"], top.delta)
    summary = _summary(top, summaries, record, epochs, settings)
    atomic_writes(
        {
            out / "phases.json": text_file(json_text(record)),
            out / "model.pt": lambda tmp: tmp.write_bytes((folders[-1] / "model.pt").read_bytes()),
            out / "metrics.csv": text_file(rows),
            out / "grad_norms.csv": text_file(_joined(folders, "grad_norms.csv", summaries)[0]),
            out / "individual_epsilon.csv": text_file(",".join(INDIVIDUAL_COLUMNS) + "\n"),
            out / "metrics.json": text_file(json_text(metrics(summary))),
            out / "summary.json": text_file(summary.text()),
        }
    )
    return summary


def _joined(folders: list[Path], name: str, summaries: list[RunSummary]) -> tuple[str, float]:
    """The CSV ``name`` of every phase, one header, its ``step`` (and ``epoch``) columns counted
    from the run's start; and the run's last epoch."""
    out, steps, epochs = None, 0, 0.0
    for folder, summary in zip(folders, summaries):
        reader = csv.DictReader(io.StringIO((folder / name).read_text()))
        if out is None:
            text = io.StringIO()
            out = csv.DictWriter(text, reader.fieldnames, lineterminator="\n")
            out.writeheader()
        for row in reader:
            row["step"] = str(int(row["step"]) + steps)
            if "epoch" in row:
                row["epoch"] = repr(float(row["epoch"]) + epochs)
            out.writerow(row)
        steps += summary.settings.steps
        epochs += summary.final.epoch
    return text.getvalue(), epochs


def _with_epsilon(table: str, settings: list[Setting], epsilon: dict, delta: float) -> str:
    """The joined metrics.csv with an ``epsilon_<name>`` column per accountant that composes the
    phases (as a run of one setting has): ε at each logged step, of the phases up to it
    (:func:`dplab.accounting.phases.epsilon_curve`; the last row's is the run's)."""
    rows = list(csv.reader(io.StringIO(table)))
    steps = [int(row[rows[0].index("step")]) for row in rows[1:]]
    curves = [accounting_phases.epsilon_curve(n, settings, delta, steps) for n in epsilon]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow([*rows[0], *(column(name) for name in epsilon)])
    for i, row in enumerate(rows[1:]):
        writer.writerow([*row, *(repr(float(curve[i])) for curve in curves)])
    return text.getvalue()


def _summary(
    top: RunSettings,
    summaries: list[RunSummary],
    record: dict,
    epochs: float,
    settings: list[Setting],
) -> RunSummary:
    """The run's summary.json: the last phase's, with the run's privacy (module docstring)."""
    last = summaries[-1]
    calibrated = top.target_epsilon is not None
    return dataclasses.replace(
        last,
        run=dict(top.record),
        final=dataclasses.replace(
            last.final, step=sum(s.settings.steps for s in summaries), epoch=epochs
        ),
        setting=None,
        noise_multiplier=None,
        noise_multiplier_source=(
            f"each phase's σ scaled by one factor to ε = {top.target_epsilon:g} ({top.accountant})"
            if calibrated
            else "given per phase"
        ),
        noise_std_on_sum=None,
        epsilon=record["epsilon"],
        epsilon_lower={},
        epsilon_comparison={},
        epsilon_bound={k: "upper" for k in record["epsilon"]},
        risk=record["risk"],
        epsilon_covers={k: "every iterate" for k in record["epsilon"]},
        excluded_accountants=record["excluded_accountants"],
        details={"phases": record["settings"], "event": record["event"]},
        note=last.note
        + (noise_floor.note(*_floor_args(top, settings)) if record["epsilon"] else ""),
        individual_privacy=None,
    )
