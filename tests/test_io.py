"""Atomic writes (dplab.io): a process killed while writing a file leaves the previous version
whole; this is what lets a training job that SLURM stops (SIGTERM, then SIGKILL after KillWait)
resume from its last checkpoint.  Written files respect the umask; output
paths are checked first."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dplab.errors import DPLabError
from dplab.io import atomic_write, check_output

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
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "writing\n"
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == -sig
    assert target.read_bytes() == before and torch.load(target, weights_only=True) == {"step": 100}
    # what is left is the killed write's temporary file, hidden, never read (and ignored by DVC)
    assert [p.name[: len(".checkpoint.pt.")] for p in tmp_path.iterdir() if p != target] == [
        ".checkpoint.pt."
    ]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_get_the_mode_the_umask_gives(tmp_path, umask, mode):
    """As open(path, "w") would: 0666 less the umask (mkstemp alone gives
    0600 whatever the umask)."""
    from dplab.io import write_text

    old = os.umask(umask)
    try:
        write_text(tmp_path / "a" / "result.csv", "x\n")
        plain = tmp_path / "plain"
        plain.write_text("x\n")
    finally:
        os.umask(old)
    assert (
        stat.S_IMODE((tmp_path / "a" / "result.csv").stat().st_mode)
        == mode
        == stat.S_IMODE(plain.stat().st_mode)
    )


def _unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process may not write in: a read-only folder, or for root (which writes in
    any folder) a read-only file system."""
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    for folder in (Path("/proc/sys"), Path("/sys/fs/cgroup")):
        if folder.is_dir() and not os.access(folder, os.W_OK):
            return folder
    pytest.skip("no folder here that root may not write in")


def test_check_output_refuses_what_cannot_be_written(tmp_path):
    afile = tmp_path / "a.csv"
    afile.write_text("x\n")
    assert (
        check_output(tmp_path / "new" / "deeper" / "out.csv", "--out")
        == tmp_path / "new" / "deeper" / "out.csv"
    )
    assert check_output(afile, "--out") == afile  # replaced by the write
    assert check_output(tmp_path / "newdir", "--out", folder=True) == tmp_path / "newdir"
    cases = [
        (tmp_path, False, "is a folder"),
        (afile, True, "is a file"),
        (afile / "out.csv", False, "lies under"),
        (afile / "sub" / "dir", True, "lies under"),
        (_unwritable_folder(tmp_path) / "dplab" / "out.csv", False, "not writable"),
    ]
    for path, folder, says in cases:
        with pytest.raises(DPLabError) as err:
            check_output(path, "--out", folder=folder)
        assert (
            err.value.key == "--out"
            and says in err.value.message
            and str(path) in err.value.message
        )
