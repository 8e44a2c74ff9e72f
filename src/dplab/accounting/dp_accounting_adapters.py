"""``rdp`` and ``pld``: thin adapters over Google's ``dp_accounting`` (000 §V; 004 §3.3).

``rdp`` and the adapters' common checks live here, ``pld`` in
:mod:`dplab.accounting.pld_accountant`: a run accounted by ``rdp`` alone does not import
dp_accounting's ``pld`` package, nor scipy.stats with it
(:mod:`dplab.package_parts`).

These classes translate a :class:`Setting` into a ``DpEvent`` and ask the library's accountants,
with one exception for speed: the Poisson-sampled Gaussian's one-step RDP is
:mod:`dplab.accounting.sampled_gaussian_rdp`, the library's own arithmetic, bit for bit.

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
- ``shuffle`` is refused by both: no amplification by shuffling is proved in the source papers.

Both also account a run in phases, a ``ComposedDpEvent`` of unequal phases, compositions nested in
it flattened (:meth:`parts`; rdp also with private selections among them, :meth:`event_rdp`):
- rdp: Rényi DP composes additively over any sequence of mechanisms (Mironov 2017, "Rényi
  Differential Privacy", Prop. 1): the run is (α, Σᵢ ρᵢ(α))-RDP, ρᵢ phase i's RDP, converted as
  one setting's is; equal to dp_accounting's ``RdpAccountant`` on the same event.
- pld, full batch: Tᵢ Gaussian steps of μᵢ = 1/σᵢ (effective, per relation) compose to one
  Gaussian mechanism of μ = √(Σᵢ Tᵢ μᵢ²) (Dong, Roth & Su 2022, Cor. 3.3): exact.
- pld, Poisson phases (a full-batch phase among them: q = 1): each phase's one-step PMF pair
  discretized pessimistically at one shared interval, the phases' PMFs composed by one tilted FFT
  per direction and ε read off with certified error bounds (:class:`pld_tilted.Composition`, the
  one-phase read-off generalized): an upper bound on the exact ε, as for one phase.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np
from dp_accounting import dp_event, privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from dplab import units
from dplab.accounting import rdp_conversion, sampled_gaussian_rdp, selection, wor_gaussian_rdp
from dplab.accounting.amplification import SHUFFLE_REFUSAL, safe_log_moments
from dplab.accounting.base import Accountant
from dplab.accounting.setting import Setting, check_delta
from dplab.errors import AssumptionError, DPLabError
from dplab.schemes import Neighbouring, Sampling

#: dp_accounting's neighbouring relations
ADD_REMOVE = privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE
REPLACE_ONE = privacy_accountant.NeighboringRelation.REPLACE_ONE

log = logging.getLogger("dplab")
_reported: set[str] = set()
_quiet = [0]  # > 0 inside :func:`bracket_only`


def _report_once(line: str) -> None:
    """``line`` on the ``dplab`` logger, once per process (never inside :func:`bracket_only`)."""
    if line not in _reported and not _quiet[0]:
        _reported.add(line)
        log.info(line)


@contextlib.contextmanager
def bracket_only():
    """An accountant used only to bracket another's search (pld's σ starts from rdp's): its notes
    describe no value the user is given, so they are not logged (a dp_mf run accounted by mf
    logged rdp's series note)."""
    _quiet[0] += 1
    try:
        yield
    finally:
        _quiet[0] -= 1


class DpAccountingAdapter(Accountant):
    #: (sampling, neighbouring) pairs dp_accounting supports for this accountant
    supported: tuple[tuple[str, str], ...] = ()
    samplings = (
        Sampling.POISSON,
        Sampling.WITHOUT_REPLACEMENT,
        Sampling.FULL_BATCH,
        Sampling.SHUFFLE,
    )
    neighbourings = (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE)

    def check_setting(self, setting: Setting) -> None:
        if setting.sampling == Sampling.SHUFFLE:
            raise self.fail("sampling", SHUFFLE_REFUSAL)
        if (setting.sampling, setting.neighbouring) not in self.supported:
            pairs = ", ".join(f"{s}+{n}" for s, n in self.supported)
            raise self.fail(
                "sampling",
                f"{setting.sampling} with {setting.neighbouring} is not supported (supported:"
                f" {pairs})",
            )
        if setting.sampling == Sampling.WITHOUT_REPLACEMENT and (
            setting.dataset_size is None or setting.batch_size is None
        ):
            raise self.fail(
                "batch_size", "sampling without replacement needs batch_size and dataset_size"
            )

    def parts(self, event: dp_event.DpEvent, neighbouring: str) -> list[Setting]:
        """One setting, or for a composition of unequal phases (nested compositions flattened:
        :func:`~dplab.accounting.events.phase_events`) each phase's, checked (a refusal names
        ``phases[i].<key>``)."""
        from dplab.accounting import events

        try:
            return super().parts(event, neighbouring)
        except AssumptionError as err:
            phases = events.phase_events(event)
            if err.key not in ("phases", "event") or phases in ([], [event]):
                raise
        out = []
        for i, phase in enumerate(phases):
            try:
                out.extend(self.parts(phase, neighbouring))
            except AssumptionError as err:
                raise self.fail(
                    f"phases[{i}].{err.key}", self._reason(err).split(": ", 1)[1]
                ) from None
        return out


class RdpAccountant(DpAccountingAdapter):
    """Rényi DP of the sampled Gaussian (Mironov, Talwar & Zhang 2019; 000 §V), composed
    additively over T and converted to (ε, δ) with dp_accounting's improved conversion."""

    name = "rdp"
    source = "000 §V (Mironov et al. numerical RDP of the sampled Gaussian), via dp_accounting"
    supported = (
        (Sampling.POISSON, Neighbouring.ADD_REMOVE),
        (Sampling.FULL_BATCH, Neighbouring.ADD_REMOVE),
        (Sampling.FULL_BATCH, Neighbouring.REPLACE_ONE),
        (Sampling.WITHOUT_REPLACEMENT, Neighbouring.REPLACE_ONE),
    )
    assumptions = (
        "every intermediate iterate may be released (composition)",
        "supported: poisson+add_remove, full_batch (both), without_replacement+replace_one "
        "(Wang, Balle & Kasiviswanathan 2019); shuffle refused (no amplification proved)",
    )

    @staticmethod
    def step(setting: Setting) -> tuple[dp_event.DpEvent, privacy_accountant.NeighboringRelation]:
        """One step's ``DpEvent`` and the relation to give ``RdpAccountant``."""
        sigma_eff = units.effective_noise_multiplier(setting.noise_multiplier, setting.neighbouring)
        gaussian = dp_event.GaussianDpEvent(sigma_eff)
        if setting.sampling == Sampling.FULL_BATCH:
            return gaussian, ADD_REMOVE
        if setting.sampling == Sampling.WITHOUT_REPLACEMENT:
            event = dp_event.SampledWithoutReplacementDpEvent(
                source_dataset_size=setting.dataset_size,
                sample_size=setting.batch_size,
                event=gaussian,
            )
            return event, REPLACE_ONE
        return dp_event.PoissonSampledDpEvent(setting.sampling_rate, gaussian), ADD_REMOVE

    def one_step_rdp(self, setting: Setting) -> tuple[np.ndarray, np.ndarray]:
        """dp_accounting's default orders and the RDP ρ(α) of one step at each.

        A Poisson-sampled step's ρ is :func:`sampled_gaussian_rdp.poisson_gaussian_rdp`: the numbers
        of dp_accounting's ``RdpAccountant``, bit for bit, in a quarter of the time (a σ
        calibration asks it about ten times); a step without replacement is
        :func:`wor_gaussian_rdp.wor_gaussian_rdp`, dp_accounting's bound with its forward
        differences free of cancellation; a full batch's is ``RdpAccountant``'s. A sampled
        Gaussian's ρ is made float-safe, staying an upper bound
        (:func:`amplification.safe_log_moments`): negative values (dp_accounting turns them into
        ε = 0) and +∞ where a series did not converge (reported once on the ``dplab`` logger) are
        replaced."""
        orders = np.array(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)  # the accountant's orders
        event, relation = self.step(setting)
        unconverged = 0
        if setting.sampling == Sampling.POISSON:
            rdp, unconverged = sampled_gaussian_rdp.poisson_gaussian_rdp(
                event.sampling_probability, event.event.noise_multiplier, orders.tolist()
            )
        elif setting.sampling == Sampling.WITHOUT_REPLACEMENT:
            rdp = wor_gaussian_rdp.wor_gaussian_rdp(
                event.sample_size / event.source_dataset_size,
                event.event.noise_multiplier,
                orders,
            )
        else:
            acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=relation)
            acc.compose(event)
            rdp = np.asarray(acc._rdp, dtype=float)  # noqa: SLF001 (no public getter; tests/test_dependencies.py)
        if setting.sampling == Sampling.FULL_BATCH:
            return orders, rdp
        rdp = safe_log_moments((orders - 1) * rdp, orders, setting) / (orders - 1)
        if unconverged:
            _report_once(  # once a process: no σ in the text, which a calibration varies
                "rdp: the series did not converge at some orders; they use the unamplified bound"
                " α/(2σ_eff²)"
            )
        return orders, rdp

    def rdp_curve(self, setting: Setting) -> tuple[np.ndarray, np.ndarray]:
        """(orders, RDP of the whole run): T times one step's
        (:mod:`dplab.accounting.selection`)."""
        orders, rdp = self.one_step_rdp(setting)
        return orders, self._steps(setting) * rdp

    def _epsilon_curve(self, setting, delta, steps):
        orders, rdp = self.one_step_rdp(setting)
        return rdp_conversion.epsilon_from_rdp(np.outer(steps, rdp), orders, delta)

    def parts(self, event: dp_event.DpEvent, neighbouring: str) -> list[Setting]:
        """As for any event; a ``RepeatAndSelectDpEvent`` (private selection), alone or repeated,
        is its repeated event's parts, with K's mean and shape checked (:func:`selection.check`)."""
        from dplab.accounting import events

        if isinstance(event, dp_event.SelfComposedDpEvent) and events.selects(event.event):
            return self.parts(event.event, neighbouring)
        if isinstance(event, dp_event.RepeatAndSelectDpEvent):
            try:
                selection.check(event.mean, event.shape)
            except DPLabError as err:
                raise self.fail(err.key, err.message) from None
            return self.parts(event.event, neighbouring)
        return super().parts(event, neighbouring)

    def event_epsilon(self, event, delta, neighbouring=Neighbouring.ADD_REMOVE):
        """One setting's ε; of any other event its RDP curve (:meth:`event_rdp`) converted."""
        from dplab.accounting import events

        settings = self.parts(event, neighbouring)  # checked: a refusal names its phase
        if len(settings) == 1 and not events.selects(event):
            return self.epsilon(settings[0], delta)
        orders, total = self.event_rdp(event, neighbouring)
        orders, total = orders[np.isfinite(total)], total[np.isfinite(total)]
        return float(rdp_conversion.epsilon_from_rdp(total[None, :], orders, check_delta(delta))[0])

    def event_rdp(self, event, neighbouring: str) -> tuple[np.ndarray, np.ndarray]:
        """(orders, RDP) of a checked event, as dp_accounting's ``RdpAccountant`` composes it: of
        a composition the sum of its parts' curves (module docstring), of ``SelfComposed(e, k)``
        k times e's, of a ``RepeatAndSelectDpEvent`` the repeated event's through Papernot &
        Steinke's bound (:func:`selection.repeat_and_select`), of a ``NoOpDpEvent`` (or of an
        empty composition within one) 0."""
        if isinstance(event, dp_event.RepeatAndSelectDpEvent):  # K checked with the event
            orders, rdp = self.event_rdp(event.event, neighbouring)
            return orders, selection.repeat_and_select(orders, rdp, event.mean, event.shape)
        orders = np.array(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
        if isinstance(event, dp_event.ComposedDpEvent):  # within a checked one: may be empty
            curves = [self.event_rdp(e, neighbouring)[1] for e in event.events]
            return orders, np.sum([np.zeros_like(orders), *curves], axis=0)
        if isinstance(event, dp_event.SelfComposedDpEvent):
            orders, rdp = self.event_rdp(event.event, neighbouring)
            return orders, event.count * rdp
        if isinstance(event, dp_event.NoOpDpEvent):
            return orders, np.zeros_like(orders)
        (setting,) = self.parts(event, neighbouring)
        return self.rdp_curve(setting)

    def _delta_curve(self, setting, epsilon, steps):
        orders, rdp = self.one_step_rdp(setting)
        return rdp_conversion.delta_from_rdp(np.outer(steps, rdp), orders, epsilon)
