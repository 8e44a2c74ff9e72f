"""Installed packages imported by their parts: dp_accounting and scipy.special.

dp_accounting's package ``__init__`` imports every part of the library (its ``pld`` package with
scipy.stats, its ``mechanism_calibration`` with scipy.optimize: 0.9 s of a job's start-up on the
project's 2-core machine, against 0.01 s for its ``rdp`` package).  scipy.special's ``__init__``
imports scipy's array-API layer, which clones numpy's namespace and with it numpy.f2py and
numpy.testing (0.12–0.18 s after torch), where an ``rdp`` job evaluates five of its compiled
functions.  Python runs a package's ``__init__`` before any of its submodules.

:func:`install` registers each package without running its ``__init__``: ``import
dp_accounting.rdp.rdp_privacy_accountant`` or ``from dp_accounting import dp_event`` import just
those modules, and ``special.gammaln`` (one of :data:`SPECIAL_UFUNCS`) is the ufunc of
scipy.special's compiled ``_ufuncs`` module, the very object its ``__init__`` exports
(tests/test_startup.py checks the identity).  The first use of any other name the ``__init__``
defines (``dp_accounting.GaussianDpEvent``, ``special.logsumexp``) runs it then, so code written
against the whole package keeps working.  The modules are the packages' own, unchanged: every
number is the same.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys

#: this module runs an installed package's ``__init__`` (:mod:`dplab.imports`)
LOADS_INSTALLED_PACKAGE = True
#: scipy.special's functions that the modules of an ``rdp`` job import (dp_accounting's rdp
#: module, :mod:`dplab.accounting.sampled_gaussian_rdp`, :mod:`dplab.accounting.gaussian`),
#: served from its ``_ufuncs`` module
SPECIAL_UFUNCS = ("erfc", "erfcx", "gammaln", "log_ndtr", "ndtr")


def install() -> None:
    """Register dp_accounting and scipy.special (each where it is not imported yet and is
    installed) as packages whose submodules import on their own and whose ``__init__`` runs on
    the first use of a name it defines."""
    _register("dp_accounting", importlib.util.find_spec("dp_accounting"), served={})
    scipy = importlib.util.find_spec("scipy")  # found, not imported (numpy stays unloaded)
    if scipy is not None:
        special = importlib.machinery.PathFinder.find_spec(
            "scipy.special", scipy.submodule_search_locations
        )
        served = dict.fromkeys(SPECIAL_UFUNCS, "_ufuncs")
        _register("scipy.special", special, served=served)


def _register(name: str, spec, served: dict[str, str]) -> None:
    """Put the package ``name`` (its ``spec``) in ``sys.modules`` with its ``__init__`` not run:
    a name in ``served`` is read from the submodule it maps to, a submodule imports alone, and
    any other name runs the ``__init__`` once."""
    if name in sys.modules or spec is None:
        return
    package = importlib.util.module_from_spec(spec)

    def __getattr__(attr: str):
        if attr in served:
            value = getattr(importlib.import_module(f".{served[attr]}", name), attr)
            setattr(package, attr, value)  # the next use finds it without this hook
            return value
        if not attr.startswith("__"):
            try:  # a submodule: import it alone
                return importlib.import_module(f".{attr}", name)
            except ModuleNotFoundError as err:
                if err.name != f"{name}.{attr}":
                    raise
        # any other name: this hook goes and the package's own __init__ runs, once
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, attr)

    package.__getattr__ = __getattr__
    sys.modules[name] = package
