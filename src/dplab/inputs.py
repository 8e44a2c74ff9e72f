"""Reading what one command wrote for another: prepared datasets, saved factorizations, run
summaries.

A missing, corrupt or truncated file is one :class:`~dplab.errors.DPLabError` (one line, exit 2
on the CLI) naming the file, what is wrong and the command that writes it again, never a
traceback.  What can be detected: an npz member whose CRC-32 does not match (any changed byte),
a truncated zip or JSON document, a missing array or key.  A file Snakemake or DVC
produced is not rebuilt while it exists, hence "delete it and rerun the pipeline" beside the
command.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from dplab.errors import DPLabError

#: keys every run's summary.json holds that the sweep and figure commands read
SUMMARY_KEYS = ("run", "final", "delta", "epsilon")


def damaged(path: str | Path, what: str, problem: str, regenerate: str) -> DPLabError:
    """The error for a file (holding ``what``, e.g. "prepared dataset") that exists but cannot be used."""
    return DPLabError(str(path), f"{what} {problem}; delete it and rerun the pipeline, or write it again with "
                                 f"`{regenerate}`")


def missing(path: str | Path, what: str, regenerate: str) -> DPLabError:
    return DPLabError(str(path), f"{what} missing; write it with `{regenerate}`")


def read_json(path: str | Path, what: str, regenerate: str, keys: tuple[str, ...] = ()) -> dict:
    """The JSON object in ``path``, which must hold ``keys``."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise missing(path, what, regenerate) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise damaged(path, what, f"corrupt or truncated ({_reason(err)})", regenerate) from None
    if not isinstance(data, dict):
        raise damaged(path, what, f"holds a JSON {type(data).__name__}, not an object", regenerate)
    absent = [k for k in keys if k not in data]
    if absent:
        raise damaged(path, what, f"has no key {', '.join(map(repr, absent))}", regenerate)
    return data


def read_npz(path: str | Path, what: str, names: tuple[str, ...], regenerate: str) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the .npz file ``path``, read whole (so that every CRC is checked)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in names if k in archive.files}
    except FileNotFoundError:
        raise missing(path, what, regenerate) from None
    except (OSError, ValueError, EOFError, MemoryError, zipfile.BadZipFile) as err:
        raise damaged(path, what, f"corrupt or truncated ({_reason(err)})", regenerate) from None
    absent = [k for k in names if k not in arrays]
    if absent:
        raise damaged(path, what, f"has no array {', '.join(map(repr, absent))}", regenerate)
    return arrays


def train_command(folder: str | Path) -> str:
    """What writes a training run's files into ``folder``."""
    return f"dplab train --config CONFIG --run RUN --data DATA --out {folder}"


def run_summary(path: str | Path) -> dict:
    """A run's summary.json (written by ``dplab train``)."""
    return read_json(path, "run summary", train_command(Path(path).parent), SUMMARY_KEYS)


def _reason(err: BaseException) -> str:
    """The first line of an exception's message, with its type, at most 120 characters."""
    text = f"{type(err).__name__}: {err}".splitlines()[0]
    return text if len(text) <= 120 else text[:117] + "..."
