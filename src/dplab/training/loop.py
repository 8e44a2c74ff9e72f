"""The one training loop of every method (docs/training.md; each method's parts in
:mod:`dplab.training.methods`):

    sample batch B → per-example gradients → clip → Σ → + noise → ÷ b → update → project

:func:`steps` takes these steps, for one run (:func:`train`) and for R runs of one config in
lockstep (:class:`dplab.training.stacked.StackedRuns`, the audit's runs): nothing else in the
package updates parameters.

Per step t (g = Σ_{i∈B} clip_C(∇ℓ(w; x_i)), Z_t the noise source's sample with std σC):

    w ← Π( (1 − λ)·w − η·( g / m + Z_t / b ) )

m = b (``normalize: expected``; Poisson: b = qn, so an empty batch gives a pure-noise step) or
m = |B| (``normalize: realized``, 001 eq. 12/17; an empty batch has no gradient term); λ = the
run's ``regularization`` (001 eq. 17, else 0); Π the projection onto the centred ball of diameter
D (else the identity); η = η_t of the run's ``lr_schedule``, and another ``optimizer`` than plain
SGD updates with the same ĝ = g/m + Z_t/b (:mod:`dplab.training.step`).  With m = b this is the
canonical convention: N(0, σ²C²) on the SUM of
clipped gradients, then divided by b.  For 001's methods the noise term η·Z_t/b has std
σ_A = ησC/b (:func:`dplab.units.asoodeh_sigma`); for noisy_gd (b = n) it is √(2η)·σ₀₀₂
(:func:`dplab.units.langevin_sigma`).

Randomness (:func:`streams`): the initialisation uses torch's global generator seeded with the
run's ``seed`` inside ``fork_rng``.  The batches come from a CPU ``torch.Generator`` seeded with
``seed``, drawn ahead in blocks of up to :data:`BATCH_BLOCK` steps (on an accelerator copied to
the device once per block, :func:`batches`), and the noise from a generator of its own seeded
with ``seed + 2³²``: on the CPU :class:`dplab.philox.CpuGenerator` (a vectorized Philox, about a
third of ``torch.randn``'s time), on an accelerator torch's generator on the device.  The same
seed gives the same numbers on the same device, and no step copies noise or indices between
host and device.  Nor does a step wait for the device: the NaN/inf guard is read at logged
steps, checkpoints and the end (on the CPU after every step), so a CUDA run synchronizes only
there.

Checkpoints (:mod:`dplab.training.checkpoint`) hold the parameters, the generators', sampler,
noise and optimizer states, the step and the metrics so far; a restarted run resumes from the
last whole one written for the same run, data and :mod:`environment
<dplab.training.environment>` and ends with the same bytes as an uninterrupted one.  Progress
(step/T, the last logged losses and ε, elapsed and estimated time left) goes to a bar on a
terminal, else to the log (:mod:`dplab.progress`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol

import numpy as np
import torch
from torch import nn

from dplab import __version__
from dplab.accounting import individual
from dplab.accounting.eligibility import REFERENCE_BOUNDS, bound, column, labelled
from dplab.errors import Diverged, DPLabError
from dplab.io import atomic_writes, json_text, text_file
from dplab.philox import CpuGenerator, NoiseGenerator, PortableGenerator
from dplab.progress import Progress, log
from dplab.schemes import Sampler, Sampling
from dplab.training import checkpoint, graphed, noise_floor
from dplab.training.data import Dataset
from dplab.training.environment import environment
from dplab.training.graphed import GraphedStep
from dplab.training.methods import METHODS, Method
from dplab.training.noise import NoiseSource
from dplab.training.per_example import ClippedGrads, clipped_grad_sum
from dplab.training.privacy import Plan, risk_reading
from dplab.training.run_metrics import metrics
from dplab.training.settings import RunSettings
from dplab.training.start import initial
from dplab.training.step import apply, denominator, project
from dplab.training.summary import DatasetInfo, Final, RunSummary

METRIC_COLUMNS = ("step", "epoch", "train_loss", "test_loss", "test_accuracy")
#: columns of DIR/grad_norms.csv (``record_grad_norms``): one row per example of a logged
#: step's batch
GRAD_NORM_COLUMNS = ("step", "grad_norm")
#: columns of DIR/individual_epsilon.csv (``individual_epsilon``): one row per training record
INDIVIDUAL_COLUMNS = ("index", "class", "individual_epsilon")
#: records per pass when every record's gradient norm is computed (``individual_epsilon``)
NORM_CHUNK = 4096
#: batches are drawn this many steps ahead (on an accelerator, one host→device copy per block)
BATCH_BLOCK = 256
#: devices whose steps read the NaN/inf guard after every step (elsewhere a read waits for the
#: device, so it is read at logged steps, checkpoints and the end)
GUARD_EVERY_STEP = ("cpu",)
#: added to the run's seed for the noise generator (run seeds are < 2³²)
NOISE_SEED_OFFSET = 1 << 32


def resolve_device(name: str, key: str = "device") -> torch.device:
    """``auto``: CUDA when present, else CPU; ``cuda`` without CUDA is an error naming ``key``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DPLabError(key, "cuda requested but torch sees no CUDA device (use auto or cpu)")
    return torch.device(name)


