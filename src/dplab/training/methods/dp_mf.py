"""Method ``dp_mf`` (:data:`METHOD`): DP training with the
matrix-factorization mechanism (004 §4.3).

The loop is the one of :mod:`dplab.training.loop`; this module supplies its three parts:

- the **sampler**: a :class:`SpecSampler` drawing batches from an MF sampler spec
  (:class:`~dplab.mf.accounting.MinSeparation`: b partitions cycled as the batches, or
  :class:`~dplab.mf.accounting.CyclicPoisson`: Poisson inside the active one; each record's
  partition drawn independently once per run, so batch sizes vary, Binomial(n, 1/b) for the
  first, and the update divides by the fixed batch_size);
  the very same spec object is what the MF accountant checks and calibrates σ with, so the
  sampler the privacy analysis assumes is the one training uses (004 §4.3 "be careful how you
  sample"); a spec the factorization does not support is an error, never assumed;
- the **noise**: :class:`~dplab.training.mf_noise.MFNoise`, the streaming C⁻¹Z of
  :func:`dplab.mf.noise.stream` on the clipped-gradient sum, so step t adds w_t with
  (w_t) ~ N(0, σ²C²·(CᵀC)⁻¹) across steps:
  :class:`~dplab.mf.noise.FilterNoise` for banded_toeplitz and blt (C⁻¹ as IIR filters, memory
  O(bands·d) or O(buffers·d), no T×T matrix anywhere in the run),
  :class:`~dplab.mf.noise.CorrelatedNoise` for the dense strategies (O(bands·d) for banded C);
  its state is checkpointed;
- the **claim**: σ calibrated from ``target_epsilon`` with :func:`dplab.mf.accounting.calibrate`,
  ε on the logged steps from the MF accountant (the first t rows of C·G + Z, i.e. C[:t, :t] and
  the spec cut to t steps), and every DP-SGD accountant listed as excluded
  (:func:`dplab.accounting.eligibility.refusal`: they assume independent noise per step).

Run keys: ``strategy`` (identity|sqrt|optimal|banded|banded_toeplitz|blt), ``bands`` (banded,
banded_toeplitz), ``buffers`` (blt, 1..15), ``objective`` (banded_toeplitz, blt: mean|max, default
mean: what the optimizer minimizes), ``min_separation`` (b: number of partitions;
null → ⌊n/batch_size⌋, under add_remove only where n ± 1 gives the same b;
required for banded_toeplitz and blt with the min_separation sampler, whose
optimizer minimizes the error of k = ⌈T/b⌉ participations b apart), ``participations`` (k,
optional: must equal ⌈T/b⌉, what the cyclic sampler gives).  Momentum is not supported by the
loop, so the workload is the prefix sum (004 §4.1).

banded_toeplitz (Choquette-Choo et al. 2023, "(Amplified) Banded Matrix Factorization"; McKenna
2024, "Scaling up the Banded Matrix Factorization Mechanism for Differentially Private ML") and blt
(Dvijotham, McMahan, Pillutla, Steinke & Thakurta 2024, "Efficient and Near-Optimal Noise Generation
for Streaming Differential Privacy"; McMahan, Xu & Zhang 2024, "A Hassle-free Algorithm for Private
Learning in Practice: Don't Use Tree Aggregation, Use BLTs") are
:class:`~dplab.mf.toeplitz.ToeplitzFactorization` s: accounted with the min_separation sampler by
their min-separation sensitivity (:func:`~dplab.mf.sensitivity.toeplitz_sensitivity`, exact or an
upper bound), banded_toeplitz with bands ≤ partitions also with cyclic_poisson (amplified BandMF);
a BLT has T bands, so cyclic_poisson is refused for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dplab import units
from dplab.accounting.eligibility import exclusion
from dplab.errors import DPLabError
from dplab.layout import BANDED_STRATEGIES, TOEPLITZ_STRATEGIES, mf_args, mf_spec
from dplab.mf import accounting as mf_accounting
from dplab.mf import blt, factorizations, saved, toeplitz
from dplab.mf.factorizations import Factorization
from dplab.mf.toeplitz import ToeplitzFactorization
from dplab.mf.workload import prefix_sum
from dplab.schemes import Neighbouring, Sampler, Sampling
from dplab.training import noise_floor
from dplab.training.methods.base import Mechanism, Method, Row
from dplab.training.privacy import Plan, requested_accountants
from dplab.training.settings import RunSettings
from dplab.validate import integer

NAME = "dp_mf"
ACCOUNTANT = mf_accounting.NAME  # "mf"


@dataclass(frozen=True, kw_only=True)
class MFOptions:
    """dp_mf's own keys of a resolved run (module docstring, "Run keys"; :data:`METHOD`'s
    ``keys``)."""

    strategy: str | None  # the factorization's strategy (required: :func:`resolve`)
    bands: int | None  # strategies banded, banded_toeplitz: bands of C
    buffers: int | None  # strategy blt: buffers of the BLT
    objective: str | None  # banded_toeplitz, blt: mean | max error the optimizer minimizes
    min_separation: int | None  # b, fixed batches or partitions; None: ⌊n/batch_size⌋
    participations: int | None  # k, participations per example; None: derived

    @classmethod
    def of(cls, cfg) -> MFOptions:
        """The options of the resolved run ``cfg`` (:attr:`RunSettings.record`)."""
        return cls(**{f.name: cfg[f.name] for f in dataclasses.fields(cls)})


def options(run: RunSettings) -> MFOptions:
    """The dp_mf options of ``run`` (:meth:`MatrixFactorization.options`)."""
    return MFOptions.of(run.record)


def resolve(run: RunSettings, err) -> dict:
    """Cross-key rules of the MF keys (:meth:`MatrixFactorization.resolve`); the generic rules of
    :func:`dplab.training.resolve.resolve_run` refuse them on other methods, and any accountant but
    mf. Returns the defaults it fills (banded_toeplitz, blt: ``objective``)."""
    o = options(run)
    strategy = o.strategy
    filled = {}
    if strategy is None:
        raise err(
            "strategy",
            f"is required for method {NAME}: one of "
            f"{', '.join((*factorizations.STRATEGIES, *TOEPLITZ_STRATEGIES))}",
        )
    if (strategy in BANDED_STRATEGIES) != (o.bands is not None):
        raise err(
            "bands",
            f"is required for strategies {' and '.join(BANDED_STRATEGIES)} and only applies to"
            " them",
        )
    if strategy == "banded":  # factorizations.banded's range, asked before it runs
        try:
            integer("bands", o.bands, 1, run.steps, "steps")
        except DPLabError as bad:
            raise err(bad.key, bad.message) from None
    if (strategy == "blt") != (o.buffers is not None):
        raise err(
            "buffers", "is required for strategy blt and only applies to it (a BLT has T bands)"
        )
    if strategy in TOEPLITZ_STRATEGIES:
        filled = _resolve_toeplitz(run, err)
    elif o.objective is not None:
        raise err(
            "objective",
            f"only applies to strategies {' and '.join(TOEPLITZ_STRATEGIES)} (what their optimizer "
            f"minimizes); strategy {strategy} has none to choose",
        )
    if run.normalize != "expected":
        raise err(
            "normalize",
            f"method {NAME} divides by the fixed batch_size (expected): the MF accounting "
            "releases the noisy sum C·G + Z divided by a constant",
        )
    return filled


def _resolve_toeplitz(run: RunSettings, err) -> dict:
    """banded_toeplitz, blt: bands or buffers within T, the sampler the analysis holds for; returns
    the objective (default mean)."""
    o = options(run)
    try:
        steps = toeplitz.check_steps(run.steps)
        if o.strategy == "blt":
            blt.check_buffers(o.buffers, steps)
        else:
            toeplitz.check_bands(o.bands, steps)
    except DPLabError as bad:
        raise err(bad.key, bad.message) from None
    if o.strategy == "blt" and run.sampling == Sampling.CYCLIC_POISSON:
        raise err(
            "sampling",
            "cyclic_poisson (amplified BandMF) needs a C with at most b bands; a BLT has T bands: "
            "use sampling min_separation, or strategy banded_toeplitz",
        )
    if run.sampling == Sampling.MIN_SEPARATION and o.min_separation is None:
        raise err(
            "min_separation",
            f"is required for strategy {o.strategy} with the "
            "min_separation sampler: its "
            "optimizer minimizes the error of k = ceil(T/b) participations b apart",
        )
    return {"objective": o.objective or "mean"}


def optimized_separation(sampling: str | None, min_separation: int | None) -> int | None:
    """The min-separation b a banded_toeplitz or blt run's optimizer minimizes the error for (the
    min_separation sampler's, k = ⌈T/b⌉); None: single participation (cyclic_poisson,
    whose amplified ε depends on ζ = ‖c‖ only, so the single-participation error is
    the one to minimize)."""
    sampling = sampling or METHOD.samplings[0]
    return min_separation if sampling == Sampling.MIN_SEPARATION else None


def build_factorization(run: RunSettings) -> Factorization | ToeplitzFactorization:
    """The factorization of the run's options (:class:`MFOptions`), optimized or factorized
    afresh."""
    o = options(run)
    if o.strategy in TOEPLITZ_STRATEGIES:
        steps, s = run.steps, optimized_separation(run.sampling, o.min_separation)
        k = 1 if s is None else -(-steps // s)
        if o.strategy == "blt":
            return blt.blt(steps, o.buffers, o.objective, k, s)
        return toeplitz.banded_toeplitz(steps, o.bands, o.objective, k, s)
    return factorizations.factorize(
        o.strategy, prefix_sum(run.steps), bands=o.bands, min_separation=o.min_separation
    )


def _spec(
    strategy: str,
    steps: int,
    bands: int | None,
    buffers: int | None,
    objective: str | None,
    sampling: str | None,
    min_separation: int | None,
) -> tuple[str, dict]:
    """(cache key, spec) of the factorization of a run (:func:`dplab.layout.mf_spec`)."""
    return mf_spec(
        strategy,
        steps,
        bands,
        buffers,
        objective,
        optimized_separation(sampling, min_separation) if strategy in TOEPLITZ_STRATEGIES else None,
    )


def _load_toeplitz(path: Path, key: str, regenerate: str) -> ToeplitzFactorization:
    """A saved banded_toeplitz or blt factorization, refused unless it was
    optimized for the run's key."""
    fact = saved.load_toeplitz(path, regenerate)
    info = fact.info
    requested = info.get("buffers", 0) + info.get("buffers_cancelled", 0)
    found, _ = mf_spec(
        fact.strategy,
        fact.steps,
        fact.bands,
        requested,
        info.get("objective"),
        info.get("min_separation") if info.get("participations", 1) > 1 else None,
    )
    if found != key:
        raise DPLabError(
            "factorization",
            f"{path} holds the factorization {found}; the run needs {key}: write it "
            f"with `{regenerate}`",
        )
    return fact


