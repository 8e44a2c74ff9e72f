"""The registries' and types' names where the schemas and docs list them, generated from them.

``python -m dplab.registries`` rewrites every schema line marked ``# generated: KIND`` (its list
``[…]`` becomes the names of that registry or type, a trailing ``null`` kept) and every block of
:data:`BLOCKS` between a line ``… generated: NAME (python -m dplab.registries) …`` and a line
``… end generated: NAME …`` (the table :data:`TABLES` names, Markdown in a ``.md`` file, a reST
simple table in a docstring): docs/registries.md (a table per kind: each name, what the entry
says of itself, its module), the methods' and models' tables of docs/training.md and of their
packages' docstrings, and the config schema's ``figures`` entries (each figure's ``PARAMS``).
tests/test_registries.py fails when any drifts from the tables:
:data:`dplab.accounting.registry.ACCOUNTANTS`, :data:`dplab.training.methods.METHODS`,
:data:`dplab.training.models.MODELS`, :data:`dplab.figures.FIGURES`,
:data:`dplab.audit.entries.ESTIMATORS`, and the types :class:`dplab.schemes.Sampling` and
:class:`dplab.schemes.Neighbouring`.  A list a schema validates with is an ``enum``; the
accountants and methods, which :func:`dplab.training.resolve.resolve_run` checks against their
registries (naming the valid ones), are listed as ``examples``, which validate nothing.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from dplab.registry import Registry
from dplab.schemes import Neighbouring, Sampling

#: this package's folder and the repository's docs
PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parents[1]
#: a schema line whose list a registry writes: ``… [a, b] … # generated: KIND``
MARK = re.compile(
    r"^(?P<head>[^#\n]*?)\[(?P<list>[^\]\n]*)\](?P<tail>[^#\n]*# generated: (?P<kind>\w+))$", re.M
)
#: the types whose members the schemas list, by kind
TYPES = {"samplings": Sampling, "neighbourings": Neighbouring}
#: a generated block: its first line, its table's lines, its last line
BLOCK = re.compile(
    r"^(?P<begin>[^\n]*generated: (?P<name>\w+) \(python -m dplab\.registries\)[^\n]*\n)"
    r"(?P<body>.*?)(?P<end>^[^\n]*end generated: (?P=name)\b[^\n]*$)",
    re.M | re.S,
)


def registries() -> dict[str, Registry]:
    """Kind -> its registry (importing the tables, not their entries)."""
    from dplab.accounting.registry import ACCOUNTANTS
    from dplab.audit.entries import ESTIMATORS
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
    """``text`` (a schema) with each marked line's list made the names of its registry or type
    (a list that ended in ``null`` keeps it)."""
    found = {**(registries() if found is None else found), **TYPES}

    def names(m: re.Match) -> str:
        null = [] if m["list"].rsplit(",", 1)[-1].strip() != "null" else ["null"]
        return f"{m['head']}[{', '.join([*found[m['kind']], *null])}]{m['tail']}"

    return MARK.sub(names, text)


def _row(kind: str, registry: Registry, name: str, entry) -> list[str]:
    """What an entry says of itself, per kind: the columns of its docs table."""
    if kind == "accountants":
        return [entry.bound, registry.meta.get(name, {}).get("colour", "-"), entry.source]
    if kind in ("methods", "models"):
        return [entry.display, entry.source]
    if kind == "figures":
        return [entry.TITLE, entry.SOURCE]
    needs = ", ".join(need for need, yes in entry.items() if yes is True) or "-"
    return [needs, f"`{entry['marker']}`"]


COLUMNS = {
    "accountants": ["bound", "colour", "source"],
    "methods": ["display", "source"],
    "models": ["display", "source"],
    "figures": ["title", "source"],
    "estimators": ["needs", "marker"],
    "samplings": ["display", "sampler", "fixed batch size", "epochs", "amplified under", "Setting"],
    "neighbourings": ["display", "sensitivity of the clipped sum"],
}


def _member_row(kind: str, member) -> list[str]:
    """A sampling scheme's or neighbouring relation's facts (:mod:`dplab.schemes`)."""
    if kind == "neighbourings":
        return [member.display, f"{member.sensitivity:g}·C"]
    sampler = member.facts.sampler
    return [
        member.display,
        f"`{sampler.__name__}`" if sampler else "dp_mf's own",
        *("yes" if fact else "no" for fact in (member.fixed_size, member.epochs)),
        member.amplified or "-",
        "yes" if member.accounted else "no",
    ]


def doc_table(found: dict[str, Registry] | None = None) -> str:
    """The tables of docs/registries.md: one per registry, in table order, then one per type."""
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
    for kind, members in TYPES.items():
        rows = [
            f"### {kind}\n",
            f"| name | {' | '.join(COLUMNS[kind])} | type |",
            "|" + " --- |" * (len(COLUMNS[kind]) + 2),
        ]
        for member in members:
            cells = " | ".join(_member_row(kind, member))
            rows.append(
                f"| `{member}` | {cells} | `dplab.schemes:{members.__name__}.{member.name}` |"
            )
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def method_rules() -> list[list[str]]:
    """The methods package's table: each method's source and update rule."""
    from dplab.training.methods import METHODS

    return [
        ["method", "source", "update (g = Σ clip(∇ℓ_i) over the batch B)"],
        *([m.name, m.row.source or m.source, m.rule] for m in METHODS.values()),
    ]


def method_defaults() -> list[list[str]]:
    """docs/training.md's table: each method's samplings, normalisation, projection, accountant."""
    from dplab.training.methods import METHODS

    def cells(m) -> list[str]:
        return [
            f"{m.name} ({m.row.cited or m.source})",
            m.row.samplings or ", ".join(m.samplings),
            m.normalize,
            "–" if m.projection == "none" else m.projection,
            m.row.accountant or m.accountant or "–",
        ]

    header = ["method", "sampling (first = default)", "normalize", "projection"]
    return [[*header, "natural accountant"], *map(cells, METHODS.values())]


def models() -> list[list[str]]:
    """The built-in models' networks."""
    from dplab.training.models import MODELS

    return [["model", "network"], *([m.name, m.network] for m in MODELS.values())]


