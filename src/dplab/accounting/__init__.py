"""Accountants (docs/accountants.md): one module per family, all behind :class:`Accountant`.

Use :func:`get` and :func:`names`; :data:`dplab.accounting.registry.ACCOUNTANTS` names each
accountant's module, imported when the accountant is first asked for.
"""

from dplab.accounting.base import Accountant
from dplab.accounting.registry import get, names
from dplab.accounting.setting import Setting

__all__ = ["Accountant", "Setting", "get", "names"]
