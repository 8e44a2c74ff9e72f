"""``rdp`` and ``pld``: thin adapters over Google's ``dp_accounting`` (000 §V; 004 §3.3).

We do not re-implement what ``dp_accounting`` does: these classes only translate a
:class:`Setting` into a ``DpEvent`` and ask the library's accountants.
"""

from __future__ import annotations

import dp_accounting
import numpy as np
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting.base import Accountant
from dplab.accounting.registry import register
from dplab.accounting.setting import Setting

_RELATION = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}


def step_event(setting: Setting) -> dp_accounting.DpEvent:
    """The ``DpEvent`` of one DP-SGD step of ``setting`` (Poisson-sampled or full-batch Gaussian)."""
    gaussian = dp_accounting.GaussianDpEvent(setting.noise_multiplier)
    if setting.sampling == "full_batch" or setting.sampling_rate == 1.0:
        return gaussian
    return dp_accounting.PoissonSampledDpEvent(setting.sampling_rate, gaussian)


@register
class RdpAccountant(Accountant):
    """Rényi DP of the sampled Gaussian (Mironov, Talwar & Zhang 2019; 000 §V), composed
    additively over T and converted to (ε, δ) with dp_accounting's improved conversion."""

    name = "rdp"
    source = "000 §V (Mironov et al. numerical RDP of the sampled Gaussian), via dp_accounting"
    samplings = ("poisson", "full_batch")
    neighbourings = ("add_remove",)
    assumptions = ("every intermediate iterate may be released (composition)",)

    def _one_step_rdp(self, setting: Setting) -> tuple[np.ndarray, np.ndarray]:
        acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=_RELATION[setting.neighbouring])
        acc.compose(step_event(setting))
        return np.asarray(acc._orders), np.asarray(acc._rdp)  # noqa: SLF001 (the library's own state)

    def _epsilon_curve(self, setting, delta, steps):
        orders, rdp = self._one_step_rdp(setting)
        return np.array(
            [rdp_privacy_accountant.compute_epsilon(orders, t * rdp, delta)[0] for t in steps]
        )

    def _delta_curve(self, setting, epsilon, steps):
        orders, rdp = self._one_step_rdp(setting)
        return np.array([rdp_privacy_accountant.compute_delta(orders, t * rdp, epsilon)[0] for t in steps])


@register
class PldAccountant(Accountant):
    """Tight privacy-loss-distribution accounting (Doroshenko et al. 2022), via dp_accounting."""

    name = "pld"
    source = "004 §3.3 footnote (PLD accounting of dp_accounting, Doroshenko et al. 2022)"
    samplings = ("poisson", "full_batch")
    neighbourings = ("add_remove", "replace_one")
    assumptions = ("every intermediate iterate may be released (composition)",)
    #: discretization of the privacy loss; dp_accounting's default
    value_discretization_interval = 1e-4

    def _accountant(self, setting: Setting, steps: int):
        acc = pld_privacy_accountant.PLDAccountant(
            neighboring_relation=_RELATION[setting.neighbouring],
            value_discretization_interval=self.value_discretization_interval,
        )
        acc.compose(step_event(setting), int(steps))
        return acc

    def _epsilon_curve(self, setting, delta, steps):
        return np.array([self._accountant(setting, t).get_epsilon(delta) for t in steps])

    def _delta_curve(self, setting, epsilon, steps):
        return np.array([self._accountant(setting, t).get_delta(epsilon) for t in steps])
