"""``noise_rng: portable`` (dplab.philox): Philox4x32-10 against Random123's known-answer vectors,
the Gaussian it draws, its state, and a run drawing the same noise on every device (the CUDA
checks run where torch sees a GPU)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats
import torch

from dplab.philox import PortableGenerator, normal, philox4x32_10
from dplab.training import loop
from dplab.training.resolve import resolve_run
from dplab.training.noise import GaussianNoise
from dplab.training.settings import RunSettings

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=cuda)]

#: Random123's kat_vectors for philox4x32_10: counter, key, output (Salmon et al. 2011)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("counter,key,expected", KAT)
def test_philox_matches_random123_known_answers(device, counter, key, expected):
    out = philox4x32_10(tuple(torch.tensor([c], device=device) for c in counter), key)
    assert tuple(int(o) for o in out) == expected


def test_portable_normal_is_standard_normal_and_resumes_from_its_state():
    g = PortableGenerator(11)
    z = g.normal((200_000,), torch.float64).numpy()
    assert scipy.stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(len(z)) and abs(z.var() - 1) < 0.02
    state = g.get_state()
    after = g.normal((7, 3))
    g2 = PortableGenerator(0)
    g2.set_state(state)
    assert torch.equal(g2.normal((7, 3)), after)
    assert not torch.equal(
        PortableGenerator(12).normal((7, 3)), PortableGenerator(11).normal((7, 3))
    )


def test_normal_dispatches_to_torch_generators_unchanged():
    a = normal((5, 4), torch.Generator().manual_seed(3), torch.float32)
    assert torch.equal(a, torch.randn(5, 4, generator=torch.Generator().manual_seed(3)))


def _cfg(device: str, **extra) -> dict:
    """A short DP-SGD run with ``noise_rng: portable`` (``extra`` overrides), resolved."""
    return resolve_run(
        {
            "method": "dp_sgd",
            "model": "mlp",
            "hidden": 16,
            "steps": 30,
            "batch_size": 8,
            "lr": 0.2,
            "noise_multiplier": 1.0,
            "log_every": 10,
            "accountants": ["rdp"],
            "device": device,
            "noise_rng": "portable",
            "checkpoint_every": 7,
            **extra,
        }
    )


def _run(synth, out, device, **extra):
    loop.train(RunSettings.of(_cfg(device, **extra)), synth, out)
    return json.loads((out / "summary.json").read_text()), (out / "metrics.csv").read_text()


def test_portable_run_is_its_own_stream_and_resumes_bit_for_bit(synth, tmp_path):
    """Batches from the CPU generator alone, noise from Philox: other numbers than the default
    run's; a run killed after step 16 and rerun ends byte-identical to an uninterrupted one."""
    whole, metrics = _run(synth, tmp_path / "a", "cpu")
    default, default_metrics = _run(synth, tmp_path / "d", "cpu", noise_rng="device")
    assert default_metrics != metrics
    assert default["epsilon"] == whole["epsilon"]

    def stop(step):
        if step == 16:
            raise KeyboardInterrupt

    cfg = _cfg("cpu")
    with pytest.raises(KeyboardInterrupt):
        loop.train(RunSettings.of(cfg), synth, tmp_path / "r", hook=stop)
    loop.train(RunSettings.of(cfg), synth, tmp_path / "r")
    for name in ("metrics.csv", "model.pt"):
        assert (tmp_path / "r" / name).read_bytes() == (tmp_path / "a" / name).read_bytes(), name


@cuda
def test_cuda_portable_noise_equals_the_cpu_noise():
    """The same seed draws the same noise on both devices: float64 equal to 1e-15 relative, float32
    within one ulp (log, cos and sin of the two devices' math libraries may
    differ in the last bit)."""
    like = {"w": torch.zeros(1_000_003)}
    cpu = GaussianNoise(2.0).sample(1, like, PortableGenerator(5, "cpu"))["w"]
    gpu = (
        GaussianNoise(2.0)
        .sample(1, {"w": like["w"].cuda()}, PortableGenerator(5, "cuda"))["w"]
        .cpu()
    )
    ulp = torch.finfo(torch.float32).eps * cpu.abs().clamp(min=torch.finfo(torch.float32).tiny)
    assert ((gpu - cpu).abs() <= ulp).all()
    assert (gpu == cpu).float().mean() > 0.999
    wide = [
        PortableGenerator(5, d).normal((100_001,), torch.float64).cpu() for d in ("cpu", "cuda")
    ]
    torch.testing.assert_close(wide[1], wide[0], rtol=1e-15, atol=0)


@cuda
def test_cuda_portable_run_matches_the_cpu_run(synth, tmp_path):
    """Same seed on CPU and GPU: the same ε and σ (computed on the CPU either way), the same
    batches and noise, so the metrics agree up to the devices' float
    arithmetic (docs/training.md)."""
    cpu, cpu_rows = _run(synth, tmp_path / "cpu", "cpu")
    gpu, gpu_rows = _run(synth, tmp_path / "gpu", "cuda")
    assert gpu["epsilon"] == cpu["epsilon"] and gpu["noise_multiplier"] == cpu["noise_multiplier"]
    for a, b in zip(cpu_rows.splitlines()[1:], gpu_rows.splitlines()[1:]):
        va, vb = (np.array([float(v) for v in line.split(",")]) for line in (a, b))
        np.testing.assert_allclose(vb, va, rtol=1e-4, atol=1e-5)