def deterministic(device: torch.device) -> None:
    """Runs on ``device`` made reproducible (PyTorch's reproducibility notes), before cuBLAS's
    first use: its fixed workspace on CUDA, and torch's deterministic algorithms (warn only)."""
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    # = torch.use_deterministic_algorithms(True, warn_only=True) minus its import of
    # torch._inductor.config (≈ 2–3 s of every job's start-up): that module's flag only affects
    # torch.compile, never used here.  A private call, fenced by tests/test_dependencies.py and
    # the torch range in pyproject.toml.
    torch._C._set_deterministic_algorithms(True, warn_only=True)


def streams(
    device: torch.device, seed: int, noise_rng: str = "device"
) -> tuple[torch.Generator, NoiseGenerator]:
    """(batch generator, noise generator) of a run (module docstring): a CPU ``torch.Generator``
    for the batches; for the noise a :class:`~dplab.philox.CpuGenerator` on the CPU, torch's
    generator on an accelerator, and with ``noise_rng: portable`` a
    :class:`~dplab.philox.PortableGenerator` on the device, on every device.  cuBLAS is made
    deterministic (PyTorch's reproducibility notes) before its first use."""
    batches = torch.Generator().manual_seed(seed)
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if noise_rng == "portable":
        return batches, PortableGenerator(seed + NOISE_SEED_OFFSET, device)
    if device.type == "cpu":
        return batches, CpuGenerator(seed + NOISE_SEED_OFFSET)
    return batches, torch.Generator(device=device).manual_seed(seed + NOISE_SEED_OFFSET)


