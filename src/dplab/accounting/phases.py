"""Runs in phases: T₁ steps at (q₁, σ₁), then T₂ at (q₂, σ₂), …, accounted as one composition.

The run's event is the ``ComposedDpEvent`` of its phases' events
(:func:`dplab.accounting.events.phases`); every accountant accounts it or says why not
(``Accountant.supports``): rdp and pld compose any phases of the steps they support
(:mod:`dplab.accounting.dp_accounting_adapters`), the others only phases equal apart from T.

σ calibration for a target ε scales every phase's σ by one factor c (ε falls as c grows):
doubling from c = 1 to a bracket, then Brent's method in log c to SIGMA_RTOL, returning the side
that meets the target; c keeps every σ within the accountants' range [SIGMA_MIN, SIGMA_MAX].
"""

from __future__ import annotations

import math
from pathlib import Path

from dplab.accounting import events, memo
from dplab.accounting.base import SIGMA_MAX, SIGMA_MIN, SIGMA_RTOL
from dplab.accounting.registry import get
from dplab.accounting.roots import brent
from dplab.accounting.setting import Setting, check_delta, check_epsilon
from dplab.errors import DPLabError

#: what one phase may give (σ, and q or b with the file's n)
PHASE_KEYS = ("steps", "noise_multiplier", "sampling_rate", "batch_size")
FILE_KEYS = ("phases", "sampling", "neighbouring", "dataset_size")


def from_file(path: str | Path) -> list[Setting]:
    """The phases of a YAML/JSON file: ``phases`` (a list of {steps, noise_multiplier, and
    sampling_rate or batch_size}), and for all of them ``sampling``, ``neighbouring`` and
    ``dataset_size`` (n, for a phase given by batch size).  Which samplings compose in phases is
    the accountant's to say (an epoch sampler: one phase only)."""
    from dplab.schemas import load_yaml

    data = load_yaml(path)
    return parse(data)


def parse(data: dict) -> list[Setting]:
    """The phases of a parsed file (:func:`from_file`), each a :class:`Setting`."""
    for key in data:
        if key not in FILE_KEYS:
            raise DPLabError(
                str(key), f"unknown key of a phases file; valid: {', '.join(FILE_KEYS)}"
            )
    entries = data.get("phases")
    if not isinstance(entries, list) or not entries:
        raise DPLabError("phases", f"must be a non-empty list of phases; got {entries!r}")
    common = {k: data[k] for k in ("sampling", "neighbouring", "dataset_size") if k in data}
    phases = []
    for i, entry in enumerate(entries):
        where = f"phases[{i}]"
        if not isinstance(entry, dict):
            raise DPLabError(where, f"must be a mapping of {', '.join(PHASE_KEYS)}; got {entry!r}")
        for key in entry:
            if key not in PHASE_KEYS:
                raise DPLabError(
                    f"{where}.{key}", f"unknown key of a phase; valid: {', '.join(PHASE_KEYS)}"
                )
        for key in ("steps", "noise_multiplier"):
            if key not in entry:
                raise DPLabError(f"{where}.{key}", "is required")
        try:
            phases.append(Setting(**common, **entry))
        except DPLabError as err:
            raise DPLabError(f"{where}.{err.key}", err.message) from None
        except TypeError as err:
            raise DPLabError(where, f"not a phase: {err}") from None
    return phases


def _check(name: str, phases: list[Setting]) -> None:
    """An :class:`AssumptionError` of accountant ``name`` unless it accounts the phases."""
    get(name).parts(events.phases(phases), _relation(phases))


def _relation(phases: list[Setting]) -> str:
    """The one neighbouring relation of the phases (an event's relation is the accountant's)."""
    for i, phase in enumerate(phases):
        if phase.neighbouring != phases[0].neighbouring:
            raise DPLabError(
                f"phases[{i}].neighbouring",
                f"must be the relation of every phase, "
                f"{phases[0].neighbouring!r}; got {phase.neighbouring!r}",
            )
    return phases[0].neighbouring


