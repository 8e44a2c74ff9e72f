"""The membership audit of one ``audits`` entry: R runs of each variant through the engine
(:mod:`dplab.audit.runner`), canaries each in or out of the dataset with probability 1/2
independently per run, their scores turned into ε lower bounds by every estimator
(:mod:`dplab.audit.estimators`) at every T of ``steps``, next to the upper bound of every
accountant valid for the run *and for what the attacker observes*.

Threat models (``threat_model`` of the entry; docs/findings.md):

============ ============================ ============= ============= ============================
threat model canary                       observation   neighbouring* upper bounds it tests
============ ============================ ============= ============= ============================
white_box    gradient (Dirac, dead coord) every iterate add_remove    composition (trajectory)
last_iterate gradient (Dirac, dead coord) last iterate  replace_one   composition and hidden-state
input_canary input (dead-feature block)   either        replace_one   by observation, as above
============ ============================ ============= ============= ============================

(* the default; the entry's ``neighbouring`` overrides it, except input_canary's: the canary and
its mirror share a slot, a replace-one pair, so add_remove is refused.)

A composition bound covers every iterate, so it also bounds a last-iterate attack; a hidden-state
bound (release ``last_iterate``) only that.  Gradient canaries follow Nasr et al. 2023 (white box)
and the crafted-gradient attacks on the hidden state of Annamalai 2024 and Cebere, Bellet &
Papernot 2024: a canary whose gradient points the same way at every step accumulates in the last
iterate as much as the loss allows.  With l2 > 0 the canary's loss ⟨g, θ⟩ + (l2/2)‖θ‖² is
l2-strongly convex, l2-smooth and (norm + l2·D/2)-Lipschitz on the ball: inside the loss class of
the run's constants when norm ≤ the data's Lipschitz constant, which is checked, so the
hidden-state bounds apply to it.

Estimators: clopper_pearson and one_run hold for every mechanism.  gdp, one_run_gdp and
one_run_independent extrapolate a trade-off curve to δ with a Gaussian shape
(:mod:`dplab.audit.estimators`), which is conservative only where the audited pair's privacy loss
has tails at least as heavy as a Gaussian's (:func:`dplab.audit.entries.gdp_applies`): a gradient
canary's coordinate under full-batch noise without projection (exactly Gaussian), or Poisson
subsampling with add/remove neighbours (the mixture's tail is the unsubsampled shift's, heavier than
the fit of its centre).  Under replace-one subsampling both worlds are mixtures and the tails are
lighter: gdp would overstate ε (for one step at q = 0.75, σ = 6 its point estimate was 1.03 against
the pair's exact 0.916), so it is not reported there.

Samples: the clopper_pearson and gdp estimators need independent scores.  The canaries of one run
are independent when their coordinates evolve independently
(:func:`dplab.audit.entries.independent_canaries`); otherwise only the first canary of each run is
used.  one_run and one_run_gdp use the k canaries of the first run (they need no independence);
one_run_independent too, only where they are independent.  Every T of ``steps`` reuses the same runs
(the update never reads T), so the bounds of different T are each valid at the stated confidence,
not simultaneously.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from dplab.accounting.eligibility import defaults
from dplab.accounting.gaussian import gaussian_epsilon
from dplab.audit import canary as canaries_mod
from dplab.audit.entries import ESTIMATORS, ONE_RUN, THREAT_MODELS, applies, audit_key
from dplab.audit.entries import canary_count, check_entry, check_estimators, gdp_applies
from dplab.audit.entries import independent_canaries, method_config
from dplab.audit.exact import canary_last_iterate_epsilon, contracted_mu
from dplab.audit.runner import train_many
from dplab.entries import variant_key
from dplab.errors import DPLabError
from dplab.progress import Progress
from dplab.schemes import Neighbouring, Sampling
from dplab.training import models, privacy
from dplab.training.data import Dataset
from dplab.training.loop import resolve_device
from dplab.training.methods import update_of
from dplab.training.settings import RunSettings

SETTING_COLUMNS = (
    "noise_multiplier",
    "sampling_rate",
    "sampling",
    "neighbouring",
    "clip",
    "lr",
    "batch_size",
    "dataset_size",
    "diameter",
    "regularization",
    "strong_convexity",
    "dimension",
)
INPUT_CANARY_NORM = 16.0


def canary_norm(entry: dict, run: RunSettings, info: dict, features) -> float:
    """‖gradient canary‖: the entry's ``canary_norm`` or the largest valid: C, and where the run's
    loss constants are claimed (hidden-state bounds; ``features``: the real records), no more than
    the data's Lipschitz constant."""
    constants, _ = privacy.loss_constants(run, info, features)
    limit = min(run.clip, info["logreg_constants"]["lipschitz"]) if constants else run.clip
    norm = entry.get("canary_norm")
    if norm is None:
        return float(limit)
    if norm > limit:
        lipschitz = ", and the loss Lipschitz constant the hidden-state bounds assume"
        raise DPLabError(
            "canary_norm",
            f"must be <= {limit:.6g} (clip{lipschitz if constants else ''}); got {norm}",
        )
    return float(norm)


