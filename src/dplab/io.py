"""Atomic writes: write to a temporary file in the same folder, then rename.

A job that fails half-way therefore never leaves a half-written file under results/.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

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
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def write_json(path: str | Path, data) -> None:
    """Sorted keys, fixed indentation: identical data gives identical bytes."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_csv(path: str | Path, frame: pd.DataFrame) -> None:
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
