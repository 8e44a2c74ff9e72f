"""The JSON schemas shipped in this package, and validation against them.

The same schemas (also under ``workflow/schemas``) and the same :func:`validate` serve the
Snakefile, every ``dplab`` command and the library's own loaders (a run, a dataset), so a key
means the same thing everywhere and defaults are filled in the same way.  Errors name the
offending key (dotted path) and the valid range, in one line (a YAML syntax error: the file,
line and column; a key given twice in one mapping: the key and both lines, where PyYAML would
silently keep the last).
"""

from __future__ import annotations

import copy
import math
import re
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from dplab.errors import DPLabError

SCHEMAS = ("config", "run", "dataset")


#: PyYAML's safe loader in C (libyaml) where PyYAML was built with it: 8× faster on the shipped
#: schemas, which every job reads (tests/test_schemas.py: the same values as :func:`parse_yaml`)
SCHEMA_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def load_schema(name: str) -> dict:
    """The schema ``dplab/schemas/<name>.schema.yaml``."""
    text = resources.files("dplab.schemas").joinpath(f"{name}.schema.yaml").read_text()
    return yaml.load(text, Loader=SCHEMA_LOADER)  # noqa: S506 (a SafeLoader)


@cache
def _registry() -> Registry:
    """The schemas by file name, for ``$ref``.  Without their ``$schema``: jsonschema validates a
    referenced schema that names its dialect with that dialect's own class, which would drop
    :data:`_Validator`'s ``integer`` inside ``runs`` and ``datasets``."""
    return Registry().with_resources(
        (
            f"{name}.schema.yaml",
            Resource(
                {k: v for k, v in load_schema(name).items() if k != "$schema"},
                specification=DRAFT202012,
            ),
        )
        for name in SCHEMAS
    )


#: Draft 2020-12 with ``integer`` meaning a Python int: the standard counts 3.0 as an integer, but a
#: count read as 3.0 would reach the code as a float (``nn.Linear(784, 3.0)`` fails mid-run)
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


def _validator(schema: dict) -> jsonschema.Draft202012Validator:
    return _Validator(schema, registry=_registry())


def _resolve(schema: dict) -> dict:
    while "$ref" in schema:
        schema = _registry().contents(schema["$ref"].split("#")[0])
    return schema


def _fill_defaults(instance, schema: dict) -> None:
    """Fill ``default`` values of a valid ``instance`` in place, following $ref, allOf,
    if/then, oneOf/anyOf (the branch that matches) and nested properties / additionalProperties."""
    schema = _resolve(schema)
    for branch in schema.get("allOf", []):
        _fill_defaults(instance, branch)
    if "if" in schema and "then" in schema and _validator(schema["if"]).is_valid(instance):
        _fill_defaults(instance, schema["then"])
    for key in ("oneOf", "anyOf"):
        for branch in schema.get(key, []):
            if _validator(branch).is_valid(instance):
                _fill_defaults(instance, branch)
                break
    if not isinstance(instance, dict):
        return
    properties = schema.get("properties", {})
    for key, sub in properties.items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance and isinstance(sub, dict):
            _fill_defaults(instance[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in instance.keys() - properties.keys():
            _fill_defaults(instance[key], extra)


def _join(where: str, key: str) -> str:
    return ".".join(part for part in (where, key) if part) or "config"


def validate(instance, schema: str | dict = "config", where: str = ""):
    """A copy of ``instance`` with defaults filled, validated against ``schema`` (a name in
    ``dplab/schemas`` or a schema dict); a :class:`DPLabError` naming the
    first bad key otherwise."""
    schema = load_schema(schema) if isinstance(schema, str) else schema
    if not isinstance(instance, dict):
        raise DPLabError(where or "config", f"must be a mapping; got {type(instance).__name__}")
    _refuse_non_finite(instance, where)
    errors = sorted(
        _validator(schema).iter_errors(instance),
        key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))),
    )
    if errors:
        err = errors[0]
        path = "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path
        ).removeprefix(".")  # a list's item as key[j]
        sub = _resolve(err.schema) if isinstance(err.schema, dict) else {}
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(sub.get("properties", {})))
            valid = ", ".join(sorted(sub.get("properties", {}))) or "none"
            raise DPLabError(
                _join(where, _join(path, extra[0]) if extra else path),
                f"unknown key; valid keys: {valid}",
            )
        if err.validator == "required":
            raise DPLabError(_join(where, _join(path, err.message.split("'")[1])), "is required")
        hint = f" ({sub['description']})" if isinstance(sub.get("description"), str) else ""
        if err.validator == "type":
            hint = _number_as_text(err.instance, err.validator_value) + hint
        raise DPLabError(_join(where, path), f"{err.message}{hint}")
    return with_defaults(instance, schema)


