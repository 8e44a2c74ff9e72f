"""Gaussian noise that is the same on the CPU and on a GPU: a counter-based generator.

torch's generators differ by device (the CPU's is a Mersenne twister, CUDA's a Philox whose
offsets depend on the kernel launch), so one seed draws different noise on each. A run with
``noise_rng: portable`` draws its noise from :class:`PortableGenerator` instead:

- Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3",
  SC 2011, §4), computed in int64 tensor arithmetic on the tensors' own device: integer
  operations, so every device gives the same bits (Random123's known-answer vectors in
  tests/test_philox.py);
- each block of four 32-bit words gives two uniforms with 53 random bits, u = (k + ½)/2⁵³ ∈ (0, 1),
  and the Box–Muller pair √(−2 ln u₁)·(cos 2πu₂, sin 2πu₂) in float64 (tails to 8.6σ), then the
  parameters' dtype. log, sqrt, cos and sin are the one place devices may differ: each is within
  an ulp or two of float64 on both, so the float32 noise agrees to ≤ 1 float32 ulp;
- the stream is the key (the seed's two 32-bit halves) and a 64-bit block counter that every draw
  advances by the blocks it used: the state is three integers (:meth:`get_state`).

It costs about 120 elementwise tensor operations per draw where ``torch.randn`` costs one, so it
is an option for checking and reproducing a run across devices, not the default
(benchmarks/README.md measures it).

The CPU's default noise (``noise_rng: device`` on the CPU) is :class:`CpuGenerator`, a second
stream of the same Philox4x32-10 blocks made for speed: float32 Box–Muller from 24-bit uniforms
u₁ ∈ [2⁻²⁴, 1] whose smallest value takes 16 more bits (u₁ ∈ [2⁻⁴⁰, 1]: tails to 7.45σ, where
torch's float32 ``randn`` stops at 5.77σ; :mod:`dplab.training.noise_floor`), with Cephes's
single-precision polynomials for ln, sin and cos, computed by a vectorized C kernel
(``src/dplab/_philox_normal.c``, built at install) at about a third of ``torch.randn``'s time on
the CPU. Every float operation of the kernel is one IEEE-754 single-precision operation, so it
gives the same bits on every instruction set, and :func:`philox_normal_reference` (the stream's
definition in torch operations, used where the kernel was not built) gives them too
(tests/test_philox.py).
"""

from __future__ import annotations

import logging
import math

import torch

log = logging.getLogger("dplab")

try:
    from dplab._philox_normal import fill as _compiled_fill
except ImportError:  # built without a C compiler: philox_normal_reference, same bits
    _compiled_fill = None

MASK32 = 0xFFFFFFFF
#: Philox4x32's round multipliers and Weyl key increments (Salmon et al. 2011, §4.2)
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10


