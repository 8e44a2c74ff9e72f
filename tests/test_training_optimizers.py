"""Optimizers and learning-rate schedules on the privatized gradient (docs/training.md,
"Optimizers"): each optimizer's step equals torch.optim's on the same gradient, one DP-Adam step
equals Opacus's DPOptimizer wrapping torch.optim.Adam on the same batch, clipping and noise, the
schedules their closed forms, a killed run resumes to the same bytes with the optimizer's
state, and a key the chosen optimizer does not read is refused."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from conftest import synthetic_data
from dplab.errors import DPLabError
from dplab.training import checkpoint, loop, models
from dplab.training.optimizers import OptimizerOptions
from dplab.training.per_example import clipped_grad_sum
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

TORCH = {  # our options -> (torch.optim class, its keyword arguments)
    "momentum": (
        OptimizerOptions("momentum", momentum=0.8, weight_decay=0.1),
        torch.optim.SGD,
        {"momentum": 0.8, "weight_decay": 0.1},
    ),
    "sgd+wd": (OptimizerOptions("sgd", weight_decay=0.1), torch.optim.SGD, {"weight_decay": 0.1}),
    "adam": (
        OptimizerOptions("adam", betas=(0.8, 0.9), eps=1e-6, weight_decay=0.05),
        torch.optim.Adam,
        {"betas": (0.8, 0.9), "eps": 1e-6, "weight_decay": 0.05},
    ),
    "adamw": (
        OptimizerOptions("adamw", weight_decay=0.3),
        torch.optim.AdamW,
        {"weight_decay": 0.3},
    ),
}


def _apply(params, grad_sum, noise, options, state, step, lr, b):
    from dplab.training.step import (
        apply,
    )  # the one update (only the loop imports it in the package)

    apply(params, grad_sum, noise, lr=lr, denom=b, b=b, optimizer=options, state=state, step=step)


@pytest.mark.parametrize("name", sorted(TORCH))
def test_each_optimizer_steps_as_torch_optim_on_the_privatized_gradient(name):
    options, cls, kwargs = TORCH[name]
    gen = torch.Generator().manual_seed(0)
    ours = {
        "w": torch.randn(4, 3, generator=gen, dtype=torch.float64),
        "b": torch.randn(3, generator=gen, dtype=torch.float64),
    }
    theirs = {k: nn.Parameter(v.clone()) for k, v in ours.items()}
    opt = cls(theirs.values(), lr=0.05, **kwargs)
    state: dict = {}
    for step in range(1, 5):
        grads = {
            k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in ours.items()
        }
        noise = {
            k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in ours.items()
        }
        _apply(ours, grads, noise, options, state, step, 0.05, 8)
        for k, p in theirs.items():
            p.grad = grads[k] / 8 + noise[k] / 8  # ĝ = g/b + Z/b
        opt.step()
        for k in ours:
            torch.testing.assert_close(ours[k], theirs[k].detach(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sigma", [0.0, 1.3])
def test_one_dp_adam_step_equals_opacus_dp_optimizer_wrapping_adam(sigma, monkeypatch):
    """Same batch, clip C and noise: σ = 0 in both, and the same injected noise tensor."""
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer, optimizer as opacus_optimizer

    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(5, 4), nn.LayerNorm(4), nn.Tanh(), nn.Linear(4, 3)).double()
    x, y, clip, b = torch.randn(6, 5, dtype=torch.float64), torch.randint(0, 3, (6,)), 0.5, 6
    params = {k: v.detach().clone() for k, v in net.named_parameters()}
    noise = {k: sigma * clip * torch.randn_like(v) for k, v in params.items()}
    grads = clipped_grad_sum(models.example_loss(copy.deepcopy(net), 0.0), params, x, y, clip)
    queue = list(noise.values())
    monkeypatch.setattr(
        opacus_optimizer, "_generate_noise", lambda std, reference, **kw: queue.pop(0)
    )
    peer = GradSampleModule(net)
    opt = DPOptimizer(
        torch.optim.Adam(peer.parameters(), lr=0.01),
        noise_multiplier=sigma,
        max_grad_norm=clip,
        expected_batch_size=b,
        loss_reduction="mean",
    )
    nn.functional.cross_entropy(peer(x), y).backward()
    opt.step()
    assert not queue or sigma == 0.0
    _apply(
        params, grads.grad_sum, noise if sigma else None, OptimizerOptions("adam"), {}, 1, 0.01, b
    )
    for k, p in net.named_parameters():
        torch.testing.assert_close(params[k], p.detach(), rtol=1e-9, atol=1e-12)


def test_schedules_follow_their_closed_forms():
    lr, steps = 0.4, 10
    cosine = OptimizerOptions(schedule="cosine")
    assert cosine.lr(lr, 1, steps) == lr and cosine.lr(lr, 6, steps) == pytest.approx(lr / 2)
    assert cosine.lr(lr, steps, steps) == pytest.approx(lr * (1 + math.cos(math.pi * 9 / 10)) / 2)
    step = OptimizerOptions(schedule="step", lr_step_size=3, lr_gamma=0.5)
    assert [step.lr(lr, t, steps) for t in (1, 3, 4, 7, 10)] == [0.4, 0.4, 0.2, 0.1, 0.05]
    warm = OptimizerOptions(schedule="warmup_cosine", warmup_steps=4)
    assert [warm.lr(lr, t, steps) for t in (1, 4)] == [0.1, 0.4]
    assert warm.lr(lr, 5, steps) == lr and warm.lr(lr, 8, steps) == pytest.approx(lr / 2)
    assert OptimizerOptions().lr(lr, 7, steps) == lr


def test_a_run_naming_no_optimizer_records_no_optimizer_key():
    cfg = resolve_run({"method": "dp_sgd", "noise_multiplier": 1.0})
    assert not {"optimizer", "lr_schedule", "betas", "momentum"} & set(cfg)
    assert RunSettings.of(cfg).optimizer.plain
    adam = resolve_run({"method": "dp_sgd", "noise_multiplier": 1.0, "optimizer": "adamw"})
    assert (adam["betas"], adam["eps"], adam["weight_decay"]) == ([0.9, 0.999], 1e-8, 0.01)


@pytest.mark.parametrize(
    "keys,key",
    [
        ({"betas": [0.9, 0.99]}, "betas"),
        ({"optimizer": "adam", "momentum": 0.9}, "momentum"),
        ({"optimizer": "momentum", "eps": 1e-6}, "eps"),
        ({"lr_gamma": 0.5}, "lr_gamma"),
        ({"lr_schedule": "step"}, "lr_step_size"),
        ({"lr_schedule": "warmup_cosine", "warmup_steps": 200}, "warmup_steps"),
    ],
)
def test_a_key_the_chosen_optimizer_or_schedule_does_not_read_is_refused(keys, key):
    with pytest.raises(DPLabError) as err:
        resolve_run({"method": "dp_sgd", "noise_multiplier": 1.0, "steps": 200, **keys})
    assert err.value.key == key


RESUME = {
    "method": "dp_sgd",
    "noise_multiplier": 1.0,
    "steps": 9,
    "batch_size": 16,
    "lr": 0.05,
    "log_every": 3,
    "checkpoint_every": 4,
    "device": "cpu",
    "accountants": ["rdp"],
    "dataset": "synthetic",
    "model": "mlp",
    "hidden": 8,
    "optimizer": "adam",
    "lr_schedule": "cosine",
}


def test_a_killed_adam_run_resumes_to_the_same_bytes(tmp_path):
    ds = synthetic_data(tmp_path / "data", 64, 16)
    cfg = resolve_run(RESUME)
    loop.train(RunSettings.of(cfg), ds, tmp_path / "whole")

    def crash(step):
        if step == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loop.train(RunSettings.of(cfg), ds, tmp_path / "killed", hook=crash)
    state = checkpoint.read(tmp_path / "killed" / "checkpoint.pt")
    assert state["step"] == 4 and set(state["optimizer"]["1.weight"]) == {"exp_avg", "exp_avg_sq"}
    loop.train(RunSettings.of(cfg), ds, tmp_path / "killed")
    for name in ("model.pt", "metrics.csv", "summary.json"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "killed" / name).read_bytes()


def test_hidden_state_accountants_refuse_another_optimizer_and_composition_does_not(tmp_path):
    """Hidden-state bounds analyse the plain SGD step; composition bounds only the released
    gradients, which any optimizer post-processes."""
    ds = synthetic_data(tmp_path / "data", 40, 10)
    run = {
        "method": "noisy_gd",
        "noise_multiplier": 2.0,
        "diameter": 2.0,
        "clip": 3.0,
        "l2": 0.1,
        "steps": 3,
        "lr": 0.1,
        "device": "cpu",
        "log_every": 3,
    }
    plain = loop.train(RunSettings.of(resolve_run(run)), ds, tmp_path / "plain")
    moved = loop.train(
        RunSettings.of(resolve_run({**run, "optimizer": "momentum"})), ds, tmp_path / "momentum"
    )
    hidden = set(plain.epsilon) - set(moved.epsilon)
    assert "langevin" in hidden and set(moved.epsilon) >= {"rdp", "pld"}
    assert all(
        "plain SGD step at a constant learning rate" in moved.excluded_accountants[n]
        for n in hidden
    )
    assert "optimizer" not in plain.update and moved.update["optimizer"] == "optimizer momentum"
    assert moved.epsilon["rdp"] == plain.epsilon["rdp"]  # the same mechanism, the same ε


@pytest.mark.parametrize("name", ["momentum", "adamw"])
def test_stacked_runs_take_each_runs_own_optimizer_step(name):
    """The audit's lockstep runs (a leading run axis, one m per run) step as each run alone."""
    from dplab.training.step import apply, denominator

    options = TORCH[name][0]
    gen = torch.Generator().manual_seed(4)
    runs = [{"w": torch.randn(5, 3, generator=gen)} for _ in range(3)]
    stacked, states, stacked_state = {"w": torch.stack([r["w"] for r in runs])}, [{}, {}, {}], {}
    for step in (1, 2, 3):
        grads = [{"w": torch.randn(5, 3, generator=gen)} for _ in runs]
        noise = [{"w": torch.randn(5, 3, generator=gen)} for _ in runs]
        sizes = [4, 0, 7]
        apply(
            stacked,
            {"w": torch.stack([g["w"] for g in grads])},
            {"w": torch.stack([z["w"] for z in noise])},
            lr=0.1,
            denom=denominator("realized", 6, torch.tensor(sizes)),
            b=6,
            stacked=True,
            optimizer=options,
            state=stacked_state,
            step=step,
        )
        for r, params in enumerate(runs):
            apply(
                params,
                grads[r],
                noise[r],
                lr=0.1,
                denom=denominator("realized", 6, sizes[r]),
                b=6,
                optimizer=options,
                state=states[r],
                step=step,
            )
    for r, params in enumerate(runs):
        torch.testing.assert_close(stacked["w"][r], params["w"], rtol=1e-6, atol=1e-7)


