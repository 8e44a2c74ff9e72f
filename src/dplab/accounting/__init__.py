"""Accountants (CATALOGUE §2): one module per family, all behind :class:`Accountant`.

Importing this package registers every accountant; use :func:`get` and :func:`names`.
"""

from dplab.accounting.base import Accountant
from dplab.accounting.registry import get, names
from dplab.accounting.setting import Setting

# Each import registers the accountants its module defines (order = listing order).
from dplab.accounting import composition  # noqa: E402,F401  naive, advanced, kairouz
from dplab.accounting import moments  # noqa: E402,F401  moments
from dplab.accounting import dp_accounting_adapters  # noqa: E402,F401  rdp, pld
from dplab.accounting import rdp_closed_form  # noqa: E402,F401  rdp_closed_form
from dplab.accounting import pabi  # noqa: E402,F401  pabi
from dplab.accounting import langevin  # noqa: E402,F401  langevin
from dplab.accounting import ye_shokri  # noqa: E402,F401  ye_shokri
from dplab.accounting import asoodeh  # noqa: E402,F401  asoodeh_projected, asoodeh_regularized
from dplab.accounting import gaussian  # noqa: E402,F401  gaussian_classic, _simple, _pei, _analytic

__all__ = ["Accountant", "Setting", "get", "names"]
