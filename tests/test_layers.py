"""The package's layers: every import points to the same layer or one below it, and no modules
import each other in a cycle (docs/architecture.md).  Every module belongs to exactly one layer, and
every import form counts (:mod:`dplab.imports`: ``import``, ``from`` and relative imports,
``importlib.import_module``/``__import__``, plug-in lists, imports in functions and under
``TYPE_CHECKING``): the tests at the end plant each kind of violation in a copy of the package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dplab import imports

SRC = Path(__file__).resolve().parents[1] / "src"

#: bottom to top (the library is accounting … figures).  An entry names one module; ``pkg.*`` names
#: the package ``pkg`` and every module below it.  A module matching no entry, or two, is an error.
LAYERS = (
    (
        "core",
        (
            "dplab",
            "dplab.errors",
            "dplab.units",
            "dplab.io",
            "dplab.inputs",
            "dplab.progress",
            "dplab.provenance",
            "dplab.philox",
            "dplab._philox_normal",
            "dplab.tables",
            "dplab.validate",
            "dplab.citations",
            "dplab.imports",
            "dplab.registry",
            "dplab.schemes",
            "dplab.package_parts",
            "dplab.startup",
        ),
    ),
    ("layout", ("dplab.layout",)),
    ("schemas", ("dplab.schemas.*", "dplab.entries")),
    ("accounting", ("dplab.accounting.*",)),
    ("mf", ("dplab.mf.*",)),
    ("training", ("dplab.training.*",)),
    ("audit", ("dplab.audit.*",)),
    ("figures", ("dplab.figures.*",)),
    ("config", ("dplab.config", "dplab.jobs", "dplab.dvc_yaml", "dplab.registries")),
    ("commands", ("dplab.commands.*", "dplab.cli")),
)


def _matches(entry: str, name: str) -> bool:
    package = entry.removesuffix(".*")
    return name == entry or (
        entry.endswith(".*") and (name == package or name.startswith(package + "."))
    )


def layer(name: str) -> int:
    """The index in :data:`LAYERS` of the one layer that names module ``name``."""
    found = [
        index
        for index, (_, entries) in enumerate(LAYERS)
        for entry in entries
        if _matches(entry, name)
    ]
    if len(found) != 1:
        where = (
            "no layer" if not found else "several layers: " + ", ".join(LAYERS[i][0] for i in found)
        )
        raise AssertionError(
            f"{name} belongs to {where}: name it once in LAYERS of tests/test_layers.py"
        )
    return found[0]


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of ``graph`` that points up a layer, as "a (layer) imports b (layer)"."""
    return [
        f"{a} ({LAYERS[layer(a)][0]}) imports {b} ({LAYERS[layer(b)][0]})"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if layer(b) > layer(a)
    ]


GRAPH = imports.graph(SRC / "dplab")
STATIC = imports.graph(SRC / "dplab", plugins=False)


def test_every_module_belongs_to_one_layer():
    assert [layer(name) for name in GRAPH]


def test_no_import_points_up_a_layer():
    found = upward(GRAPH)
    assert not found, "imports up a layer:\n" + "\n".join(found)


def test_layout_imports_nothing_from_dplab():
    assert GRAPH["dplab.layout"] == set()


def test_no_import_cycle():
    """Plug-ins left out: a registry loads them by name when first asked,
    after both are imported."""
    cycle = find_cycle(STATIC)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path a -> … -> a, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": set(), "c": {"a", "b"}}, None),
    ],
)
def test_find_cycle_finds_one(graph, expected):
    assert find_cycle(graph) == expected


def test_setup_py_builds_each_c_file_as_the_module_the_graph_names():
    """setup.py's extensions are exactly :func:`dplab.imports.extensions`: each ``NAME.c`` of the
    package builds the module ``NAME`` beside it, so the graph's node for it is the module."""
    import ast

    tree = ast.parse((SRC.parent / "setup.py").read_text())
    built = {
        call.args[0].value: [SRC.parent / e.value for e in call.args[1].elts]
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Extension"
    }
    assert built == {name: [path] for name, path in imports.extensions(SRC / "dplab").items()}
    assert built and "dplab._philox_normal" in GRAPH["dplab.philox"]


