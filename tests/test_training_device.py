"""The accelerator path of the loop, checked on the CPU by forcing its streams,
plus CUDA-only checks that run where torch sees a GPU: noise on the device's own generator,
batches drawn ahead in blocks, the NaN guard read only where the loop syncs anyway, the
per-example conv route by device.  The CPU path's numbers are checked by hand in
tests/test_training_loop.py, its bytes in test_training_run.py."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import model_settings

from dplab.errors import Diverged
from dplab.mf import accounting as mf_accounting
from dplab.schemes import Sampling
from dplab.training import checkpoint, loop, per_example
from dplab.training.methods import dp_mf
from dplab.training.noise import GaussianNoise
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
FILES = ("summary.json", "metrics.csv", "model.pt")


@pytest.fixture
def accelerator_streams(monkeypatch):
    """The CPU run takes the accelerator's streams and guard: batches drawn ahead in blocks of
    4, noise from a second torch generator, the NaN guard read only where the loop syncs."""

    def split(device, seed, noise_rng="device"):
        return torch.Generator().manual_seed(seed), torch.Generator().manual_seed(
            seed + loop.NOISE_SEED_OFFSET
        )

    monkeypatch.setattr(loop, "streams", split)
    monkeypatch.setattr(loop, "BATCH_BLOCK", 4)
    monkeypatch.setattr(loop, "GUARD_EVERY_STEP", ())


def _sampler(kind: str):
    if kind == "mf":
        return dp_mf.SpecSampler(mf_accounting.CyclicPoisson(60, 5.0, 4, 30))
    return Sampling(kind).sampler(60, 5, reshuffle=kind == "shuffle")


@pytest.mark.parametrize("kind", ["poisson", "without_replacement", "shuffle", "full_batch", "mf"])
def test_batches_drawn_ahead_are_the_step_by_step_batches(kind):
    """Blocks of 5 steps, cut at every checkpoint (7, 14): the same indices as drawing step by
    step, and at a checkpoint the generator and sampler are where
    step-by-step drawing leaves them."""
    ahead, g_ahead = _sampler(kind), torch.Generator().manual_seed(3)
    step_by_step, g_ref = _sampler(kind), torch.Generator().manual_seed(3)
    for step, idx in loop.batches(
        ahead, g_ahead, torch.device("cpu"), 1, 20, 5, checkpoint_every=7
    ):
        assert torch.equal(idx, step_by_step.sample(step, g_ref)), step
        if step % 7 == 0:
            assert torch.equal(g_ahead.get_state(), g_ref.get_state())
            assert str(ahead.state_dict()) == str(step_by_step.state_dict())


def test_accelerator_streams_same_seed_same_bytes_and_exact_resume(
    synth, tmp_path, accelerator_streams
):
    cfg = resolve_run(
        {
            "method": "dp_sgd",
            "steps": 20,
            "batch_size": 8,
            "lr": 0.5,
            "noise_multiplier": 1.0,
            "log_every": 5,
            "checkpoint_every": 7,
            "accountants": ["rdp"],
            "device": "cpu",
        }
    )
    loop.train(RunSettings.of(cfg), synth, tmp_path / "a")
    loop.train(RunSettings.of(cfg), synth, tmp_path / "b")
    assert all(
        (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in FILES
    )

    def crash(step):
        if step == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loop.train(RunSettings.of(cfg), synth, tmp_path / "c", hook=crash)
    state = checkpoint.read(tmp_path / "c" / "checkpoint.pt")
    assert state["step"] == 7 and "noise_generator" in state
    resumed = []
    loop.train(RunSettings.of(cfg), synth, tmp_path / "c", hook=resumed.append)
    assert resumed[0] == 8
    assert all(
        (tmp_path / "a" / f).read_bytes() == (tmp_path / "c" / f).read_bytes() for f in FILES
    )


def test_accelerator_streams_differ_from_the_cpu_stream(synth, tmp_path, monkeypatch):
    """The accelerator's streams are really taken (torch's generator for the noise, not the
    CPU's Philox)."""
    cfg = resolve_run(
        {
            "method": "dp_sgd",
            "steps": 5,
            "batch_size": 8,
            "lr": 0.5,
            "noise_multiplier": 1.0,
            "accountants": ["rdp"],
            "device": "cpu",
        }
    )
    loop.train(RunSettings.of(cfg), synth, tmp_path / "cpu")
    monkeypatch.setattr(
        loop,
        "streams",
        lambda device, seed, noise_rng: (
            torch.Generator().manual_seed(seed),
            torch.Generator().manual_seed(seed + 1),
        ),
    )
    loop.train(RunSettings.of(cfg), synth, tmp_path / "split")
    assert (tmp_path / "cpu" / "model.pt").read_bytes() != (
        tmp_path / "split" / "model.pt"
    ).read_bytes()


