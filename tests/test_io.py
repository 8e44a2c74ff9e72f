"""Atomic writes (dplab.io): a process killed while writing a file leaves the previous version
whole; this is what lets a training job that SLURM stops (SIGTERM, then SIGKILL after KillWait)
resume from its last checkpoint."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from dplab.io import atomic_write

#: writes half a file into atomic_write's temporary file, says so, and waits to be killed
WRITER = """
import sys, time
from dplab.io import atomic_write

def write(tmp):
    with open(tmp, "wb") as f:
        f.write(b"half a checkpoint")
        f.flush()
        print("writing", flush=True)
        time.sleep(60)

atomic_write(sys.argv[1], write)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_kill_in_the_middle_of_a_write_leaves_the_previous_file(tmp_path, sig):
    import torch

    target = tmp_path / "checkpoint.pt"
    atomic_write(target, lambda tmp: torch.save({"step": 100}, tmp))
    before = target.read_bytes()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "writing\n"
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == -sig
    assert target.read_bytes() == before and torch.load(target, weights_only=True) == {"step": 100}
    # what is left is the killed write's temporary file, hidden, never read (and ignored by DVC)
    assert [p.name[: len(".checkpoint.pt.")] for p in tmp_path.iterdir() if p != target] == [".checkpoint.pt."]