def load_factorization(
    run: RunSettings, cache: str | Path
) -> Factorization | ToeplitzFactorization:
    """The run's factorization from a cache folder; one that does not match the run is an error."""
    o = options(run)
    key, spec = _spec(
        o.strategy, run.steps, o.bands, o.buffers, o.objective, run.sampling, o.min_separation
    )
    path = Path(cache) / f"{key}.npz"
    regenerate = f"dplab mf {mf_args(spec)} --out {path}"
    if not path.exists():
        raise DPLabError(
            "factorization", f"no saved factorization {path}; write it with `{regenerate}`"
        )
    if o.strategy in TOEPLITZ_STRATEGIES:
        return _load_toeplitz(path, key, regenerate)
    fact, momentum = saved.load(path, regenerate)
    want = (o.strategy, run.steps, o.bands if o.strategy == "banded" else fact.bands, 0.0)
    if (fact.strategy, fact.steps, fact.bands, momentum) != want:
        raise DPLabError(
            "factorization",
            f"{path} holds {fact.strategy} T={fact.steps} bands={fact.bands} "
            f"momentum={momentum}; the run needs {want}",
        )
    return fact


def _parts_of_n(run: RunSettings, n: int, batch: int) -> int:
    """b = ⌊n/batch_size⌋ taken from the dataset's size; under add_remove only where the
    neighbour's n ± 1 gives the same b (else every partition would be drawn anew:
    docs/matrix_factorization.md)."""
    if run.neighbouring == Neighbouring.ADD_REMOVE and not 1 <= n % batch <= batch - 2:
        raise DPLabError(
            "min_separation",
            f"null takes b = floor(n/batch_size) = {n // batch} from the dataset size, which one "
            f"record more or less changes (n mod batch_size = {n % batch}, add_remove needs it in "
            f"[1, batch_size - 2]): set min_separation = {max(1, n // batch)} (b then does not "
            "depend on n) or neighbouring = replace_one",
        )
    return n // batch