def upper_bounds(
    run: RunSettings, n: int, b: int, dimension: int, info: dict, steps: list[int], features
):
    """ε(T) of every accountant the engine reports for this run
    (:func:`dplab.training.privacy.plan`, one accountant at a time so that one failing bound
    does not hide the others; ``features``: every record either world trains on), their release
    kinds, and the run's Setting as a dict. A bound whose ε overflows a float (ε > ~700,
    vacuous) is left out."""
    curves, release, setting = {}, {}, None
    for name in defaults():
        try:
            claim = privacy.plan(
                replace(run, accountants=(name,)),
                update_of(run),
                n,
                b,
                dimension,
                info,
                steps,
                features,
            )
        except OverflowError:
            continue
        setting = claim.setting.as_dict()
        curves.update(claim.curves)
        release.update(claim.release)
    if setting is None:
        setting = privacy.plan(
            replace(run, accountants=()), update_of(run), n, b, dimension, info, steps, features
        ).setting.as_dict()
    return curves, release, setting


def _records(data: Dataset, n_real: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    if n_real < 1 or n_real > len(data.y_train):
        raise DPLabError(
            "dataset_size",
            f"leaves {n_real} training records beside the canaries; need 1 to {len(data.y_train)}",
        )
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(len(data.y_train))[:n_real])
    return data.x_train[perm], data.y_train[perm]


def _estimates(
    entry: dict, scores: np.ndarray, members: np.ndarray, independent: bool, gdp: bool, delta: float
):
    """(estimator, Estimate) of every estimator of the entry that applies, on scores (R, k)."""
    pooled = (scores, members) if independent else (scores[:, :1], members[:, :1])
    s_in, s_out = pooled[0][pooled[1]], pooled[0][~pooled[1]]
    for name in entry.get("estimators") or ESTIMATORS:
        if not applies(name, scores.shape[1], gdp, independent):
            continue
        if name in ONE_RUN:
            yield name, ESTIMATORS[name](scores[0], members[0], delta, entry["confidence"])
        else:
            yield name, ESTIMATORS[name](s_in, s_out, delta, entry["confidence"])


