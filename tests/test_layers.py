"""The package's layers: every import (at the top of a module or inside a function) points to the
same layer or one below it, and no modules import each other in a cycle (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: bottom to top (the library is accounting … figures); a module belongs to the layer whose longest
#: prefix names it or its package
LAYERS = (
    ("core", ("dplab", "dplab.errors", "dplab.units", "dplab.io", "dplab.inputs", "dplab.progress", "dplab.provenance",
              "dplab.validate")),
    ("layout", ("dplab.layout",)),
    ("schemas", ("dplab.schemas", "dplab.jobs")),
    ("accounting", ("dplab.accounting",)),
    ("mf", ("dplab.mf",)),
    ("training", ("dplab.training",)),
    ("audit", ("dplab.audit",)),
    ("figures", ("dplab.figures",)),
    ("config", ("dplab.config", "dplab.pipeline", "dplab.dvc_yaml")),
    ("commands", ("dplab.commands", "dplab.cli")),
)


def modules() -> dict[str, Path]:
    """Every module of src/dplab: dotted name -> file (a package is its __init__.py)."""
    found = {}
    for path in sorted((SRC / "dplab").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The dplab modules ``name`` imports, anywhere in its file (``from a import b`` names ``a.b``
    when that is a module, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in found if m in known and m != name}


def layer(name: str) -> int:
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    if best is None:
        raise AssertionError(f"{name} belongs to no layer: add it to LAYERS in tests/test_layers.py")
    return best[0]


MODULES = modules()
GRAPH = {name: imports(name, path, set(MODULES)) for name, path in MODULES.items()}


def test_every_module_belongs_to_a_layer():
    assert {name: layer(name) for name in MODULES}


def test_no_import_points_up_a_layer():
    upward = [f"{a} ({LAYERS[layer(a)][0]}) imports {b} ({LAYERS[layer(b)][0]})"
              for a in sorted(GRAPH) for b in sorted(GRAPH[a]) if layer(b) > layer(a)]
    assert not upward, "imports up a layer:\n" + "\n".join(upward)


def test_layout_imports_nothing_from_dplab():
    assert GRAPH["dplab.layout"] == set()


def test_no_import_cycle():
    cycle = find_cycle(GRAPH)
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
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set(), "c": {"a", "b"}}, None),
])
def test_find_cycle_finds_one(graph, expected):
    assert find_cycle(graph) == expected


def test_architecture_doc_shows_the_same_layers():
    doc = (SRC.parent / "docs/architecture.md").read_text()
    rows = [line.split("|")[1].strip() for line in doc.split("## Layers", 1)[1].split("\n## ", 1)[0].splitlines()
            if line.startswith("| ") and not line.startswith("| layer") and not line.startswith("| ---")]
    assert rows == [name for name, _ in LAYERS] + ["rules"]
