"""One meaning per name (docs/architecture.md "One meaning per name"): rule files named for their
rules, no private argparse API in the CLI, no module named like the pipeline's
config below training."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

RULES = ROOT / "workflow" / "rules"
PRIVATE_ARGPARSE = re.compile(
    r"\._(actions|add_action|subparsers|option_string_actions|positionals|optionals|"
    r"name_parser_map|choices_actions|action_groups|registries)\b|_SubParsersAction"
)


def rule_names(path) -> list[str]:
    return re.findall(r"^rule (\w+):", path.read_text(), re.M)


def test_every_rule_file_is_named_for_a_rule_it_holds():
    for path in sorted(RULES.glob("*.smk")):
        names = rule_names(path)
        if not names:
            assert path.stem == "common", f"{path.name} holds no rule"
            continue
        stems = {
            path.stem,
            path.stem.rstrip("s"),
        }  # figures.smk holds rule figure (and figure_table)
        assert (
            stems & set(names) or path.stem == "report" and set(names) == {"index", "provenance"}
        ), f"{path.name} holds rules {names}"


def test_the_rule_file_check_fails_on_a_misnamed_file(tmp_path):
    planted = tmp_path / "accounting.smk"
    planted.write_text("rule sweep:\n    output: 'x'\n")
    assert {planted.stem, planted.stem.rstrip("s")}.isdisjoint(rule_names(planted))


def test_the_cli_uses_argparse_public_api_only():
    sources = [ROOT / "src/dplab/cli.py", *sorted((ROOT / "src/dplab/commands").glob("*.py"))]
    offenders = [
        f"{p.name}:{i}"
        for p in sources
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if PRIVATE_ARGPARSE.search(line)
    ]
    assert offenders == []
    assert PRIVATE_ARGPARSE.search("parser._add_action(action)") and PRIVATE_ARGPARSE.search(
        "sub._name_parser_map"
    )


def test_config_means_the_pipeline_config_only():
    """No module or package below dplab but dplab.config is called config (a run is resolved by
    dplab.training.resolve), and nothing imports a training.config module."""
    package = ROOT / "src" / "dplab"
    named = [
        p.relative_to(package) for p in package.rglob("config*.py") if p != package / "config.py"
    ]
    assert named == []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.endswith("training.config"), path