def test_architecture_doc_shows_the_same_layers():
    doc = (SRC.parent / "docs/architecture.md").read_text()
    rows = [
        line.split("|")[1].strip()
        for line in doc.split("## Layers", 1)[1].split("\n## ", 1)[0].splitlines()
        if line.startswith("| ") and not line.startswith("| layer") and not line.startswith("| ---")
    ]
    assert rows == [name for name, _ in LAYERS] + ["rules"]


#: a registry whose table names a module (a plug-in loaded when its entry is first used)
TABLE_LINE = "from dplab.registry import Registry\nR = Registry('x', {'m': 'dplab.cli:main'})"
#: each kind of upward import planted at the end of dplab.accounting.base (one line or a few of
#: code), and the module it imports
PLANTS = {
    "import": ("import dplab.cli", "dplab.cli"),
    "import as": ("import dplab.commands.train as train", "dplab.commands.train"),
    "from import": ("from dplab.commands import train", "dplab.commands.train"),
    "from import a function": ("from dplab.jobs import plan", "dplab.jobs"),
    "relative from": ("from ..commands import train", "dplab.commands.train"),
    "relative module": ("from .. import cli", "dplab.cli"),
    "import_module": ("import importlib\nimportlib.import_module('dplab.cli')", "dplab.cli"),
    "import_module as": (
        "from importlib import import_module as load\nload('dplab.cli')",
        "dplab.cli",
    ),
    "import_module relative": (
        "import importlib\nimportlib.import_module('..cli', __package__)",
        "dplab.cli",
    ),
    "__import__": ("__import__('dplab.cli')", "dplab.cli"),
    "__import__ fromlist": ("__import__('dplab.cli', fromlist=['main'])", "dplab.cli"),
    "plug-in by prefix": (
        "import importlib\ndef load(name):\n    return importlib.import_module(f'dplab.cli{name}')",
        "dplab.cli",
    ),
    "plug-in list": (
        (
            "import importlib\nNAMES = ('dplab.cli',)\n"
            "for _name in NAMES:\n    importlib.import_module(_name)"
        ),
        "dplab.cli",
    ),
    "registry table line": (TABLE_LINE, "dplab.cli"),
    "in a function": ("def f():\n    from dplab import dvc_yaml", "dplab.dvc_yaml"),
    "TYPE_CHECKING": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dplab.cli import main",
        "dplab.cli",
    ),
    "typing.TYPE_CHECKING": (
        "import typing\nif typing.TYPE_CHECKING:\n    import dplab.config",
        "dplab.config",
    ),
    "not TYPE_CHECKING, else": (
        "import typing\nif not typing.TYPE_CHECKING:\n    pass\nelse:\n    import dplab.config",
        "dplab.config",
    ),
}


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of src/dplab to plant violations in."""
    return Path(
        shutil.copytree(
            SRC / "dplab", tmp_path / "dplab", ignore=shutil.ignore_patterns("__pycache__")
        )
    )


def plant(package: Path, module: str, code: str) -> dict[str, set[str]]:
    """:data:`GRAPH` with ``code`` appended to ``module`` in ``package`` (only
    that module read again)."""
    path = imports.modules(package)[module]
    path.write_text(path.read_text() + "\n" + code + "\n")
    return {**GRAPH, module: imports.module_imports(module, path, set(GRAPH))}


@pytest.mark.parametrize("kind", PLANTS)
def test_an_upward_import_of_each_form_is_caught(package, kind):
    code, target = PLANTS[kind]
    assert target not in GRAPH["dplab.accounting.base"]
    found = upward(plant(package, "dplab.accounting.base", code))
    assert found == [
        f"dplab.accounting.base (accounting) imports {target} ({LAYERS[layer(target)][0]})"
    ]


def test_a_module_without_a_layer_is_caught(package):
    """No catch-all: a new module (here at the top of the package) must be named in LAYERS."""
    (package / "helpers.py").write_text("import dplab.cli\n")
    with pytest.raises(AssertionError, match="dplab.helpers belongs to no layer"):
        [layer(name) for name in imports.modules(package)]


def test_an_upward_import_in_a_core_module_is_caught(package):
    """Every module is read, those LAYERS names one by one too (dplab.citations was only covered by
    the catch-all prefix "dplab" before)."""
    found = upward(plant(package, "dplab.citations", "import dplab.training.loop"))
    assert found == ["dplab.citations (core) imports dplab.training.loop (training)"]


@pytest.mark.parametrize(
    "code",
    [
        "import importlib\ndef load(name):\n    return importlib.import_module(name)",
        "exec('import dplab.cli')",
        "import runpy\nrunpy.run_module('dplab.cli')",
    ],
)
def test_an_import_the_graph_cannot_read_is_refused(package, code):
    with pytest.raises(imports.UnreadableImport, match=r"errors\.py:\d+: "):
        plant(package, "dplab.errors", code)


LOADER = (
    "import importlib.util\nspec = importlib.util.spec_from_file_location('m', 'models/net.py')\n"
    "spec.loader.exec_module(importlib.util.module_from_spec(spec))"
)


def test_only_a_module_declaring_it_loads_project_files_by_path(package):
    """A model file of the user's project is loaded by path (training/model_file.py), outside the
    graph; the declaration allows importlib.util's loaders, never exec."""
    with pytest.raises(imports.UnreadableImport, match=r"exec_module\(\) runs code"):
        plant(package, "dplab.errors", LOADER)
    assert (
        plant(package, "dplab.units", "LOADS_PROJECT_FILES = True\n" + LOADER)["dplab.units"]
        == GRAPH["dplab.units"]
    )
    with pytest.raises(imports.UnreadableImport, match=r"exec\(\) runs code"):
        plant(package, "dplab.io", "LOADS_PROJECT_FILES = True\nexec('import dplab.cli')")


