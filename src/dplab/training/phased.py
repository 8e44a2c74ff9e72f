"""A run in phases (the run's ``phases:``): T₁ steps at (b₁, σ₁, C₁, η₁), then T₂ steps at
(b₂, σ₂, C₂, η₂), …  Each phase is one call of the training loop (:func:`dplab.training.loop.train`)
into DIR/phase<i>, started from the previous phase's final parameters, with its own seed
(seed + i: fresh batches and noise).  A phase reports no ε of its own: the run's privacy is the
composition of the phases' events (:func:`dplab.accounting.events.phases`), accounted by every
accountant the run reports that supports it (rdp; pld for full-batch phases; the others say why
not) and written to DIR/phases.json.  With ``target_epsilon`` the phases' σ are scaled by one
factor (:func:`dplab.accounting.phases.calibrate`, with the run's ``accountant``).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from dplab.accounting import events, get
from dplab.accounting import phases as accounting_phases
from dplab.accounting.eligibility import exclusion
from dplab.errors import DPLabError
from dplab.io import atomic_writes, json_text, text_file
from dplab.training import loop, privacy
from dplab.training.data import Dataset
from dplab.training.methods import METHODS, update_of
from dplab.training.resolve import phase_runs
from dplab.training.settings import RunSettings
from dplab.training.start import initial


def plan(cfg: dict, n: int, dimension: int) -> tuple[list[dict], dict]:
    """(the phases' runs, σ calibrated where asked) and the run's privacy: its event, ε per
    accountant that supports it, and why the others do not (DPLabError if none does)."""
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
        why = next(filter(None, (exclusion(name, s, update) for s in settings)), None)
        why = why or get(name).supports(event, top.neighbouring)
        if why is None:
            epsilon[name] = get(name).epsilon(event, top.delta, top.neighbouring)
        else:
            excluded[name] = why
    if not epsilon and top.accountants != ():
        raise DPLabError(
            "phases",
            "no accountant the run reports composes its phases: "
            + "; ".join(f"{k}: {v}" for k, v in list(excluded.items())[:3]),
        )
    return runs, {
        "delta": top.delta,
        "noise_multipliers": [s.noise_multiplier for s in settings],
        "event": str(event),
        "epsilon": epsilon,
        "excluded_accountants": excluded,
    }


def train(cfg: dict, data: Dataset, out: str | Path) -> dict:
    """Train the phases in sequence into ``out``/phase<i> and write ``out``/phases.json (the run's
    privacy, :func:`plan`, and each phase's final metrics); return what phases.json holds."""
    out = Path(out)
    method = METHODS[RunSettings.of(cfg).method]
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
    runs, record = plan(cfg, len(data.y_train), dimension)
    params, finals = None, []
    for i, run in enumerate(runs):
        folder = out / f"phase{i}"
        typed = RunSettings.of(run)
        summary = loop.train(typed, data, folder, start=params)
        params = torch.load(folder / "model.pt", weights_only=True)
        finals.append(
            {
                "steps": typed.steps,
                "noise_multiplier": typed.noise_multiplier,
                "final": asdict(summary.final),
            }
        )
    record["phases"] = finals
    atomic_writes({out / "phases.json": text_file(json_text(record))})
    return record
