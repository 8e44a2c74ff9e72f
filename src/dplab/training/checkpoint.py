"""Checkpoints of an unfinished run: DIR/checkpoint.pt, and the one before it as a fallback,
DIR/checkpoint.prev.pt (docs/training.md, Reliability).

A checkpoint file is one header line ``dplab-checkpoint sha256=<64 hex digits>`` and then
``torch.save``'s archive of the state; the digest covers the archive (torch itself checks no
checksum of tensor data: a changed byte there loads as a silently different parameter).

:func:`save` renames checkpoint.pt to checkpoint.prev.pt, then writes the new checkpoint.pt
atomically (:func:`dplab.io.atomic_write`), so a process killed at any moment leaves at least
one whole checkpoint.  :func:`resume` tries checkpoint.pt, then checkpoint.prev.pt: a file that
is truncated, fails its digest, does not load or holds no state is set aside (renamed
``<name>.corrupt-<time>``, never deleted) and the next one is tried; one written for another
run, dataset (its info.json or its arrays) or :mod:`environment <dplab.training.environment>`
(its fingerprint differs) is ignored.  One log
line says what was found and whether the run resumes (from which file, at which step) or
restarts from step 0.

A run that keeps its record (a phase of a run in phases, :mod:`dplab.training.phased`) also writes
its fingerprint to DIR/run.fingerprint with its results; :func:`completed` then tells a rerun that
DIR already holds this run, finished, so the run in phases goes on from its first unfinished phase.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import time
from pathlib import Path

import torch

from dplab import __version__
from dplab.io import atomic_write
from dplab.progress import log
from dplab.training.data import tensors_digest
from dplab.training.environment import differences

#: the current checkpoint and the one before it, in the order :func:`resume` tries them
NAMES = ("checkpoint.pt", "checkpoint.prev.pt")
#: a completed run's fingerprint, beside its summary.json (:func:`completed`)
COMPLETED = "run.fingerprint"
HEADER = b"dplab-checkpoint sha256="


def fingerprint(
    cfg: dict,
    info: dict,
    arrays: str,
    environment: dict,
    code: dict | None = None,
    start: dict[str, torch.Tensor] | None = None,
) -> str:
    """What a checkpoint must have been written for to be resumed: the run config, the dataset's
    info.json and the SHA-256 of its ``arrays`` (:attr:`dplab.training.data.Dataset.digest`;
    info.json does not change when the records do), dplab's version and source
    (:func:`source_digest`), the environment the bytes depend on, the SHA-256 of the run's own
    code (``code``: a model file's, :mod:`dplab.training.model_file`) and of the parameters it
    began from where they are not W₀ (``start``: a later phase's, whose config does not name the
    phases before it, :mod:`dplab.training.phased`)."""
    record = {
        "run": cfg,
        "data": info,
        "arrays": arrays,
        "version": __version__,
        "source": source_digest(),
        "environment": environment,
    }
    if code:
        record["code"] = code
    if start is not None:
        record["start"] = tensors_digest(start)
    blob = json.dumps(record, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


#: the files of dplab's own code that :func:`source_digest` hashes, by suffix, below its package
SOURCE_SUFFIXES = (".py", ".c", ".yaml")
PACKAGE = Path(__file__).resolve().parents[1]


@functools.cache
def source_digest(root: Path = PACKAGE) -> str:
    """SHA-256 of dplab's source (every :data:`SOURCE_SUFFIXES` file below ``root``, by relative
    path): code edited without a new version is another run's code."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES):
        digest.update(f"{path.relative_to(root).as_posix()}|".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def save(folder: Path, state: dict) -> None:
    """Write ``state`` as ``folder``/checkpoint.pt, keeping the previous one
    as checkpoint.prev.pt."""
    payload = torch_bytes(state)
    blob = HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    current, previous = (folder / name for name in NAMES)
    if current.exists():
        os.replace(current, previous)
    atomic_write(current, lambda tmp: tmp.write_bytes(blob))


def read(path: Path) -> dict:
    """The state in checkpoint file ``path``; a ValueError saying why if it is not whole."""
    head, newline, payload = path.read_bytes().partition(b"\n")
    if not newline or not head.startswith(HEADER):
        raise ValueError("no dplab checkpoint header")
    if hashlib.sha256(payload).hexdigest().encode() != head[len(HEADER) :]:
        raise ValueError(
            f"its SHA-256 does not match: truncated or changed ({len(payload)} bytes after the"
            " header)"
        )
    try:
        state = torch.load(io.BytesIO(payload), weights_only=True)
    except Exception as err:  # any failure to unpickle the archive: the file cannot be resumed from
        raise ValueError(f"torch.load fails: {str(err).splitlines()[0][:120]}") from None
    if not isinstance(state, dict):
        raise ValueError(f"it holds a {type(state).__name__}, not a run's state")
    return state


def resume(folder: Path, fingerprint: str, environment: dict, steps: int) -> dict | None:
    """The state of the last whole checkpoint in ``folder`` written for ``fingerprint``, or None
    (start from step 0); logs one line when a checkpoint was found (module docstring), saying so
    where it holds the run's last step (of ``steps``: a finished run of a job of several)."""
    notes = []
    for name in NAMES:
        path = folder / name
        if not path.exists():
            continue
        try:
            state = read(path)
        except (OSError, ValueError) as err:
            notes.append(f"{path} is corrupt ({err}); set aside as {set_aside(path).name}")
            continue
        if state.get("fingerprint") != fingerprint:
            changed = differences(state.get("environment"), environment)
            notes.append(
                f"ignoring {path}: written "
                + (f"with {changed}" if changed else "for another run config, dataset or start")
            )
            continue
        log.warning(
            "dplab train: %sresuming from %s at step %d%s",
            "".join(n + "; " for n in notes),
            path,
            state["step"],
            ", the run's last: its results are written, no step trained"
            if state["step"] == steps
            else "",
        )
        return state
    if notes:
        log.warning("dplab train: %s; restarting from step 0", "; ".join(notes))
    return None


def completed(folder: Path, fingerprint: str) -> bool:
    """Whether ``folder`` holds a completed run (its summary.json) whose :data:`COMPLETED` record
    is ``fingerprint``; logs one line when it does."""
    record = folder / COMPLETED
    if not (folder / "summary.json").exists() or not record.exists():
        return False
    if record.read_text().strip() != fingerprint:
        return False
    log.warning("dplab train: %s holds this run, completed: not trained again", folder)
    return True


def set_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.corrupt-<local time>`` (a new name, never over another file)."""
    stem = f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
    target, n = path.with_name(stem), 1
    while target.exists():
        target, n = path.with_name(f"{stem}-{n}"), n + 1
    os.rename(path, target)
    return target


def discard(folder: Path) -> None:
    """Remove the checkpoints of a finished run (set-aside corrupt ones stay for the user)."""
    for name in NAMES:
        (folder / name).unlink(missing_ok=True)


def torch_bytes(obj) -> bytes:
    """``torch.save`` into memory: the archive then does not record a (temporary) file name,
    so the same tensors give the same bytes."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()
