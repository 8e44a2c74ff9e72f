"""dplab.philox: Philox4x32-10 against Random123's known-answer vectors; ``noise_rng: portable``'s
Gaussian, its state, and a run drawing the same noise on every device; the CPU's default stream
(CpuGenerator): its C kernel bit for bit against its definition in torch operations, on every
instruction set, against float64 Box–Muller, as a standard normal (the CUDA checks run where
torch sees a GPU)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats
import torch

from conftest import ROOT
from dplab import philox
from dplab.philox import (
    MASK32,
    CpuGenerator,
    PortableGenerator,
    normal,
    philox4x32_10,
    philox_normal_reference,
)
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


#: (seed, counter, n): partial and whole chunks, a counter whose low word carries, a large seed
DRAWS = [(0, 0, 1), (11, 5, 257), (3, 2**32 - 70, 1000), (2**63 + 12345, 2**40 - 3, 100_001)]


def _generator(seed: int, counter: int) -> CpuGenerator:
    g = CpuGenerator(seed)
    g.counter = counter
    return g


def test_the_cpu_kernel_is_built():
    """``make`` builds src/dplab/_philox_normal.c (setup.py): without it the noise is drawn by
    philox_normal_reference, the same numbers about 30 times slower."""
    assert philox._compiled_fill is not None


@pytest.mark.parametrize("seed,counter,n", DRAWS)
def test_cpu_kernel_equals_its_definition_bit_for_bit(seed, counter, n):
    g = _generator(seed, counter)
    got = g.normal((n,))
    want = philox_normal_reference(n, g.key, counter)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    assert g.counter == counter + 64 * -(-n // 256)  # whole chunks of 64 blocks


def test_without_the_kernel_the_same_numbers_come_from_torch_and_the_log_says_so(
    monkeypatch, caplog
):
    want = CpuGenerator(8).normal((1000,))
    monkeypatch.setattr(philox, "_compiled_fill", None)
    monkeypatch.setattr(philox, "_said_slow", False)
    generators = [CpuGenerator(8), CpuGenerator(9)]
    assert torch.equal(generators[0].normal((1000,)), want)
    said = [r.getMessage() for r in caplog.records if "kernel was not built" in r.getMessage()]
    assert len(said) == 1  # once per process


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_cpu_kernel_bits_do_not_depend_on_the_instruction_set(tmp_path):
    """The kernel compiled for the baseline instruction set, without the per-set clones, draws the
    same bits as the installed one (on x86-64 its AVX-512 or AVX2 clone).  Built by setup.py, with
    its own flags."""
    build = ["build_ext", "--build-lib", tmp_path, "--build-temp", tmp_path / "temp"]
    env = {**os.environ, "CFLAGS": "-DDPLAB_NO_CLONES"}
    subprocess.run([sys.executable, "setup.py", "-q", *build], cwd=ROOT, env=env, check=True)
    assert list(tmp_path.glob("dplab/_philox_normal.*"))  # optional=True: a failure only warns
    script = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); import _philox_normal as k; "
        "z = torch.empty(100_001); k.fill(z.data_ptr(), 100_001, 7, 9, 2**32 - 5); "
        "sys.stdout.buffer.write(z.numpy().tobytes())"
    )
    run = subprocess.run([sys.executable, "-c", script, tmp_path / "dplab"], capture_output=True)
    baseline = np.frombuffer(run.stdout, dtype=np.float32)
    g = _generator((9 << 32) | 7, 2**32 - 5)
    assert np.array_equal(baseline.view(np.int32), g.normal((100_001,)).numpy().view(np.int32))


def test_the_cpu_stream_s_tail_beyond_24_bits_is_the_gaussian_s():
    """The smallest 24-bit uniform (a >> 8 = 0, probability 2⁻²⁴) takes the pair's 16 unused bits:
    u₁ = (j + 1)·2⁻⁴⁰, so P(r > x) = P(u₁ < e^(−x²/2)) is the Rayleigh tail to 2⁻⁴⁰ (3·2⁻⁴⁰ with
    float32's rounding of r) beyond r = 5.768, up to the cut 7.446, where 24 bits alone stop
    (r = 5.768, P(r > 6) = 0)."""
    j = torch.arange(1 << 16)
    high = torch.randint(0, 1 << 24, (1 << 16,), generator=torch.Generator().manual_seed(0))
    r = torch.hypot(*(z.double() for z in philox._box_muller_f32(j >> 8, (high << 8) | (j & 0xFF))))
    want = torch.sqrt(-2 * torch.log((j.double() + 1) * 2.0**-40))
    assert ((r - want).abs() / want).max() < 3 * torch.finfo(torch.float32).eps
    for x in (5.8, 6.0, 6.5, 7.0, 7.4):  # 2⁻⁴⁰ from the grid, ±1 value from float32 rounding
        tail = (r > x).sum().item() * 2.0**-40
        assert abs(tail - math.exp(-(x**2) / 2)) < 3 * 2.0**-40


def test_the_cpu_kernel_draws_the_refined_tail_where_philox_gives_it():
    """Block 14,883,995 under key (0, 0) has x0 = 0x93 (x0 >> 8 = 0) and x1's low byte 0x0c:
    u₁ = (0x930c + 1)·2⁻⁴⁰ and the chunk's numbers 0 and 64 have radius √(−2 ln u₁) = 5.8634
    (5.768 from 24 bits), from the kernel and from its definition alike."""
    counter = 14_883_995
    x = philox4x32_10(tuple(torch.tensor([v]) for v in (counter, 0, 0, 0)), (0, 0))
    assert int(x[0]) == 0x93 and int(x[1]) & 0xFF == 0x0C
    z = _generator(0, counter).normal((256,))
    assert torch.equal(
        z.view(torch.int32), philox_normal_reference(256, (0, 0), counter).view(torch.int32)
    )
    radius = math.hypot(float(z[0]), float(z[64]))
    assert radius == pytest.approx(math.sqrt(-2 * math.log(0x930D * 2.0**-40)), rel=1e-6)


def test_cpu_normal_is_box_muller_to_two_ulp():
    """Against float64 Box–Muller (√(−2 ln u₁)·cos/sin 2πu₂) on the same uniforms: Cephes's
    float32 ln, sin and cos leave at most 2 float32 ulps (5e-7 absolute)."""
    n = 1 << 18
    g = CpuGenerator(3)
    z = g.normal((n,)).double()
    index = torch.arange(n // 4)
    x = philox4x32_10((index & MASK32, index >> 32, index * 0, index * 0), g.key)

    def pair(a, b):
        fine = ((a & 0xFF) * 256 + (b & 0xFF)).double() + 1
        u = torch.where(a >> 8 == 0, fine * 2.0**-40, ((a >> 8).double() + 1) * 2.0**-24)
        theta = 2 * math.pi * (b >> 8).double() * 2.0**-24
        r = torch.sqrt(-2 * torch.log(u))
        return r * torch.cos(theta), r * torch.sin(theta)

    want = torch.stack((*pair(x[0], x[1]), *pair(x[2], x[3]))).view(4, -1, 64)
    want = want.transpose(0, 1).reshape(-1)
    error = (z - want).abs()
    assert error.max() < 6e-7
    big = want.abs() > 0.01
    assert (error[big] / want[big].abs()).max() < 2 * torch.finfo(torch.float32).eps


def test_cpu_normal_is_standard_normal_and_resumes_from_its_state():
    g = CpuGenerator(11)
    z = g.normal((1 << 20,)).double().numpy()
    assert scipy.stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(len(z)) and abs(z.var() - 1) < 0.01
    tail = 2 * scipy.stats.norm.sf(3)  # P(|Z| > 3)
    assert abs((np.abs(z) > 3).mean() - tail) < 5 * np.sqrt(tail / len(z))
    assert np.abs(z).max() <= math.sqrt(-2 * math.log(2.0**-40))  # u₁ ≥ 2⁻⁴⁰: 7.45σ
    state = g.get_state()
    after = g.normal((7, 3))
    g2 = CpuGenerator(0)
    g2.set_state(state)
    assert torch.equal(g2.normal((7, 3)), after)
    assert not torch.equal(CpuGenerator(12).normal((7, 3)), CpuGenerator(11).normal((7, 3)))


def test_cpu_normal_fills_out_and_widens_other_dtypes():
    flat = torch.empty(300)
    a, b = flat.split([290, 10])
    normal(a.shape, g := CpuGenerator(4), torch.float32, out=a)
    normal(b.shape, g, torch.float32, out=b)
    h = CpuGenerator(4)
    assert torch.equal(a, h.normal((290,))) and torch.equal(b, h.normal((10,)))
    wide = normal((5, 3), CpuGenerator(4), torch.float64)
    assert wide.dtype == torch.float64
    assert torch.equal(wide, CpuGenerator(4).normal((5, 3)).double())
    strided = torch.empty(10, 2)[:, 0]  # not contiguous: drawn aside, then copied in
    CpuGenerator(4).normal((10,), out=strided)
    assert torch.equal(strided, CpuGenerator(4).normal((10,)))
    with pytest.raises(ValueError, match="out holds 5 numbers, the draw 10"):
        CpuGenerator(4).normal((10,), out=torch.empty(5))  # never written past its end


@cuda
def test_cuda_computes_the_cpu_stream_bit_for_bit():
    """philox_normal_reference on a GPU: integer and IEEE float32 operations only (sqrt in
    float64), so the CPU kernel's bits."""
    g = CpuGenerator(21)
    want = g.normal((100_001,))
    got = philox_normal_reference(100_001, g.key, 0, "cuda").cpu()
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


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