def run_variant(
    entry: dict,
    data: Dataset,
    variant: str,
    seed: int,
    progress: Progress | None = None,
    done: int = 0,
) -> pd.DataFrame:
    """The rows of one variant; ``progress`` counts its run-steps from ``done`` on."""
    started = time.perf_counter()
    threat = entry["threat_model"]
    kind, observations, _ = THREAT_MODELS[threat]
    run = method_config(entry, variant)
    runs, chunk, steps, n = (
        entry["runs"],
        entry["chunk"],
        sorted(entry["steps"]),
        entry["dataset_size"],
    )
    k = canary_count(entry)
    x_real, y_real = _records(data, n - k, seed)
    model = models.build(run, list(data.x_train.shape[1:]), data.info["classes"])
    params = dict(model.named_parameters())
    rng = np.random.default_rng(
        np.random.SeedSequence([seed, zlib.crc32(variant.encode())])
    )  # order-free
    # one_run needs every canary in with probability 1/2; a lone canary alternates (equal worlds)
    members = rng.random((runs, k)) < 0.5 if k >= 2 else (np.arange(runs) % 2 == 0)[:, None]
    run_seeds = rng.integers(0, 2**31 - 1, size=runs).tolist()
    gradient = probe = None
    if kind == "gradient":
        gradient = canaries_mod.gradient_canaries(
            x_real, params, k, canary_norm(entry, run, data.info, x_real), run.neighbouring
        )
    else:
        probe = canaries_mod.build(
            data.x_train,
            entry.get("canary_norm") or INPUT_CANARY_NORM,
            entry["canary_label"],
            params,
        )
    scores = {(o, t): [] for o in observations for t in steps}
    projections = 0
    for start in range(0, runs, chunk):
        part = slice(start, min(start + chunk, runs))
        r = len(run_seeds[part])
        x, y = x_real.expand(r, *x_real.shape), y_real.expand(r, -1)
        if probe is not None:  # the canary's slot: x_c (in) or its mirror −x_c (out)
            slot = torch.where(
                torch.from_numpy(members[part, 0]).view(-1, *[1] * probe.x_in.dim()),
                probe.x_in,
                probe.x_out,
            )
            x = torch.cat([x, slot[:, None]], 1)
            y = torch.cat([y, probe.label.expand(r, 1)], 1)

        def on_step(step, base=done + start * steps[-1], width=r, first=start + 1):
            if progress is not None:
                progress.update(
                    base + step * width,
                    f"variant {variant}, runs {first}–{first + width - 1} of {runs}, "
                    f"step {step}/{steps[-1]}",
                )

        res = train_many(
            run,
            x,
            y,
            run_seeds[part],
            steps,
            data.info["classes"],
            canary=probe,
            gradient=gradient,
            members=torch.from_numpy(members[part]),
            on_step=on_step,
        )
        projections += res.projections
        for t in steps:
            for obs in observations:
                scores[(obs, t)].append(getattr(res, obs)[t].cpu().numpy())
    seconds = time.perf_counter() - started
    if progress is not None:
        progress.update(
            done + runs * steps[-1],
            f"variant {variant} ({threat}) done: {runs} runs × {steps[-1]} steps, "
            f"{k} canaries per run, {seconds:.1f} s",
        )
    b = run.b(n)
    dimension = sum(p.numel() for p in params.values())
    features = (
        x_real if probe is None else torch.cat([x_real, probe.x_in[None], probe.x_out[None]])
    )  # both worlds
    curves, release, setting = upper_bounds(run, n, b, dimension, data.info, steps, features)
    independent = kind == "gradient" and independent_canaries(run)
    gdp = gdp_applies(run, kind, projections)
    exact = (
        _exact(run, gradient, projections, steps, n, observations) if gradient is not None else {}
    )
    rows = []
    for t_i, t in enumerate(steps):
        for obs in observations:
            for name, est in _estimates(
                entry, np.concatenate(scores[(obs, t)]), members, independent, gdp, run.delta
            ):
                row = {
                    "audit": entry.get("name"),
                    "variant": variant,
                    "method": run.method,
                    "model": run.model,
                    "threat_model": threat,
                    "observation": obs,
                    "estimator": name,
                    "steps": t,
                    "confidence": entry["confidence"],
                    "runs": 1 if name in ONE_RUN else runs,
                    "canaries": k,
                    "independent_canaries": independent,
                    "samples_in": est.samples_in,
                    "samples_out": est.samples_out,
                    "epsilon_lower": est.epsilon_lower,
                    "epsilon_estimate": est.epsilon_estimate,
                    "epsilon_upper": est.epsilon_upper,
                    "detail": est.detail,
                    "exact_epsilon": exact.get(obs, np.full(len(steps), np.nan))[t_i],
                    "projections": projections,
                    "delta": run.delta,
                    "l2": run.l2,
                    **{c: setting.get(c) for c in SETTING_COLUMNS},
                }
                for acc, curve in curves.items():
                    if obs == "last_iterate" or release[acc] == "trajectory":
                        row[f"upper_{acc}"] = float(curve[t_i])
                rows.append(row)
    return pd.DataFrame(rows)


