"""``rdp`` and ``pld``: thin adapters over Google's ``dp_accounting`` (000 §V; 004 §3.3).

We do not re-implement what ``dp_accounting`` does: these classes only translate a
:class:`Setting` into a ``DpEvent`` and ask the library's accountants.

Units.  Our σ is std/C on the clipped sum (sensitivity C for add_remove, 2C for replace_one).
- dp_accounting's RDP treats a ``GaussianDpEvent`` and the subsampled Gaussian of
  ``SampledWithoutReplacementDpEvent`` (Wang, Balle & Kasiviswanathan 2019, Thm 27) as
  std / (sensitivity under the relation): we pass the effective multiplier
  (:func:`dplab.units.effective_noise_multiplier`, σ/2 for replace_one).
- dp_accounting's PLD with ``REPLACE_ONE`` shifts a record's contribution from +C to −C
  itself (``privacy_loss_mechanism``: mu(x ± sensitivity)), so it gets σ unchanged.

Supported (anything else raises :class:`AssumptionError`):
- rdp: poisson + add_remove; full_batch (both relations); without_replacement + replace_one.
- pld: poisson (both relations); full_batch (both relations).  dp_accounting 0.6.0's PLD
  has no sampling-without-replacement event, so ``pld`` refuses it.
- ``shuffle`` is refused by both: no amplification by shuffling is proved in the seeds.
"""

from __future__ import annotations

import dp_accounting
import numpy as np
from dp_accounting.pld import pld_privacy_accountant, privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant

from dplab import units
from dplab.accounting import pld_curve
from dplab.accounting.amplification import SHUFFLE_REFUSAL
from dplab.accounting.base import Accountant
from dplab.accounting.registry import register
from dplab.accounting.setting import Setting

_ADD_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
_REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE


class _DpAccountingAdapter(Accountant):
    #: (sampling, neighbouring) pairs dp_accounting supports for this accountant
    supported: tuple[tuple[str, str], ...] = ()
    samplings = ("poisson", "without_replacement", "full_batch", "shuffle")
    neighbourings = ("add_remove", "replace_one")

    def check_setting(self, setting: Setting) -> None:
        if setting.sampling == "shuffle":
            raise self.fail("sampling", SHUFFLE_REFUSAL)
        if (setting.sampling, setting.neighbouring) not in self.supported:
            pairs = ", ".join(f"{s}+{n}" for s, n in self.supported)
            raise self.fail(
                "sampling",
                f"{setting.sampling} with {setting.neighbouring} is not supported (supported: {pairs})",
            )
        if setting.sampling == "without_replacement" and (setting.dataset_size is None or setting.batch_size is None):
            raise self.fail("batch_size", "sampling without replacement needs batch_size and dataset_size")


@register
class RdpAccountant(_DpAccountingAdapter):
    """Rényi DP of the sampled Gaussian (Mironov, Talwar & Zhang 2019; 000 §V), composed
    additively over T and converted to (ε, δ) with dp_accounting's improved conversion."""

    name = "rdp"
    source = "000 §V (Mironov et al. numerical RDP of the sampled Gaussian), via dp_accounting"
    supported = (
        ("poisson", "add_remove"),
        ("full_batch", "add_remove"),
        ("full_batch", "replace_one"),
        ("without_replacement", "replace_one"),
    )
    assumptions = (
        "every intermediate iterate may be released (composition)",
        "supported: poisson+add_remove, full_batch (both), without_replacement+replace_one "
        "(Wang, Balle & Kasiviswanathan 2019); shuffle refused (no amplification proved)",
    )

    @staticmethod
    def step(setting: Setting) -> tuple[dp_accounting.DpEvent, dp_accounting.NeighboringRelation]:
        """One step's ``DpEvent`` and the relation to give ``RdpAccountant``."""
        sigma_eff = units.effective_noise_multiplier(setting.noise_multiplier, setting.neighbouring)
        gaussian = dp_accounting.GaussianDpEvent(sigma_eff)
        if setting.sampling == "full_batch":
            return gaussian, _ADD_REMOVE
        if setting.sampling == "without_replacement":
            event = dp_accounting.SampledWithoutReplacementDpEvent(
                source_dataset_size=setting.dataset_size, sample_size=setting.batch_size, event=gaussian
            )
            return event, _REPLACE_ONE
        return dp_accounting.PoissonSampledDpEvent(setting.sampling_rate, gaussian), _ADD_REMOVE

    def one_step_rdp(self, setting: Setting) -> tuple[np.ndarray, np.ndarray]:
        """dp_accounting's default orders and the RDP of one step at each."""
        event, relation = self.step(setting)
        acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=relation)
        acc.compose(event)
        return np.asarray(acc._orders), np.asarray(acc._rdp)  # noqa: SLF001 (the library's own state)

    def _epsilon_curve(self, setting, delta, steps):
        orders, rdp = self.one_step_rdp(setting)
        return np.array([rdp_privacy_accountant.compute_epsilon(orders, t * rdp, delta)[0] for t in steps])

    def _delta_curve(self, setting, epsilon, steps):
        orders, rdp = self.one_step_rdp(setting)
        return np.array([rdp_privacy_accountant.compute_delta(orders, t * rdp, epsilon)[0] for t in steps])


