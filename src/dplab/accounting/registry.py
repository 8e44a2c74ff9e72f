"""Name → accountant instance: the table :data:`ACCOUNTANTS` (a :class:`dplab.registry.Registry`).

An accountant's module is imported on its first :func:`get`, so that a job imports the
accountants it uses only (importing :mod:`dplab.accounting`, e.g. for :class:`Setting`, stays
cheap).  A new accountant is a module (its :class:`Accountant` class) and a line here.
"""

from __future__ import annotations

from dplab.accounting.base import Accountant
from dplab.errors import DPLabError
from dplab.registry import Registry

#: name -> its class (or instance), in the order `dplab accountants` lists them
ACCOUNTANTS = Registry("accountant", {
    "naive": "dplab.accounting.composition:NaiveComposition",
    "advanced": "dplab.accounting.composition:AdvancedComposition",
    "kairouz": "dplab.accounting.composition:KairouzComposition",
    "moments": "dplab.accounting.moments:MomentsAccountant",
    "rdp": "dplab.accounting.dp_accounting_adapters:RdpAccountant",
    "pld": "dplab.accounting.dp_accounting_adapters:PldAccountant",
    "rdp_closed_form": "dplab.accounting.rdp_closed_form:RdpClosedForm",
    "pabi": "dplab.accounting.pabi:PabiAccountant",
    "langevin": "dplab.accounting.langevin:LangevinAccountant",
    "ye_shokri": "dplab.accounting.ye_shokri:YeShokriAccountant",
    "asoodeh_projected": "dplab.accounting.asoodeh:AsoodehProjectedAccountant",
    "asoodeh_regularized": "dplab.accounting.asoodeh:AsoodehRegularizedAccountant",
    "gaussian_classic": "dplab.accounting.gaussian:GAUSSIAN_CLASSIC",
    "gaussian_simple": "dplab.accounting.gaussian:GAUSSIAN_SIMPLE",
    "gaussian_pei": "dplab.accounting.gaussian:GAUSSIAN_PEI",
    "gaussian_analytic": "dplab.accounting.gaussian:GAUSSIAN_ANALYTIC",
    "fixed_batches": "dplab.accounting.fixed_batches:FixedBatches",
    "as_if_poisson": "dplab.accounting.fixed_batches:AsIfPoisson",
    "balls_in_bins": "dplab.accounting.balls_in_bins:BallsInBins",
    "shuffle_lower": "dplab.accounting.shuffle_lower:ShuffleLower",
    "balls_in_bins_lower": "dplab.accounting.shuffle_lower:BallsInBinsLower",
})

_INSTANCES: dict[str, Accountant] = {}


def get(name: str) -> Accountant:
    """The accountant called ``name`` (one instance per process); a :class:`DPLabError` naming
    the valid ones otherwise."""
    if name not in ACCOUNTANTS:
        raise DPLabError("accountant", f"unknown {name!r}; valid: {', '.join(sorted(ACCOUNTANTS))}")
    if name not in _INSTANCES:
        found = ACCOUNTANTS[name]
        _INSTANCES[name] = found() if isinstance(found, type) else found
    return _INSTANCES[name]


def names() -> list[str]:
    """Every accountant, in :data:`ACCOUNTANTS` order (nothing imported)."""
    return ACCOUNTANTS.names()
