"""RDP → (ε, δ) conversion shared by the hidden-state accountants (pabi, langevin, ye_shokri).

These bounds give an RDP curve ε_α for every Rényi order α.  The conversion is
dp_accounting's ``compute_epsilon`` / ``compute_delta`` (the improved conversion of Balle et
al. 2020 / Canonne et al. 2020, valid for any RDP guarantee), optimized over :data:`ORDERS`,
or evaluated at the single order ``Setting.alpha`` when one is given.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Callable

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting.base import Accountant
from dplab.accounting.setting import Setting

#: dp_accounting's default orders, extended geometrically to 10⁶ for bounds that stay small
#: (RDP linear in α with a tiny slope is optimized at α ≈ √(log(1/δ)/slope)).
ORDERS = np.unique(
    np.concatenate(
        [
            np.asarray(rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=float),
            np.geomspace(64.0, 1e6, 80),
        ]
    )
)


def orders_for(alpha: float | None) -> np.ndarray:
    """The orders to optimize over: :data:`ORDERS`, or only ``alpha`` when it is fixed."""
    return ORDERS if alpha is None else np.array([float(alpha)])


#: RDP values are raised to at least this before the conversion (an upper bound stays one): below it
#: e^(−ρ) rounds to 1, where dp_accounting's KL bound √(1 − e^(−ρ)) fails (math domain error)
RDP_MIN = 1e-15


def epsilon_from_rdp(rdp: np.ndarray, orders: np.ndarray, delta: float) -> np.ndarray:
    """ε for each row of ``rdp`` (shape (len(T), len(orders))) at δ."""
    rdp = np.maximum(rdp, RDP_MIN)
    return np.array([rdp_privacy_accountant.compute_epsilon(orders, row, delta)[0] for row in rdp])


def delta_from_rdp(rdp: np.ndarray, orders: np.ndarray, epsilon: float) -> np.ndarray:
    """δ for each row of ``rdp`` (shape (len(T), len(orders))) at ε."""
    rdp = np.maximum(rdp, RDP_MIN)
    return np.array([rdp_privacy_accountant.compute_delta(orders, row, epsilon)[0] for row in rdp])


def rdp_table(curve: Callable[[float], np.ndarray], orders: np.ndarray) -> np.ndarray:
    """Stack ``curve(α)`` (ε_α for every T of a grid) over ``orders``: shape
    (len(T), len(orders))."""
    return np.stack([np.asarray(curve(float(a)), dtype=float) for a in orders], axis=1)


class RdpBound(Accountant):
    """An accountant whose bound is an RDP curve: subclasses give ``_rdp`` and inherit the
    conversion to (ε, δ) above (optimized over the orders, or at ``Setting.alpha``)."""

    reads = (*Accountant.reads, "alpha")  # a fixed order instead of the search over orders

    @abstractmethod
    def _rdp(self, setting: Setting, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(orders, RDP of shape (len(steps), len(orders)))."""

    def rdp_curve(self, setting: Setting) -> tuple[np.ndarray, np.ndarray]:
        """(orders, RDP of the whole run, T = setting.steps): what private selection composes
        (:mod:`dplab.accounting.selection`)."""
        orders, rdp = self._rdp(setting, np.array([self._steps(setting)]))
        return orders, rdp[0]

    def _epsilon_curve(self, setting, delta, steps):
        orders, rdp = self._rdp(setting, steps)
        return epsilon_from_rdp(rdp, orders, delta)

    def _delta_curve(self, setting, epsilon, steps):
        orders, rdp = self._rdp(setting, steps)
        return delta_from_rdp(rdp, orders, epsilon)