def _parts(run: RunSettings, n: int, batch: int, min_separation: int | None) -> int:
    """b: ``min_separation``, else ⌊n/batch_size⌋ (:func:`_parts_of_n`)."""
    return min_separation if min_separation is not None else _parts_of_n(run, n, batch)


def _holds(run: RunSettings, n: int, batch: int, min_separation: int | None) -> bool:
    """Whether batch_size ``batch`` and ``min_separation`` pass the min_separation sampler's
    checks of :func:`sampler_spec` (b from n where null, ⌊n/b⌋ = batch_size, a banded C's
    bands <= b)."""
    try:
        parts = _parts(run, n, batch, min_separation)
    except DPLabError:
        return False
    o = options(run)
    return (
        1 <= batch <= n
        and 1 <= parts <= n
        and n // parts == batch
        and not (o.strategy == "banded" and o.bands > parts)
    )


def _batch_fixes(run: RunSettings, n: int, parts: int) -> str:
    """The changes of batch_size or min_separation that make ⌊n/b⌋ = batch_size hold (checked
    with :func:`_holds`; none that leaves the run as it is)."""
    o, batch = options(run), run.batch_size
    fits = n // parts  # b stays (null: ⌊n/⌊n/b⌋⌋ = b for b = ⌊n/batch_size⌋)
    fixes = []
    if _holds(run, n, fits, o.min_separation):
        fixes.append(f"batch_size = {fits}")
    elif o.min_separation is None and _holds(run, n, fits, parts):
        fixes.append(f"batch_size = {fits} with min_separation = {parts}")
    # the largest b with ⌊n/b⌋ >= batch_size: the only one that can give batch_size (null: b)
    if n // batch != parts and _holds(run, n, batch, n // batch):
        fixes.append(f"min_separation = {n // batch}")
    if not fixes:
        return "choose batch_size and min_separation with floor(n/min_separation) = batch_size"
    return "set " + " or ".join(fixes)


