"""The membership audit: R runs per world of each method, with the slot record = canary (in)
or its mirror (out), scored from the last iterate or from the whole trajectory; each score
list gives an ε lower bound (:func:`dplab.audit.stats.audit_bound`) per T.

Neighbouring datasets are replace-one (same n, so q = b/n is the same in both worlds, and
001's bounds apply): D₀ ∪ {x_c} versus D₀ ∪ {−x_c}, with x_c the dead-feature canary of
:mod:`dplab.audit.canary` (norm ``canary_norm``, label ``canary_label``).  Both go through the
engine's per-example gradient and clipping inside the Poisson batch, so the difference of their
clipped gradients can approach the worst case 2C; the scores are those of
:mod:`dplab.audit.runner`.

Every T of ``steps`` reuses the same runs (the update never reads T), so the bounds of different
T are each valid at the stated confidence, not simultaneously.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from dplab import accounting
from dplab.audit import canary
from dplab.audit.canary import Canary
from dplab.audit.runner import train_many
from dplab.audit.stats import audit_bound
from dplab.errors import DPLabError
from dplab.progress import Progress
from dplab.training import models, privacy
from dplab.training.config import resolve_run
from dplab.training.data import Dataset

OBSERVATIONS = ("last_iterate", "trajectory")
SETTING_COLUMNS = ("noise_multiplier", "sampling_rate", "sampling", "neighbouring", "clip", "lr", "batch_size",
                   "dataset_size", "diameter", "regularization", "dimension")


def method_config(entry: dict, method: str) -> dict:
    """The resolved run config of ``method`` in audit ``entry`` (run schema and defaults)."""
    raw = {**entry["run"], **(entry["methods"][method] or {}), "method": method, "steps": max(entry["steps"]),
           "neighbouring": "replace_one", "accountants": None, "device": "cpu", "checkpoint_every": 0}
    return resolve_run(raw, where=f"audits.methods.{method}")


def audit_data(data: Dataset, entry: dict, cfg: dict, seed: int) -> tuple[torch.Tensor, torch.Tensor, Canary]:
    """(x, y) of the two worlds, shape (2, n, ...): n − 1 training records and the canary slot
    (world 0: the canary x_c, world 1: its mirror −x_c), and the :class:`Canary`."""
    n = entry["dataset_size"]
    if n > len(data.y_train) + 1:
        raise DPLabError("dataset_size", f"must be <= {len(data.y_train) + 1} (training split + the canary slot)")
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(len(data.y_train))[: n - 1])
    base_x, base_y = data.x_train[perm], data.y_train[perm]
    model = models.build(cfg, list(data.x_train.shape[1:]), data.info["classes"])
    c = canary.build(data.x_train, entry["canary_norm"], entry["canary_label"], dict(model.named_parameters()))
    x = torch.stack([torch.cat([base_x, c.x_in[None]]), torch.cat([base_x, c.x_out[None]])])
    y = torch.stack([torch.cat([base_y, c.label[None]])] * 2)
    return x, y, c


def upper_bounds(cfg: dict, n: int, b: int, dimension: int, info: dict, steps: list[int], features):
    """ε(T) of every accountant the engine reports for this run (:func:`dplab.training.privacy.plan`,
    one accountant at a time so that one failing bound does not hide the others; ``features``:
    every record either world trains on), their release kinds, and the run's Setting as a dict.
    A bound whose ε overflows a float (ε > ~700, vacuous) is left out."""
    curves, release, setting = {}, {}, None
    for name in accounting.names():
        try:
            claim = privacy.plan({**cfg, "accountants": [name]}, n, b, dimension, info, steps, features)
        except OverflowError:
            continue
        setting = claim.setting.as_dict()
        curves.update(claim.curves)
        release.update(claim.release)
    if setting is None:
        setting = privacy.plan({**cfg, "accountants": []}, n, b, dimension, info, steps, features).setting.as_dict()
    return curves, release, setting


def run_method(entry: dict, data: Dataset, method: str, index: int, seed: int,
               progress: Progress | None = None, done: int = 0) -> pd.DataFrame:
    """The rows of one method; ``progress`` counts its run-steps from ``done`` on."""
    cfg = method_config(entry, method)
    x, y, probes = audit_data(data, entry, cfg, seed)
    runs, chunk, steps = entry["runs"], entry["chunk"], sorted(entry["steps"])
    scores = {(w, o, t): [] for w in (0, 1) for o in OBSERVATIONS for t in steps}
    for world in (0, 1):
        seeds = np.random.SeedSequence([seed, index, world]).generate_state(runs).tolist()
        for start in range(0, runs, chunk):
            part = seeds[start : start + chunk]

            def on_step(step, base=done + (world * runs + start) * steps[-1], width=len(part), first=start + 1):
                if progress is not None:
                    progress.update(base + step * width, f"method {method}, world {('canary', 'mirror')[world]}, "
                                    f"runs {first}–{first + width - 1} of {runs}, step {step}/{steps[-1]}")

            res = train_many(cfg, x[world].expand(len(part), *x.shape[1:]), y[world].expand(len(part), -1),
                             part, steps, data.info["classes"], probes, on_step)
            for t in steps:
                scores[(world, "last_iterate", t)].append(res.last_iterate[t].numpy())
                scores[(world, "trajectory", t)].append(res.trajectory[t].numpy())
    n = entry["dataset_size"]
    b = n if cfg["sampling"] == "full_batch" else cfg["batch_size"]
    dimension = sum(p[0].numel() for p in res.params.values())
    curves, release, setting = upper_bounds(cfg, n, b, dimension, data.info, steps, x.flatten(0, 1))  # both worlds
    rows = []
    for t_i, t in enumerate(steps):
        for obs in OBSERVATIONS:
            bound = audit_bound(np.concatenate(scores[(0, obs, t)]), np.concatenate(scores[(1, obs, t)]),
                                cfg["delta"], entry["confidence"])
            row = {"method": method, "model": cfg["model"], "steps": t, "observation": obs, "runs": runs,
                   "confidence": entry["confidence"], "delta": cfg["delta"], **{k: setting.get(k) for k in SETTING_COLUMNS},
                   "threshold": bound.threshold, "tp": bound.tp, "positives": bound.positives, "fp": bound.fp,
                   "negatives": bound.negatives, "epsilon_lower": bound.epsilon, "epsilon_lower_ci_low": bound.ci_low,
                   "epsilon_lower_ci_high": bound.ci_high}
            for name, curve in curves.items():
                row[f"upper_{name}"] = float(curve[t_i])
                row[f"release_{name}"] = release[name]
            rows.append(row)
    return pd.DataFrame(rows)


def run_audit(entry: dict, data: Dataset, seed: int) -> pd.DataFrame:
    """One tidy table: a row per (method, T, observation) with the audit's ε lower bound and the
    upper bound of every accountant valid for that run (``upper_<accountant>``, its release in
    ``release_<accountant>``; the run's excluded accountants have no column)."""
    per_method = 2 * entry["runs"] * max(entry["steps"])
    progress = Progress(f"audit {entry.get('name', '')}".rstrip(), len(entry["methods"]) * per_method, unit="run-step")
    frames = [run_method(entry, data, m, i, seed, progress, i * per_method) for i, m in enumerate(entry["methods"])]
    progress.close()
    return pd.concat(frames, ignore_index=True)
