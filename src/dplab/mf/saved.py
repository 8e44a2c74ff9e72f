"""A saved strategy file (.npz, written by ``dplab mf --out``) is one object: loading it checks that
every number the noise, the accounting and the reported errors read belongs to the same C.

What a file holds, what reads it, and how :func:`load` / :func:`load_toeplitz` check it:

- dense (identity, sqrt, optimal, banded; :func:`save`): ``encoder`` C (the noise C⁻¹Z by forward
  substitution *and* the sensitivity both read it), ``bands`` (the noise keeps the last bands − 1
  outputs, the amplified accounting needs C b-banded), ``momentum`` (rebuilds A: the reported
  errors), ``strategy``.  Checked: C finite, lower-triangular with a positive diagonal, zero
  below ``bands`` diagonals, ``bands`` the strategy's (identity 1, sqrt and optimal T), and C the
  strategy's: identity I; sqrt the Toeplitz square root of A, recomputed; banded the
  column-normalized Toeplitz band of its own first column, recomputed; optimal unit columns
  (its constraint diag(CᵀC) = 1; the fixed point itself is too costly to rerun).
- banded_toeplitz (:func:`save_toeplitz`): ``coefficients`` c (C's first column, b entries: the
  sensitivity, and the noise as the all-pole filter 1/c(x)), no filter sections (the noise
  derives from c), ``info`` (the (k, s) and objective the optimizer minimized, and the ``loss``
  it reached: the run key and the report).  Checked: ‖c‖ = 1, c_0 > 0, no sections, k the
  participations T steps allow at separation s, and ``loss`` = the objective recomputed from c.
- blt: the buffer decays θ, θ̂ (``info``: ``buf_decay``, ``inverse_buf_decay``) define C; the file
  also holds c (T entries, the sensitivity), the inverse filter sections (the noise) and ω
  (``output_scale``).  :func:`load_toeplitz` recomputes c, the sections and ω from θ, θ̂
  (:func:`dplab.mf.blt.from_decays`) and returns the recomputed factorization, after refusing a
  file whose stored copies differ from them, then the ``loss`` as for banded_toeplitz.

Tolerances.  A stored array and its recomputation run the same float64 code on the same inputs
(JSON keeps floats exactly): they agree to the bit on the machine that wrote them, and between
numpy/BLAS builds only by reordered sums, each off by at most γ_n = n·u/(1 − n·u) of the sum of
magnitudes (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1; u = 2⁻⁵³, n ≤ T terms,
so ≤ 1.2·10⁻¹⁰ at the largest T = 10⁶).  :data:`RTOL` = 10⁻⁹ (relative to the largest entry)
is above that and far below any change that moves ε or the noise: a ×0.01 scale, swapped or
perturbed sections and an edited entry are refused.  The ``loss`` is recomputed along another
path (the stored sections or 1/c(x) on T ones, then a weighted sum of 2T positive terms), whose
relative error is ≤ 4·γ_T·κ with κ = Σ|h|/|Σh| ≥ 1 (h: the inverse filter's impulse response);
:data:`LOSS_RTOL` = 10⁻⁶ allows κ up to 2000 at T = 10⁶ (measured: 4·10⁻¹⁴ at T = 10⁵).  Every
check is O(T·b) or O(T·k) for the Toeplitz files and O(T²) for dense ones (sqrt: O(T²) too),
far below the factorization's cost. A file that fails is refused with one line naming the
command that writes it again.
"""

from __future__ import annotations

import json

import numpy as np

from dplab.errors import DPLabError
from dplab.layout import mf_args, mf_spec
from dplab.mf import blt, factorizations, toeplitz
from dplab.mf.factorizations import Factorization
from dplab.mf.sensitivity import column_sum, max_participations
from dplab.mf.toeplitz import OBJECTIVES, ToeplitzFactorization

#: stored array against its recomputation, relative to the largest entry (module docstring)
RTOL = 1e-9
#: the recorded optimizer ``loss`` against the objective recomputed from the file (module docstring)
LOSS_RTOL = 1e-6
DENSE = "saved factorization"
TOEPLITZ = "saved Toeplitz factorization"


