"""Provenance records: commit, config hash, package versions and output hashes, checked against
git, hashlib and importlib.metadata directly."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess

import numpy
import pytest
import torch

from dplab.cli import main
from dplab.provenance import config_hash, record

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "tracked.txt").write_text("a\n")
    subprocess.run(["git", "add", "tracked.txt"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "commit", "-qm", "c"], cwd=tmp_path, check=True)
    results = tmp_path / "results" / "runs" / "r"
    results.mkdir(parents=True)
    (results / "summary.json").write_text('{"x": 1}\n')
    for name in ("checkpoint.pt", "checkpoint.prev.pt", "checkpoint.pt.corrupt-20260101T000000"):
        (results / name).write_bytes(b"resume state")
    return tmp_path


def test_record_names_commit_config_hash_versions_and_output_hashes(repo):
    config = {"seed": 0, "runs": {"r": {"lr": 0.5}}}
    rec = record(config, ["results"], cwd=repo)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    assert rec["git"] == {"commit": head, "dirty": False}
    canonical = '{"runs":{"r":{"lr":0.5}},"seed":0}'
    assert rec["config_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    for name, dist in [
        ("dplab", "dplab"),
        ("torch", "torch"),
        ("numpy", "numpy"),
        ("dp_accounting", "dp-accounting"),
        ("snakemake", "snakemake"),
        ("dvc", "dvc"),
    ]:
        assert rec["versions"][name] == importlib.metadata.version(dist)
    assert (
        rec["versions"]["torch"] == torch.__version__
        and rec["versions"]["numpy"] == numpy.__version__
    )
    summary = repo / "results" / "runs" / "r" / "summary.json"
    assert rec["outputs"] == {
        "results/runs/r/summary.json": {"sha256": hashlib.sha256(summary.read_bytes()).hexdigest()}
    }


def test_config_hash_ignores_key_order_but_not_values():
    a = {"seed": 0, "runs": {"r": {"lr": 0.5, "steps": 10}}}
    b = {"runs": {"r": {"steps": 10, "lr": 0.5}}, "seed": 0}
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash({"seed": 0, "runs": {"r": {"lr": 0.25, "steps": 10}}})


def test_uncommitted_change_marks_the_tree_dirty(repo):
    (repo / "tracked.txt").write_text("b\n")
    assert record({}, [], cwd=repo)["git"]["dirty"] is True


def test_outside_git_the_commit_is_null_with_the_reason(tmp_path):
    state = record({}, [], cwd=tmp_path)["git"]
    assert state["commit"] is None and state["error"]


def test_cli_config_file_and_json_give_the_same_hash(tmp_path, monkeypatch, capsys):
    from conftest import small_config

    config_file = tmp_path / "config.yaml"
    import yaml

    config_file.write_text(yaml.safe_dump(small_config()))
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    assert (
        main(["provenance", "--config", str(config_file), "--out", str(out_a), str(config_file)])
        == 0
    )
    assert (
        main(
            [
                "provenance",
                "--config-json",
                json.dumps(small_config()),
                "--out",
                str(out_b),
                str(config_file),
            ]
        )
        == 0
    )
    a, b = json.loads(out_a.read_text()), json.loads(out_b.read_text())
    assert a["config_sha256"] == b["config_sha256"]
    assert a["config"]["threads"] == small_config()["threads"]  # validated, defaults filled in

    assert (
        main(
            [
                "provenance",
                "--config",
                str(config_file),
                "--out",
                str(out_a),
                str(tmp_path / "nope"),
            ]
        )
        == 2
    )
    assert "outputs" in capsys.readouterr().err
