"""Probing ``dplab`` with bad input: call it in this process as a fresh process would answer, and
check the contract of a refusal (docs/reliability.md): exit code 2 (or 3 for a valid run that
failed), one line on stderr naming the key, flag or file, nothing written under the output path;
and the conditions a probe sets up: a nearly full disk (:func:`mount`), a folder another process
is writing (:func:`hold`).

Used by the probes of tests/test_refused_inputs.py, tests/test_fuzz_cli.py and the list of
tests/bad_inputs.py (which also runs as a script against another checkout: nothing here imports
``dplab`` until a call).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

#: a log line (progress, notes): "2026-01-01 12:00:00 …", which a refusal may print besides its line
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")
#: what a refusal's line names: "dplab CMD: error: KEY: …", a --flag, an argparse argument
NAMES_SOMETHING = re.compile(
    r"error: (argument |the following arguments|unrecognized arguments|[^\s:]+: )|--\w"
)
#: CPU seconds, and wall seconds, after which a call counts as hanging
CPU_LIMIT, WALL_LIMIT = 60, 600
#: this process's PYTHONPATH made absolute (a test changes the working folder before a holder
#: starts)
PYTHONPATH = os.pathsep.join(
    os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
)


class Hang(BaseException):
    """A call past its time limit (not an Exception: the CLI's handlers do not turn it into
    exit 1)."""


@contextmanager
def time_limit(cpu_seconds: float, wall_seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in this process once it has used ``cpu_seconds`` of CPU (a busy loop,
    however loaded the machine) or waited ``wall_seconds`` (a blocking read)."""

    def stop(signum, frame):
        raise Hang

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    signal.setitimer(signal.ITIMER_REAL, wall_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def fresh_stderr() -> Iterator[list[str]]:
    """What a fresh ``dplab`` process would also print on stderr for the block, which an
    in-process call under pytest does not show: the first line of each Python warning (under the
    interpreter's default filters: pytest's own record every warning and print none) and each
    library log record of level WARNING or above (which a fresh process prints through logging's
    last-resort handler: under pytest the root logger has handlers that print nothing).  dplab's
    own log lines are printed by its handler, and counted from stderr as they are."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            if not record.name.startswith("dplab"):
                lines.append(f"{record.levelname}:{record.name}:{record.getMessage()}")

    root, handler = logging.getLogger(), Collect(logging.WARNING)
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.resetwarnings()
            warnings.simplefilter("default")
            for category in (
                DeprecationWarning,
                PendingDeprecationWarning,
                ImportWarning,
                ResourceWarning,
            ):
                warnings.simplefilter("ignore", category)
            try:
                yield lines
            finally:
                lines += [
                    f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}" for w in caught
                ]
    finally:
        root.removeHandler(handler)


class Answer(NamedTuple):
    """What one call of ``dplab`` did."""

    code: int | None  #: its exit code; None: stopped at the time limit
    out: str
    err: str  #: stderr, with the lines a fresh process would add (:func:`fresh_stderr`)
    seconds: float  #: CPU seconds
    exited: bool  #: it ended by SystemExit (argparse's refusals), not by returning its code


def call(
    argv: list[str], capture, cpu_seconds: float = CPU_LIMIT, wall_seconds: float = WALL_LIMIT
) -> Answer:
    """``dplab ARGV`` in this process within the time limits; ``capture`` is pytest's capsys or
    capfd.  An exception other than SystemExit propagates: the CLI must turn every one into a
    line and an exit code."""
    from dplab.cli import main

    capture.readouterr()
    start, exited = time.process_time(), False
    try:
        with time_limit(cpu_seconds, wall_seconds), fresh_stderr() as printed:
            code = main(argv)
    except SystemExit as exit_:  # the exit code a process ending so would have
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        exited = True
    except Hang:
        code = None
    out, err = capture.readouterr()
    err += "".join(line + "\n" for line in printed)
    return Answer(code, out, err, time.process_time() - start, exited)


def error_lines(stderr: str) -> list[str]:
    """The lines of ``stderr`` but blank and log lines (:data:`LOG_LINE`)."""
    return [line for line in stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]


def written(folder: Path) -> list[str]:
    """What is under ``folder`` (paths relative to it, sorted; none where it does not exist)."""
    folder = Path(folder)
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def check_refusal(answer: Answer, case: str, out: Path | None = None, codes=(2,)) -> str:
    """Assert ``answer`` is a refusal: an exit code of ``codes``, one line on stderr (log lines
    aside) naming a key, flag or file, no traceback, nothing under ``out``; return the line."""
    assert answer.code in codes, f"{case}: exit code {answer.code}, want {codes}\n{answer.err}"
    assert "Traceback" not in answer.out + answer.err, f"{case}: traceback\n{answer.err}"
    lines = error_lines(answer.err)
    assert len(lines) == 1, f"{case}: {len(lines)} lines on stderr, want 1\n{answer.err}"
    assert NAMES_SOMETHING.search(lines[0]), f"{case}: names no key, flag or file: {lines[0]}"
    left = written(out) if out is not None else []
    assert not left, f"{case}: failed but wrote {left}"
    return lines[0]


def refused(argv: list[str], capture, out: Path | None = None) -> str:
    """Assert ``dplab ARGV`` refuses (:func:`check_refusal`, exit code 2); return its line."""
    return check_refusal(call(argv, capture), f"dplab {' '.join(map(repr, argv))}", out)


def mount(folder: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` (a nearly full disk) at ``folder``; False where this process may
    not mount one."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def umount(folder: Path) -> None:
    subprocess.run(["umount", str(folder)], capture_output=True, timeout=30)


#: holds the folder argv[1] (dplab.io.folder_lock) until its stdin closes; says "held" once it does
#: (a dplab without the lock, counted before it existed, holds nothing, as its commands did not)
HOLDER = """import contextlib, sys
import dplab.io
folder_lock = getattr(dplab.io, "folder_lock", contextlib.nullcontext)
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def hold(folder: str, killed: bool) -> subprocess.Popen | None:
    """Another process holding ``folder`` as a command writing it does (None once ``killed``:
    SIGKILL, as ``kill -9`` of a run, after it took the folder)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, folder],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )
    if holder.stdout.readline().strip() != "held":
        holder.kill()
        raise SystemExit(f"setup failed: could not hold {folder}")
    if killed:
        holder.kill()
        holder.wait()
        holder.stdin.close()
        holder.stdout.close()
        return None
    return holder
