"""Progress of long jobs (training, audit, sweep, factorization), in their logs.

On a terminal: a tqdm bar.  Otherwise (a Snakemake or SLURM job, whose stderr is the rule's log
file): one line on the ``dplab`` logger when the job starts, then whenever
``DPLAB_PROGRESS_SECONDS`` seconds of wall time (default 30; 0: at every update) have passed
since the last line, and one when it ends, so that ``tail -f logs/runs/<run>.log`` shows a run
moving.  A line names the job, the count done, the job's own status (training: the last
logged losses and ε with their accountant, δ, neighbouring relation and sampling), the elapsed
time and the time left at the rate so far (one line, wrapped here):

    2026-11-23 12:00:00 dplab train mnist_try3_dp_sgd: step 120/200 (60.0%) | train_loss=0.4123 …
      | elapsed 0:01:02, left ~0:00:41

The interval is by wall time only, so a job with fast steps writes no more than one line per
interval and a slow one at most one per step.  Lines are flushed as they are written.  For an
iterative solver (the factorizations) the total is its iteration cap, so the time left is an
upper bound.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time

from dplab.errors import DPLabError

#: environment variable: seconds between two progress lines in a log (not on a terminal)
INTERVAL_ENV = "DPLAB_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 30.0

log = logging.getLogger("dplab")


class _Stderr(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a record is emitted."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def setup_logging() -> None:
    """Send the ``dplab`` logger's INFO lines to stderr, with a time stamp (once per process)."""
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)


def interval_seconds() -> float:
    """``DPLAB_PROGRESS_SECONDS`` (default 30): a number of seconds >= 0."""
    raw = os.environ.get(INTERVAL_ENV)
    if raw is None or raw == "":
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise DPLabError(
            INTERVAL_ENV, f"must be a number of seconds >= 0 between progress lines; got {raw!r}"
        )
    return value


def clock(seconds: float) -> str:
    """H:MM:SS."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Progress of ``total`` units of work named ``what``, starting after ``done`` of them (a
    resumed run).  ``update(done, status)`` after each unit; ``close()`` at the end."""

    def __init__(self, what: str, total: int, done: int = 0, unit: str = "step"):
        self.what, self.total, self.unit = what, total, unit
        self.first = self.done = done
        self.status = ""
        self.last_written: int | None = None
        self.interval = interval_seconds()
        self.start = self.last = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, desc=f"dplab {what}", unit=unit)
        else:
            log.info("dplab %s: starting at %s %d/%d", what, unit, done, total)

    def due(self, done: int) -> bool:
        """Whether ``update(done)`` will write a log line (callers compute
        costly status only then)."""
        return self.bar is None and (
            done >= self.total or time.monotonic() - self.last >= self.interval
        )

    def update(self, done: int, status: str | None = None) -> None:
        """``done`` units are finished; ``status`` (if given) replaces the job's status text."""
        if status is not None:
            self.status = status
        if self.bar is not None:
            if status is not None:
                self.bar.set_postfix_str(status, refresh=False)
            self.bar.update(done - self.done)
        elif self.due(done):
            self._line(done)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.last_written != self.done:
            self._line(self.done)

    def _line(self, done: int) -> None:
        now = time.monotonic()
        elapsed, rate_done = now - self.start, done - self.first
        left = clock((self.total - done) * elapsed / rate_done) if rate_done > 0 else "?"
        share = 100.0 * done / self.total if self.total else 100.0
        status = f" | {self.status}" if self.status else ""
        log.info(
            "dplab %s: %s %d/%d (%.1f%%)%s | elapsed %s, left ~%s",
            self.what,
            self.unit,
            done,
            self.total,
            share,
            status,
            clock(elapsed),
            left,
        )
        self.last, self.last_written = now, done
