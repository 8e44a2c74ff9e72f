"""References resolve: the citation table of docs/references.md matches the code, every
accountant names the class that implements it, docs name only files that exist, and nothing
points outside the repository."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from dplab import accounting, citations
from dplab.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: words that name places outside the repository (split so that this file does not hold them)
OUTSIDE = ("CATA" + "LOGUE", "shared" + "/", "seeds" + "/")


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.splitlines() if (ROOT / name).is_file()]


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        return None


def test_citation_table_matches_the_code():
    doc = (ROOT / "docs/references.md").read_text()
    table = doc.split("<!-- citations: begin (python -m dplab.citations) -->\n")[1].split(
        "<!-- citations: end -->"
    )[0]
    rows = dict(
        line.split(" | ", 1)
        for line in table.removeprefix("| ").replace("\n| ", "\n").splitlines()[2:]
    )
    code = dict(
        line.split(" | ", 1)
        for line in citations.table().replace("\n| ", "\n").removeprefix("| ").splitlines()[2:]
    )
    stale = {
        k: (rows.get(k), code.get(k))
        for k in rows.keys() | code.keys()
        if rows.get(k) != code.get(k)
    }
    assert not stale, (
        f"docs/references.md is stale; regenerate with `python -m dplab.citations`: {stale}"
    )


def test_citations_are_read_from_docstrings_and_comments(tmp_path):
    pkg = tmp_path / "dplab"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        '"""000 eq. 6 and 001 Thms 2–3."""\n\n\nclass A:\n    def f(self):\n'
        "        return 1  # 002 Cor. 1)\n"
    )
    assert citations.citations(pkg) == {
        "000 eq. (6)": ["dplab.m"],
        "001 Thm 2–3": ["dplab.m"],
        "002 Cor. 1": ["dplab.m.A.f"],
    }


def test_every_accountant_names_its_implementation_and_the_table_lists_it(capsys):
    assert main(["accountants"]) == 0
    found = citations.citations()
    for entry in json.loads(capsys.readouterr().out):
        module, _, cls = entry["implemented_in"].rpartition(".")
        assert isinstance(
            accounting.get(entry["name"]), getattr(importlib.import_module(module), cls)
        ), entry["name"]
        cited = [
            citations.normalize(*m.groups()) for m in citations.CITATION.finditer(entry["source"])
        ]
        for cite in cited:
            assert any(w == module or w.startswith(module + ".") for w in found[cite]), (
                entry["name"],
                cite,
            )


def test_nothing_points_outside_the_repository():
    hits = [
        f"{path.relative_to(ROOT)}: {word}"
        for path in _tracked()
        if path.name != Path(__file__).name
        for word in OUTSIDE
        if word.lower() in ((_text(path) or "").lower())
    ]
    assert not hits, hits


#: a .md file named in text or as a markdown link target
MD = re.compile(r"(?<![\w/.{}-])((?:\.\./|[\w.-]+/)*[\w-]+\.md)\b(?:#[\w-]+)?")


def test_markdown_files_named_anywhere_exist():
    """A path named in a markdown link resolves from its file; other mentions from the repository
    root, or from docs/ inside docs (results/ files are outputs, made by the pipeline)."""
    missing = []
    for path in _tracked():
        text = _text(path)
        if text is None or path.suffix in (".db",):
            continue
        for match in MD.finditer(text):
            name = match.group(1)
            if name.startswith("results/") or name == "index.md":
                continue
            bases = [path.parent, ROOT] + ([ROOT / "docs"] if path.parent.name == "docs" else [])
            if not any((base / name).is_file() for base in bases):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, missing


def test_training_doc_lists_only_modules_that_exist():
    doc = (ROOT / "docs/training.md").read_text()
    code = doc.split("Code: ", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"`([\w/.]+\.py)`", code)
    assert len(names) >= 10
    missing = [
        n
        for n in names
        if not ((ROOT / n).is_file() or (ROOT / "src/dplab/training" / n).is_file())
    ]
    assert not missing, missing
    for path in re.findall(r"`([\w/.]+/)`", code):
        assert (ROOT / path).is_dir(), path


def test_no_dvc_cache_is_committed():
    tracked = [
        p.relative_to(ROOT) for p in _tracked()
    ]  # parts inside the repository only (a clone may lie under /tmp)
    caches = [
        str(p)
        for p in tracked
        if "site_cache" in p.parts or ("tmp" in p.parts and ".dvc" in p.parts) or p.suffix == ".db"
    ]
    assert not caches, caches
