"""Every file dplab writes goes through here: written under a temporary name in the same folder,
then renamed (:func:`atomic_write`; :func:`atomic_writes` for files that belong together, such as
a figure's PDF and PNG); a folder of several files is whole only when its last file lands
(:func:`output_folder`), and only one command writes it at a time (:func:`folder_lock`); and the
check every command makes of its output paths before it computes anything (:func:`check_output`).

A job that fails half-way (a full disk, a diverged run) therefore never leaves a half-written file
under results/, nor, on failure, any file it wrote (docs/reliability.md, "Nothing half-written").
A file gets the mode a plain ``open(path, "w")`` would give (0666 less the umask), so results on a
shared file system are as readable as the user's umask says.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from dplab.errors import DPLabError


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)`` and move the result to ``path`` in one rename."""
    atomic_writes({path: write})


def atomic_writes(writers: dict[str | Path, Callable[[Path], None]]) -> None:
    """Each ``write(tmp_path)`` of ``writers`` (path → write) to a temporary file beside its path,
    then every rename: the files land together or (a write failed) none does.  A folder this
    creates for them is removed again on failure."""
    temps: dict[Path, Path] = {}
    made = []
    try:
        for path, write in writers.items():
            path = Path(path)
            made += _make_folder(path.parent)
            fd, tmp = tempfile.mkstemp(
                dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix or ".tmp"
            )
            os.close(fd)
            temps[path] = Path(tmp)
            try:
                write(temps[path])
            except OSError as err:  # ENOSPC on write() names no file: name the output
                if err.filename is not None or err.errno is None:
                    raise
                raise OSError(err.errno, err.strerror, str(path)) from err
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600 whatever the umask
        for path, tmp in temps.items():
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        _remove_empty(made)
        raise


#: the name prefix of :func:`folder_lock`'s lock files (no result: provenance skips them)
LOCK_PREFIX = ".dplab-lock."


@contextmanager
def folder_lock(path: str | Path, flag: str = "--out") -> Iterator[Path]:
    """Hold ``path``, a folder a command writes, for the block: a second command writing it
    meanwhile is refused (one line naming ``flag``, the folder and the holder's pid) rather than
    both printing results of which the folder holds one.  The lock is ``flock`` on the file
    ``.dplab-lock.NAME`` (:data:`LOCK_PREFIX`) beside the folder, which holds the holder's
    pid and is removed when the block ends; the kernel releases a ``flock`` when its
    process dies, so a killed command (``kill -9``) leaves at most a stale lock file that
    the next command takes over."""
    path = Path(path)
    made = _make_folder(path.parent)
    lock = path.parent / f"{LOCK_PREFIX}{path.name}"
    try:
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                raise DPLabError(
                    flag,
                    f"{path} is being written by another dplab command (pid {holder}); wait for "
                    "it to end, or give another folder",
                ) from None
            try:
                if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                    # else the holder removed the file between our open and flock: take the new one
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            yield path
        finally:
            lock.unlink(
                missing_ok=True
            )  # before the unlock: a waiter that opened it retries on the new file
            os.close(fd)
    finally:
        _remove_empty(made)


@contextmanager
def output_folder(path: str | Path) -> Iterator[Path]:
    """The folder a command writes several files into (a run folder, a prepared dataset), left
    as it was found if the command fails: on an exception the files and folders the block added
    are removed, and the folder itself (with the parents) if the block created it.  The command
    writes its marker file last (a run's summary.json, a dataset's info.json): the folder is
    whole when that file is there.  An interrupt (Ctrl-C, SystemExit) keeps everything: a killed
    run resumes from its checkpoints.  The folder is held (:func:`folder_lock`) for the block."""
    path = Path(path)
    with folder_lock(path):
        made = _make_folder(path)
        before = set(path.iterdir())
        try:
            yield path
        except Exception:
            for entry in set(path.iterdir()) - before if path.is_dir() else ():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
            _remove_empty(made)
            raise


def _make_folder(folder: Path) -> list[Path]:
    """``mkdir -p folder``; the folders it created, deepest first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) where empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it: put it back at once
    os.umask(mask)
    return mask


def check_output(path: str | Path, flag: str, folder: bool = False) -> Path:
    """``path`` as a :class:`Path` if a command can write it (a file, or a ``folder``); else a
    :class:`DPLabError` naming ``flag``: the path is a folder where a file is wanted (or a file
    where a folder is; a file path ending in ``/``), lies under a file, or the nearest folder that
    exists is not writable. Every command calls this for each output before it computes anything, so
    a bad ``--out`` is refused at once, not after the work, at the final write."""
    if not str(path).strip():  # Path("") is ".": the command would write into the working folder
        raise DPLabError(flag, "is empty; give the path to write")
    if not folder and str(path).endswith(("/", os.sep)):  # Path("dir/") is "dir": a file named dir
        raise DPLabError(flag, f"{path} ends with '/', a folder; give the file to write")
    path = Path(path)
    if path.exists() and path.is_dir() != folder:
        raise DPLabError(
            flag,
            f"{path} is a {'file' if folder else 'folder'}; give the"
            f" {'folder' if folder else 'file'} to write",
        )
    parent = path if folder else path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise DPLabError(flag, f"{path} lies under {parent}, which is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DPLabError(flag, f"cannot write {path}: the folder {parent} is not writable")
    return path


def check_not_input(path: str | Path, flag: str, inputs) -> None:
    """Refuse an output ``path`` that is one of the command's ``inputs`` (the same file, by any
    name: writing it would replace the input), a :class:`DPLabError` naming ``flag``."""
    for given in inputs:
        if Path(path).exists() and Path(given).exists() and os.path.samefile(path, given):
            raise DPLabError(
                flag, f"{path} is the input {given}: writing it would replace it; give another path"
            )


def write_text(path: str | Path, text: str) -> None:
    atomic_write(path, text_file(text))


def text_file(text: str) -> Callable[[Path], None]:
    """A writer of ``text`` for :func:`atomic_write`/:func:`atomic_writes`."""
    return lambda tmp: tmp.write_text(text)


def npz_file(arrays: dict) -> Callable[[Path], None]:
    """A writer of ``arrays`` as one .npz (``numpy.savez``) for
    :func:`atomic_write`/:func:`atomic_writes`."""

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)

    return write


def write_npz(path: str | Path, **arrays) -> None:
    atomic_write(path, npz_file(arrays))


def write_json(path: str | Path, data) -> None:
    write_text(path, json_text(data))


def json_text(data) -> str:
    """Sorted keys, fixed indentation: identical data gives identical bytes."""
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
