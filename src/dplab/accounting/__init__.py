"""Accountants (docs/accountants.md): one module per family, all behind :class:`Accountant`.

Use :func:`get` and :func:`names`; the accountant modules listed in
:data:`dplab.accounting.registry.MODULES` register themselves when first needed.
"""

from dplab.accounting.base import Accountant
from dplab.accounting.registry import get, names
from dplab.accounting.setting import Setting

__all__ = ["Accountant", "Setting", "get", "names"]
