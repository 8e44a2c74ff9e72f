"""dp_accounting imported by its parts: a module that uses ``dp_accounting.rdp`` does not pay for
``dp_accounting.pld``.

dp_accounting's package ``__init__`` imports every part of the library (its ``pld`` package with
scipy.stats, its ``mechanism_calibration`` with scipy.optimize: 0.9 s of a job's start-up on the
project's 2-core machine, against 0.01 s for its ``rdp`` package), and Python runs a package's
``__init__`` before any of its submodules.  :func:`install` registers the package without running
its ``__init__``: ``import dp_accounting.rdp.rdp_privacy_accountant`` or
``from dp_accounting import dp_event`` import just those modules.  The first use of a name the
``__init__`` defines (``dp_accounting.GaussianDpEvent``) runs it then, so any code written against
the whole package keeps working.  The modules are dp_accounting's own, unchanged: every number
is the same.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

#: this module runs an installed package's ``__init__`` (:mod:`dplab.imports`)
LOADS_INSTALLED_PACKAGE = True
PACKAGE = "dp_accounting"


def install() -> None:
    """Register dp_accounting (where it is not imported yet) as a package whose submodules import
    on their own and whose ``__init__`` runs on the first use of a name it defines."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    package = importlib.util.module_from_spec(spec)

    def __getattr__(name: str):
        if not name.startswith("__"):
            try:  # a submodule: import it alone
                return importlib.import_module(f"dp_accounting.{name}")
            except ModuleNotFoundError as err:
                if err.name != f"{PACKAGE}.{name}":
                    raise
        # any other name: this hook goes and the package's own __init__ runs, once
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = __getattr__
    sys.modules[PACKAGE] = package
