"""Validate a config dict against a package schema (``dplab/schemas/*.yaml``) and fill defaults.

Every violation becomes a :class:`~dplab.errors.DPLabError` naming the offending key.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources

import jsonschema
import yaml

from dplab.errors import DPLabError


@functools.cache
def load_schema(name: str) -> dict:
    """The schema ``dplab/schemas/<name>.schema.yaml``."""
    text = resources.files("dplab").joinpath("schemas", f"{name}.schema.yaml").read_text()
    return yaml.safe_load(text)


def validate(instance: dict, schema: dict, where: str = "") -> dict:
    """A copy of ``instance`` with defaults filled, or a DPLabError naming the first bad key."""
    if not isinstance(instance, dict):
        raise DPLabError(where or "config", f"must be a mapping; got {type(instance).__name__}")
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        err = errors[0]
        path = [str(p) for p in err.path]
        if err.validator == "additionalProperties":
            extra = sorted(set(instance) - set(schema.get("properties", {})))
            key = extra[0] if extra else "?"
            raise DPLabError(_join(where, key), f"unknown key; valid keys: {', '.join(sorted(schema['properties']))}")
        if err.validator == "required":
            raise DPLabError(_join(where, err.message.split("'")[1]), "is required")
        prop = schema.get("properties", {}).get(path[0], {}) if path else {}
        hint = f" ({prop['description']})" if "description" in prop else ""
        raise DPLabError(_join(where, ".".join(path) or "config"), f"{err.message}{hint}")
    out = copy.deepcopy(instance)
    for key, prop in schema.get("properties", {}).items():
        if key not in out and "default" in prop:
            out[key] = copy.deepcopy(prop["default"])
    return out


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