def save(factorization: Factorization | ToeplitzFactorization, path, momentum: float = 0.0) -> None:
    """Write a factorization to ``path`` (.npz, atomic): :func:`save_toeplitz` for banded_toeplitz
    and blt, else C, strategy, bands and momentum; :func:`load` reads it back."""
    from dplab.io import write_npz

    if isinstance(factorization, ToeplitzFactorization):
        save_toeplitz(factorization, path)
        return
    write_npz(
        path,
        encoder=factorization.encoder,
        strategy=factorization.strategy,
        bands=factorization.bands,
        momentum=momentum,
    )


def save_toeplitz(factorization: ToeplitzFactorization, path) -> None:
    """strategy, T, C's first column, the inverse filter sections (BLT; rows of numerators and
    denominators, zero-padded to one length) and ``info`` as JSON; :func:`load_toeplitz` reads it
    back."""
    from dplab.io import write_npz

    numerators, denominators = _section_rows(factorization.sections)
    write_npz(
        path,
        strategy=factorization.strategy,
        steps=factorization.steps,
        coefficients=np.asarray(factorization.coefficients, dtype=float),
        section_numerators=numerators,
        section_denominators=denominators,
        info=json.dumps(factorization.info),
    )


def _section_rows(sections, width: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The filter sections (b, a) as two arrays of rows, zero-padded to >= ``width`` columns."""
    sections = sections or ()
    width = max([width] + [max(len(b), len(a)) for b, a in sections])
    numerators, denominators = np.zeros((len(sections), width)), np.zeros((len(sections), width))
    for row, (b, a) in enumerate(sections):
        numerators[row, : len(b)], denominators[row, : len(a)] = b, a
    return numerators, denominators


def _command(
    path,
    strategy: str,
    steps: int,
    bands=None,
    buffers=None,
    objective=None,
    separation=None,
    momentum: float = 0.0,
) -> str:
    """The `dplab mf` command that writes the file ``path`` claims to hold."""
    _, spec = mf_spec(strategy, steps, bands, buffers, objective, separation)
    return (
        f"dplab mf {mf_args(spec)}"
        + (f" --momentum {momentum}" if momentum else "")
        + f" --out {path}"
    )


def _far(stored, recomputed) -> bool:
    """Whether ``stored`` is off ``recomputed`` by more than :data:`RTOL` of its largest entry."""
    try:
        stored, recomputed = np.asarray(stored, dtype=float), np.asarray(recomputed, dtype=float)
    except (TypeError, ValueError):  # an info entry that is no list of numbers
        return True
    if stored.shape != recomputed.shape:
        return True
    with np.errstate(invalid="ignore"):
        return not np.max(np.abs(stored - recomputed), initial=0.0) <= RTOL * np.max(
            np.abs(recomputed), initial=0.0
        )


def load(path, regenerate: str | None = None) -> tuple[Factorization, float]:
    """(factorization, momentum) of a dense file :func:`save` wrote, checked (module docstring); a
    missing, corrupt or inconsistent file is a DPLabError naming it and ``regenerate`` (default: the
    `dplab mf` command of the strategy, T, bands and momentum the file names)."""
    from dplab.inputs import damaged, read_npz
    from dplab.mf.workload import momentum_workload

    fallback = f"dplab mf --strategy STRATEGY --steps T [--bands M] --out {path}"
    f = read_npz(path, DENSE, ("encoder", "strategy", "bands", "momentum"), regenerate or fallback)
    C = f["encoder"]
    if (
        C.ndim != 2
        or C.shape[0] != C.shape[1]
        or C.dtype.kind != "f"
        or f["strategy"].dtype.kind != "U"
        or f["bands"].ndim != 0
        or f["bands"].dtype.kind not in "iu"
        or f["momentum"].ndim != 0
    ):
        raise damaged(
            path,
            DENSE,
            f"holds an encoder of shape {list(C.shape)} ({C.dtype}) or malformed fields",
            regenerate or fallback,
        )
    strategy, bands, momentum, T = (
        str(f["strategy"]),
        int(f["bands"]),
        float(f["momentum"]),
        C.shape[0],
    )
    regenerate = regenerate or _command(path, strategy, T, bands, momentum=momentum)
    if not 0 <= momentum < 1:
        raise damaged(path, DENSE, f"holds momentum {momentum}, outside [0, 1)", regenerate)
    fact = Factorization(strategy, momentum_workload(T, momentum), C, bands)
    problem = _dense_problem(fact)
    if problem:
        raise damaged(path, DENSE, problem, regenerate)
    return fact, momentum


def _dense_problem(fact: Factorization) -> str | None:
    """What makes a dense factorization not the strategy it names (module docstring), or None."""
    C, T, strategy = fact.encoder, fact.steps, fact.strategy
    if strategy not in factorizations.STRATEGIES:
        return f"names strategy {strategy!r}, not one of {', '.join(factorizations.STRATEGIES)}"
    if not np.all(np.isfinite(C)) or not fact.lower_triangular or not np.all(np.diag(C) > 0):
        return "holds a C that is not finite and lower-triangular with a positive diagonal"
    own = {"identity": 1, "sqrt": T, "optimal": T}.get(strategy, fact.bands)
    if not 1 <= fact.bands <= T or fact.bands != own or not fact.within_bands(fact.bands):
        return f"says bands = {fact.bands}, but its {strategy} C of T = {T} has {_bands_of(C)}"
    if strategy == "optimal":
        norms = np.sqrt(np.sum(C**2, axis=0))
        if _far(norms, np.ones(T)):
            spread = f"{norms.min():.12g}..{norms.max():.12g}"
            return f"holds an optimal C whose column norms reach {spread}, not 1"
        return None
    with np.errstate(all="ignore"):
        expected = {
            "identity": lambda: np.eye(T),
            "sqrt": lambda: factorizations.sqrt(fact.workload).encoder,
            "banded": lambda: factorizations.banded_encoder(C[: fact.bands, 0], T),
        }[strategy]()
    if _far(C, expected):
        return (
            f"holds a C that is not the {strategy} C its own numbers define (recomputed, relative "
            f"tolerance {RTOL:g})"
        )
    return None


def _bands_of(C: np.ndarray) -> int:
    """The number of non-zero diagonals of a lower-triangular C."""
    lags = np.subtract.outer(np.arange(len(C)), np.arange(len(C)))[C != 0]
    return int(lags.max(initial=-1)) + 1


def load_toeplitz(path, regenerate: str | None = None) -> ToeplitzFactorization:
    """The banded_toeplitz or blt factorization :func:`save_toeplitz` wrote, checked (module
    docstring; a BLT is returned as recomputed from its decays); a missing, corrupt or inconsistent
    file is a DPLabError naming it and ``regenerate`` (default: the `dplab mf` command of what the
    file says it holds)."""
    from dplab.inputs import damaged, json_member, read_npz

    fallback = (
        f"dplab mf --strategy STRATEGY --steps T --bands M | --buffers K --objective O --out {path}"
    )
    f = read_npz(
        path,
        TOEPLITZ,
        ("strategy", "steps", "coefficients", "section_numerators", "section_denominators", "info"),
        regenerate or fallback,
    )
    c, num, den = f["coefficients"], f["section_numerators"], f["section_denominators"]
    steps = int(f["steps"]) if f["steps"].dtype.kind in "iu" and f["steps"].ndim == 0 else 0
    shapes_ok = (
        num.ndim == 2 and num.shape == den.shape and (len(num) == 0 or np.all(den[:, 0] != 0))
    )
    if not (f["info"].dtype.kind == "U" and f["info"].ndim == 0):
        raise damaged(
            path, TOEPLITZ, "holds an `info` that is not a JSON object", regenerate or fallback
        )
    info = json_member(path, str(f["info"]), TOEPLITZ, regenerate or fallback)
    if not (
        c.ndim == 1
        and 1 <= len(c) <= steps
        and c.dtype.kind == "f"
        and np.all(np.isfinite(c))
        and shapes_ok
        and f["strategy"].dtype.kind == "U"
    ):
        raise damaged(
            path,
            TOEPLITZ,
            f"holds coefficients of shape {list(c.shape)} for T = {steps} or malformed sections",
            regenerate or fallback,
        )
    strategy = str(f["strategy"])
    k, s = info.get("participations"), info.get("min_separation")
    asked = (
        info.get("buffers"),
        info.get("buffers_cancelled", 0),
    )  # the buffers `dplab mf --buffers` asked for
    buffers = sum(asked) if strategy == "blt" and all(type(v) is int for v in asked) else None
    regenerate = regenerate or _command(
        path, strategy, steps, len(c), buffers, info.get("objective"), s if k != 1 else None
    )
    sections = (
        tuple((np.trim_zeros(b, "b"), np.trim_zeros(a, "b")) for b, a in zip(num, den)) or None
    )
    stored = ToeplitzFactorization(strategy, c, steps, info, sections)
    fact, problem = _toeplitz_checked(stored)
    if problem:
        raise damaged(path, TOEPLITZ, problem, regenerate)
    return fact


def _toeplitz_problem_info(info: dict, steps: int) -> str | None:
    k, s, objective = info.get("participations"), info.get("min_separation"), info.get("objective")
    if objective not in OBJECTIVES or not all(type(v) is int and v >= 1 for v in (k, s)):
        return (
            f"records objective {objective!r}, participations {k!r}, min_separation {s!r}: "
            f"need one of {', '.join(OBJECTIVES)} and integers >= 1"
        )
    if k != max_participations(steps, k, s):
        return (
            f"records participations {k} at min_separation {s}, more than T = {steps} steps allow"
        )
    return None


def _toeplitz_checked(stored: ToeplitzFactorization) -> tuple[ToeplitzFactorization, str | None]:
    """(the factorization to use, what is wrong with the file or None), module docstring."""
    c, steps, info = stored.coefficients, stored.steps, stored.info
    problem = _toeplitz_problem_info(info, steps)
    if problem:
        return stored, problem
    if stored.strategy == "banded_toeplitz":
        fact = stored
        if stored.sections is not None:
            return (
                stored,
                "holds inverse filter sections; a banded_toeplitz C⁻¹ is 1/c(x), derived from c",
            )
        if not c[0] > 0 or abs(np.linalg.norm(c) - 1.0) > RTOL:
            return (
                stored,
                f"holds coefficients with c_0 = {c[0]:.6g} and norm {np.linalg.norm(c):.12g}; "
                "dplab mf writes c_0 > 0 and norm 1",
            )
    elif stored.strategy == "blt":
        try:
            fact = blt.from_decays(
                info.get("buf_decay", []), info.get("inverse_buf_decay", []), steps, info
            )
        except (DPLabError, TypeError, ValueError) as err:
            return stored, f"records BLT decays that define no BLT ({getattr(err, 'message', err)})"
        fact = ToeplitzFactorization("blt", fact.coefficients, steps, info, fact.sections)
        for name, have, want in (
            ("coefficients", c, fact.coefficients),
            (
                "output_scale",
                info.get("output_scale", []),
                blt.output_scales(
                    np.asarray(info["buf_decay"]), np.asarray(info["inverse_buf_decay"])
                ),
            ),
        ):
            if _far(have, want):
                return (
                    stored,
                    f"holds {name} that are not those of its decays buf_decay, inverse_buf_decay "
                    f"(recomputed, relative tolerance {RTOL:g})",
                )
        rows = _section_rows(fact.sections)
        if any(
            _far(have, want)
            for have, want in zip(_section_rows(stored.sections, rows[0].shape[1]), rows)
        ):
            return (
                stored,
                "holds inverse filter sections that are not those of its decays buf_decay, "
                f"inverse_buf_decay (recomputed, relative tolerance {RTOL:g})",
            )
        if info.get("buffers") != len(fact.sections):
            return (
                stored,
                f"records buffers = {info.get('buffers')!r}, but its decays give "
                f"{len(fact.sections)}",
            )
    else:
        return stored, f"names strategy {stored.strategy!r}, not banded_toeplitz or blt"
    if "loss" in info:
        loss = objective_value(
            fact, info["objective"], info["participations"], info["min_separation"]
        )
        if not (
            isinstance(info["loss"], (int, float)) and abs(info["loss"] - loss) <= LOSS_RTOL * loss
        ):
            return (
                stored,
                f"records loss {info['loss']!r}, but its C gives {loss:.12g} (the recorded "
                f"objective {info['objective']} for k = {info['participations']}, "
                f"s = {info['min_separation']})",
            )
    return fact, None


def objective_value(
    fact: ToeplitzFactorization, objective: str, participations: int, min_separation: int
) -> float:
    """‖v‖²·Σ_s w_s·x_s² (v = Σ_{m<k} C[:, m·s], x = C⁻¹·1): the optimizers' objective
    (:func:`dplab.mf.toeplitz.objective_and_gradient`), here with C⁻¹ from the factorization's own
    filters, O(T·b) or O(T·k)."""
    T = fact.steps
    x = fact.inverse(np.ones(T))
    v = column_sum(np.asarray(fact.coefficients, dtype=float), T, participations, min_separation)
    return float(v @ v) * float(np.dot(toeplitz.row_weights(T, objective), x**2))