def encoder_bands(strategy: str, steps: int, bands: int | None) -> int:
    """The bands of the run's C, known before it is built: 1 for identity (C = I), ``bands`` for
    banded and banded_toeplitz, T for the dense sqrt and optimal and for a BLT."""
    if strategy == "identity":
        return 1
    if strategy in BANDED_STRATEGIES:
        return min(bands, steps)
    return steps


def _check_amplified(run: RunSettings, parts: int) -> None:
    """cyclic_poisson: amplified BandMF's conditions (:func:`mf_accounting.check_amplified`, what
    the accountant asks of the factorization at training), asked of the run's strategy; a dense
    strategy's refusal names ``strategy``, a banded one's ``bands``."""
    o = options(run)
    have = encoder_bands(o.strategy, run.steps, o.bands)
    if o.strategy in BANDED_STRATEGIES:
        got, key = f"; got bands = {o.bands}: lower bands or raise min_separation", "bands"
    else:
        got, key = (
            f"; strategy {o.strategy} has {have} (T = {run.steps}): use strategy banded or "
            f"banded_toeplitz with bands <= {parts}, or sampling min_separation",
            "strategy",
        )
    try:
        mf_accounting.check_amplified(run.neighbouring, parts, have <= parts, got)
    except DPLabError as bad:
        if bad.key != "bands":
            raise
        raise DPLabError(key, bad.message) from None


def sampler_spec(run: RunSettings, n: int):
    """The MF sampler spec of the run (the object both training and accounting use), refused
    where the factorization or the MF accountant would refuse it (``dplab check-config`` runs it
    before any job)."""
    o = options(run)
    batch = run.batch_size
    if not 1 <= batch <= n:
        raise DPLabError("batch_size", f"must lie in [1, dataset_size={n}]; got {batch}")
    parts = _parts(run, n, batch, o.min_separation)
    if o.strategy == "banded":  # the factorization's own rule (factorizations.banded)
        factorizations.check_separation(
            o.bands,
            parts,
            "min_separation"
            if o.min_separation is not None
            else f"b = floor(n/batch_size) = floor({n}/{batch})",
        )
    if run.sampling == Sampling.MIN_SEPARATION:
        if n // parts != batch:
            raise DPLabError(
                "batch_size",
                f"{parts} partitions of {n} examples hold {n / parts:g} "
                f"each in expectation; {_batch_fixes(run, n, parts)}",
            )
        spec = mf_accounting.MinSeparation(parts, run.steps, n)
        k = spec.participations
    elif run.sampling == Sampling.CYCLIC_POISSON:
        spec = mf_accounting.CyclicPoisson(n, batch, parts, run.steps)
        k = spec.compositions
        _check_amplified(run, parts)
    else:
        raise DPLabError(
            "sampling", f"method {NAME} allows {', '.join(METHOD.samplings)}; got {run.sampling!r}"
        )
    if o.participations is not None and o.participations != k:
        raise DPLabError(
            "participations",
            f"the {run.sampling} sampler with b = {parts} over T = {run.steps} "
            f"steps gives k = ceil(T/b) = {k}; "
            f"got {o.participations}",
        )
    return spec


