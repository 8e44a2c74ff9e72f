"""Name → accountant instance.  Modules register their classes with :func:`register`.

The accountant modules are imported on the first :func:`get` or :func:`names` call, so that
importing :mod:`dplab.accounting` (e.g. for :class:`Setting`) stays cheap.
"""

from __future__ import annotations

import importlib

from dplab.accounting.base import Accountant
from dplab.errors import DPLabError

#: modules whose import registers accountants (order = listing order of `dplab accountants`)
MODULES = (
    "dplab.accounting.matrix_factorization",  # mf
    "dplab.accounting.composition",  # naive, advanced, kairouz
    "dplab.accounting.moments",  # moments
    "dplab.accounting.dp_accounting_adapters",  # rdp, pld
    "dplab.accounting.rdp_closed_form",  # rdp_closed_form
    "dplab.accounting.pabi",  # pabi
    "dplab.accounting.langevin",  # langevin
    "dplab.accounting.ye_shokri",  # ye_shokri
    "dplab.accounting.asoodeh",  # asoodeh_projected, asoodeh_regularized
    "dplab.accounting.gaussian",  # gaussian_classic, gaussian_simple, gaussian_pei, gaussian_analytic
    "dplab.accounting.fixed_batches",  # fixed_batches, as_if_poisson (comparison)
    "dplab.accounting.balls_in_bins",  # balls_in_bins
    "dplab.accounting.shuffle_lower",  # shuffle_lower, balls_in_bins_lower (lower bounds)
)

_REGISTRY: dict[str, Accountant] = {}


def register(cls: type[Accountant] | Accountant) -> type[Accountant] | Accountant:
    """Class decorator: make ``cls`` (or an instance, e.g. one built from a table) available under its name."""
    if cls.name in _REGISTRY:
        raise RuntimeError(f"accountant {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls() if isinstance(cls, type) else cls
    return cls


def _load() -> None:
    for module in MODULES:
        importlib.import_module(module)


def get(name: str) -> Accountant:
    """The accountant called ``name``; a :class:`DPLabError` naming the valid ones otherwise."""
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DPLabError("accountant", f"unknown {name!r}; valid: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    """Every registered accountant, families in :data:`MODULES` order."""
    _load()
    order = {cls: i for i, cls in enumerate(MODULES)}
    return sorted(_REGISTRY, key=lambda n: order.get(type(_REGISTRY[n]).__module__, len(order)))
