"""The shipped schemas as every job reads them (:func:`dplab.schemas.load_schema`, libyaml where
PyYAML has it) are the values of dplab's own checking YAML loader: no key given twice, nothing
that libyaml reads otherwise."""

from __future__ import annotations

import json

import yaml
from conftest import ROOT

from dplab.schemas import SCHEMA_LOADER, SCHEMAS, load_schema, parse_yaml


def test_each_schema_loads_as_the_checking_loader_reads_it():
    assert SCHEMA_LOADER is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)
    folder = ROOT / "src" / "dplab" / "schemas"
    assert sorted(SCHEMAS) == sorted(p.name.split(".")[0] for p in folder.glob("*.schema.yaml"))
    for name in SCHEMAS:
        checked = parse_yaml((folder / f"{name}.schema.yaml").read_text())
        # the same keys in the same order, the same types (1, 1.0 and true differ in JSON)
        assert json.dumps(load_schema(name)) == json.dumps(checked), name
        assert len(str(checked)) > 1000  # a real schema, not an empty document


#: JSON Schema keywords whose value must be a number
NUMERIC_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _numeric_bounds(node, path=""):
    """(path, keyword, value) of every numeric keyword in the schema ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in NUMERIC_KEYWORDS and not isinstance(value, dict):
                yield f"{path}.{key}", value
            else:
                yield from _numeric_bounds(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numeric_bounds(value, f"{path}[{i}]")


def test_every_bound_in_the_schemas_is_a_number():
    """YAML 1.1 reads ``1.0e12`` (no sign in the exponent) as text: a bound written so compared
    a float with a str at validation, an internal error, not a refusal."""
    bounds = [(name, *b) for name in SCHEMAS for b in _numeric_bounds(load_schema(name))]
    assert len(bounds) > 50
    for name, path, value in bounds:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (name, path, value)