class SpecSampler(Sampler):
    """Engine sampler drawing from an MF sampler spec; the partitions are drawn once, on the
    first step, from the run's generator (and checkpointed; a checkpoint of the earlier
    permutation split, key ``parts``, is refused)."""

    name = "mf"

    def __init__(self, spec):
        if not isinstance(spec, (mf_accounting.MinSeparation, mf_accounting.CyclicPoisson)):
            raise DPLabError("sampling", f"not an MF sampler spec: {type(spec).__name__}")
        n = spec.dataset_size
        batch = (
            n // spec.min_separation
            if isinstance(spec, mf_accounting.MinSeparation)
            else spec.batch_size
        )
        super().__init__(n, max(1, int(batch)))
        self.spec, self.parts = spec, None

    def sample(self, step, generator):
        if self.parts is None:
            self.parts = self.spec.partitions(generator)
        return self.spec.batch(step - 1, self.parts, generator).sort().values

    def epoch(self, step):
        if isinstance(self.spec, mf_accounting.MinSeparation):
            return step / self.spec.min_separation
        return step * self.spec.batch_size / self.spec.dataset_size

    def state_dict(self):
        return {"partitions": self.parts}

    def load_state_dict(self, state):
        if "partitions" not in state:
            raise DPLabError(
                "checkpoint",
                "holds dp_mf batches of the earlier permutation split, "
                "which the MF ε does not cover under add_remove: delete "
                "the run's checkpoint.pt and checkpoint.prev.pt",
            )
        self.parts = state["partitions"]


def truncate(fact: Factorization | ToeplitzFactorization, spec, steps: int):
    """The first ``steps`` rows of the release C·G + Z: C[:t, :t] (C is lower-triangular) and the
    spec cut to t. A lower-triangular Toeplitz C cut to t steps is the Toeplitz C of its first t
    coefficients (same filters)."""
    if isinstance(fact, ToeplitzFactorization):
        sub = dataclasses.replace(fact, coefficients=fact.coefficients[:steps], steps=steps)
    else:
        sub = Factorization(
            fact.strategy,
            fact.workload[:steps, :steps],
            fact.encoder[:steps, :steps],
            min(fact.bands, steps),
            fact.info,
        )
    return sub, dataclasses.replace(spec, steps=steps)


def sampler_description(spec) -> dict:
    if isinstance(spec, mf_accounting.MinSeparation):
        return {
            "name": Sampling.MIN_SEPARATION,
            "min_separation": spec.min_separation,
            "participations": spec.participations,
            "description": "b partitions (each record's drawn uniformly and independently, "
            "once per run) used cyclically as the batches: k = ceil(T/b) "
            "participations, any two >= b steps apart; no amplification",
        }
    return {
        "name": Sampling.CYCLIC_POISSON,
        "partitions": spec.partitions_count,
        "sampling_rate": spec.sampling_rate,
        "compositions": spec.compositions,
        "description": "b partitions (each record's drawn uniformly and independently, "
        "once per run); step t uses partition t mod b, each member kept with "
        "probability p (amplified banded MF, Choquette-Choo et al. 2023, Thm 4)",
    }