def figure_params() -> str:
    """The config schema's ``figures`` entries: each figure's ``PARAMS`` (its module), as YAML."""
    import yaml

    from dplab.figures import FIGURES

    params = {name: FIGURES[name].PARAMS for name in FIGURES}
    text = yaml.safe_dump(params, sort_keys=False, allow_unicode=True, width=80)
    return textwrap.indent(text, " " * 6)


#: the generated blocks, by name: a table (rows, the header first) or the text itself
TABLES = {
    "registries": doc_table,
    "method_rules": method_rules,
    "method_defaults": method_defaults,
    "models": models,
    "figure_params": figure_params,
}
#: the files holding generated blocks
BLOCKS = (
    "docs/registries.md",
    "docs/training.md",
    "src/dplab/training/models/__init__.py",
    "src/dplab/schemas/config.schema.yaml",
)


def markdown(rows: list[list[str]]) -> str:
    """``rows`` (the header first) as a Markdown table (a ``|`` in a cell escaped)."""
    lines = [f"| {' | '.join(cell.replace('|', chr(92) + '|') for cell in row)} |" for row in rows]
    return "\n".join([lines[0], "|" + " --- |" * len(rows[0]), *lines[1:]])


def rest(rows: list[list[str]]) -> str:
    """``rows`` (the header first) as a reST simple table."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = "  ".join("=" * width for width in widths)
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join([rule, lines[0], rule, *lines[1:], rule])


def blocks_text(text: str, markdown_file: bool) -> str:
    """``text`` with each generated block's table made anew."""

    def table(m: re.Match) -> str:
        made = TABLES[m["name"]]()
        body = made if isinstance(made, str) else (markdown if markdown_file else rest)(made)
        return m["begin"] + body.rstrip("\n") + "\n" + m["end"]

    return BLOCK.sub(table, text)


def write() -> None:
    """Rewrite the marked schema lines and the generated blocks."""
    found = registries()
    for path in sorted((PACKAGE / "schemas").glob("*.schema.yaml")):
        path.write_text(schema_text(path.read_text(), found))
    for name in BLOCKS:
        path = ROOT / name
        path.write_text(blocks_text(path.read_text(), path.suffix == ".md"))


if __name__ == "__main__":
    write()
