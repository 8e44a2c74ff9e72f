"""Streaming the correlated noise C⁻¹Z of the matrix-factorization mechanism (004 §4.3).

Training adds w_t = (C⁻¹Z)[t] to the clipped gradient sum of step t, where the rows z_t of Z
are i.i.d. N(0, std²·I) (std = σ·clip).  Because C is lower-triangular, w_t is found by
forward substitution, C[t, t]·w_t = z_t − Σ_{j<t} C[t, j]·w_j:
- banded C (m bands): only w_{t−m+1..t−1} are needed, memory O(m·d) (:class:`CorrelatedNoise`
  keeps a ring of the last m − 1 outputs);
- dense C (identity is 1-banded; sqrt and optimal are dense): the fallback keeps every past
  w_j, memory O(T·d);
- Toeplitz C given by its generating function (:class:`~dplab.mf.toeplitz.ToeplitzFactorization`:
  banded Toeplitz, 1/c(x) of order b − 1; BLT, k first-order sections, Dvijotham et al. 2024,
  "Efficient and Near-Optimal Noise Generation for Streaming Differential Privacy", §5):
  :class:`FilterNoise` runs C⁻¹ as a cascade of IIR filters in direct form II transposed, whose
  state is b − 1 (or k) vectors: memory O(b·d) or O(k·d), no T×T matrix.
The covariance of (w_t) across steps is C⁻¹C⁻ᵀ = (CᵀC)⁻¹ (per coordinate, times std²).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import scipy.linalg
import torch

from dplab.errors import DPLabError
from dplab.philox import normal
from dplab.mf.factorizations import Factorization
from dplab.mf.toeplitz import ToeplitzFactorization


class _Stream:
    """What both streams share: the std of z_t and the order of the steps."""

    def __init__(self, steps: int, std: float):
        if not (np.isfinite(std) and std > 0):
            raise DPLabError(
                "noise_multiplier", f"noise std must be a finite number > 0; got {std}"
            )
        self.std = float(std)
        self.steps = steps
        self._next = 0

    def _draw(self, step: int, like: torch.Tensor, generator) -> torch.Tensor:
        """z_step ~ N(0, std²·I) shaped like ``like``, after checking that steps come in order."""
        if step != self._next:
            raise DPLabError(
                "step",
                f"correlated noise must be drawn in order; expected step {self._next}, got {step}",
            )
        if step >= self.steps:
            raise DPLabError(
                "step", f"the factorization covers {self.steps} steps; got step {step}"
            )
        self._next += 1
        return normal(like.shape, generator, like.dtype, like.device) * self.std


class CorrelatedNoise(_Stream):
    """``sample(step, like, generator)`` → w_step, shaped like ``like``; steps
    must come in order 0, 1, ….

    Drop-in for the i.i.d. Gaussian noise of the training engine: ``std`` is the absolute
    std of z_t (σ·clip, noise on the sum of clipped gradients).
    """

    def __init__(self, factorization: Factorization, std: float):
        super().__init__(factorization.steps, std)
        self.encoder = factorization.encoder
        self.bands = factorization.bands
        # memory: the last bands − 1 outputs (dense C: bands = T, the O(T·d) fallback)
        self._past: deque[torch.Tensor] = deque(maxlen=max(self.bands - 1, 0))

    @property
    def memory_vectors(self) -> int:
        """How many past noise vectors are held now."""
        return len(self._past)

    def sample(
        self, step: int, like: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        z = self._draw(step, like, generator)
        row = self.encoder[step]
        acc = z
        # self._past[-1] is w_{step−1}, self._past[-i] is w_{step−i}
        for i in range(1, len(self._past) + 1):
            coeff = row[step - i]
            if coeff != 0:
                acc = acc - float(coeff) * self._past[-i]
        w = acc / float(row[step])
        if self._past.maxlen:
            self._past.append(w)
        return w

    def state_dict(self) -> dict:
        """What a checkpoint needs to continue the stream exactly: the next step
        and the held outputs."""
        return {"next": self._next, "past": list(self._past)}

    def load_state_dict(self, state: dict) -> None:
        self._past = deque(state["past"], maxlen=self._past.maxlen)
        self._next = int(state["next"])


class FilterNoise(_Stream):
    """C⁻¹Z streamed for a :class:`~dplab.mf.toeplitz.ToeplitzFactorization`, the same interface as
    :class:`CorrelatedNoise`.  Each section (b, a) of C⁻¹ = Π b(x)/a(x) runs in direct form II
    transposed: with b, a divided by a_0 and n = max(len a, len b) − 1 state vectors s,
    y = b_0·u + s_0,  s_i ← b_{i+1}·u − a_{i+1}·y + s_{i+1}  (s_n = 0); the output of one section is
    the input of the next."""

    def __init__(self, factorization: ToeplitzFactorization, std: float):
        super().__init__(factorization.steps, std)
        self.sections = []
        for b, a in factorization.inverse_sections:
            n = max(len(a), len(b))
            padded_b, padded_a = np.zeros(n), np.zeros(n)
            padded_b[: len(b)], padded_a[: len(a)] = b, a
            self.sections.append(
                ((padded_b / a[0]).tolist(), (padded_a / a[0]).tolist())
            )  # floats, not numpy scalars
        self._state: list[list[torch.Tensor]] | None = None

    @property
    def memory_vectors(self) -> int:
        """How many state vectors are held: Σ over sections of their order
        (bands − 1, or the buffers)."""
        return sum(len(b) - 1 for b, _ in self.sections)

    def sample(
        self, step: int, like: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        u = self._draw(step, like, generator)
        if self._state is None:
            self._state = [
                [torch.zeros_like(u) for _ in range(len(b) - 1)] for b, _ in self.sections
            ]
        for (b, a), s in zip(self.sections, self._state):
            y = torch.add(s[0], u, alpha=b[0]) if s else u * b[0]
            for i in range(
                len(s)
            ):  # s_i ← s_{i+1} + b_{i+1}·u − a_{i+1}·y, with no op for a zero b_{i+1}
                last = i + 1 == len(s)
                if b[i + 1] == 0:
                    s[i] = y * -a[i + 1] if last else torch.add(s[i + 1], y, alpha=-a[i + 1])
                else:
                    s[i] = (u * b[i + 1] if last else torch.add(s[i + 1], u, alpha=b[i + 1])).add_(
                        y, alpha=-a[i + 1]
                    )
            u = y
        return u

    def state_dict(self) -> dict:
        return {"next": self._next, "state": self._state}

    def load_state_dict(self, state: dict) -> None:
        self._state = state["state"]
        self._next = int(state["next"])


def stream(factorization, std: float) -> CorrelatedNoise | FilterNoise:
    """The streaming noise of a factorization: :class:`FilterNoise` for a Toeplitz C given by its
    generating function (O(b·d) or O(k·d)), :class:`CorrelatedNoise` for a dense C."""
    if isinstance(factorization, ToeplitzFactorization):
        return FilterNoise(factorization, std)
    return CorrelatedNoise(factorization, std)


def batch_noise(factorization: Factorization, Z: np.ndarray) -> np.ndarray:
    """C⁻¹Z for a whole (T, d) matrix of draws (reference for the streamed version)."""
    return scipy.linalg.solve_triangular(factorization.encoder, Z, lower=True)
