"""Typed runs and summaries (docs/architecture.md, "Where each fact lives"): a run's settings are
read from the resolved dict only by :meth:`dplab.training.settings.RunSettings.of`, a summary.json
only by :class:`dplab.training.summary.RunSummary`, which writes it back byte for byte."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conftest import synthetic_data
from dplab.errors import DPLabError
from dplab.training import loop
from dplab.training.resolve import resolve_run
from dplab.training.summary import RunSummary
from dplab.training.settings import RunSettings

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "dplab"
#: names that hold a resolved run (the dict) or a summary.json object
NAMES = ("cfg", "summary")
#: the modules that parse or write those dicts (the edges)
EDGES = {"training/resolve.py", "training/settings.py", "training/summary.py"}
#: modules whose lookups of those names are not a run's or a summary's, with the reason
_DATASET_ENTRY = (
    "its cfg is a dataset entry of the config's `datasets` (resolve_dataset), not a run"
)
ALLOWED = {
    module: _DATASET_ENTRY
    for module in (
        "training/data.py",
        "training/own_data.py",
        "training/csv_table.py",
        "training/image_folder.py",
    )
}


def string_lookups(root: Path) -> dict[str, int]:
    """Module (relative path) -> number of ``cfg["…"]``, ``cfg.get("…")``, ``summary["…"]`` and
    ``summary.get("…")`` under ``root``, outside :data:`EDGES`."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in EDGES:
            continue
        count = 0
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in NAMES
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                count += 1
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in NAMES
            ):
                count += 1
        if count:
            found[rel] = count
    return found


def test_runs_and_summaries_are_read_by_key_only_at_the_edges():
    found = string_lookups(PACKAGE)
    assert {k: v for k, v in found.items() if k not in ALLOWED} == {}
    assert set(ALLOWED) <= set(found), "an allowed module no longer needs its exception: remove it"


def test_the_scan_finds_a_planted_lookup(tmp_path):
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "resolve.py").write_text("x = cfg['method']\n")  # an edge: not counted
    (tmp_path / "plugin.py").write_text(
        "def f(cfg, summary):\n    return cfg['lr'], cfg.get('clip'), "
        "summary['epsilon'], summary.get('risk'), cfg[0]\n"
    )
    assert string_lookups(tmp_path) == {"plugin.py": 4}


BASE = {
    "steps": 4,
    "log_every": 2,
    "batch_size": 10,
    "lr": 0.5,
    "device": "cpu",
    "dataset": "synthetic",
}
KINDS = {
    "sgd": {"method": "sgd"},
    "shuffle": {
        "method": "dp_sgd_fixed_batches",
        "noise_multiplier": 1.0,
        "accountants": ["fixed_batches", "shuffle_lower", "as_if_poisson"],
    },  # lower bound and comparison
    "individual": {
        "method": "dp_sgd",
        "noise_multiplier": 1.0,
        "accountants": ["rdp"],
        "individual_epsilon": True,
    },
    "risk": {
        "method": "dp_sgd",
        "noise_multiplier": 2.0,
        "accountants": ["pld"],
    },  # a risk reading from pld's PLD
    "dp_mf": {
        "method": "dp_mf",
        "strategy": "banded",
        "bands": 2,
        "sampling": "cyclic_poisson",
        "min_separation": 2,
        "noise_multiplier": 1.0,
    },
}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return synthetic_data(
        tmp_path_factory.mktemp("synthetic"), 41, 10
    )  # 41 mod b = 1: add_remove keeps ⌊n/b⌋


@pytest.mark.parametrize("kind", KINDS)
def test_a_summary_read_and_written_again_is_the_same_file(synth, tmp_path, kind):
    returned = loop.train(
        RunSettings.of(resolve_run({**BASE, **KINDS[kind]})), synth, tmp_path / "run"
    )
    path = tmp_path / "run" / "summary.json"
    summary = RunSummary.read(path)
    assert (
        summary.text() == returned.text() == path.read_text()
    )  # (JSON makes individual_privacy's class keys strings)
    summary.write(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert (summary.individual_privacy is not None) == (kind == "individual") and (
        "tpr" in summary.risk
    ) == (kind == "risk")
    assert bool(summary.details) == (kind == "dp_mf") and bool(summary.epsilon_lower) == (
        kind == "shuffle"
    )
    assert summary.settings.method == KINDS[kind]["method"] and summary.final.step == BASE["steps"]


def test_a_summary_without_a_key_is_refused_naming_it(synth, tmp_path):
    loop.train(RunSettings.of(resolve_run({**BASE, **KINDS["sgd"]})), synth, tmp_path / "run")
    data = json.loads((tmp_path / "run" / "summary.json").read_text())
    del data["update"], data["risk"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    with pytest.raises(DPLabError, match=r"run summary has no key 'risk', 'update'; delete it"):
        RunSummary.read(tmp_path / "old.json")
    data = json.loads((tmp_path / "run" / "summary.json").read_text())
    del data["run"]["individual_order"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    with pytest.raises(
        DPLabError, match=r"run summary records a run without key 'individual_order'"
    ):
        RunSummary.read(tmp_path / "old.json")