def batches(
    sampler,
    generator: torch.Generator,
    device: torch.device,
    first: int,
    last: int,
    block: int,
    checkpoint_every: int = 0,
) -> Iterator[tuple[int, torch.Tensor]]:
    """(step, the step's batch indices on ``device``) for steps ``first``..``last``.

    ``block`` > 1 (only when ``generator`` draws nothing but batches): the indices of up to
    ``block`` steps are drawn at once (on an accelerator copied in one transfer); a block never
    runs past a multiple of ``checkpoint_every``, so the generator and sampler states a
    checkpoint saves are those after its step."""
    step = first
    while step <= last:
        stop = min(last, step + block - 1)
        if checkpoint_every:
            stop = min(stop, -(-step // checkpoint_every) * checkpoint_every)
        drawn = [sampler.sample(t, generator) for t in range(step, stop + 1)]
        if device.type == "cpu":
            yield from zip(range(step, stop + 1), drawn)
        elif len(drawn) == 1:
            yield step, drawn[0].to(device)
        else:
            flat = torch.cat(drawn)
            if device.type == "cuda":
                flat = flat.pin_memory()
            flat = flat.to(device, non_blocking=True)
            yield from zip(range(step, stop + 1), flat.split([len(d) for d in drawn]))
        step = stop + 1


def log_grid(steps: int, log_every: int) -> list[int]:
    """Steps at which metrics (and ε) are logged: every ``log_every``, and always the last."""
    grid = list(range(log_every, steps + 1, log_every))
    return grid if grid and grid[-1] == steps else grid + [steps]


class Runs(Protocol):
    """What :func:`steps` steps: one run (:class:`_Run`, :func:`train`) or R runs of one config in
    lockstep, parameters stacked along a leading run axis
    (:class:`dplab.training.stacked.StackedRuns`)."""

    settings: RunSettings
    params: dict[str, torch.Tensor]
    b: int
    device: torch.device
    stacked: bool
    optimizer_state: dict  # the optimizer's moments by parameter name (empty for plain SGD)

    def batches(self, first: int, last: int) -> Iterator[tuple[int, object]]:
        """(step, its batch) for steps ``first``..``last``, drawn lazily: a step's noise is drawn
        after its batch."""

    def noise(self, step: int) -> dict[str, torch.Tensor] | None:
        """The step's noise on the clipped sum (None: non-private)."""

    def gradients(self, step: int, batch) -> tuple[ClippedGrads, object]:
        """The batch's clipped sum at the current parameters, and m of the update
        (:func:`dplab.training.step.denominator`)."""


@dataclass
class Step:
    """What :func:`steps` yields after each step."""

    step: int
    grads: ClippedGrads  # the step's clipped sum, its per-example norms and summed loss
    #: where the projection moved the parameters (per run when stacked); None without one
    moved: torch.Tensor | None


def steps(
    runs: Runs,
    first: int,
    last: int,
    sync: Callable[[int], bool] = lambda step: True,
    graph: GraphedStep | None = None,
) -> Iterator[Step]:
    """The one step loop of every training run (module docstring): for steps ``first``..``last``,
    the batch, the noise, the clipped sum, :func:`dplab.training.step.apply` (update, projection);
    yields each step taken.  ``graph``: the same step captured as a CUDA graph
    (:mod:`dplab.training.graphed`), replayed for every batch that fits it.  The NaN/inf guard
    (losses and parameters) accumulates on the device and is read at the steps where ``sync(step)``
    holds (every step by default), so a run on an accelerator waits for the device only there;
    :class:`~dplab.errors.Diverged` names the step, or the steps since the last read."""
    s = runs.settings
    finite, checked = torch.ones((), dtype=torch.bool, device=runs.device), first - 1
    for step, batch in runs.batches(first, last):
        if graph is not None and graph.fits(batch):
            grads, moved = graph(batch)
        else:
            noise = runs.noise(step)
            grads, denom = runs.gradients(step, batch)
            moved = apply(
                runs.params,
                grads.grad_sum,
                noise,
                lr=s.optimizer.lr(s.lr, step, s.steps),
                denom=denom,
                b=runs.b,
                regularization=s.shrink,
                diameter=s.diameter,
                stacked=runs.stacked,
                optimizer=s.optimizer,
                state=runs.optimizer_state,
                step=step,
            )
        finite = (
            finite
            & torch.isfinite(grads.loss_sum).all()
            & torch.stack([torch.isfinite(p).all() for p in runs.params.values()]).all()
        )
        if sync(step):
            if not bool(finite):
                where = (
                    f"at step {step}"
                    if checked == step - 1
                    else f"between steps {checked + 1} and {step}"
                )
                raise Diverged(where, s.lr)
            checked = step
        yield Step(step, grads, moved)


@torch.no_grad()
def evaluate(
    model: nn.Module, params: dict, x: torch.Tensor, y: torch.Tensor, chunk: int = 2048
) -> tuple[float, float]:
    """Mean cross-entropy and accuracy on (x, y), the model in eval mode (then back)."""
    loss, correct, training = 0.0, 0, model.training
    model.eval()
    try:
        for start in range(0, len(x), chunk):
            logits = torch.func.functional_call(model, params, (x[start : start + chunk],))
            target = y[start : start + chunk]
            loss += float(nn.functional.cross_entropy(logits, target, reduction="sum"))
            correct += int((logits.argmax(1) == target).sum())
    finally:
        model.train(training)
    return loss / len(x), correct / len(x)


def train(
    settings: RunSettings,
    data: Dataset,
    out: str | Path,
    *,
    noise_source: NoiseSource | None = None,
    hook: Callable[[int], None] | None = None,
    factorization=None,
    cuda_graph: bool = True,
    start: dict[str, torch.Tensor] | None = None,
    keep_record: bool = False,
    keep_final: bool = False,
) -> RunSummary:
    """Run the resolved run ``settings`` (:meth:`RunSettings.of`) on ``data``; write
    ``out``/model.pt (final parameters, the release), metrics.csv and summary.json (last, so its
    presence means the run completed); return the summary.

    ``noise_source`` replaces the i.i.d. Gaussian noise (e.g. a correlated source); ``hook(step)``
    is called after every completed step (tests use it to simulate a crash); ``factorization``
    (dp_mf only) is a cached :class:`~dplab.mf.factorizations.Factorization` of the run;
    ``cuda_graph``: on a CUDA device, replay the step as a CUDA graph where
    :func:`dplab.training.graphed.refusal` allows (the summary's ``environment.cuda_graph`` says
    whether it did, and why not); ``start``: parameters to begin from instead of W₀ (a later
    phase, :mod:`dplab.training.phased`); ``keep_record``: write the run's fingerprint beside its
    results, and return the summary of ``out`` without training where ``out`` already holds this
    run, completed (:func:`dplab.training.checkpoint.completed`; a phase); ``keep_final``: keep
    the final state as ``out``/checkpoint.pt rather than discard it, so that a rerun writes the
    results from it without training (a job of several runs, whose failure makes Snakemake delete
    every run's results: ``dplab train`` discards it once all its runs are done).
    """
    settings.check_record()
    out = Path(out)
    run = _setup(settings, data, noise_source, factorization, cuda_graph, start)
    if keep_record and checkpoint.completed(out, run.context.fingerprint):
        return RunSummary.read(out / "summary.json")
    progress = _resume(run, out)
    _step_loop(run, out, progress, hook)
    return _write(run, out, keep_record, keep_final)


@dataclass(frozen=True, kw_only=True)
class _Context:
    """What a run fixes before its first step (built by :func:`_setup`; the sampler, noise source
    and generators are fixed objects whose own state the steps advance)."""

    settings: RunSettings
    info: dict  # the dataset's info.json
    method: Method
    device: torch.device
    model: nn.Module
    n: int
    b: int
    dimension: int
    grid: list[int]  # the logged steps (:func:`log_grid`)
    sampler: Sampler
    claim: Plan
    noise_source: NoiseSource
    loss: Callable
    generator: torch.Generator
    noise_generator: NoiseGenerator
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    env: dict
    fingerprint: str
    #: individual_budget: RDP at the filter's order of one step at each level
    level_rdp: torch.Tensor | None = None
    #: the data's validation split (x, y) on the device, if it has one
    validation: tuple[torch.Tensor, torch.Tensor] | None = None
    #: how a record meets the noise (:mod:`dplab.training.noise_floor`); None: non-private
    exposure: noise_floor.Exposure | None = None


@dataclass(kw_only=True)
class _State:
    """What a run's steps change (what a checkpoint saves, with the generators', sampler's and
    noise source's states)."""

    params: dict[str, torch.Tensor]
    step: int = 0
    optimizer_state: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    norms: list[tuple[int, float]] = field(default_factory=list)
    #: individual_epsilon: (n, LEVELS + 1) steps per record and sensitivity level
    counts: torch.Tensor | None = None


@dataclass(frozen=True)
class _Run:
    """One run as :func:`steps` steps it (:class:`Runs`): its context and its state."""

    context: _Context
    state: _State

    @property
    def settings(self) -> RunSettings:
        return self.context.settings

    @property
    def params(self) -> dict[str, torch.Tensor]:
        return self.state.params

    @property
    def b(self) -> int:
        return self.context.b

    @property
    def device(self) -> torch.device:
        return self.context.device

    @property
    def optimizer_state(self) -> dict:
        return self.state.optimizer_state

    stacked = False  # one run (:class:`Runs`)

    def batches(self, first: int, last: int) -> Iterator[tuple[int, torch.Tensor]]:
        """(step, the batch's indices on the device): :func:`batches`, drawn ahead."""
        c = self.context
        return batches(
            c.sampler,
            c.generator,
            c.device,
            first,
            last,
            BATCH_BLOCK,
            c.settings.checkpoint_every,
        )

    def noise(self, step: int) -> dict[str, torch.Tensor] | None:
        c = self.context
        return (
            c.noise_source.sample(step, self.params, c.noise_generator)
            if c.method.private
            else None
        )

    def gradients(self, step: int, idx: torch.Tensor) -> tuple[ClippedGrads, object]:
        """The clipped sum of the batch (ghost clipping where it applies) and m; with
        ``individual_epsilon`` the records' levels are counted first (:func:`_count_levels`)."""
        c = self.context
        if self.state.counts is not None:
            idx = _count_levels(self, idx)
        if c.settings.sampling == Sampling.FULL_BATCH and len(idx) == c.n:
            x, y = c.x_train, c.y_train  # every example in order: no copy of the data each step
        else:
            x, y = c.x_train[idx], c.y_train[idx]
        grads = clipped_grad_sum(c.loss, self.params, x, y, c.settings.clip)
        return grads, denominator(c.settings.normalize, c.b, len(idx))


def _trajectory_claim(exposure: noise_floor.Exposure | None, claim: Plan) -> bool:
    """Whether a private run claims a bound on its trajectory, which the float noise's δ floor
    (:mod:`dplab.training.noise_floor`) bounds from below."""
    return exposure is not None and "trajectory" in claim.release.values()


def _setup(
    settings: RunSettings,
    data: Dataset,
    noise_source: NoiseSource | None,
    factorization,
    cuda_graph: bool = True,
    start: dict[str, torch.Tensor] | None = None,
) -> _Run:
    """Resolve the device, build the model (:func:`dplab.training.start.initial`), the method's
    sampler, privacy plan (σ and ε fixed before training: a refusal writes nothing) and noise
    source (:meth:`dplab.training.methods.base.Method.mechanism`), W₀ (or ``start``) projected,
    the generators and the data on the device."""
    method = METHODS[settings.method]
    device = resolve_device(settings.device)
    deterministic(device)
    n = len(data.y_train)
    info = data.info
    first = initial(settings, n, info["input_shape"], info["classes"], settings.seed, device)
    params = first.params
    dimension = sum(p.numel() for p in params.values())
    grid = log_grid(settings.steps, settings.log_every)
    mechanism = method.mechanism(settings, n, dimension, info, grid, data.x_train, factorization)
    if _trajectory_claim(mechanism.exposure, mechanism.plan):  # a phase claims nothing
        noise_floor.check([mechanism.exposure], settings.delta, settings.noise_rng, device.type)
    if start is not None:  # a later phase: where the one before ended
        params = {k: v.detach().clone().to(device) for k, v in start.items()}
    project(params, settings.diameter)  # W₀ ∈ W (001 eq. 1)

    generator, noise_generator = streams(device, settings.seed, settings.noise_rng)
    env = environment(device)
    noise = mechanism.noise if noise_source is None else noise_source
    if device.type == "cuda":
        individual_steps = settings.individual_epsilon or settings.individual_budget is not None
        why = graphed.refusal(
            settings, device, noise if method.private else None, individual=individual_steps
        )
        env["cuda_graph"] = (
            "on" if cuda_graph and why is None else f"off: {why or '--cuda-graph off'}"
        )
    level_rdp = None
    if settings.individual_budget is not None:
        level_rdp = torch.as_tensor(
            individual.order_rdp(mechanism.plan.setting, settings.individual_order), device=device
        )
        budget = individual.filter_budget(
            settings.individual_budget, settings.individual_order, settings.delta
        )
        if level_rdp[individual.LEVELS] > budget:
            log.warning(
                "individual_budget: B = %.6g of RDP at order %g is below one step's at full "
                "sensitivity (%.6g): a record whose clipped gradient reaches the clip norm never "
                "takes a step (summary.json: individual_privacy.filter)",
                budget,
                settings.individual_order,
                float(level_rdp[individual.LEVELS]),
            )
    context = _Context(
        settings=settings,
        info=info,
        method=method,
        device=device,
        model=first.model,
        n=n,
        b=first.b,
        dimension=dimension,
        grid=grid,
        sampler=mechanism.sampler,
        claim=mechanism.plan,
        exposure=mechanism.exposure,
        noise_source=noise,
        loss=first.loss,
        generator=generator,
        noise_generator=noise_generator,
        x_train=data.x_train.to(device),
        y_train=data.y_train.to(device),
        x_test=data.x_test.to(device),
        y_test=data.y_test.to(device),
        env=env,
        fingerprint=checkpoint.fingerprint(
            dict(settings.record), info, data.digest, env, first.code, start
        ),
        level_rdp=level_rdp,
        validation=None
        if data.x_validation is None
        else (data.x_validation.to(device), data.y_validation.to(device)),
    )
    counts = None
    if settings.individual_epsilon:
        counts = torch.zeros((n, individual.LEVELS + 1), dtype=torch.int64, device=device)
    return _Run(context, _State(params=params, counts=counts))


def _resume(run: _Run, out: Path) -> Progress:
    """Continue from ``out``'s last whole checkpoint of this run, data and environment (step,
    metrics, parameters, generator, sampler and noise states), if any; the progress display."""
    c, st = run.context, run.state
    state = checkpoint.resume(out, c.fingerprint, c.env, c.settings.steps)
    if state is not None:
        st.step, st.rows, st.norms = state["step"], state["rows"], state["norms"]
        if st.counts is not None:
            st.counts = state["counts"].to(c.device)
        st.params = {k: v.to(c.device) for k, v in state["params"].items()}
        c.generator.set_state(state["generator"])
        c.noise_generator.set_state(state["noise_generator"])
        c.sampler.load_state_dict(state["sampler"])
        c.noise_source.load_state_dict(state["noise"])
        st.optimizer_state = {
            k: {name: t.to(c.device) for name, t in moments.items()}
            for k, moments in state.get("optimizer", {}).items()
        }
    progress = Progress(f"train {c.settings.label}", c.settings.steps, st.step)
    if st.rows:
        progress.update(st.step, _status(run, st.rows[-1]))
    return progress


def _step_loop(
    run: _Run, out: Path, progress: Progress, hook: Callable[[int], None] | None
) -> None:
    """Steps ``state.step + 1``..T of the one loop (:func:`steps`), the NaN/inf guard read where
    the run synchronizes anyway (on the CPU every step), the logged rows (:func:`_log`),
    checkpoints (:func:`_save`) and the progress display."""
    c, st = run.context, run.state
    s = c.settings
    logged = set(c.grid)

    def due(step: int) -> bool:
        return bool(s.checkpoint_every) and step % s.checkpoint_every == 0 and step < s.steps

    def sync(step: int) -> bool:
        return c.device.type in GUARD_EVERY_STEP or step in logged or due(step)

    graph = _graph(run) if c.env.get("cuda_graph") == "on" else None
    for done in steps(run, st.step + 1, s.steps, sync=sync, graph=graph):
        st.step = done.step
        status = _log(run, done.grads) if done.step in logged else None
        if due(done.step):
            _save(run, out)
        progress.update(done.step, status)
        if hook is not None:
            hook(done.step)
    progress.close()


def _graph(run: _Run) -> GraphedStep:
    """The run's step as a CUDA graph (:mod:`dplab.training.graphed`), captured at its first
    step."""
    c = run.context
    s = c.settings
    return GraphedStep(
        c.loss,
        run.params,
        c.x_train,
        c.y_train,
        s.clip,
        c.noise_source if c.method.private else None,
        c.noise_generator,
        s.optimizer.lr(s.lr, 1, s.steps),
        c.b,
        s.shrink,
        s.diameter,
        capacity=graphed.capacity(c.b, c.n),
    )


def _count_levels(run: _Run, idx: torch.Tensor) -> torch.Tensor:
    """Add one step to every record's count at its sensitivity level at the current iterate
    (:func:`dplab.accounting.individual.levels`), sampled or not: the individual accounting needs
    each record's clipped norm at every step (:mod:`dplab.accounting.individual`).  With the
    Rényi filter (``individual_budget``), a record whose RDP spent plus this step's would pass the
    budget is left out of the step (level 0); returns the batch ``idx`` without those records."""
    c, st = run.context, run.state
    s = c.settings
    clip = s.clip
    levels = torch.cat(
        [
            individual.levels(
                clipped_grad_sum(
                    c.loss,
                    st.params,
                    c.x_train[start : start + NORM_CHUNK],
                    c.y_train[start : start + NORM_CHUNK],
                    clip,
                    summed=False,
                ).norms,
                clip,
            )
            for start in range(0, c.n, NORM_CHUNK)
        ]
    )
    if c.level_rdp is not None:
        spent = st.counts.to(c.level_rdp.dtype) @ c.level_rdp
        budget = individual.filter_budget(s.individual_budget, s.individual_order, s.delta)
        fits = spent + c.level_rdp[levels] <= budget
        levels = torch.where(fits, levels, 0)
        idx = idx[fits[idx]]
    st.counts[torch.arange(c.n, device=c.device), levels] += 1
    return idx


def _log(run: _Run, grads) -> str:
    """The metrics row of the step just taken (losses and accuracy on the train and test data;
    with ``record_grad_norms`` the batch's unclipped norms); returns its progress status."""
    c, st = run.context, run.state
    step = st.step
    train_loss, _ = evaluate(c.model, st.params, c.x_train, c.y_train)
    test_loss, test_acc = evaluate(c.model, st.params, c.x_test, c.y_test)
    if not (math.isfinite(train_loss) and math.isfinite(test_loss)):
        raise Diverged(f"at step {step}", c.settings.lr)
    st.rows.append(
        {
            "step": step,
            "epoch": c.sampler.epoch(step),
            "train_loss": train_loss,
            "test_loss": test_loss,
            "test_accuracy": test_acc,
        }
    )
    if c.settings.record_grad_norms:
        st.norms += [(step, v) for v in grads.norms.cpu().tolist()]
    return _status(run, st.rows[-1])


def _save(run: _Run, out: Path) -> None:
    """A checkpoint after the step just taken (:mod:`dplab.training.checkpoint`)."""
    c, st = run.context, run.state
    state = {
        "fingerprint": c.fingerprint,
        "environment": c.env,
        "step": st.step,
        "rows": st.rows,
        "norms": st.norms,
        "generator": c.generator.get_state(),
        "params": {k: v.cpu() for k, v in st.params.items()},
        "sampler": c.sampler.state_dict(),
        "noise": c.noise_source.state_dict(),
    }
    if st.counts is not None:
        state["counts"] = st.counts.cpu()
    if st.optimizer_state:
        state["optimizer"] = {
            k: {name: t.cpu() for name, t in moments.items()}
            for k, moments in st.optimizer_state.items()
        }
    state["noise_generator"] = c.noise_generator.get_state()
    checkpoint.save(out, state)


def _write(run: _Run, out: Path, keep_record: bool, keep_final: bool) -> RunSummary:
    """model.pt, metrics.csv, grad_norms.csv and individual_epsilon.csv (header only without
    ``record_grad_norms``, ``individual_epsilon``), metrics.json (``keep_record``: and
    run.fingerprint) and summary.json, landing together (:func:`dplab.io.atomic_writes`;
    summary.json renamed last: its presence means the run completed); the checkpoint is
    discarded (``keep_final``: replaced by one of the final state, first); returns the summary."""
    c, st = run.context, run.state
    summary = _summary(run)
    final_params = {k: v.detach().cpu() for k, v in st.params.items()}
    files = {
        out / "model.pt": lambda tmp: tmp.write_bytes(checkpoint.torch_bytes(final_params)),
        out / "metrics.csv": text_file(_metrics_csv(st.rows, c.claim, c.grid)),
    }
    # every run folder has the same files (one Snakemake rule trains them all): header-only
    # where not recorded
    files[out / "grad_norms.csv"] = text_file(_grad_norms_csv(st.norms))  # no rows: not recorded
    files[out / "individual_epsilon.csv"] = text_file(",".join(INDIVIDUAL_COLUMNS) + "\n")
    if st.counts is not None:
        eps = individual.epsilons(c.claim.setting, st.counts.cpu().numpy(), c.settings.delta)
        files[out / "individual_epsilon.csv"] = text_file(_individual_csv(eps, c.y_train.cpu()))
        summary = dataclasses.replace(summary, individual_privacy=_individual_summary(run, eps))
    if c.validation is not None:
        loss, accuracy = evaluate(c.model, st.params, *c.validation)
        summary = dataclasses.replace(
            summary, validation={"loss": loss, "accuracy": accuracy, "size": len(c.validation[1])}
        )
    files[out / "metrics.json"] = text_file(json_text(metrics(summary)))
    if keep_record:
        files[out / checkpoint.COMPLETED] = text_file(c.fingerprint + "\n")
    files[out / "summary.json"] = text_file(summary.text())
    if keep_final:
        _save(run, out)
    atomic_writes(files)
    if not keep_final:
        checkpoint.discard(out)
    return summary


def _status(run: _Run, row: dict) -> str:
    """The progress status after logged step ``row``: its losses and accuracy, and ε there of
    every accountant with δ, neighbouring relation and sampling (lower bounds and comparisons
    after the claims, labelled)."""
    c = run.context
    s, claim = c.settings, c.claim
    text = (
        f"train_loss={row['train_loss']:.4g} test_loss={row['test_loss']:.4g} "
        f"test_accuracy={row['test_accuracy']:.4f}"
    )
    if not c.method.private:
        return text + " | non-private: no ε"
    pos = c.grid.index(row["step"])
    eps = ", ".join(f"{name}={float(curve[pos]):.4g}" for name, curve in claim.curves.items())
    if not eps and s.accountants == ():  # a phase of a run in phases: the run composes them
        eps = "none asked for (accountants: [])"
    elif not eps:
        eps = "none (every upper bound asked for is excluded: summary.json says why)"
    eps += "".join(
        f"; {labelled(name, float(curve[pos]))}" for name, curve in claim.references.items()
    )
    return (
        f"{text} | ε at step {row['step']} (δ={s.delta:g}, {s.neighbouring}, "
        f"{s.sampling} sampling): {eps}"
    )


def _metrics_csv(rows: list[dict], claim: Plan, grid: list[int]) -> str:
    """One row per logged step; an ``epsilon_<name>`` column per claim, then
    ``epsilon_lower_<name>`` and ``epsilon_comparison_<name>`` per reference value
    (:func:`dplab.accounting.eligibility.column`)."""
    curves = {**claim.curves, **claim.references}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*METRIC_COLUMNS, *(column(name) for name in curves)])
    for row in rows:
        pos = grid.index(row["step"])
        writer.writerow(
            [
                *(repr(row[c]) for c in METRIC_COLUMNS),
                *(repr(float(v[pos])) for v in curves.values()),
            ]
        )
    return buf.getvalue()


