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
"""

from __future__ import annotations

import math

import torch

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


class PortableGenerator:
    """A Gaussian stream of Philox4x32-10 blocks (module docstring) on ``device``."""

    def __init__(self, seed: int, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.seed = int(seed) & ((1 << 64) - 1)
        self.counter = 0

    def get_state(self) -> torch.Tensor:
        return torch.tensor(
            [self.seed >> 32, self.seed & MASK32, self.counter >> 32, self.counter & MASK32],
            dtype=torch.int64,
        )

    def set_state(self, state: torch.Tensor) -> None:
        hi, lo, chi, clo = (int(v) for v in state.tolist())
        self.seed, self.counter = (hi << 32) | lo, (chi << 32) | clo

    def normal(self, shape, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Standard normal numbers of ``shape`` on the generator's device (the next blocks)."""
        n = math.prod(shape)
        blocks = (n + 1) // 2
        index = torch.arange(
            self.counter, self.counter + blocks, dtype=torch.int64, device=self.device
        )
        self.counter += blocks
        zero = torch.zeros_like(index)
        x0, x1, x2, x3 = philox4x32_10(
            (index & MASK32, index >> 32, zero, zero), (self.seed & MASK32, self.seed >> 32)
        )
        scale = 2.0**-53
        u1 = (((x0 << 21) | (x1 >> 11)).double() + 0.5) * scale
        u2 = (((x2 << 21) | (x3 >> 11)).double() + 0.5) * scale
        radius = torch.sqrt(-2.0 * torch.log(u1))
        angle = (2.0 * math.pi) * u2
        z = torch.stack((radius * torch.cos(angle), radius * torch.sin(angle)), dim=1).flatten()[:n]
        return z.to(dtype).view(shape)


def normal(
    shape,
    generator,
    dtype: torch.dtype,
    device: torch.device | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Standard normal numbers of ``shape`` and ``dtype`` from a :class:`PortableGenerator` or a
    ``torch.Generator`` (None: torch's default one), on ``device`` (default: the generator's):
    the one draw every noise source makes.  ``out``: a contiguous tensor of that shape and
    dtype on the generator's device, filled with the same numbers (``torch.randn`` is
    ``normal_`` on a new tensor) and returned."""
    if isinstance(generator, PortableGenerator):
        z = generator.normal(tuple(shape), dtype)
        if out is not None:
            return out.copy_(z)
        return z if device is None else z.to(device)
    if out is not None:
        return out.normal_(generator=generator)
    if device is None and generator is not None:
        device = generator.device
    return torch.randn(tuple(shape), generator=generator, dtype=dtype, device=device)
