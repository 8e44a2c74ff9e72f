"""Commit subjects of at most 72 characters (docs/architecture.md, "Writing code, tests and
commits"): the commit-msg hook refuses a longer one in one line, ``make hooks`` installs it, and
the commits since :data:`BASE` comply."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

HOOK = ROOT / ".githooks" / "commit-msg"
LIMIT = 72
#: the commit after which the subjects are checked (the first with the hook; older ones are not)
BASE = "c864799"
#: git's environment without what a calling git (a hook running the tests) points at its own repo
GIT_ENV = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
MESSAGES = [
    ("x" * 72 + "\n\nthe detail " + "y" * 200 + "\n", None),
    ("x" * 73 + "\n", 73),
    ("# a comment line git leaves out\n\n" + "σ" * 72 + "\n", None),  # characters, not bytes
    ("a subject on two lines,\njoined by git log into one of " + "z" * 30 + "\n", 84),
]


def git(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("message, length", MESSAGES, ids=["72", "73", "comment+72σ", "2 lines"])
def test_the_hook_refuses_a_subject_over_72_characters_in_one_line(tmp_path, message, length):
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(HOOK), str(path)], capture_output=True, text=True, timeout=60
    )
    lines = done.stderr.splitlines()
    if length is None:
        assert done.returncode == 0 and not lines, done.stderr
    else:
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert f"the subject has {length} characters, more than {LIMIT}" in lines[0]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_hook_reads_the_subject_git_log_prints(tmp_path):
    """The subject the hook measures is git's own ``%s`` of the same message."""
    subject = runpy.run_path(str(HOOK))["subject"]
    assert git("init", "-q", cwd=tmp_path).returncode == 0
    for message, _ in MESSAGES:
        done = git(
            *("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q"),
            *("--allow-empty", "--no-verify", "--cleanup=strip", "-m", message),
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        printed = git("log", "-1", "--format=%s", cwd=tmp_path).stdout.rstrip("\n")
        assert subject(message) == printed


@pytest.mark.skipif(not (shutil.which("git") and shutil.which("make")), reason="needs git, make")
def test_make_hooks_installs_the_hook_at_the_top_of_a_checkout_only(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path)
    inner = tmp_path / "copy"
    inner.mkdir()
    shutil.copy(ROOT / "Makefile", inner)
    assert git("init", "-q", cwd=tmp_path).returncode == 0
    for folder in (inner, tmp_path):  # a copy inside another repository sets up nothing
        make = ["make", "-s", "INSTALL=", "hooks"]
        done = subprocess.run(make, cwd=folder, env=GIT_ENV, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        hooks = git("config", "core.hooksPath", cwd=tmp_path).stdout.strip()
        assert hooks == ("" if folder == inner else ".githooks")


def test_the_commits_since_the_base_have_subjects_of_at_most_72_characters():
    if shutil.which("git") is None or git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    if git("cat-file", "-e", f"{BASE}^{{commit}}").returncode != 0:
        pytest.skip(f"commit {BASE} is not in this history (a shallow clone?)")
    subjects = git("log", "--format=%s", f"{BASE}..HEAD").stdout.splitlines()
    long = [f"{len(s)}: {s}" for s in subjects if len(s) > LIMIT]
    assert not long, f"commit subjects over {LIMIT} characters: {long}"
