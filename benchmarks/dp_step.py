"""Time and memory of one training step: non-private vs the engine's DP-SGD step vs Opacus 1.6.

    PYTHONPATH=src python benchmarks/dp_step.py [--threads 2] [--batch 256] [--memory-batch 1024]
        [--consecutive 1]

Prints one JSON object per model (logistic regression 784→10, the MLP 784-128-10 of seed 004,
the CNN of ``models.build`` with 16 channels on 1×28×28, Tramèr & Boneh's tanh CNN, a wide MLP
784-3072-2560-10 with ~10.3M parameters):

- ``median_ms``: median wall time of one step of each method, the methods measured interleaved
  (round-robin, one step each per round) in this process, after warm-up steps; with
  ``--consecutive K`` each method takes K steps in a row per round, the methods in a shuffled
  order, and only steps that follow a step of the same method count: the steady state of a
  training run, where a step never follows another method's;
- ``ratio``: each DP step's median / the non-private step's median;
- ``peak_mb`` (batch ``--memory-batch``, each method in its own subprocess, after one step that
  creates lazy state): the peak of the memory held by tensors during one step, resident ones
  (parameters, optimizer state, data) included: on CUDA ``torch.cuda.max_memory_allocated``, on
  CPU the maximum of torch.profiler's memory timeline (``export_memory_timeline``; allocator
  caches, library buffers and Python objects are not counted, as on CUDA).  Opacus with hooks
  is not probed where its per-sample gradients alone would take over half the memory.

``--count-ops`` adds ``ops_per_step``: the ATen operations one step of each method dispatches
(counted below autograd by a ``TorchDispatchMode``; CPU only), each a few µs of per-step overhead
on a CPU.

Every step runs with malloc keeping freed memory, as in ``dplab train``
(:func:`dplab.startup.keep_freed_memory`; ``--default-malloc``: glibc's own thresholds, under which
a convolution model's steps fault in fresh pages for their large temporaries every step).

Each row also gives ``vs_opacus`` (the engine's median over each Opacus mode's), the device's
name, torch's version and the date.

Methods: ``non_private`` (forward, ``backward()``, in-place SGD update); ``non_private_graph``
(CUDA only: the same step captured as one CUDA graph); ``engine_graph`` (CUDA only: the engine's DP
step captured as one CUDA graph, :mod:`dplab.training.graphed`, as ``dplab train`` replays it on a
GPU); ``engine_dp`` (what one step
of ``dplab train`` does in :func:`dplab.training.loop.steps`: the clipped sum
(:func:`dplab.training.per_example.clipped_grad_sum`), i.i.d. Gaussian noise from the run's noise
generator (:func:`dplab.training.loop.streams`: on the device itself on a GPU), the update
(:func:`dplab.training.step.apply`));
``engine_portable`` (the same with ``noise_rng: portable``: the noise from :mod:`dplab.philox`);
``opacus`` (``PrivacyEngine.make_private`` with default hooks: per-sample gradients, clip, noise,
``optimizer.step()``); ``opacus_ghost`` (``grad_sample_mode="ghost"``, Opacus's fast gradient
clipping with a double backward); ``noise_draw`` (not a step: the DP step's noise draw alone,
so that its ratio is the share of the non-private step that the noise adds).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from dplab.startup import keep_freed_memory
from dplab.training import loop, models
from dplab.training.noise import GaussianNoise
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings
from dplab.training.graphed import GraphedStep, capture
from dplab.training.per_example import clipped_grad_sum
from dplab.training.step import apply

MODELS = ("logreg", "mlp004", "cnn", "tanh_cnn", "wide_mlp")
METHODS = (
    "non_private",
    "engine_dp",
    "engine_portable",
    "opacus",
    "opacus_ghost",
    "engine_graph",
    "non_private_graph",
    "noise_draw",
)
CUDA_ONLY = ("engine_graph", "non_private_graph")
SIGMA, CLIP, LR = 1.0, 1.0, 0.05


def _model(**keys) -> nn.Module:
    """The model of a run with these model keys, as ``dplab train`` builds it."""
    return models.build(RunSettings.of(resolve_run({"method": "sgd", **keys})), [1, 28, 28], 10)


def build_model(name: str) -> nn.Module:
    if name == "logreg":
        model = _model(model="logreg")
        for p in model.parameters():  # start away from 0 so per-example gradients differ
            nn.init.normal_(p, std=0.01)
        return model
    if name == "mlp004":
        return _model(model="mlp", hidden=128)
    if name == "cnn":
        return _model(model="cnn", channels=16)
    if name == "tanh_cnn":
        return _model(model="tanh_cnn")
    if name == "wide_mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 3072),
            nn.ReLU(),
            nn.Linear(3072, 2560),
            nn.ReLU(),
            nn.Linear(2560, 10),
        )
    raise KeyError(name)


class Steps:
    """One model, one copy per method (same initial weights), and a step function per method."""

    def __init__(self, name: str, methods, batch: int, device: torch.device, seed: int = 0):
        torch.manual_seed(seed)
        base = build_model(name).to(device)
        self.x = torch.rand(batch, 1, 28, 28, device=device)
        self.y = torch.randint(0, 10, (batch,), device=device)
        self.batch = batch
        self.fns, self.resident, self.errors = {}, {}, {}
        for method in methods:
            model = copy.deepcopy(base)
            try:
                self.fns[method] = getattr(self, f"_{method}")(model)
                if device.type == "cuda":
                    self.fns[
                        method
                    ]()  # a step that fails (e.g. a graph's capture) is reported, not timed
            except RuntimeError as error:
                self.errors[method] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
                self.fns.pop(method, None)

    def _non_private(self, model):
        opt = torch.optim.SGD(model.parameters(), lr=LR)

        def step():
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(self.x), self.y).backward()
            opt.step()

        return step

    def _engine_dp(self, model, noise_rng="device"):
        params = {k: v.detach().clone() for k, v in model.named_parameters()}
        loss = models.example_loss(model, 0.0)
        noise_source = GaussianNoise(SIGMA * CLIP)
        generator = loop.streams(self.x.device, 0, noise_rng)[1]
        b = self.batch

        def step():  # the step loop.train takes for dp_sgd (normalize: expected)
            noise = noise_source.sample(0, params, generator)
            apply(
                params,
                clipped_grad_sum(loss, params, self.x, self.y, CLIP).grad_sum,
                noise,
                lr=LR,
                denom=b,
                b=b,
            )

        return step

    def _noise_draw(self, model):
        """The DP step's noise draw alone (``engine_dp``'s :class:`GaussianNoise` on the run's
        generator): a part of the DP step that no change of the clipped sum removes."""
        params = {k: v.detach() for k, v in model.named_parameters()}
        noise_source = GaussianNoise(SIGMA * CLIP)
        generator = loop.streams(self.x.device, 0)[1]
        return lambda: noise_source.sample(0, params, generator)

    def _engine_graph(self, model):
        """The engine's DP step captured as a CUDA graph (:mod:`dplab.training.graphed`), as
        ``dplab train`` replays it on a GPU: a fixed batch fills the padded buffers exactly."""
        params = {k: v.detach().clone() for k, v in model.named_parameters()}
        generator = loop.streams(self.x.device, 0)[1]
        step = GraphedStep(
            models.example_loss(model, 0.0),
            params,
            self.x,
            self.y,
            CLIP,
            GaussianNoise(SIGMA * CLIP),
            generator,
            LR,
            self.batch,
            0.0,
            None,
            capacity=self.batch,
        )
        idx = torch.arange(self.batch, device=self.x.device)
        return lambda: step(idx)

    def _non_private_graph(self, model):
        """The non-private step captured as a CUDA graph too (PyTorch's whole-network capture)."""
        opt = torch.optim.SGD(model.parameters(), lr=LR)

        def body():
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(self.x), self.y).backward()
            opt.step()

        graph, _ = capture(lambda: [body() for _ in range(3)], body)
        return graph.replay

    def _engine_portable(self, model):
        return self._engine_dp(model, noise_rng="portable")

    def _opacus(self, model, mode="hooks"):
        from opacus import PrivacyEngine

        data = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(self.x, self.y), batch_size=self.batch
        )
        engine = PrivacyEngine(accountant="rdp")
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kwargs = dict(
                module=model,
                optimizer=opt,
                data_loader=data,
                noise_multiplier=SIGMA,
                max_grad_norm=CLIP,
                poisson_sampling=False,
                grad_sample_mode=mode,
            )
            if mode == "ghost":
                gsm, opt, criterion, _ = engine.make_private(
                    criterion=nn.CrossEntropyLoss(), **kwargs
                )
            else:
                gsm, opt, _ = engine.make_private(**kwargs)
                criterion = nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            criterion(gsm(self.x), self.y).backward()
            opt.step()

        return step

    def _opacus_ghost(self, model):
        return self._opacus(model, mode="ghost")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


