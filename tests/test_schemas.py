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
