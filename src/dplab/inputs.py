"""Reading what one command wrote for another: prepared datasets, saved factorizations, run
summaries (:meth:`dplab.training.summary.RunSummary.read` builds on :func:`read_json`), result
tables (CSV); and the whole-file check of every file a command reads.

A missing, corrupt or truncated file is one :class:`~dplab.errors.DPLabError` (one line, exit 2
on the CLI) naming the file, what is wrong and the command that writes it again, never a
traceback.  What can be detected: a path that is not a regular file (a FIFO or a device such as
/dev/zero, which would block or never end) or is empty (:func:`input_file`); an npz member whose
CRC-32 does not match (any changed byte), a truncated zip or JSON document, a missing array or
key; a CSV table cut inside a line (every table dplab writes ends with a newline:
:func:`read_csv`).  A CSV cut exactly at a line boundary is detected where its producer
promises a length: a run's metrics.csv ends at the run's last step (:func:`run_metrics`); a
result table records its row count (:mod:`dplab.tables`).  A file
Snakemake or DVC produced is not rebuilt while it exists, hence "delete it and rerun the
pipeline" beside the command.
"""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from dplab.errors import DPLabError

if TYPE_CHECKING:  # numpy and pandas are imported where a file is read: `dplab` starts fast
    import numpy as np
    import pandas as pd


def damaged(path: str | Path, what: str, problem: str, regenerate: str) -> DPLabError:
    """The error for a file (holding ``what``, e.g. "prepared dataset") that
    exists but cannot be used."""
    return DPLabError(
        str(path),
        f"{what} {problem}; delete it and rerun the pipeline, or write it again with "
        f"`{regenerate}`",
    )


def missing(path: str | Path, what: str, regenerate: str) -> DPLabError:
    return DPLabError(str(path), f"{what} missing; write it with `{regenerate}`")


def input_file(path: str | Path, key: str, empty_ok: bool = False) -> Path:
    """``path`` as a :class:`Path` if it is a regular file a command can read to its end (not
    empty, unless ``empty_ok``); else a :class:`DPLabError` naming ``key`` (the flag, or the file's
    role) and what ``path`` is instead: missing, a folder, a FIFO, a device (``/dev/zero``, whose
    reading never ends), a socket."""
    if str(path) == "":  # Path("") is ".", the working folder
        raise DPLabError(key, "is an empty path; give a file")
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise DPLabError(key, f"no such file: {path}") from None
    except OSError as err:
        raise DPLabError(key, f"cannot read {path}: {err.strerror}") from None
    if stat.S_ISDIR(mode):
        raise DPLabError(key, f"{path} is a folder; give a file")
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise DPLabError(
            key,
            f"{path} is {kind}, not a regular file; give a file (reading it could block or never"
            " end)",
        )
    if not empty_ok and path.stat().st_size == 0:
        raise DPLabError(key, f"{path} is empty")
    return path


#: the deepest nesting of arrays and objects a JSON or YAML input may have (no input of dplab nests
#: deeper than 6; Python's parsers recurse, and 100 000 nested ``[`` was a RecursionError)
DEPTH_MAX = 64


class DuplicateKey(ValueError):
    """A key given twice in one JSON object."""


def loads(text: str) -> object:
    """The JSON value of ``text``, refusing (:class:`ValueError`, one line) what :func:`json.loads`
    would take silently or crash on: a key given twice in one object (RFC 8259 §4: names SHOULD be
    unique; Python keeps the last, so a second ``noise_multiplier`` replaced the first), nesting
    deeper than :data:`DEPTH_MAX`, ``NaN``/``Infinity``."""
    depth = _json_depth(text)
    if depth > DEPTH_MAX:
        raise ValueError(f"nested {depth} levels deep, more than {DEPTH_MAX} (DEPTH_MAX)")
    return json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)