class _OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def ops_per_step(name, methods, batch) -> dict:
    """The ATen operations one step of each method dispatches, on the CPU (module docstring)."""
    bench = Steps(name, [m for m in methods if m not in CUDA_ONLY], batch, torch.device("cpu"))
    counts = {}
    for m, step in bench.fns.items():
        step()  # lazy state made
        with _OpCounter() as counter:
            step()
        counts[m] = counter.count
    return counts


def time_steps(name, methods, batch, device, rounds, warmup, consecutive=1) -> dict:
    bench = Steps(name, methods, batch, device)
    methods = [m for m in methods if m in bench.fns]
    times = {m: [] for m in methods}
    order = random.Random(0)
    for r in range(warmup + rounds):
        if consecutive > 1:
            order.shuffle(methods)
        for m in methods:  # interleaved: one step (or one block of steps) of each method a round
            for k in range(consecutive):
                sync(device)
                t0 = time.perf_counter()
                bench.fns[m]()
                sync(device)
                if r >= warmup and (k > 0 or consecutive == 1):
                    times[m].append(time.perf_counter() - t0)
    return {m: 1e3 * statistics.median(v) for m, v in times.items()}, bench.errors


def probe(name, method, batch, device) -> dict:
    """Peak tensor memory of ``method``'s step (in a fresh subprocess, see the module docstring)."""
    bench = Steps(name, [method], batch, device)
    step = bench.fns[method]
    step()  # lazily created state (grad buffers, optimizer state) counts as resident
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        return {"peak_mb": torch.cuda.max_memory_allocated() / 2**20}
    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_memory_timeline(f"{tmp}/timeline.json", device="cpu")
        _, sizes = json.loads(Path(tmp, "timeline.json").read_text())
    return {"peak_mb": max(sum(s) for s in sizes) / 2**20}