def test_only_a_module_declaring_it_runs_an_installed_package_s_init(package):
    """package_parts runs dp_accounting's ``__init__`` from its spec: its declaration allows
    ``module_from_spec`` and ``exec_module``, never a file loaded by path."""
    init = (
        "import importlib.util\nspec = importlib.util.find_spec('dp_accounting')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))"
    )
    with pytest.raises(
        imports.UnreadableImport, match=r"(exec_module|module_from_spec)\(\) runs code"
    ):
        plant(package, "dplab.errors", init)
    declared = "LOADS_INSTALLED_PACKAGE = True\n"
    assert plant(package, "dplab.units", declared + init)["dplab.units"] == GRAPH["dplab.units"]
    with pytest.raises(imports.UnreadableImport, match=r"spec_from_file_location\(\) runs code"):
        plant(package, "dplab.io", declared + LOADER)


def test_a_planted_cycle_is_caught(package):
    graph = dict(STATIC)
    graph["dplab.units"] = plant(package, "dplab.units", "from dplab import errors")["dplab.units"]
    graph["dplab.errors"] = plant(package, "dplab.errors", "from dplab import units")[
        "dplab.errors"
    ]
    assert find_cycle(graph) == ["dplab.errors", "dplab.units", "dplab.errors"]


def test_a_registry_table_line_is_a_plug_in_not_an_import_at_load(package):
    """A module building a lazy Registry loads each module its table names when the entry is used:
    a plug-in in the whole graph (DVC stages depend on it), not an import that loading it runs."""
    path = imports.modules(package)["dplab.accounting.base"]
    path.write_text(path.read_text() + "\n" + TABLE_LINE + "\n")

    def read(**how) -> set[str]:
        return imports.module_imports("dplab.accounting.base", path, set(GRAPH), **how)

    assert "dplab.cli" in read()
    assert "dplab.cli" not in read(plugins=False) and "dplab.cli" not in read(runs=())
