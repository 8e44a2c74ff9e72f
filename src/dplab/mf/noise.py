"""Streaming the correlated noise C⁻¹Z of the matrix-factorization mechanism (004 §4.3).

Training adds w_t = (C⁻¹Z)[t] to the clipped gradient sum of step t, where the rows z_t of Z
are i.i.d. N(0, std²·I) (std = σ·clip).  Because C is lower-triangular, w_t is found by
forward substitution, C[t, t]·w_t = z_t − Σ_{j<t} C[t, j]·w_j:
- banded C (m bands): only w_{t−m+1..t−1} are needed, memory O(m·d) (:class:`CorrelatedNoise`
  keeps a ring of the last m − 1 outputs);
- dense C (identity is 1-banded; sqrt and optimal are dense): the fallback keeps every past
  w_j, memory O(T·d).
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


class CorrelatedNoise:
    """``sample(step, like, generator)`` → w_step, shaped like ``like``; steps must come in order 0, 1, ….

    Drop-in for the i.i.d. Gaussian noise of the training engine: ``std`` is the absolute
    std of z_t (σ·clip, noise on the sum of clipped gradients).
    """

    def __init__(self, factorization: Factorization, std: float):
        if not (np.isfinite(std) and std > 0):
            raise DPLabError("noise_multiplier", f"noise std must be a finite number > 0; got {std}")
        self.encoder = factorization.encoder
        self.bands = factorization.bands
        self.std = float(std)
        self.steps = factorization.steps
        # memory: the last bands − 1 outputs (dense C: bands = T, the O(T·d) fallback)
        self._past: deque[torch.Tensor] = deque(maxlen=max(self.bands - 1, 0))
        self._next = 0

    @property
    def memory_vectors(self) -> int:
        """How many past noise vectors are held now."""
        return len(self._past)

    def sample(self, step: int, like: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if step != self._next:
            raise DPLabError("step", f"correlated noise must be drawn in order; expected step {self._next}, got {step}")
        if step >= self.steps:
            raise DPLabError("step", f"the factorization covers {self.steps} steps; got step {step}")
        z = normal(like.shape, generator, like.dtype, like.device) * self.std
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
        self._next += 1
        return w

    def state_dict(self) -> dict:
        """What a checkpoint needs to continue the stream exactly: the next step and the held outputs."""
        return {"next": self._next, "past": list(self._past)}

    def load_state_dict(self, state: dict) -> None:
        self._past = deque(state["past"], maxlen=self._past.maxlen)
        self._next = int(state["next"])


def batch_noise(factorization: Factorization, Z: np.ndarray) -> np.ndarray:
    """C⁻¹Z for a whole (T, d) matrix of draws (reference for the streamed version)."""
    return scipy.linalg.solve_triangular(factorization.encoder, Z, lower=True)
