"""The registries (dplab.registry): each table names exactly the plug-ins of its kind, each entry
loads the object it names, the schemas' generated lists and docs/registries.md agree with the
tables, and looking a name up imports only that entry's module."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

from conftest import ROOT

from dplab import registries
from dplab.accounting.base import Accountant
from dplab.accounting.registry import ACCOUNTANTS, get
from dplab.figures import FIGURES, Figure
from dplab.registry import Registry
from dplab.schemas import load_schema
from dplab.schemes import Neighbouring, Sampling
from dplab.training.methods.base import Method
from dplab.training.models.base import Model

PACKAGE = ROOT / "src" / "dplab"


def test_the_schemas_generated_lists_are_the_registries_names():
    found = registries.registries()
    for path in sorted((PACKAGE / "schemas").glob("*.schema.yaml")):
        text = path.read_text()
        assert registries.schema_text(text, found) == text, path.name  # python -m dplab.registries
    marked = {
        path.stem.split(".")[0]: {m["kind"] for m in registries.MARK.finditer(path.read_text())}
        for path in (PACKAGE / "schemas").glob("*.schema.yaml")
    }
    assert marked["run"] == {"methods", "models", "samplings", "neighbourings", "accountants"}
    assert marked["config"] == {"estimators", "neighbourings", "accountants"}
    # the figures' entries: a generated block of the modules' PARAMS (same lists, from the types)
    figures = load_schema("config")["properties"]["figures"]["properties"]
    assert figures["sampling_gap"]["properties"]["neighbouring"]["enum"] == list(Neighbouring)
    accountants = figures["sigma_vs_steps"]["properties"]["accountants"]["items"]["examples"]
    assert accountants == list(ACCOUNTANTS)


def test_the_schemas_lists_are_the_types_members():
    run = load_schema("run")["properties"]
    assert run["sampling"]["enum"] == [*Sampling, None]
    assert run["neighbouring"]["enum"] == list(Neighbouring)
    assert run["accountant"]["examples"] == list(ACCOUNTANTS)
    assert "enum" not in run["accountant"] and "enum" not in run["method"]  # resolve_run checks


def test_the_config_schemas_figures_are_the_registered_figures():
    figures = load_schema("config")["properties"]["figures"]["properties"]
    assert list(figures) == list(FIGURES)
    assert all(figures[name] == FIGURES[name].PARAMS for name in FIGURES), "their own PARAMS"


def test_a_marked_schema_line_takes_its_registrys_names():
    table = {"models": Registry("model", {"b": "x:B", "a": "x:A"})}
    line = "      - {enum: [old, names]}  # generated: models\n"
    assert registries.schema_text(line, table) == "      - {enum: [b, a]}  # generated: models\n"
    line = "  x: {enum: [old, null], default: null}  # generated: neighbourings\n"
    new = (
        "  x: {enum: [add_remove, replace_one, null], default: null}  # generated: neighbourings\n"
    )
    assert registries.schema_text(line, table) == new


def test_every_generated_block_is_its_table():
    """docs/registries.md, the methods' and models' tables of docs/training.md and of their
    packages' docstrings: each block is what its registry makes of it now."""
    for name in registries.BLOCKS:
        path = ROOT / name
        text = path.read_text()
        assert registries.BLOCK.search(text), f"{name} holds no generated block"
        made = registries.blocks_text(text, path.suffix == ".md")
        assert made == text, f"{name}: run python -m dplab.registries"


BLOCK = "a\n{0} generated: models (python -m dplab.registries)\nold\n{0} end generated: models\nb\n"


def test_a_block_is_written_as_a_markdown_or_rest_table():
    from dplab.training.models import MODELS

    md = registries.blocks_text(BLOCK.format("<!--"), markdown_file=True).splitlines()
    assert md[:2] == ["a", "<!-- generated: models (python -m dplab.registries)"]
    assert md[2:4] == ["| model | network |", "| --- | --- |"]
    assert md[4:-2] == [f"| {m.name} | {m.network} |" for m in MODELS.values()]
    assert md[-2:] == ["<!-- end generated: models", "b"]
    rest = registries.blocks_text(BLOCK.format(".."), markdown_file=False).splitlines()[2:-2]
    rule = rest[0]
    assert rest[2] == rest[-1] == rule and set(rule) == {"=", " "}
    start = rule.index("  =") + 2  # a simple table's second column starts under its rule
    for line, model in zip(rest[3:-1], MODELS.values()):
        assert line[:start].rstrip() == model.name and line[start:] == model.network


def test_a_methods_row_overrides_only_what_its_fields_do_not_say():
    from dplab.training.methods import METHODS

    rows = {row[0].split(" (")[0]: row for row in registries.method_defaults()[1:]}
    sgd, dp_gd = METHODS["sgd"], METHODS["dp_gd"]
    assert rows["sgd"] == [f"sgd ({sgd.source})", ", ".join(sgd.samplings), "expected", "–", "–"], (
        "no Row: every cell from the fields"
    )
    assert rows["dp_gd"][0] == f"dp_gd ({dp_gd.row.cited})" != f"dp_gd ({dp_gd.source})"
    assert rows["dp_gd"][3:] == ["optional", "rdp"]


def test_every_entry_loads_an_object_of_its_kind_under_its_name():
    for name in ACCOUNTANTS:
        assert isinstance(get(name), Accountant) and get(name).name == name
    from dplab.training.methods import METHODS
    from dplab.training.models import MODELS

    assert all(isinstance(METHODS[n], Method) and METHODS[n].name == n for n in METHODS)
    assert all(isinstance(MODELS[n], Model) and MODELS[n].name == n for n in MODELS)
    assert all(
        isinstance(FIGURES[n], Figure) and FIGURES[n].__name__ == f"dplab.figures.{n}"
        for n in FIGURES
    )


def test_every_accountant_class_of_the_package_is_registered():
    """A concrete Accountant class defined in dplab.accounting that no table line names is a
    forgotten registration (the Gaussian calibrations are instances of one class, all named)."""
    import importlib

    registered = {type(get(name)) for name in ACCOUNTANTS}
    modules = {target.partition(":")[0] for target in ACCOUNTANTS.entries.values()}
    for module in sorted(modules):
        for _, cls in inspect.getmembers(importlib.import_module(module), inspect.isclass):
            concrete = not inspect.isabstract(cls) and not cls.__name__.startswith("_")
            if issubclass(cls, Accountant) and cls.__module__ == module and concrete:
                assert cls in registered, f"{module}.{cls.__name__} is in no line of ACCOUNTANTS"


PROBE = """
import json, sys
from dplab.accounting import get, names
names()
listed = [m for m in sys.modules if m.startswith("dplab.accounting.")]
get("naive")
after = [m for m in sys.modules if m.startswith("dplab.accounting.")]
print(json.dumps({"listed": listed, "after": after}))
"""


def test_a_lookup_imports_only_its_entrys_module():
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
    )
    seen = json.loads(out.stdout)
    assert "dplab.accounting.composition" not in seen["listed"]
    new = set(seen["after"]) - set(seen["listed"])
    assert "dplab.accounting.composition" in new
    assert "dplab.accounting.dp_accounting_adapters" not in new