def _mulhilo(m: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) 32-bit words of m·x for x < 2³², from the 64-bit product: int64 products wrap
    modulo 2⁶⁴ (two's complement) on every device, so the low 64 bits are exact."""
    prod = x * m
    return (prod >> 32) & MASK32, prod & MASK32


def philox4x32_10(
    counter: tuple[torch.Tensor, ...], key: tuple[int, int]
) -> tuple[torch.Tensor, ...]:
    """The four output words of Philox4x32-10 for each counter (four int64 tensors of values
    < 2³², elementwise) under ``key`` (two ints < 2³²)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


class _Stream:
    """A key (the seed's two 32-bit halves) and a 64-bit block counter: the whole state of a
    counter-based stream, saved as four int64 (:meth:`get_state`)."""

    device = torch.device("cpu")

    def __init__(self, seed: int):
        self.seed = int(seed) & ((1 << 64) - 1)
        self.counter = 0

    @property
    def key(self) -> tuple[int, int]:
        return self.seed & MASK32, self.seed >> 32

    def get_state(self) -> torch.Tensor:
        return torch.tensor(
            [self.seed >> 32, self.seed & MASK32, self.counter >> 32, self.counter & MASK32],
            dtype=torch.int64,
        )

    def set_state(self, state: torch.Tensor) -> None:
        hi, lo, chi, clo = (int(v) for v in state.tolist())
        self.seed, self.counter = (hi << 32) | lo, (chi << 32) | clo


class PortableGenerator(_Stream):
    """A Gaussian stream of Philox4x32-10 blocks in float64 (module docstring) on ``device``."""

    def __init__(self, seed: int, device: torch.device | str = "cpu"):
        super().__init__(seed)
        self.device = torch.device(device)

    def normal(self, shape, dtype: torch.dtype = torch.float32, out=None) -> torch.Tensor:
        """Standard normal numbers of ``shape`` on the generator's device (the next blocks), in
        ``out`` where given."""
        n = math.prod(shape)
        blocks = (n + 1) // 2
        index = torch.arange(
            self.counter, self.counter + blocks, dtype=torch.int64, device=self.device
        )
        self.counter += blocks
        zero = torch.zeros_like(index)
        x0, x1, x2, x3 = philox4x32_10((index & MASK32, index >> 32, zero, zero), self.key)
        scale = 2.0**-53
        u1 = (((x0 << 21) | (x1 >> 11)).double() + 0.5) * scale
        u2 = (((x2 << 21) | (x3 >> 11)).double() + 0.5) * scale
        radius = torch.sqrt(-2.0 * torch.log(u1))
        angle = (2.0 * math.pi) * u2
        z = torch.stack((radius * torch.cos(angle), radius * torch.sin(angle)), dim=1).flatten()[:n]
        z = z.to(dtype).view(shape)
        return z if out is None else out.copy_(z)


#: CpuGenerator's numbers per chunk, and the Philox blocks (lanes of the C kernel) they take
CHUNK, LANES = 256, 64
#: whether a CpuGenerator has said in the log that the kernel is missing
_said_slow = False


def _ln(x: torch.Tensor) -> torch.Tensor:
    """ln x for float32 x in (0, 1]: Cephes's ``logf``, operation for operation as the C kernel."""
    bits = x.view(torch.int32)
    e = ((bits >> 23) & 0xFF) - 126
    m = ((bits & 0x007FFFFF) | 0x3F000000).view(torch.float32)  # [1/2, 1)
    small = (m < 0.70710678).to(torch.int32)
    e = e - small
    m = m * (1 + small).to(torch.float32)
    f = m - 1.0
    z, fe = f * f, e.to(torch.float32)
    y = torch.full_like(f, 7.0376836292e-2)
    for coefficient in (
        -1.1514610310e-1,
        1.1676998740e-1,
        -1.2420140846e-1,
        1.4249322787e-1,
        -1.6668057665e-1,
        2.0000714765e-1,
        -2.4999993993e-1,
        3.3333331174e-1,
    ):
        y = y * f + coefficient
    y = y * f * z
    y = y + -2.12194440e-4 * fe
    y = y + -0.5 * z
    return (f + y) + 0.693359375 * fe


def _box_muller_f32(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(r cos θ, r sin θ) from Philox words ``a``, ``b`` (int64 < 2³²), as the C kernel's
    ``pair``: u = ((a >> 8) + 1)·2⁻²⁴, or (j + 1)·2⁻⁴⁰ where a >> 8 = 0 (j: the 16 low bits of a
    and b, the smallest bucket spread over 2¹⁶ values), r = √(−2 ln u), θ = 2π·(b >> 8)·2⁻²⁴,
    reduced to qπ/2 + x with |x| ≤ π/4 for Cephes's sinf/cosf polynomials."""
    k = a >> 8
    fine = ((((a & 0xFF) << 8) | (b & 0xFF)).to(torch.float32) + 1.0) * 2.0**-40
    u = torch.where(k == 0, fine, (k.to(torch.float32) + 1.0) * 2.0**-24)  # exact, in [2⁻⁴⁰, 1]
    # torch's float32 sqrt is not correctly rounded on the CPU; the float64 root rounded to float32
    # is (53 ≥ 2·24 + 2), and equals the kernel's IEEE sqrtf
    r = torch.sqrt((-2.0 * _ln(u)).double()).float()
    t = (b >> 8).to(torch.float32) * 2.0**-24 * 4.0
    q = (t + 0.5).to(torch.int32)
    x = (t - q.to(torch.float32)) * (math.pi / 2)
    x2 = x * x
    s = ((-1.9515295891e-4 * x2 + 8.3321608736e-3) * x2 + -1.6666654611e-1) * x2 * x + x
    c = (
        ((2.443315711809948e-5 * x2 + -1.388731625493765e-3) * x2 + 4.166664568298827e-2) * x2 * x2
        + -0.5 * x2
        + 1.0
    )
    odd = (q & 1).bool()
    sin, cos = torch.where(odd, c, s), torch.where(odd, s, c)
    sin = torch.where((q & 2).bool(), -sin, sin)
    cos = torch.where(((q + 1) & 2).bool(), -cos, cos)
    return r * cos, r * sin


def philox_normal_reference(
    n: int, key: tuple[int, int], counter: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The first ``n`` float32 numbers of :class:`CpuGenerator`'s stream from block ``counter``
    under ``key``, in torch operations (the C kernel's definition): chunks of :data:`CHUNK`
    numbers, chunk j from the :data:`LANES` blocks counter + 64j + i, whose words x0..x3 give the
    chunk's numbers i, 64 + i, 128 + i, 192 + i: the Box–Muller pairs of (x0, x1) and (x2, x3)."""
    chunks = -(-n // CHUNK)
    index = torch.arange(LANES * chunks, dtype=torch.int64, device=device) + counter
    zero = torch.zeros_like(index)
    x0, x1, x2, x3 = philox4x32_10((index & MASK32, index >> 32, zero, zero), key)
    parts = (*_box_muller_f32(x0, x1), *_box_muller_f32(x2, x3))
    return torch.stack(parts).view(4, chunks, LANES).transpose(0, 1).reshape(-1)[:n]


class CpuGenerator(_Stream):
    """The CPU's default noise stream (module docstring): float32 normals, :data:`CHUNK` per
    :data:`LANES` Philox blocks, from the compiled kernel (or :func:`philox_normal_reference`,
    saying so once in the log)."""

    def __init__(self, seed: int):
        super().__init__(seed)
        global _said_slow
        if _compiled_fill is None and not _said_slow:
            log.warning(
                "dplab: the CPU noise kernel was not built (no C compiler at install): the same"
                " numbers from torch operations, about 30x slower (reinstall with a compiler)"
            )
            _said_slow = True

    def normal(self, shape, dtype: torch.dtype = torch.float32, out=None) -> torch.Tensor:
        """The next ``math.prod(shape)`` numbers, as float32 (converted to ``dtype``), in ``out``
        where given: a tensor of that shape (and dtype), written in place by the kernel where it
        is a contiguous float32 CPU tensor."""
        n = math.prod(shape)
        if out is not None and out.numel() != n:
            raise ValueError(f"out holds {out.numel()} numbers, the draw {n}")
        direct = (
            out is not None
            and out.device.type == "cpu"
            and out.dtype == torch.float32
            and out.is_contiguous()
        )
        z = out if direct else torch.empty(tuple(shape), dtype=torch.float32)
        if _compiled_fill is not None:
            _compiled_fill(z.data_ptr(), n, *self.key, self.counter)
        else:
            z.view(-1).copy_(philox_normal_reference(n, self.key, self.counter))
        self.counter += LANES * -(-n // CHUNK)
        if direct:
            return out
        return z.to(dtype) if out is None else out.copy_(z)


#: what draws a run's noise (:func:`dplab.training.loop.streams`)
NoiseGenerator = torch.Generator | PortableGenerator | CpuGenerator


def normal(
    shape,
    generator,
    dtype: torch.dtype,
    device: torch.device | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Standard normal numbers of ``shape`` and ``dtype`` from a :class:`CpuGenerator`, a
    :class:`PortableGenerator` or a ``torch.Generator`` (None: torch's default one), on
    ``device`` (default: the generator's): the one draw every noise source makes.  ``out``: a
    contiguous tensor of that shape and dtype on the generator's device, filled with the same
    numbers (``torch.randn`` is ``normal_`` on a new tensor) and returned."""
    if isinstance(generator, _Stream):
        z = generator.normal(tuple(shape), dtype, out)
        return z if device is None or out is not None else z.to(device)
    if out is not None:
        return out.normal_(generator=generator)
    if device is None and generator is not None:
        device = generator.device
    return torch.randn(tuple(shape), generator=generator, dtype=dtype, device=device)
