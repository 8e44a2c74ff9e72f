"""Where the code cites the source documents 000–004 (docs/references.md).

Every "001 Thm 2", "000 eq. (6)", "004 §3.2" in ``src/dplab`` — docstrings, comments and
strings — attributed to the function or class it sits in (else the module).
``python -m dplab.citations`` prints the table docs/references.md holds; tests/test_references.py
checks that the two agree, so the map cannot go stale.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from dplab.imports import modules

PACKAGE = Path(__file__).resolve().parent

#: a citation: document, kind, number (a range such as "(16)–(17)" or "§3.2–3.4" stays whole)
CITATION = re.compile(
    r"\b(00[0-4]),? (Thms?|eqs?\.|Eq\.|Alg\.|Cor\.|Figs?\.|Table|Prop\.|Lemma|Def\.|App\.|§) ?"
    r"(\(?(?:[A-Z]\.)?[0-9IVX][0-9IVXA-Z.]*\)?(?:–\(?(?:[A-Z]\.)?[0-9IVX][0-9IVXA-Z.]*\)?)?)"
)
KINDS = {"Thms": "Thm", "eqs.": "eq.", "Eq.": "eq.", "Figs.": "Fig."}


def normalize(doc: str, kind: str, number: str) -> str:
    """One spelling per citation: "001 eq. (17)", "000 Thm VII.2", "004 §3.2"."""
    kind = KINDS.get(kind, kind)
    number = number.rstrip(".")
    if kind == "eq.":
        number = "–".join(f"({part.strip('()')})" for part in number.split("–"))
    else:
        number = (
            number.strip("()")
            if number.count("(") != number.count(")") or number.startswith("(")
            else number
        )
    return f"{doc} {kind}{'' if kind == '§' else ' '}{number}"


def _scopes(tree: ast.Module, module: str) -> list[tuple[int, int, str]]:
    """(first line, last line, dotted name) of every function and class."""
    scopes = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                scopes.append((child.lineno, child.end_lineno, name))
                walk(child, name)

    walk(tree, module)
    return scopes


def citations(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Citation -> the sorted places citing it (``dplab.module`` or ``dplab.module.function``)."""
    found = defaultdict(set)
    for module, path in modules(package).items():
        if path.name == "citations.py":  # its own examples
            continue
        text = path.read_text()
        scopes = _scopes(ast.parse(text), module)
        for lineno, line in enumerate(text.splitlines(), 1):
            for match in CITATION.finditer(line):
                inner = [s for s in scopes if s[0] <= lineno <= s[1]]
                where = max(inner, key=lambda s: s[0])[2] if inner else module
                found[normalize(*match.groups())].add(where)
    return {key: sorted(found[key]) for key in sorted(found, key=_order)}


def _order(citation: str):
    doc, _, rest = citation.partition(" ")
    return doc, [(int(t) if t.isdigit() else 0, t) for t in re.split(r"(\d+)", rest)]


def table(found: dict[str, list[str]] | None = None) -> str:
    """The markdown table of docs/references.md: citation | where in the code."""
    found = citations() if found is None else found
    rows = ["| citation | implemented or used in |", "| --- | --- |"]
    rows += [f"| {cite} | {', '.join(f'`{w}`' for w in where)} |" for cite, where in found.items()]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")