def _grad_norms_csv(norms: list[tuple[int, float]]) -> str:
    """The unclipped per-example gradient norms at the logged steps (the batch the step used)."""
    lines = [",".join(GRAD_NORM_COLUMNS)] + [f"{step},{norm!r}" for step, norm in norms]
    return "\n".join(lines) + "\n"


def _individual_csv(eps, labels: torch.Tensor) -> str:
    """One row per training record: its index in the training set, its class, its individual ε."""
    lines = [",".join(INDIVIDUAL_COLUMNS)] + [
        f"{i},{c},{e!r}" for i, (c, e) in enumerate(zip(labels.tolist(), eps.tolist()))
    ]
    return "\n".join(lines) + "\n"


@torch.no_grad()
def _individual_summary(run: _Run, eps) -> dict:
    """summary.json's ``individual_privacy``: how the individual ε was computed, the worst case it
    never exceeds, and the test accuracy per class (beside the per-class ε)."""
    c = run.context
    s = c.settings
    logits = torch.func.functional_call(c.model, run.state.params, (c.x_test,))
    hit = (logits.argmax(1) == c.y_test).double()
    per_class = {int(k): float(hit[c.y_test == k].mean()) for k in torch.unique(c.y_test)}
    out = {
        "method": individual.METHOD,
        "neighbouring": individual.NEIGHBOURING,
        "worst_case_epsilon": individual.worst_case(c.claim.setting, s.delta),
        "max_individual_epsilon": float(eps.max()),
        "median_individual_epsilon": float(np.median(eps)),
        "test_accuracy_per_class": per_class,
        "note": "data-dependent: read from this run's trajectory and each record's own gradients; "
        "not a release guarantee (no filter stopped any record at a budget)",
    }
    if c.level_rdp is not None:
        out["filter"] = {
            "epsilon_budget": s.individual_budget,
            "order": s.individual_order,
            "rdp_budget": individual.filter_budget(
                s.individual_budget, s.individual_order, s.delta
            ),
            "full_step_rdp": float(c.level_rdp[individual.LEVELS]),
            "records_left_out_of_every_step": int((run.state.counts[:, 0] == run.state.step).sum()),
        }
        out["note"] = (
            f"Rényi filter (Feldman & Zrnic 2021): every record's RDP at order "
            f"{s.individual_order} stays within the budget, so each record's ε at δ is at "
            f"most {s.individual_budget}; the individual ε below it is data-dependent"
        )
    return out