@register
class PldAccountant(_DpAccountingAdapter):
    """Tight privacy-loss-distribution accounting (Doroshenko et al. 2022), via dp_accounting."""

    name = "pld"
    source = "004 §3.3 footnote (PLD accounting of dp_accounting, Doroshenko et al. 2022)"
    supported = (
        ("poisson", "add_remove"),
        ("poisson", "replace_one"),
        ("full_batch", "add_remove"),
        ("full_batch", "replace_one"),
    )
    assumptions = (
        "every intermediate iterate may be released (composition)",
        "supported: poisson and full_batch with either relation; without_replacement refused "
        "(no such event in dp_accounting's PLD); shuffle refused (no amplification proved)",
        "pessimistic discretization (interval 1e-4): an upper bound on the exact ε",
    )
    #: discretization of the privacy loss; dp_accounting's default
    value_discretization_interval = 1e-4

    @staticmethod
    def step(setting: Setting) -> tuple[dp_accounting.DpEvent, dp_accounting.NeighboringRelation]:
        """One step's ``DpEvent`` (σ = std/C; dp_accounting doubles the shift for REPLACE_ONE)."""
        relation = _ADD_REMOVE if setting.neighbouring == "add_remove" else _REPLACE_ONE
        gaussian = dp_accounting.GaussianDpEvent(setting.noise_multiplier)
        if setting.sampling == "full_batch":
            return gaussian, relation
        return dp_accounting.PoissonSampledDpEvent(setting.sampling_rate, gaussian), relation

    def _accountant(self, setting: Setting, steps: int):
        event, relation = self.step(setting)
        acc = pld_privacy_accountant.PLDAccountant(
            neighboring_relation=relation,
            value_discretization_interval=self.value_discretization_interval,
        )
        acc.compose(event, int(steps))
        return acc

    def _epsilon_curve(self, setting, delta, steps):
        """Exact dp_accounting values for grids of ≤ 64 steps; on longer grids an upper bound
        within :data:`pld_curve.EXCESS` (1%) of the exact value at every T
        (:func:`pld_curve.monotone_curve`).  Poisson: the one-step PLD is built once and shared
        by every T (:class:`pld_curve.ComposedPmf`, equal to dp_accounting's values to ~1e-8
        relative); a single T is answered by dp_accounting itself."""
        if setting.sampling == "full_batch" or len(steps) == 1:
            def exact(ts):
                return np.array([self._accountant(setting, t).get_epsilon(delta) for t in ts])
        else:
            event, relation = self.step(setting)
            pld = privacy_loss_distribution.from_gaussian_mechanism(
                standard_deviation=event.event.noise_multiplier,
                value_discretization_interval=self.value_discretization_interval,
                sampling_prob=event.sampling_probability,
                neighboring_relation=relation,
            )
            pmfs = [pld._pmf_remove] + ([] if pld._symmetric else [pld._pmf_add])  # noqa: SLF001
            composed = [pld_curve.ComposedPmf(p.to_dense_pmf()) for p in pmfs]

            def exact(ts):  # max over the pair (remove first: usually the larger ε)
                eps = None
                for c in composed:
                    eps = c.epsilons(ts, delta, floor=eps)
                return eps
        return pld_curve.monotone_curve(exact, steps)

    def _delta_curve(self, setting, epsilon, steps):
        return np.array([self._accountant(setting, t).get_delta(epsilon) for t in steps])

    def _sigma_start(self, setting: Setting, epsilon: float, delta: float) -> float:
        """rdp's σ (rdp ≥ pld, so it meets the target up to pld's discretization): a bracket
        that never asks for the huge PLDs of tiny σ."""
        if setting.sampling == "poisson" and setting.neighbouring == "replace_one":
            return 1.0  # no rdp for this pair
        return RdpAccountant().sigma(setting, epsilon, delta)