def epsilon(name: str, phases: list[Setting], delta: float) -> float:
    """ε at δ of the phases composed, by accountant ``name`` (module docstring); kept for the
    job (:mod:`dplab.accounting.memo`): its calibration, its plan and its curve ask it again."""
    delta = check_delta(delta)
    question = ("phases_epsilon", name, repr(phases), repr(delta))
    return memo.answer(
        question, lambda: get(name).epsilon(events.phases(phases), delta, _relation(phases))
    )


def prefix(phases: list[Setting], steps: int) -> list[Setting]:
    """The phases of a run's first ``steps`` steps (1 ≤ steps ≤ ΣTᵢ): the phases before the step,
    then the one it falls in, cut short at it."""
    total = sum(p.steps for p in phases)
    if not 1 <= steps <= total:
        raise DPLabError("steps", f"must be in [1, {total}] (the phases' steps); got {steps!r}")
    out, left = [], steps
    for phase in phases:
        if left <= 0:
            break
        out.append(phase if phase.steps <= left else phase.replace(steps=left))
        left -= phase.steps
    return out


def epsilon_curve(name: str, phases: list[Setting], delta: float, steps: list[int]) -> list[float]:
    """ε at δ after each count of ``steps`` (counted from the run's start): the composition of
    the phases' :func:`prefix` there, by accountant ``name``: a run in phases' ε(T) curve, whose
    value at ΣTᵢ is :func:`epsilon`.  The rows within the first phase are that phase's own ε
    curve, in one call (:meth:`~dplab.accounting.base.Accountant.epsilon_curve`, as a run of one
    setting's); the others share what they compute alike (each phase's one-step PLD:
    :func:`dplab.accounting.memo.kept_answers`), as in a job."""
    _check(name, phases)
    with memo.kept_answers():
        head = sorted({s for s in steps if 1 <= s <= phases[0].steps})
        first = dict(zip(head, get(name).epsilon_curve(phases[0], delta, head))) if head else {}
        return [
            float(first[s]) if s in first else epsilon(name, prefix(phases, s), delta)
            for s in steps
        ]


def scaled(phases: list[Setting], factor: float) -> list[Setting]:
    """Every phase's σ multiplied by ``factor``."""
    return [p.replace(noise_multiplier=p.noise_multiplier * factor) for p in phases]


def calibrate(name: str, phases: list[Setting], target: float, delta: float) -> float:
    """The smallest factor c (to a relative SIGMA_RTOL) with ε(phases,
    σᵢ·c) ≤ ``target`` at ``delta``; upper bounds only, as for one setting."""
    target = check_epsilon(target)
    get(name).require_upper()
    _check(name, phases)

    sigmas = [p.noise_multiplier for p in phases]
    lowest, highest = (
        SIGMA_MIN / min(sigmas),
        SIGMA_MAX / max(sigmas),
    )  # every σ within the accountants' range

    def factor(log_c: float) -> float:
        return min(max(math.exp(log_c), lowest), highest)  # exp(log x) may round past x

    def misses(log_c: float) -> bool:
        return epsilon(name, scaled(phases, factor(log_c)), delta) > target

    top, bottom = math.log(highest), math.log(lowest)
    lo = hi = 0.0  # from c = 1, doubling outward until the target is bracketed
    while misses(hi):
        if hi >= top:
            raise DPLabError(
                "epsilon",
                f"no factor on the phases' σ up to {highest:g} (σ ≤ {SIGMA_MAX:g}) "
                f"reaches ε = {target:g} at δ = {delta:g}",
            )
        lo, hi = hi, min(hi + math.log(2), top)
    while lo == hi or not misses(lo):
        if lo <= bottom:
            return lowest
        lo, hi = max(lo - math.log(2), bottom), lo
    root = brent(
        lambda x: epsilon(name, scaled(phases, factor(x)), delta) - target,
        lo,
        hi,
        xtol=SIGMA_RTOL / 4,
    )
    hi = min(root + SIGMA_RTOL / 4, hi)
    while misses(hi):  # Brent's root may sit on the missing side: step to the side that meets
        hi += SIGMA_RTOL / 4
    return factor(hi)