def memory(name, method, batch, device, threads) -> dict:
    per_sample = batch * sum(p.numel() for p in build_model(name).parameters()) * 4
    available = (
        torch.cuda.mem_get_info()[1]
        if device.type == "cuda"
        else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    )
    if method == "opacus" and per_sample > available / 2:  # its per-sample gradients alone
        return {
            "peak_mb": float("nan"),
            "error": f"skipped: per-sample gradients need {per_sample / 2**30:.0f} GiB",
        }
    cmd = [
        sys.executable,
        __file__,
        "--probe",
        name,
        method,
        "--memory-batch",
        str(batch),
        "--device",
        device.type,
        "--threads",
        str(threads),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if (
        out.returncode != 0
    ):  # e.g. Opacus's per-sample gradients of a 10M-parameter model at batch 1024
        last = (out.stderr.strip().splitlines() or ["killed"])[-1]
        return {"peak_mb": float("nan"), "error": last[:200]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--memory-batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument(
        "--consecutive", type=int, default=1, help="steps of a method in a row per round"
    )
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--count-ops", action="store_true", help="ATen operations per step (CPU)")
    ap.add_argument(
        "--probe-jobs", type=int, default=1, help="memory probes run at once (GPU: several fit)"
    )
    ap.add_argument(
        "--default-malloc",
        action="store_true",
        help="leave malloc's thresholds as they are (dplab's commands keep freed memory)",
    )
    ap.add_argument("--probe", nargs=2, metavar=("MODEL", "METHOD"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.consecutive < 1:
        ap.error(f"--consecutive must be at least 1, got {args.consecutive}")
    if not args.default_malloc:
        keep_freed_memory()  # as in dplab train (dplab.startup): the steps of both kinds
    torch.set_num_threads(args.threads)
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    if args.probe:
        print(json.dumps(probe(*args.probe, args.memory_batch, device)))
        return
    methods = [
        "non_private",
        *[
            m
            for m in args.methods
            if m != "non_private" and (device.type == "cuda" or m not in CUDA_ONLY)
        ],
    ]
    for name in args.models:
        med, errors = time_steps(
            name, methods, args.batch, device, args.rounds, args.warmup, args.consecutive
        )
        n_params = sum(p.numel() for p in build_model(name).parameters())
        row = {
            "model": name,
            "parameters": n_params,
            "device": device.type,
            "device_name": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "date": datetime.date.today().isoformat(),
            "torch": torch.__version__,
            "threads": args.threads,
            "batch": args.batch,
            "rounds": args.rounds,
            "consecutive": args.consecutive,
            "median_ms": {m: round(v, 3) for m, v in med.items()},
            "ratio": {m: round(med[m] / med["non_private"], 3) for m in med if m != "non_private"},
            **({"errors": errors} if errors else {}),
        }
        if args.count_ops:
            row["ops_per_step"] = ops_per_step(name, methods, args.batch)
        if "engine_dp" in med:
            row["vs_opacus"] = {
                m: round(med["engine_dp"] / med[m], 3)
                for m in ("opacus", "opacus_ghost")
                if m in med
            }
        if not args.no_memory:
            with ThreadPoolExecutor(
                args.probe_jobs
            ) as pool:  # each probe its own process: peaks do not mix
                mem = dict(
                    zip(
                        methods,
                        pool.map(
                            lambda m: memory(name, m, args.memory_batch, device, args.threads),
                            methods,
                        ),
                    )
                )
            row["memory_batch"] = args.memory_batch
            row["peak_mb"] = {m: round(v["peak_mb"], 1) for m, v in mem.items()}
            row.update({f"memory_error_{m}": v["error"] for m, v in mem.items() if "error" in v})
            row["peak_ratio"] = {
                m: round(mem[m]["peak_mb"] / mem["non_private"]["peak_mb"], 3)
                for m in methods
                if m != "non_private"
            }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
