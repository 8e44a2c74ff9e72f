"""Provenance of results: which commit, config and package versions made each output.

One record (``results/provenance.json``, written by the ``provenance`` rule and DVC stage)
holds the git commit (and whether the working tree had uncommitted changes), the SHA-256 of
the config (canonical JSON: sorted keys, no whitespace) and the config itself, the versions
of the packages that compute results, and the SHA-256 of every output it covers, so that a
table or figure found anywhere can be matched to the run that made it by its hash; and, where
the config's datasets read the user's own files (kinds arrays, csv, image_folder) or its runs
build a model of the user's own (``model: FILE.py:Class``), the SHA-256 of each of those inputs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import subprocess
from pathlib import Path

from dplab.io import LOCK_PREFIX

#: distributions whose versions determine the numbers (import name differs for dp_accounting)
PACKAGES = ("dplab", "torch", "numpy", "scipy", "dp-accounting", "opacus", "snakemake", "dvc")
#: name prefixes of files next to results that are not results: training's resume state
#: (checkpoint.pt, checkpoint.prev.pt, those set aside as corrupt, a killed write's temporary file)
#: and a folder's lock file (:func:`dplab.io.folder_lock`)
SKIP = ("checkpoint.", ".checkpoint.", LOCK_PREFIX)


def config_hash(config: dict) -> str:
    """SHA-256 of the config as canonical JSON (key order and formatting do not matter)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def versions() -> dict[str, str | None]:
    """Installed versions of :data:`PACKAGES` (None where one is not installed) and Python."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name.replace("-", "_")] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name.replace("-", "_")] = None
    out["python"] = platform.python_version()
    return out


def git_state(cwd: Path) -> dict:
    """The commit checked out in ``cwd`` and whether tracked files differ from it."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return {
            "commit": None,
            "dirty": None,
            "error": head.stderr.strip() or "not a git repository",
        }
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return {"commit": head.stdout.strip(), "dirty": bool(dirty)}


def expand(paths: list[str], cwd: Path = Path(".")) -> dict[str, Path]:
    """Files named by ``paths`` (directories: every file below them, sorted), minus :data:`SKIP`,
    keyed by their name as given (relative paths are relative to ``cwd``)."""
    files = {}
    for name in paths:
        path = Path(cwd, name)
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for p in found:
            if not p.name.startswith(SKIP):
                files[(Path(name) / p.relative_to(path)).as_posix()] = p
    return files


def record(config: dict, outputs: list[str], cwd: Path = Path("."), inputs: list[str] = ()) -> dict:
    """The provenance record of ``outputs`` made with ``config`` in the repository at ``cwd``
    from the data files ``inputs`` (the key only where there are some)."""
    out = {
        "git": git_state(cwd),
        "config_sha256": config_hash(config),
        "versions": versions(),
        "outputs": {key: {"sha256": file_hash(p)} for key, p in expand(outputs, cwd).items()},
    }
    if inputs:
        out["inputs"] = {
            key: {"sha256": file_hash(p)} for key, p in expand(list(inputs), cwd).items()
        }
    return {**out, "config": config}