def _json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` outside strings (an upper
    bound for invalid JSON)."""
    import re

    depth = deepest = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"?|[\[{]|[\]}]', text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _unique(pairs: list[tuple[str, object]]) -> dict:
    data: dict = {}
    for key, value in pairs:
        if key in data:
            raise DuplicateKey(
                f"key {key!r} given twice in one object; keep one (the last would silently win)"
            )
        data[key] = value
    return data


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number; give a finite number")


def read_json(path: str | Path, what: str, regenerate: str, keys: tuple[str, ...] = ()) -> dict:
    """The JSON object in ``path`` (read by :func:`loads`), which must hold ``keys``."""
    if not Path(path).exists():
        raise missing(path, what, regenerate)
    input_file(path, what)
    try:
        data = loads(Path(path).read_text())
    except FileNotFoundError:
        raise missing(path, what, regenerate) from None
    except DuplicateKey as err:
        raise damaged(path, what, str(err), regenerate) from None
    except (
        OSError,
        ValueError,
    ) as err:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise damaged(path, what, f"corrupt or truncated ({_reason(err)})", regenerate) from None
    if not isinstance(data, dict):
        raise damaged(path, what, f"holds a JSON {type(data).__name__}, not an object", regenerate)
    absent = [k for k in keys if k not in data]
    if absent:
        raise damaged(path, what, f"has no key {', '.join(map(repr, absent))}", regenerate)
    return data


def json_member(path: str | Path, text: str, what: str, regenerate: str) -> dict:
    """The JSON object ``text`` stored inside the file ``path`` (e.g. a saved factorization's
    ``info``), read by :func:`loads`; anything else is the file's damage."""
    try:
        data = loads(text)
    except ValueError as err:
        raise damaged(
            path, what, f"holds a member that is not a JSON object ({_reason(err)})", regenerate
        ) from None
    if not isinstance(data, dict):
        raise damaged(
            path, what, f"holds a JSON {type(data).__name__} where an object belongs", regenerate
        )
    return data


def read_npz(
    path: str | Path, what: str, names: tuple[str, ...], regenerate: str
) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the .npz file ``path``, read whole (so that every CRC is checked)."""
    import numpy as np

    if Path(path).exists():
        input_file(path, what)
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


def read_csv(path: str | Path, what: str, regenerate: str) -> pd.DataFrame:
    """The CSV table in ``path`` (written by :func:`dplab.tables.write_table` or the training loop,
    both of which end every line, the last included, with a newline): refused when missing, not a
    regular file, empty, cut inside its last line (no final newline) or not CSV."""
    import pandas as pd

    if not Path(path).exists():
        raise missing(path, what, regenerate)
    input_file(path, what)
    with open(path, "rb") as handle:
        handle.seek(-1, 2)
        if handle.read(1) != b"\n":
            raise damaged(
                path, what, "truncated (its last line is cut: no final newline)", regenerate
            )
    try:
        return pd.read_csv(path)
    except (
        OSError,
        UnicodeDecodeError,
        ValueError,
        pd.errors.ParserError,
        pd.errors.EmptyDataError,
    ) as err:
        raise damaged(path, what, f"not a CSV table ({_reason(err)})", regenerate) from None


def run_metrics(path: str | Path, steps: int) -> pd.DataFrame:
    """A run's metrics.csv, which must end at the run's last step ``steps`` (T, the training loop
    always logs it): a table cut at a line boundary is refused too."""
    regenerate = train_command(Path(path).parent)
    metrics = read_csv(path, "run metrics", regenerate)
    if "step" not in metrics.columns or metrics.empty or metrics["step"].iloc[-1] != steps:
        last = (
            metrics["step"].iloc[-1] if "step" in metrics.columns and not metrics.empty else "none"
        )
        raise damaged(
            path,
            "run metrics",
            f"truncated: its last step is {last}, the run's summary says {steps}",
            regenerate,
        )
    return metrics


def train_command(folder: str | Path) -> str:
    """What writes a training run's files into ``folder``."""
    return f"dplab train --config CONFIG --run RUN --data DATA --out {folder}"


def _reason(err: BaseException) -> str:
    """The first line of an exception's message, with its type, at most 120 characters."""
    text = f"{type(err).__name__}: {err}".splitlines()[0]
    return text if len(text) <= 120 else text[:117] + "..."
