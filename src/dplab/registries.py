"""The registries' and types' names where the schemas and docs list them, generated from them.

``python -m dplab.registries`` rewrites every schema line marked ``# generated: KIND`` (its list
``[…]`` becomes the names of that registry or type, a trailing ``null`` kept) and
docs/registries.md (a table per kind: each name, what the entry says of itself, its module);
tests/test_registries.py fails when either drifts from the tables:
:data:`dplab.accounting.registry.ACCOUNTANTS`, :data:`dplab.training.methods.METHODS`,
:data:`dplab.training.models.MODELS`, :data:`dplab.figures.FIGURES`,
:data:`dplab.audit.estimators.ESTIMATORS`, and the types :class:`dplab.schemes.Sampling` and
:class:`dplab.schemes.Neighbouring`.  A list a schema validates with is an ``enum``; the
accountants and methods, which :func:`dplab.training.resolve.resolve_run` checks against their
registries (naming the valid ones), are listed as ``examples``, which validate nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from dplab.registry import Registry
from dplab.schemes import Neighbouring, Sampling

#: this package's folder and the repository's docs
PACKAGE = Path(__file__).resolve().parent
DOC = PACKAGE.parents[1] / "docs/registries.md"
#: a schema line whose list a registry writes: ``… [a, b] … # generated: KIND``
MARK = re.compile(
    r"^(?P<head>[^#\n]*?)\[(?P<list>[^\]\n]*)\](?P<tail>[^#\n]*# generated: (?P<kind>\w+))$", re.M
)
#: the types whose members the schemas list, by kind
TYPES = {"samplings": Sampling, "neighbourings": Neighbouring}
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


def write() -> None:
    """Rewrite the marked schema lines and the tables of docs/registries.md."""
    found = registries()
    for path in sorted((PACKAGE / "schemas").glob("*.schema.yaml")):
        path.write_text(schema_text(path.read_text(), found))
    head, rest = DOC.read_text().split(BEGIN)
    DOC.write_text(head + BEGIN + doc_table(found) + END + rest.split(END)[1])


if __name__ == "__main__":
    write()
