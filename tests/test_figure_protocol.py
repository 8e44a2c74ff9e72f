"""Figures as one typed protocol: every registered figure module implements
:class:`dplab.figures.Figure`, names its inputs (``INPUTS``) and returns exactly those from
``inputs``, carries the one description of the figure (``CAPTION``, which the report shows), and
the README lists every figure without describing it a second time."""

from __future__ import annotations

import inspect
import json
import re
from html import unescape

import pytest

from conftest import ROOT, SMALL_FIGURES
from dplab.config import load_config
from dplab.errors import DPLabError
from dplab.figures import FIGURES, Figure, figure, input_args, input_files, parse_input_args

SIGNATURES = {
    "check": ["config", "params"],
    "inputs": ["config", "params"],
    "table": ["inputs", "params"],
    "draw": ["table"],
}


@pytest.mark.parametrize("figure_id", FIGURES)
def test_every_figure_implements_the_protocol(figure_id):
    module = figure(figure_id)
    assert isinstance(module, Figure), figure_id
    for name, params in SIGNATURES.items():
        assert list(inspect.signature(getattr(module, name)).parameters) == params, (
            figure_id,
            name,
        )
    for text in (module.TITLE, module.SOURCE, module.CAPTION):
        assert isinstance(text, str) and text.strip(), figure_id
    assert len(module.CAPTION) > len(module.TITLE)  # a caption says more than the title
    assert all(kind in (str, list) for kind in module.INPUTS.values()), figure_id


def test_a_module_without_a_caption_is_not_a_figure():
    from dplab.figures import gaussian_sigma

    class Stripped:
        pass

    stripped = Stripped()
    for name in ("TITLE", "SOURCE", "INPUTS", "PARAMS", *SIGNATURES):
        setattr(stripped, name, getattr(gaussian_sigma, name))
    assert not isinstance(stripped, Figure)
    stripped.CAPTION = gaussian_sigma.CAPTION
    assert isinstance(stripped, Figure)


@pytest.fixture(scope="module")
def paper():
    """config/paper.yaml draws every figure."""
    config = load_config(ROOT / "config" / "paper.yaml")
    assert set(config["figures"]) == set(FIGURES)
    return config


@pytest.mark.parametrize("figure_id", FIGURES)
def test_inputs_are_the_declared_names_and_survive_the_command_line(paper, figure_id):
    """``inputs`` gives exactly the names and kinds of ``INPUTS``; encoded as ``--inputs NAME=PATH``
    and parsed back, the same mapping (a list of one file stays a list)."""
    inputs = figure(figure_id).inputs(paper, paper["figures"][figure_id])
    kinds = figure(figure_id).INPUTS
    assert list(inputs) == list(kinds), figure_id
    assert all(isinstance(inputs[name], kind) for name, kind in kinds.items()), figure_id
    assert all(input_files(inputs)) and all(
        path.startswith("results/") for path in input_files(inputs)
    )
    assert parse_input_args(figure_id, input_args(inputs)) == inputs


def test_one_file_list_round_trips_and_order_is_kept():
    inputs = {"summaries": ["b/summary.json"], "metrics": ["b/metrics.csv"]}
    assert input_args(inputs) == ["summaries=b/summary.json", "metrics=b/metrics.csv"]
    assert parse_input_args("hidden_state_gain", input_args(inputs)) == inputs
    two = ["summaries=z.json", "metrics=z.csv", "summaries=a.json", "metrics=a.csv"]
    assert parse_input_args("hidden_state_gain", two) == {
        "summaries": ["z.json", "a.json"],
        "metrics": ["z.csv", "a.csv"],
    }
    assert parse_input_args("gaussian_sigma", []) == {}


