"""Atomic writes: write to a temporary file in the same folder, then rename; and the check every
command makes of its output paths before it computes anything.

A job that fails half-way therefore never leaves a half-written file under results/.  The file
gets the mode a plain ``open(path, "w")`` would give (0666 less the umask), so results on a
shared file system are as readable as the user's umask says.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from dplab.errors import DPLabError

if TYPE_CHECKING:  # pandas is not imported at run time: `dplab train` writes no frames
    import pandas as pd


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)`` and move the result to ``path`` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix or ".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600 whatever the umask
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it: put it back at once
    os.umask(mask)
    return mask


def check_output(path: str | Path, flag: str, folder: bool = False) -> Path:
    """``path`` as a :class:`Path` if a command can write it (a file, or a ``folder``); else a
    :class:`DPLabError` naming ``flag``: the path is a folder where a file is wanted (or a file
    where a folder is), lies under a file, or the nearest folder that exists is not writable.
    Every command calls this for each output before it computes anything, so a bad ``--out``
    is refused at once, not after the work, at the final write."""
    if not str(path).strip():  # Path("") is ".": the command would write into the working folder
        raise DPLabError(flag, "is empty; give the path to write")
    path = Path(path)
    if path.exists() and path.is_dir() != folder:
        raise DPLabError(flag, f"{path} is a {'file' if folder else 'folder'}; give the {'folder' if folder else 'file'} to write")
    parent = path if folder else path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise DPLabError(flag, f"{path} lies under {parent}, which is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DPLabError(flag, f"cannot write {path}: the folder {parent} is not writable")
    return path


def write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def write_json(path: str | Path, data) -> None:
    """Sorted keys, fixed indentation: identical data gives identical bytes."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_csv(path: str | Path, frame: pd.DataFrame) -> None:
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