def prepare(
    run: RunSettings, n: int, grid: list[int], factorization: Factorization | None = None
) -> Mechanism:
    """Sampler, factorization, σ and the ε curve of a dp_mf run, decided before training."""
    from dplab.training.mf_noise import MFNoise  # torch: training's, not planning's

    o = options(run)
    names = requested_accountants(run)
    update = METHOD.update(run)
    excluded = {
        name: exclusion(name, None, update) for name in names if name != ACCOUNTANT
    }  # claims decides
    sampler = METHOD.sampler(run, n)
    spec = sampler.spec
    fact = factorization if factorization is not None else build_factorization(run)
    delta, neighbouring = run.delta, run.neighbouring
    # the accountant receives the spec the sampler draws from (sampler.spec),
    # never a description of it
    if run.noise_multiplier is not None:
        sigma, source = float(run.noise_multiplier), "given"
        mf_accounting.dp_event(
            fact, sampler.spec, sigma, neighbouring
        )  # refuses an unsupported spec
    else:
        sigma = mf_accounting.calibrate(fact, sampler.spec, run.target_epsilon, delta, neighbouring)
        source = f"calibrated with {ACCOUNTANT} to epsilon={run.target_epsilon} at delta={delta}"
    curve = np.array(
        [
            mf_accounting.epsilon(*truncate(fact, sampler.spec, t), sigma, delta, neighbouring)
            for t in grid
        ]
    )
    if not np.all(np.isfinite(curve)):
        raise DPLabError(
            "noise_multiplier", f"the MF accountant returned a non-finite epsilon for sigma={sigma}"
        )
    k = spec.participations if isinstance(spec, mf_accounting.MinSeparation) else 1
    sep = (
        spec.min_separation
        if isinstance(spec, mf_accounting.MinSeparation)
        else spec.partitions_count
    )
    errors = fact.errors(k, sep)
    details = {
        "matrix_factorization": {
            "strategy": fact.strategy,
            "steps": fact.steps,
            "bands": fact.bands,
            **(
                {"buffers": o.buffers, "objective": o.objective, "optimizer": fact.info}
                if isinstance(fact, ToeplitzFactorization)
                else {}
            ),
            "workload": "prefix_sum",
            "sampler": sampler_description(spec),
            "sensitivity": errors["sensitivity"],
            "sensitivity_exact": errors["sensitivity_exact"],
            "sensitivity_method": errors["sensitivity_method"],
            "max_error": errors["max_error"],
            "mean_error": errors["mean_error"],
            "max_column_norm": fact.max_column_norm,
            "dp_event": str(mf_accounting.dp_event(fact, sampler.spec, sigma, neighbouring)),
        },
        "epsilon_accountant": {
            ACCOUNTANT: {
                "delta": delta,
                "neighbouring": neighbouring,
                "sampling": run.sampling,
                "method": "exact Gaussian profile of the dp_event; PLD (dp_accounting) "
                "when Poisson-sampled",
            }
        },
    }
    plan = Plan(
        setting=None,
        noise_multiplier=sigma,
        sigma_source=source,
        constants_note="",
        curves={ACCOUNTANT: curve},
        release={ACCOUNTANT: "trajectory"},
        excluded=excluded,
        details=details,
        update=update,
    )
    diagonal = (  # C's smallest diagonal entry: a participation's move of its own coordinate
        abs(float(fact.coefficients[0]))
        if isinstance(fact, ToeplitzFactorization)
        else float(np.min(np.abs(np.diag(fact.encoder))))
    )
    exposure = noise_floor.Exposure(  # every record's partition has ⌊T/b⌋ steps at least
        shift=units.sum_sensitivity(1.0, neighbouring) * diagonal / sigma,
        rate=spec.sampling_rate if isinstance(spec, mf_accounting.CyclicPoisson) else 1.0,
        count=run.steps // sep,
        sigma=sigma,
    )
    noise = MFNoise(fact, sigma * run.clip)
    return Mechanism(sampler=sampler, plan=plan, noise=noise, exposure=exposure)


@dataclass(frozen=True)
class MatrixFactorization(Method):
    """The MF mechanism's parts (module docstring) in the one loop."""

    def options(self, run):
        return options(run)

    def resolve(self, run, err):
        return resolve(run, err)

    def sampler(self, run, n):
        return SpecSampler(sampler_spec(run, n))

    def mechanism(self, run, n, dimension, info, grid, features, factorization=None):
        return prepare(run, n, grid, factorization)

    def factorization(self, entry):
        return _spec(
            entry["strategy"],
            entry["steps"],
            entry.get("bands"),
            entry.get("buffers"),
            entry.get("objective"),
            entry.get("sampling"),
            entry.get("min_separation"),
        )

    def load_factorization(self, run, cache):
        return load_factorization(run, cache)


METHOD = MatrixFactorization(
    name=NAME,
    display="DP-MF",
    source="004 §4.3; Choquette-Choo et al. 2023",
    rule="w ← w − η·(g + (C⁻¹Z)_t)/b, MF samplers",
    samplings=(Sampling.MIN_SEPARATION, Sampling.CYCLIC_POISSON),
    noise="correlated",
    accountant=ACCOUNTANT,
    accountants=(ACCOUNTANT,),
    keys=("strategy", "bands", "buffers", "objective", "min_separation", "participations"),
    row=Row(cited="004 §4.3; `training/methods/dp_mf.py`", accountant="mf (the MF accountant)"),
)
