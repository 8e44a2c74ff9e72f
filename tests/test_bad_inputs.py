"""The cheap part of the list of bad inputs (tests/bad_inputs.py), run in-process.

Every cheap entry falls in no class (exit code, half-written files, lines on stderr, hang,
silent, a message that misses what its ``says`` expects): each is refused, or answered, within
a few seconds (the late and hanging entries, not cheap, are counted by the script)."""

from __future__ import annotations

import subprocess
import sys

import bad_inputs
import probe
import pytest

from dplab.cli import main

CHEAP = [entry for entry in bad_inputs.ENTRIES if entry.cheap]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    work = tmp_path_factory.mktemp("bad_inputs")
    return work, bad_inputs.prepare(work, lambda argv, timeout: (main(argv), "", 0.0))


@pytest.mark.parametrize("entry", CHEAP, ids=lambda entry: entry.name)
def test_bad_input(entry, world, capfd, monkeypatch):
    work, (data, table, paths) = world
    monkeypatch.chdir(work)

    def call(argv, timeout):
        answer = probe.call(argv, capfd, probe.CPU_LIMIT, timeout)
        return answer.code, answer.err, answer.seconds

    result = bad_inputs.run_entry(entry, work, data, table, paths, call, probe.WALL_LIMIT)
    if result is None:
        pytest.skip("cannot mount a tmpfs here")
    assert bad_inputs.classify(entry, result) == [], result


def test_a_series_that_does_not_converge_is_one_line_in_a_fresh_process(tmp_path):
    """rdp's series that do not converge at some orders are one ``dplab`` line, once (a new
    process: under pytest the root logger already has handlers; dp_accounting's own absl warning
    for them gave it a stderr handler, and every later line came out twice)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dplab.cli",
            "epsilon",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.1",
            "--steps",
            "6",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and probe.LOG_LINE.match(lines[0]) and "did not converge" in lines[0], (
        lines
    )


WARN = """import logging, warnings
warnings.warn_explicit("a library's warning", RuntimeWarning, "somelib.py", 1, module="somelib")
warnings.warn_explicit("hidden by Python's default filters", DeprecationWarning, "somelib.py", 2,
                       module="somelib")
logging.getLogger("somelib").warning("a library's log warning")
logging.getLogger("somelib").info("below WARNING")
"""


def test_fresh_stderr_shows_what_a_fresh_process_prints(tmp_path):
    """Under pytest an in-process call shows neither Python warnings (pytest records them) nor
    library log warnings (the root logger has pytest's handlers): ``fresh_stderr`` collects the
    lines a fresh process prints, one per warning, and nothing a fresh process hides."""
    done = subprocess.run(
        [sys.executable, "-c", WARN], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    shown = [line for line in done.stderr.splitlines() if line.strip()]
    with probe.fresh_stderr() as printed:
        exec(WARN, {})  # noqa: S102 (the same code, in this process)
    assert len(shown) == len(printed) == 2, (shown, printed)
    assert any("RuntimeWarning: a library's warning" in line for line in printed)
    assert any("a library's log warning" in line for line in printed)