def test_nan_guard_waits_for_a_logged_step_off_the_cpu(synth, tmp_path, accelerator_streams):
    cfg = resolve_run(
        {
            "method": "sgd",
            "l2": 1.0,
            "steps": 30,
            "batch_size": 8,
            "lr": 1e4,
            "log_every": 10,
            "device": "cpu",
        }
    )
    with pytest.raises(
        Diverged, match=r"the loss or the parameters became NaN/inf between steps 1 and 10 "
    ):
        loop.train(RunSettings.of(cfg), synth, tmp_path / "a")
    assert not (tmp_path / "a" / "summary.json").exists()


def test_gaussian_noise_is_drawn_on_the_generator_device():
    like = {"w": torch.zeros(3, 4), "b": torch.zeros(4)}
    got = GaussianNoise(2.0).sample(1, like, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    assert torch.equal(got["w"], torch.randn(3, 4, generator=g) * 2.0)
    assert torch.equal(got["b"], torch.randn(4, generator=g) * 2.0)
    mixed = {**like, "d": torch.zeros(2, dtype=torch.float64)}  # a draw per tensor, in order
    got = GaussianNoise(2.0).sample(1, mixed, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    for k, p in mixed.items():
        assert torch.equal(got[k], torch.randn(p.shape, generator=g, dtype=p.dtype) * 2.0), k


def test_grouped_conv_route_by_device(monkeypatch):
    cpu = torch.device("cpu")
    assert [per_example.grouped_wins(cpu, c) for c in (4, 8, 32, 64)] == [False, True, True, False]
    for major, expected in ((6, False), (7, True), (9, True)):
        monkeypatch.setattr(
            torch.cuda, "get_device_capability", lambda device=None, m=major: (m, 0)
        )
        assert all(
            per_example.grouped_wins(torch.device("cuda", 0), c) == expected for c in (1, 16, 64)
        )
    assert not per_example.grouped_wins(torch.device("meta"), 16)


# ------------------------------------------------------------------ on a CUDA device only
@cuda
def test_cuda_noise_same_seed_same_numbers_on_the_device():
    like = {"w": torch.zeros(1000, 10, device="cuda")}
    draw = [
        GaussianNoise(1.0).sample(1, like, loop.streams(torch.device("cuda"), 7)[1])["w"]
        for _ in range(2)
    ]
    assert draw[0].device.type == "cuda" and torch.equal(draw[0], draw[1])


@cuda
def test_cuda_run_reproducible_and_syncs_only_at_logged_steps(synth, tmp_path):
    cfg = resolve_run(
        {
            "method": "dp_sgd",
            "model": "mlp",
            "hidden": 32,
            "steps": 40,
            "batch_size": 8,
            "lr": 0.5,
            "noise_multiplier": 1.0,
            "log_every": 20,
            "accountants": ["rdp"],
            "device": "cuda",
        }
    )
    syncs, count = [], []
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loop.train(
                RunSettings.of(cfg),
                synth,
                tmp_path / "a",
                hook=lambda step: count.append((step, len(caught))),
            )
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = {step: n - count[i - 1][1] for i, (step, n) in enumerate(count) if i}
    assert all(n == 0 for step, n in syncs.items() if step not in (20, 21, 40)), syncs
    loop.train(RunSettings.of(cfg), synth, tmp_path / "b")
    assert all(
        (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in FILES
    )


@cuda
@pytest.mark.parametrize("channels", [3, 16])
def test_cuda_conv_clipped_sum_matches_torch_func(channels):
    from dplab.training import models

    torch.manual_seed(0)
    model = models.build(model_settings("cnn", channels=channels), [1, 12, 12], 10).cuda()
    params = {k: v.detach() for k, v in model.named_parameters()}
    loss = models.example_loss(model, 0.0)
    x, y = torch.rand(16, 1, 12, 12, device="cuda"), torch.randint(0, 10, (16,), device="cuda")
    ghost = per_example.clipped_grad_sum(loss, params, x, y, 0.5)
    plain = per_example.clipped_grad_sum(loss, params, x, y, 0.5, ghost=False)
    torch.testing.assert_close(ghost.norms, plain.norms, rtol=1e-4, atol=1e-5)
    for k in params:
        torch.testing.assert_close(ghost.grad_sum[k], plain.grad_sum[k], rtol=1e-4, atol=1e-5)
