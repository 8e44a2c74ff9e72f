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

It also keeps freed memory for reuse (:func:`keep_freed_memory`): glibc's malloc gives a block
above its mmap threshold pages of its own and returns them on free, so every step that makes such
temporaries pays their page faults again (14,000 a DP step of the CNN at batch 256, half its time;
benchmarks/README.md).
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: glibc's mallopt parameters (malloc.h) and the values :func:`keep_freed_memory` sets: blocks
#: below 32 MiB (glibc's largest mmap threshold on 64-bit) come from the heap, and the heap keeps
#: up to 256 MiB of freed memory at its top instead of returning it to the system
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 256 << 20


@contextmanager
def settled_imports() -> Iterator[None]:
    """Run the block (a command's imports) with the cyclic garbage collector paused, then freeze
    what exists (the first time in this process) and resume the collector as it was."""
    keep_freed_memory()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
        if enabled:
            gc.enable()


def keep_freed_memory() -> bool:
    """Have the C library's malloc keep freed memory for the next allocations
    (:data:`MMAP_THRESHOLD`, :data:`TRIM_THRESHOLD`) rather than map and fault fresh pages each
    step; where malloc has no ``mallopt`` (not glibc), nothing changes.  Where memory lies does
    not change any number.  Returns whether both settings took."""
    try:  # where ctypes opens no C library by None (Windows), or it has no mallopt: nothing
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
