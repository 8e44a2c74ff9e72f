"""The training methods as plug-ins (dplab.training.methods): every registered method declares
all its parts, they are consistent with the run schema, the accountants and the docs, and no module
outside the methods package branches on a method's name."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from dplab import accounting
from dplab.errors import DPLabError
from dplab.figures import runs
from dplab.schemas import load_schema
from dplab.schemes import Sampling
from dplab.training.methods import METHODS
from dplab.training.methods.base import Method
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

PACKAGE = ROOT / "src" / "dplab"
METHODS_DIR = PACKAGE / "training" / "methods"
SAMPLINGS = (
    "poisson",
    "without_replacement",
    "shuffle",
    "balls_in_bins",
    "full_batch",
    "min_separation",
    "cyclic_poisson",
)


def test_the_registry_holds_one_method_per_module_of_the_package():
    modules = sorted(p.stem for p in METHODS_DIR.glob("*.py") if p.stem not in ("__init__", "base"))
    assert sorted(METHODS) == modules
    assert "enum" not in load_schema("run")["properties"]["method"], (
        "the registry, not the schema, lists the methods"
    )
    with pytest.raises(
        DPLabError, match=r"^runs\.x\.method: must be one of " + re.escape(", ".join(METHODS))
    ):
        resolve_run({"method": "dp_sgd2"}, "runs.x")


def test_a_new_method_is_one_new_module_and_one_registry_line(tmp_path):
    """A module dropped into a copy of the methods package and named by one line of the registry's
    table is a method every run may name: no schema or resolution code is edited."""
    copy = tmp_path / "dplab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "training" / "methods" / "planted_sgd.py").write_text(
        "import dataclasses\nfrom dplab.training.methods.dp_sgd import METHOD as _DP_SGD\n"
        "METHOD = dataclasses.replace(_DP_SGD, name='planted_sgd')\n"
    )
    table = copy / "training" / "methods" / "__init__.py"
    line = '    "sgd": "dplab.training.methods.sgd:METHOD",\n'
    table.write_text(
        table.read_text().replace(
            line, line + '    "planted_sgd": "dplab.training.methods.planted_sgd:METHOD",\n'
        )
    )
    probe = (
        "from dplab.training.resolve import resolve_run\n"
        "cfg = resolve_run({'method': 'planted_sgd', 'noise_multiplier': 1.0})\n"
        "print(cfg['method'], cfg['sampling'], cfg['accountant'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    ).stdout.split()
    dp_sgd = resolve_run({"method": "dp_sgd", "noise_multiplier": 1.0})
    assert out == ["planted_sgd", dp_sgd["sampling"], dp_sgd["accountant"]]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_declares_all_its_parts(name):
    method = METHODS[name]
    assert isinstance(method, Method) and method.name == name
    assert (
        method.display and runs.display_name(name) == method.display
    )  # the figures' name: the method's own
    assert re.search(r"\b00[0-4]\b", method.source), "cites its source paper (docs/references.md)"
    assert method.rule.startswith("w ←")
    assert method.samplings and set(method.samplings) <= set(SAMPLINGS)
    assert method.noise in ("none", "independent", "correlated")
    assert method.normalize in ("expected", "realized")
    assert method.projection in ("none", "optional", "required")
    assert isinstance(method.regularized, bool)
    assert set(method.keys) <= set(load_schema("run")["properties"])
    known = set(accounting.names()) | {"mf"}
    if method.private:
        assert method.accountant in known
        assert method.accountants is None or (
            method.accountant in method.accountants and set(method.accountants) <= known
        )
    else:
        assert method.accountant is None and method.accountants is None
    assert METHODS_DIR.joinpath(f"{name}.py").read_text().count("METHOD = ") == 1


def test_every_method_has_its_own_display_name():
    displays = [method.display for method in METHODS.values()]
    assert len(set(displays)) == len(displays)
    assert runs.display_name("unknown_method") == "unknown_method"


@pytest.mark.parametrize("name", sorted(m for m in METHODS if not METHODS[m].keys))
def test_a_method_without_own_keys_resolves_and_samples_as_declared(name):
    """A run of only what the method declares it needs resolves to the method's defaults, and its
    sampler draws the batches of its default sampling."""
    method = METHODS[name]
    raw = {"method": name, "steps": 3, "batch_size": 4, "device": "cpu"}
    if method.private:
        raw["noise_multiplier"] = 1.0
    if method.projection == "required":
        raw["diameter"] = 10.0
    if method.regularized:
        raw["regularization"] = 0.1
    cfg = resolve_run(raw)
    assert (cfg["sampling"], cfg["normalize"]) == (method.samplings[0], method.normalize)
    assert cfg["accountant"] == method.default_accountant(cfg["sampling"], cfg["neighbouring"])
    assert method.update(RunSettings.of(cfg)).noise == method.noise
    sampler = method.sampler(RunSettings.of(cfg), 20)
    assert type(sampler) is type(Sampling(cfg["sampling"]).sampler(20, RunSettings.of(cfg).b(20)))


def test_keys_and_accountants_of_one_method_are_refused_on_the_others():
    owner = next(m for m in METHODS.values() if m.keys)
    for other in (m for m in METHODS.values() if m is not owner and m.private):
        raw = {
            "method": other.name,
            "noise_multiplier": 1.0,
            "diameter": 1.0 if other.projection == "required" else None,
            "regularization": 0.1 if other.regularized else None,
        }
        with pytest.raises(Exception, match=f"only applies to method {owner.name}"):
            resolve_run({**raw, owner.keys[0]: 1 if owner.keys[0] != "strategy" else "identity"})
        with pytest.raises(Exception, match=f"accounts method {owner.name} only"):
            resolve_run({**raw, "accountant": owner.accountants[0]})


def test_the_docs_list_every_method():
    table = (ROOT / "docs/training.md").read_text()
    for name, method in METHODS.items():
        assert re.search(rf"^\| {name} \(", table, re.M), f"docs/training.md's table lacks {name}"
        row = re.search(
            rf"^\| {name} \| {re.escape(method.source.split(';')[0])}.* \| "
            rf"{re.escape(method.rule.replace('|', chr(92) + '|'))} \|$",
            table,
            re.M,
        )
        assert row, f"docs/training.md's rules table lacks {name} or states another rule"


def method_name_comparisons(root: Path, names: set[str]) -> list[str]:
    """``file:line`` of every comparison (==, !=, in, not in, is) of a module below ``root`` outside
    training/methods/ with a string literal (or a literal tuple/list/set of
    them) naming a method."""

    def named(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and node.value in names
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(named(e) for e in node.elts)

    found = []
    for path in sorted(root.rglob("*.py")):
        if METHODS_DIR in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare) and any(
                named(e) for e in (node.left, *node.comparators)
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
            elif isinstance(node, ast.match_case) and any(
                named(e.value) for e in ast.walk(node.pattern) if isinstance(e, ast.MatchValue)
            ):
                found.append(f"{path.relative_to(root)}:{node.pattern.lineno}")
    return found


def test_no_module_outside_the_methods_package_compares_a_method_name():
    assert method_name_comparisons(PACKAGE, set(METHODS)) == []


def test_the_name_check_finds_each_form_of_comparison(tmp_path):
    (tmp_path / "a.py").write_text('if cfg["method"] == "dp_mf":\n    pass\n')
    (tmp_path / "b.py").write_text('ok = method not in ("dp_sgd", "dp_gd")\n')
    (tmp_path / "c.py").write_text('match m:\n    case "noisy_gd":\n        pass\n')
    (tmp_path / "d.py").write_text('fine = {"dp_sgd": 1}["dp_sgd"] == 1 and x == "sampling"\n')
    assert method_name_comparisons(tmp_path, set(METHODS)) == ["a.py:1", "b.py:1", "c.py:2"]
