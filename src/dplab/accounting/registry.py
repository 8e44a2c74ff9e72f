"""Name → accountant instance: the table :data:`ACCOUNTANTS` (a :class:`dplab.registry.Registry`).

An accountant's module is imported on its first :func:`get`, so that a job imports the
accountants it uses only (importing :mod:`dplab.accounting`, e.g. for :class:`Setting`, stays
cheap).  A new accountant is a module (its :class:`Accountant` class) and a line here.
"""

from __future__ import annotations

from dplab.accounting.base import Accountant
from dplab.errors import DPLabError
from dplab.registry import Registry

#: name -> its class (or instance), in the order `dplab accountants` lists them, with its colour
ACCOUNTANTS = Registry(
    "accountant",
    {
        "mf": "dplab.accounting.matrix_factorization:MatrixFactorizationAccountant",
        "naive": "dplab.accounting.composition:NaiveComposition",
        "advanced": "dplab.accounting.composition:AdvancedComposition",
        "kairouz": "dplab.accounting.composition:KairouzComposition",
        "moments": "dplab.accounting.moments:MomentsAccountant",
        "rdp": "dplab.accounting.dp_accounting_adapters:RdpAccountant",
        "pld": "dplab.accounting.pld_accountant:PldAccountant",
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
    },
    meta={  # a fixed colour per accountant in every figure (dplab.figures.style.colour); the noise
        # it accounts where not independent (the class's ``noise``, tests/test_registries.py)
        "mf": {"noise": "correlated"},
        "naive": {"colour": "#8c564b"},
        "advanced": {"colour": "#d62728"},
        "kairouz": {"colour": "#ff7f0e"},
        "moments": {"colour": "#bcbd22"},
        "rdp": {"colour": "#1f77b4"},
        "rdp_closed_form": {"colour": "#17becf"},
        "pld": {"colour": "#000000"},
        "pabi": {"colour": "#9467bd"},
        "langevin": {"colour": "#2ca02c"},
        "ye_shokri": {"colour": "#e377c2"},
        "asoodeh_projected": {"colour": "#7f7f7f"},
        "asoodeh_regularized": {"colour": "#393b79"},
        "fixed_batches": {"colour": "#a63603"},
        "shuffle_lower": {"colour": "#fd8d3c"},
        "balls_in_bins": {"colour": "#31a354"},
        "balls_in_bins_lower": {"colour": "#31a354"},
        "as_if_poisson": {"colour": "#000000"},
    },
)

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
