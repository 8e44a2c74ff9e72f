"""Lazy registries: a table of name -> ``"module:object"``, imported when an entry is first used.

Every kind of plug-in registers this one way: accountants (:mod:`dplab.accounting.registry`),
training methods (:mod:`dplab.training.methods`), models (:mod:`dplab.training.models`), figures
(:mod:`dplab.figures`), audit estimators (:mod:`dplab.audit.estimators`) and commands
(:mod:`dplab.cli`).  A :class:`Registry` is a read-only mapping: its names (in table order) and
``name in registry`` import nothing; ``registry[name]`` imports the entry's module once and returns
its object (``"module"`` alone: the module itself).  So a job imports the plug-ins it uses, not
every plug-in of the kind.  :mod:`dplab.imports` reads each such string literal as a plug-in of
the module holding the table; this module's own import call loads only those.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

#: this module's import calls load what other modules' tables name (:mod:`dplab.imports`)
LOADS_REGISTERED = True


class Registry(Mapping):
    """``kind``'s entries: name -> ``"module:object"`` (or ``"module"``), in listing order, with
    display metadata per name (``meta``: e.g. a figure's colour or a table's label)."""

    def __init__(self, kind: str, entries: dict[str, str], meta: dict[str, dict] | None = None):
        self.kind, self.entries, self.meta = kind, dict(entries), dict(meta or {})
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        target = self.entries[name]
        if target not in self._loaded:
            module, _, member = target.partition(":")
            loaded = importlib.import_module(module)
            self._loaded[target] = getattr(loaded, member) if member else loaded
        return self._loaded[target]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> list[str]:
        """Every name, in listing order (nothing imported)."""
        return list(self.entries)