def test_plain_update_is_each_tensor_s_arithmetic_and_overflow_diverges():
    """The SGD update over all parameters at once is, to the bit, each tensor's own
    (1 − λ)·w, then + (−η/m)·g, then + (−η/b)·Z; an η/m past float32 makes w inf/NaN (the
    divergence the loop reports), not an error."""
    from dplab.training.step import update

    gen = torch.Generator().manual_seed(4)
    params = {k: torch.randn(*s, generator=gen) for k, s in (("w", (5, 3)), ("b", (5,)))}
    grads = {k: torch.randn(p.shape, generator=gen) for k, p in params.items()}
    noise = {k: torch.randn(p.shape, generator=gen) for k, p in params.items()}
    want = {
        k: p.clone().mul_(0.9).add_(grads[k], alpha=-0.3 / 7).add_(noise[k], alpha=-0.3 / 8)
        for k, p in params.items()
    }
    update(params, grads, noise, lr=0.3, denom=7, b=8, regularization=0.1)
    assert all(torch.equal(params[k], want[k]) for k in params)
    update(params, grads, None, lr=1e250, denom=7, b=8, regularization=0.0)
    assert all(not torch.isfinite(p).all() for p in params.values())


@pytest.mark.parametrize(
    "options, lr",
    [
        (OptimizerOptions("sgd", weight_decay=1e300), 0.1),
        (OptimizerOptions("momentum", momentum=0.9, weight_decay=1e300), 0.1),
        (OptimizerOptions("adam", weight_decay=1e300), 0.1),
        (OptimizerOptions("adam"), 1e300),
        (OptimizerOptions("adamw"), 1e300),
    ],
)
def test_a_weight_decay_or_lr_past_float32_diverges_with_every_optimizer(options, lr):
    """As plain SGD's η past float32 (above): the optimizer's step makes w inf/NaN, the divergence
    the loop reports (exit 3), where torch's add_/addcdiv_ refuse the factor with a RuntimeError
    (an internal error, exit 1, before)."""
    gen = torch.Generator().manual_seed(5)
    params = {"w": torch.randn(4, 3, generator=gen)}
    grads = {"w": torch.randn(4, 3, generator=gen)}
    _apply(params, grads, None, options, {}, 1, lr, 8)
    assert not torch.isfinite(params["w"]).all()
