"""Answers kept for the rest of a job: the same accountant question asked twice is computed once.

A job of several runs asks its accountants the same questions again: a grid cell's seeds (config
``group_runs: seed``) share the setting, so the σ calibration (every ε of its root search), the ε
curve at the logged steps and the attack risk are the same computation in each run.  Inside
:func:`kept_answers` each is computed on its first asking only and given again, as a copy, after:
the same bits, since every accountant is a function of its question.  Outside, nothing is kept
(a test that changes an accountant sees its change).
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Callable, Hashable, Iterator, TypeVar

T = TypeVar("T")

#: question → answer while :func:`kept_answers` is active (None: nothing is kept)
_KEPT: dict[Hashable, object] | None = None


@contextmanager
def kept_answers() -> Iterator[None]:
    """Keep every answer of :func:`answer` until the block ends (nested blocks share one store)."""
    global _KEPT
    outer = _KEPT
    _KEPT = {} if outer is None else outer
    try:
        yield
    finally:
        _KEPT = outer


def answer(question: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, or inside :func:`kept_answers` a copy of what it gave for ``question`` before
    (``question`` must name everything the answer depends on).  Refusals are not kept."""
    if _KEPT is None:
        return compute()
    if question not in _KEPT:
        _KEPT[question] = compute()
    return copy.deepcopy(_KEPT[question])