#: a number in exponent form YAML 1.1 reads as text (no decimal point, or no sign in the exponent)
_EXPONENT_FORM = re.compile(r"[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+")


def _number_as_text(value, types) -> str:
    """Where ``value`` is a number in exponent form read as text (PyYAML, like Snakemake's
    loader, follows YAML 1.1: ``1e-5`` and ``1.0e5`` are strings, ``1.0e-5`` a float), the same
    number written so that it is read as one; else ''."""
    if not (isinstance(value, str) and _EXPONENT_FORM.fullmatch(value)):
        return ""
    types = [types] if isinstance(types, str) else types
    mantissa, exponent = value.lower().split("e")
    if "number" in types:
        mantissa += "" if "." in mantissa else ".0"
        exponent = exponent if exponent[0] in "+-" else f"+{exponent}"
        return f": YAML reads {value} as text; write {mantissa}e{exponent}"
    if "integer" in types and float(value).is_integer() and abs(float(value)) < 1e18:
        return f": YAML reads {value} as text; write {int(float(value))}"
    return ""


def with_defaults(instance: dict, schema: str | dict) -> dict:
    """A copy of ``instance`` with the ``default`` values of ``schema`` (a name in
    ``dplab/schemas`` or a schema dict) filled as :func:`validate` fills them, without validating
    it: for an entry validated elsewhere."""
    out = copy.deepcopy(instance)
    _fill_defaults(out, load_schema(schema) if isinstance(schema, str) else schema)
    return out


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A key given twice in one YAML mapping."""


class TooLargeError(yaml.composer.ComposerError):
    """A YAML document nested too deep, expanding past :data:`YAML_NODES_MAX` nodes through its
    aliases, or referring to itself."""


#: the most nodes a YAML document may expand to through its aliases (``*anchor``): the largest
#: config shipped has ~1200; a 9-level "billion laughs" of 9 aliases a level expands to 9⁹
YAML_NODES_MAX = 100_000


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing a key given twice in one mapping (YAML 1.2 §3.2.1.1: keys
    are unique; PyYAML keeps the last), and, before anything is built, a document nested deeper
    than :data:`dplab.inputs.DEPTH_MAX` or expanding to more than :data:`YAML_NODES_MAX` nodes
    (its aliases counted where they are used: a "billion laughs" of shared lists that every later
    walk expands).  Keys brought in by a merge (``<<: *anchor``) may be overridden, as YAML's
    merge-key type intends."""

    _depth = 0

    def compose_node(self, parent, index):
        from dplab.inputs import DEPTH_MAX

        if self._depth >= DEPTH_MAX:
            raise TooLargeError(
                None,
                None,
                f"nested more than {DEPTH_MAX} levels deep (DEPTH_MAX)",
                self.peek_event().start_mark,
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        if node is not None:
            _expanded(node, 1, {}, set())
        return node

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise DuplicateKeyError(
                            None,
                            None,
                            f"key {key!r} given twice, at line {seen[key]} and "
                            f"line {line}; keep one",
                            key_node.start_mark,
                        )
                    seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded(
    node: yaml.Node, level: int, known: dict[int, tuple[int, int]], open_: set[int]
) -> tuple[int, int]:
    """(nodes, depth) of ``node`` with every alias expanded, memoized by node (linear in the
    document's size); :class:`TooLargeError` past the limits or on an alias
    inside its own anchor."""
    from dplab.inputs import DEPTH_MAX

    key = id(node)
    if key in open_:
        raise TooLargeError(
            None,
            None,
            "an alias refers to the node that holds it (a recursive structure)",
            node.start_mark,
        )
    if key not in known:
        children = (
            node.value
            if isinstance(node, yaml.SequenceNode)
            else (
                [n for pair in node.value for n in pair]
                if isinstance(node, yaml.MappingNode)
                else []
            )
        )
        open_.add(key)
        sizes = [_expanded(child, level + 1, known, open_) for child in children]
        open_.discard(key)
        known[key] = (1 + sum(n for n, _ in sizes), 1 + max((d for _, d in sizes), default=0))
    nodes, depth = known[key]
    if level - 1 + depth > DEPTH_MAX:
        raise TooLargeError(
            None,
            None,
            f"nested more than {DEPTH_MAX} levels deep once its aliases are expanded (DEPTH_MAX)",
            node.start_mark,
        )
    if nodes > YAML_NODES_MAX:
        raise TooLargeError(
            None,
            None,
            f"expands to {nodes} nodes through its aliases (*anchor), more than "
            f"{YAML_NODES_MAX} (YAML_NODES_MAX)",
            node.start_mark,
        )
    return nodes, depth


def parse_yaml(text: str):
    """The YAML value of ``text``, read by the one loader dplab reads YAML with
    (:class:`_UniqueKeyLoader`)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


def _refuse_non_finite(value, where: str) -> None:
    """No number in a config is infinite or NaN (YAML's ``.inf``, ``.nan``): JSON schema's
    ``minimum``/``exclusiveMinimum`` let +inf through, and no key of any schema means it.  No
    key is anything but text (YAML reads ``2024:`` as a number, ``on:`` as true), which schema
    patterns do not check and names of folders and rules could not hold."""
    if isinstance(value, float) and not math.isfinite(value):
        raise DPLabError(where or "config", f"must be a finite number; got {value}")
    for key in value if isinstance(value, dict) else ():
        if not isinstance(key, str):
            raise DPLabError(
                _join(where, str(key)),
                f"a key must be text; YAML read {key!r} as {type(key).__name__}: quote it",
            )
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        _refuse_non_finite(item, _join(where, str(key)))


def load_yaml(path: str | Path) -> dict:
    """A YAML mapping from ``path`` (DPLabError if missing, not a regular non-empty file, malformed,
    or holding a key twice in one mapping); a file that is valid JSON is read as JSON, as
    Snakemake reads a config file (JSON first, then YAML: YAML 1.1 reads the JSON number ``1e-3``
    as text)."""
    from dplab.inputs import input_file, loads

    path = input_file(path, "config")
    try:
        text = path.read_text()
        try:
            data = loads(text)
        except ValueError:  # not JSON, or JSON that loads refuses: YAML says why
            data = parse_yaml(text)
    except (FileNotFoundError, NotADirectoryError):
        raise DPLabError("config", f"no such file: {path}") from None
    except IsADirectoryError:
        raise DPLabError("config", f"{path} is a folder; give a YAML file") from None
    except DuplicateKeyError as err:  # its problem names both lines
        raise DPLabError(str(path), err.problem) from None
    except TooLargeError as err:
        raise DPLabError(str(path), f"{err.problem} (line {err.problem_mark.line + 1})") from None
    except UnicodeDecodeError as err:
        raise DPLabError(
            str(path), f"not a UTF-8 text file ({err.reason} at byte {err.start})"
        ) from None
    except yaml.YAMLError as err:
        raise DPLabError(str(path), f"not valid YAML: {yaml_problem(err)}") from None
    if not isinstance(data, dict):
        raise DPLabError("config", f"{path} must hold a mapping at the top level")
    return data


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML parser error on one line: where (line and column, from 1) and what."""
    mark, context = getattr(err, "problem_mark", None), getattr(err, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if context and getattr(err, "context_mark", None):
        problem += (
            f" ({context} started at line {err.context_mark.line + 1}, column"
            f" {err.context_mark.column + 1})"
        )
    return where + problem
