"""A job's start-up: the libraries it imports, without garbage collections of their objects.

Importing torch allocates about 110,000 Python objects that live as long as the process and are
never garbage; CPython's cyclic collector scans them anyway, and its full collections during a
1-step ``dplab train`` took 0.15–0.16 s of its 1.6 s on the project's 2-core machine (0.22 s with
the younger generations; ``gc.callbacks``, benchmarks/README.md).  Inside :func:`settled_imports`
the collector is paused; on leaving, everything allocated so far is frozen (``gc.freeze``: moved
to a generation the collector never scans) and the collector resumes for the job's own work.
The freeze happens once per process: a caller that runs several commands in one process (the
tests) keeps no more than what existed at its first.  Reference counting frees everything else
as before; the results do not depend on it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def settled_imports() -> Iterator[None]:
    """Run the block (a command's imports) with the cyclic garbage collector paused, then freeze
    what exists (the first time in this process) and resume the collector as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
        if enabled:
            gc.enable()