def _summary(run: _Run) -> RunSummary:
    """summary.json of the run just finished (:class:`~dplab.training.summary.RunSummary`)."""
    c = run.context
    s, claim, method, info, env = c.settings, c.claim, c.method, c.info, c.env
    final = run.state.rows[-1]
    references = {
        kind: {k: float(v[-1]) for k, v in claim.references.items() if bound(k) == kind}
        for kind in REFERENCE_BOUNDS
    }  # beside the claims: never the run's ε
    return RunSummary(
        dplab_version=__version__,
        run=dict(s.record),
        method_source=method.source,
        dataset=DatasetInfo(**{f.name: info[f.name] for f in dataclasses.fields(DatasetInfo)}),
        device=env["device"],
        # with the config and data, what the bytes depend on (docs/training.md, Determinism)
        environment=env,
        dimension=c.dimension,
        final=Final(**{k: final[k] for k in METRIC_COLUMNS}),
        setting=claim.setting.as_dict() if claim.setting is not None else None,
        noise_multiplier=claim.noise_multiplier,
        noise_multiplier_source=claim.sigma_source,
        noise_std_on_sum=claim.noise_multiplier * s.clip if claim.noise_multiplier else None,
        delta=s.delta if method.private else None,
        neighbouring=s.neighbouring,
        sampling=s.sampling,
        batch_size=c.b,
        dataset_size=c.n,
        loss_constants_note=claim.constants_note,
        epsilon={k: float(v[-1]) for k, v in claim.curves.items()},  # claims: upper bounds only
        epsilon_lower=references["lower"],
        epsilon_comparison=references["comparison"],
        epsilon_bound={k: bound(k) for k in [*claim.curves, *claim.references]},
        risk=risk_reading(claim),  # an attacker's TPR at fixed FPR and advantage (docs/risk.md)
        epsilon_covers={
            k: ("every iterate" if r == "trajectory" else "the final parameters only")
            for k, r in claim.release.items()
        },
        excluded_accountants=claim.excluded,
        # with "setting": what dplab.accounting.eligibility.refusal decides from
        update=claim.update.as_dict(),
        details=claim.details,
        note="epsilon covers the model parameters; the logged losses/accuracies are diagnostics "
        "computed on the data and are not privatised"
        + (
            noise_floor.note([c.exposure], s.delta, s.noise_rng, c.device.type)
            if _trajectory_claim(c.exposure, claim)
            else ""
        )
        + _fitted_note(info),
    )


def _fitted_note(info: dict) -> str:
    """Where the data's encoding was fitted on the training records (a CSV table's means, stds
    or categories: info.json's ``fitted``), that it lies outside ε ("" elsewhere)."""
    if not info.get("fitted"):
        return ""
    return (
        f"; the encoding of {', '.join(info['fitted'])} was fitted on the training split, outside"
        " ε (its values, in the data's info.json, shape every record's features;"
        " docs/own_experiment.md, What ε covers)"
    )
