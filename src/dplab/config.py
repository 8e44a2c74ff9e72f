"""Load and validate configuration against the JSON schemas shipped in ``dplab/schemas``.

The same schemas drive Snakemake's ``validate()`` (through ``workflow/schemas``) and the
``dplab`` commands, so a config key means the same thing everywhere and defaults are
filled in the same way.  Errors name the offending key and the valid range.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource

from dplab.errors import DPLabError

SCHEMAS = ("config", "run", "dataset")


@cache
def _registry() -> Registry:
    resources_ = []
    for name in SCHEMAS:
        text = resources.files("dplab.schemas").joinpath(f"{name}.schema.yaml").read_text()
        resources_.append((f"{name}.schema.yaml", Resource.from_contents(yaml.safe_load(text))))
    return Registry().with_resources(resources_)


def _with_defaults(validator_class):
    """A validator class that fills in ``default`` values of properties while validating."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def properties(validator, props, instance, schema):
        if isinstance(instance, dict):
            for key, sub in props.items():
                if isinstance(sub, dict) and "default" in sub and key not in instance:
                    instance[key] = sub["default"]
        yield from validate_properties(validator, props, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


_Validator = _with_defaults(jsonschema.Draft202012Validator)


def validate(instance: dict, schema: str = "config", prefix: str = "") -> dict:
    """Validate ``instance`` (in place, filling defaults) against ``<schema>.schema.yaml``.

    Raises :class:`DPLabError` whose key is the dotted path of the first offending entry.
    """
    registry = _registry()
    root = registry.contents(f"{schema}.schema.yaml")
    validator = _Validator(root, registry=registry)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        error = errors[0]
        path = ".".join(str(p) for p in error.absolute_path)
        key = ".".join(p for p in (prefix, path) if p) or "config"
        raise DPLabError(key, error.message)
    return instance


def load_yaml(path: str | Path) -> dict:
    """Read a YAML mapping; a missing or malformed file is a :class:`DPLabError` naming it."""
    try:
        with open(path) as handle:
            data = yaml.safe_load(handle)
    except OSError as err:
        raise DPLabError("config", f"cannot read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise DPLabError("config", f"{path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise DPLabError("config", f"{path} must hold a mapping at the top level")
    return data


def load_config(path: str | Path) -> dict:
    """A pipeline config file, validated, with defaults, and cross-checked."""
    from dplab.pipeline import check_config

    config = validate(load_yaml(path))
    check_config(config)
    return config
