"""A model class in a Python file of the user's project: a run's ``model: FILE.py:Class``
(``FILE`` relative to the project folder, the working directory of ``dplab`` and Snakemake),
built as ``Class(**model_args)``.  A constructor with a parameter ``input_shape`` or
``classes`` also gets the data's (from the prepared dataset's info.json) unless ``model_args``
sets it.  The file is imported once per content (its SHA-256 names the module), so an edited
file is imported afresh and a run's jobs depend on it (:func:`dplab.jobs.plan`)."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dplab.errors import DPLabError
from dplab.layout import MODEL_FILE, model_path

if TYPE_CHECKING:  # torch is imported with the user's file: a config of built-in models needs none
    from torch import nn

#: this module loads the user's files, outside the package (:mod:`dplab.imports` follows none)
LOADS_PROJECT_FILES = True
#: constructor parameters filled from the data unless ``model_args`` sets them
FROM_DATA = ("input_shape", "classes")


def names_file(model: str) -> bool:
    """Whether the run's ``model`` names a class in a file (else a built-in model's name)."""
    return model_path(model) is not None


def sha256(model: str) -> str:
    """The SHA-256 of the model's file (what the checkpoint fingerprint records)."""
    return hashlib.sha256(Path(model_path(model)).read_bytes()).hexdigest()


def model_class(model: str) -> type[nn.Module]:
    """The class ``model`` names; a DPLabError on ``model`` when the file is missing, does not
    import, or defines no such ``nn.Module`` subclass."""
    from torch import nn

    file, name = MODEL_FILE.match(model).group("path", "name")
    source = Path(file)
    if not source.is_file():
        raise DPLabError(
            "model",
            f"no model file {file} (relative to the project folder {Path.cwd()}); "
            "write model: FILE.py:Class",
        )
    module_name = f"dplab_model_{hashlib.sha256(source.read_bytes()).hexdigest()[:20]}"
    module = sys.modules.get(module_name) or _import(module_name, source)
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        defined = sorted(
            k
            for k, v in vars(module).items()
            if isinstance(v, type) and issubclass(v, nn.Module) and v.__module__ == module_name
        )
        raise DPLabError(
            "model",
            f"{file} defines no nn.Module class {name!r}; it defines "
            f"{', '.join(defined) or 'none'}",
        )
    return cls


def _import(module_name: str, source: Path):
    spec = importlib.util.spec_from_file_location(module_name, source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # whatever the user's file raises: it does not import
        del sys.modules[module_name]
        first = (str(err).splitlines() or [""])[0][:160]
        raise DPLabError(
            "model", f"{source} does not import: {type(err).__name__}: {first}"
        ) from None
    return module


def arguments(
    model: str, model_args: dict | None, input_shape: list[int] | None, classes: int | None
) -> dict:
    """The constructor's keyword arguments: ``model_args``, plus the data's input shape and
    classes where the constructor takes them (module docstring); a DPLabError on
    ``model_args`` when they do not bind to its signature."""
    cls = model_class(model)
    signature = inspect.signature(cls)
    kwargs = dict(model_args or {})
    for key, value in zip(FROM_DATA, (input_shape, classes)):
        if key in signature.parameters and key not in kwargs:
            kwargs[key] = value
    try:
        signature.bind(**kwargs)
    except TypeError as err:
        raise DPLabError(
            "model_args",
            f"{cls.__name__}{signature} does not take {sorted(model_args or {})}: {err}",
        ) from None
    return kwargs


def build(model: str, model_args: dict | None, input_shape: list[int], classes: int) -> nn.Module:
    """``Class(**arguments)`` (:func:`arguments`); a DPLabError on ``model`` if it raises."""
    kwargs = arguments(model, model_args, input_shape, classes)
    try:
        return model_class(model)(**kwargs)
    except DPLabError:
        raise
    except (Exception, SystemExit) as err:  # the user's constructor failed
        raise DPLabError(
            "model", f"{model}({kwargs}) fails: {type(err).__name__}: {str(err)[:160]}"
        ) from None
