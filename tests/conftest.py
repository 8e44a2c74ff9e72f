"""Shared fixtures: the repository root, and a throw-away copy of the project for pipeline tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tool_env() -> dict:
    """The environment the pipeline's tools run in: this interpreter's bin first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(cmd: list[str], cwd: Path, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a command of the pipeline (snakemake, dvc, dplab) and return its completed process."""
    proc = subprocess.run(cmd, cwd=cwd, env=tool_env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line]


#: the figures the pipeline tests build (each figure's table is tested on its own elsewhere)
SMALL_FIGURES = ("accountants_vs_pld", "gaussian_sigma")


def small_config() -> dict:
    """The default config with fewer steps, one seed per grid and the figures of
    :data:`SMALL_FIGURES`: every stage of the DAG in seconds."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for entry in config["runs"].values():
        entry["steps"] = min(entry.get("steps", 40), 40)
    for grid in config.get("grids", {}).values():
        grid["base"]["steps"] = min(grid["base"].get("steps", 20), 20)
        grid["seeds"] = grid["seeds"][:1]
        grid["variants"] = dict(list(grid["variants"].items())[:2])
        grid["target_epsilon"] = grid.get("target_epsilon", [1.0])[:1] if "target_epsilon" in grid else None
        if grid["target_epsilon"] is None:
            del grid["target_epsilon"]
    for audit in config.get("audits", {}).values():
        audit.update(runs=8, chunk=8, steps=audit["steps"][:1])
    for entry in config.get("sweeps", {}).values():
        entry["points"] = 5
        entry["accountants"] = [a for a in entry["accountants"] if a in ("rdp", "pld")]
    config["figures"] = {k: v for k, v in config.get("figures", {}).items() if k in SMALL_FIGURES}
    return config


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project's tracked files (a git repo of its own) with a small config."""
    dest = tmp_path / "project"
    for rel in tracked_files():
        src = ROOT / rel
        if src.is_symlink() or src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target, follow_symlinks=False)
    (dest / "config" / "config.yaml").write_text(yaml.safe_dump(small_config(), sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"], cwd=dest, check=True
    )
    return dest


# Property tests draw the same examples on every run (CI must not be flaky).
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("dplab", derandomize=True, deadline=None)
_hypothesis_settings.load_profile("dplab")