@pytest.mark.parametrize(
    "figure_id, args, problem",
    [
        ("accountants_vs_pld", ["sweep=s.csv"], "summary=PATH given 0 times"),
        (
            "accountants_vs_pld",
            ["sweep=s.csv", "summary=a.json", "summary=b.json"],
            "summary=PATH given 2 times",
        ),
        (
            "accountants_vs_pld",
            ["sweep=s.csv", "summary=a.json", "runs=r.json"],
            "'runs=r.json' is not NAME=PATH",
        ),
        ("accountants_vs_pld", ["s.csv", "a.json"], "'s.csv' is not NAME=PATH"),
        ("accountants_vs_pld", ["sweep=", "summary=a.json"], "'sweep=' is not NAME=PATH"),
        ("gaussian_sigma", ["sweep=s.csv"], "figure gaussian_sigma takes no inputs"),
    ],
)
def test_bad_input_arguments_name_the_flag_and_the_figure_s_inputs(figure_id, args, problem):
    with pytest.raises(DPLabError) as err:
        parse_input_args(figure_id, args)
    assert err.value.key == "--inputs" and problem in err.value.message
    if figure_id == "accountants_vs_pld":
        assert "takes sweep=PATH, summary=PATH" in err.value.message


def test_readme_lists_every_figure_once_and_describes_none():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Figures\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| [")]
    listed = [
        m
        for row in rows
        for m in re.findall(r"\[(\w+)\]\(src/dplab/figures/\1\.py\)", row.split(" | ")[0])
    ]
    assert sorted(listed) == sorted(FIGURES)
    assert all(
        len(row.strip("|").split(" | ")) == 3 for row in rows
    )  # id, default settings, paper settings


def test_the_report_template_holds_no_caption():
    template = (ROOT / "workflow" / "report" / "figure.rst").read_text()
    assert "snakemake.params.caption" in template
    for figure_id in FIGURES:
        assert figure(figure_id).CAPTION[:40] not in template


@pytest.mark.pipeline
def test_the_report_shows_each_figure_s_caption_from_its_module(built):
    """The built report (conftest: the small DAG's figures) carries each module's caption."""
    html = (built / "results" / "report.html").read_text()
    captions = [
        unescape(re.sub(r"<[^>]+>", "", json.loads(c)))
        for c in re.findall(r'"caption": ?("(?:[^"\\]|\\.)*")', html)
    ]
    for figure_id in SMALL_FIGURES:
        words = " ".join(re.sub(r"[`*]", "", figure(figure_id).CAPTION).split())
        assert sum(f"{figure_id} {words}" in " ".join(c.split()) for c in captions) == 1, figure_id


#: the JSON-schema keywords a figure's parameter schema uses; anything else is a typo or a
#: description split in two (a comma in unquoted YAML once made "D" a description and
#: "diameter of the projection set" a key)
SCHEMA_WORDS = {
    "type", "description", "default", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "enum", "items", "minItems", "maxItems", "uniqueItems", "examples",
    "additionalProperties", "properties", "required", "anyOf", "oneOf", "const", "pattern",
    "minLength", "not", "allOf", "propertyNames", "$ref",
}  # fmt: skip


def _schema_keys(node, path="PARAMS"):
    """(path, key) of every key of a schema node (recursing into sub-schemas) that is no
    JSON-schema keyword."""
    if isinstance(node, list):
        return [k for i, n in enumerate(node) for k in _schema_keys(n, f"{path}[{i}]")]
    if not isinstance(node, dict):
        return []
    out = [(path, key) for key in node if key not in SCHEMA_WORDS]
    for key, value in node.items():
        if key == "properties":
            for name, sub in value.items():
                out += _schema_keys(sub, f"{path}.{name}")
        elif key in ("items", "additionalProperties", "not", "propertyNames"):
            out += _schema_keys(value, f"{path}.{key}")
        elif key in ("anyOf", "oneOf", "allOf"):
            out += _schema_keys(value, f"{path}.{key}")
    return out


@pytest.mark.parametrize("figure_id", sorted(FIGURES))
def test_a_figure_s_parameter_schema_uses_only_schema_keywords(figure_id):
    assert _schema_keys(figure(figure_id).PARAMS) == []
