"""The registries' names where the schemas and docs list them, generated from the tables.

``python -m dplab.registries`` rewrites every schema line marked ``# generated: KIND`` (its list
``[…]`` becomes the names of that registry) and docs/registries.md (a table per registry: each
name, what the entry says of itself, its module); tests/test_registries.py fails when either
drifts from the tables: :data:`dplab.accounting.registry.ACCOUNTANTS`,
:data:`dplab.training.methods.METHODS`, :data:`dplab.training.models.MODELS`,
:data:`dplab.figures.FIGURES` and :data:`dplab.audit.estimators.ESTIMATORS`.
"""

from __future__ import annotations

import re
from pathlib import Path

from dplab.registry import Registry

#: this package's folder and the repository's docs
PACKAGE = Path(__file__).resolve().parent
DOC = PACKAGE.parents[1] / "docs/registries.md"
#: a schema line whose list a registry writes: ``… [a, b] … # generated: KIND``
MARK = re.compile(
    r"^(?P<head>[^#\n]*?)\[[^\]\n]*\](?P<tail>[^#\n]*# generated: (?P<kind>\w+))$", re.M
)
BEGIN, END = "<!-- registries: begin (python -m dplab.registries) -->\n", "<!-- registries: end -->"


def registries() -> dict[str, Registry]:
    """Kind -> its registry (importing the tables, not their entries)."""
    from dplab.accounting.registry import ACCOUNTANTS
    from dplab.audit.estimators import ESTIMATORS
    from dplab.figures import FIGURES
    from dplab.training.methods import METHODS
    from dplab.training.models import MODELS

    return {
        "accountants": ACCOUNTANTS,
        "methods": METHODS,
        "models": MODELS,
        "figures": FIGURES,
        "estimators": ESTIMATORS,
    }


def schema_text(text: str, found: dict[str, Registry] | None = None) -> str:
    """``text`` (a schema) with each marked line's list made the names of its registry."""
    found = registries() if found is None else found
    return MARK.sub(lambda m: f"{m['head']}[{', '.join(found[m['kind']])}]{m['tail']}", text)


def _row(kind: str, registry: Registry, name: str, entry) -> list[str]:
    """What an entry says of itself, per kind: the columns of its docs table."""
    if kind == "accountants":
        return [entry.bound, registry.meta.get(name, {}).get("colour", "-"), entry.source]
    if kind in ("methods", "models"):
        return [entry.display, entry.source]
    if kind == "figures":
        return [entry.TITLE, entry.SOURCE]
    return [", ".join(need for need, yes in entry.items() if yes) or "-"]


COLUMNS = {
    "accountants": ["bound", "colour", "source"],
    "methods": ["display", "source"],
    "models": ["display", "source"],
    "figures": ["title", "source"],
    "estimators": ["needs"],
}


def doc_table(found: dict[str, Registry] | None = None) -> str:
    """The tables of docs/registries.md, one per registry, in table order."""
    from dplab.accounting.registry import get

    found = registries() if found is None else found
    parts = []
    for kind, registry in found.items():
        rows = [
            f"### {kind}\n",
            f"| name | {' | '.join(COLUMNS[kind])} | module |",
            "|" + " --- |" * (len(COLUMNS[kind]) + 2),
        ]
        for name in registry:
            entry = (
                get(name)
                if kind == "accountants"
                else registry.meta[name]
                if kind == "estimators"
                else registry[name]
            )
            cells = [cell.replace("|", "\\|") for cell in _row(kind, registry, name, entry)]
            rows.append(f"| `{name}` | {' | '.join(cells)} | `{registry.entries[name]}` |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def write() -> None:
    """Rewrite the marked schema lines and the tables of docs/registries.md."""
    found = registries()
    for path in sorted((PACKAGE / "schemas").glob("*.schema.yaml")):
        path.write_text(schema_text(path.read_text(), found))
    head, rest = DOC.read_text().split(BEGIN)
    DOC.write_text(head + BEGIN + doc_table(found) + END + rest.split(END)[1])


if __name__ == "__main__":
    write()
