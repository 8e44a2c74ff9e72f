"""Name → accountant instance.  Modules register their classes with :func:`register`."""

from __future__ import annotations

from dplab.accounting.base import Accountant
from dplab.errors import DPLabError

_REGISTRY: dict[str, Accountant] = {}


def register(cls: type[Accountant]) -> type[Accountant]:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise RuntimeError(f"accountant {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls()
    return cls


def get(name: str) -> Accountant:
    """The accountant called ``name``; a :class:`DPLabError` naming the valid ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DPLabError("accountant", f"unknown {name!r}; valid: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    """Every registered accountant, in registration order."""
    return list(_REGISTRY)