def _exact(
    run: RunSettings, gradient, projections: int, steps: list[int], n: int, observations
) -> dict[str, np.ndarray]:
    """Exact ε(δ) of the pair a gradient canary's coordinate sees, where it is known (else {}).
    It needs the projection never to have moved a run and the contraction of the coordinate to be
    the same deterministic c = (1−λ)(1 − η·l2) in both worlds (l2 > 0: every slot present, i.e.
    replace_one, and a fixed batch size); then, with a = norm/(σC):

    - full batch: Gaussian, trajectory μ√T and last iterate :func:`dplab.audit.exact.contracted_mu`
      with μ = a (add_remove) or 2a (replace_one);
    - Poisson, without replacement, fixed batches (n divisible by b, no reshuffle),
      balls-in-bins (epochs of ⌊n/b⌋ steps): the last iterate,
      :func:`dplab.audit.exact.canary_last_iterate_epsilon` (the trajectory's exact value is the
      composition pld computes, where it applies), nan at a T whose ε its grid does not resolve
      (:data:`dplab.audit.exact.EPSILON_SEARCH_MAX`).

    A batch of random size (Poisson, balls-in-bins) must be normalized by b: ÷ |B| scales each
    draw of the canary by a random factor.  An absent add_remove canary keeps its slot (zero
    gradient), so the epochs of balls-in-bins are those of the run either way.
    """
    fixed_batch = Sampling(run.sampling).fixed_size  # |B| = b at every step
    if projections or (
        run.l2 and (gradient.neighbouring == Neighbouring.ADD_REMOVE or not fixed_batch)
    ):
        return {}
    if run.normalize == "realized" and not fixed_batch:
        return {}
    shift = gradient.norm / (run.noise_multiplier * run.clip)
    c = (1.0 - run.shrink) * (1.0 - run.lr * run.l2)
    if run.sampling == Sampling.FULL_BATCH:
        mu_step = shift * (2.0 if gradient.neighbouring == Neighbouring.REPLACE_ONE else 1.0)
        return {
            "trajectory": gaussian_epsilon(run.delta, contracted_mu(mu_step, 1.0, steps)),
            "last_iterate": gaussian_epsilon(run.delta, contracted_mu(mu_step, c, steps)),
        }
    if "last_iterate" not in observations:
        return {}
    if run.sampling == Sampling.SHUFFLE:
        if n % run.batch_size or run.reshuffle:
            return {}
        law = {"period": n // run.batch_size}
    elif run.sampling == Sampling.BALLS_IN_BINS:
        law = {"bins": n // run.batch_size}
    else:
        law = {"q": run.batch_size / n}

    def at(t: int) -> float:  # nan (not known) where the grid does not resolve it
        try:
            return float(
                canary_last_iterate_epsilon(
                    run.delta, shift, [t], gradient.neighbouring, contraction=c, **law
                )[0]
            )
        except DPLabError:
            return np.nan

    return {"last_iterate": np.array([at(t) for t in steps])}


def run_audit(entry: dict, data: Dataset, seed: int) -> pd.DataFrame:
    """One tidy table: a row per (variant (sorted by name), observation, estimator, T) with the
    estimator's ε lower bound and point estimate and the upper bound of every accountant valid for
    the run and the observation (``upper_<accountant>``; the others have no value)."""
    check_entry(entry)
    runs = {variant: method_config(entry, variant) for variant in entry["methods"]}
    for variant, run in runs.items():  # a device this machine lacks: refused before any run
        key = variant_key(audit_key(entry), entry, "methods", "run", variant, "device")
        resolve_device(run.device, key)
    check_estimators(entry, runs)
    per_variant = entry["runs"] * max(entry["steps"])
    progress = Progress(
        f"audit {entry.get('name', '')}".rstrip(),
        len(entry["methods"]) * per_variant,
        unit="run-step",
    )
    frames = [
        run_variant(entry, data, v, seed, progress, i * per_variant)
        for i, v in enumerate(sorted(entry["methods"]))
    ]
    progress.close()
    return pd.concat(frames, ignore_index=True)
