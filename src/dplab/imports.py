"""The package's import graph, read from its source with :mod:`ast` (nothing is imported).

Every way a module of ``dplab`` can load another counts, wherever it is written (at the top, inside
a function, under ``if TYPE_CHECKING:``):

* ``import a.b`` and ``from a import b`` (``a.b`` where that is a module, else ``a``), relative
  ones (``from ..x import y``) resolved against the module's package;
* ``importlib.import_module(NAME)`` and ``__import__(NAME)`` (any spelling of the call: imported by
  name, renamed with ``as``, or an attribute of any object), with ``NAME``

  - a string literal (relative with ``package=``: a literal, ``__package__`` or ``__name__``),
  - a literal prefix (``f"dplab.figures.{figure_id}"``,
    ``"dplab.x." + name``): every module under it,
  - anything else (a loop over names): every module that a string literal of the importing
    module names.

A module that builds a :class:`dplab.registry.Registry` (it imports :mod:`dplab.registry`) loads
each module its table names (a string literal ``"a.b:object"`` or ``"a.b"`` naming a module of
the package) as a plug-in, when an entry is first used: the registry's own import call, declared
by ``LOADS_REGISTERED = True`` at the top of :mod:`dplab.registry`, counts for nothing by itself.
Such table entries count in the whole graph, not among what importing a module ``runs``.

A call that loads code some other way (``exec``, ``eval``, ``runpy``, ``importlib.util``'s loaders),
or a dynamic import whose names this cannot tell, is an :class:`UnreadableImport`: the graph is
either complete or refused.  One exception: a module that declares ``LOADS_PROJECT_FILES = True``
at its top (:mod:`dplab.training.model_file`) may load a file by ``importlib.util``'s loaders —
the user's own model files, outside the package, of which each job depends directly
(:func:`dplab.jobs.plan`).  A module that declares ``LOADS_INSTALLED_PACKAGE = True``
(:mod:`dplab.package_parts`) may run an installed package's ``__init__`` from its spec
(``module_from_spec``, ``exec_module``): code outside the package, whose version
:mod:`dplab.provenance` records.  ``runs`` narrows a module's imports to those its import runs
(outside functions) and those of the functions it names.  A compiled module counts by its C
source (:func:`extensions`).  tests/test_layers.py checks the
layers on this graph; :mod:`dplab.dvc_yaml` makes each DVC stage depend on the closure of the
code its command runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: this package's source folder
PACKAGE = Path(__file__).resolve().parent

#: calls that import a module by name (the first argument)
IMPORT_CALLS = {"import_module", "__import__"}
#: calls that run code this reader cannot see: builtins (called by their bare name: ``re.compile``
#: is no builtin) and loaders (any spelling)
OPAQUE_BUILTINS = {"exec", "eval", "compile"}
OPAQUE_CALLS = {
    "run_module",
    "run_path",
    "spec_from_file_location",
    "spec_from_loader",
    "module_from_spec",
    "exec_module",
    "load_module",
}
#: the loaders a module declaring ``LOADS_PROJECT_FILES = True`` may call
#: (files outside the package)
PROJECT_LOADERS = {"spec_from_file_location", "module_from_spec", "exec_module"}
#: the loaders a module declaring ``LOADS_INSTALLED_PACKAGE = True`` may call (an installed
#: package's spec, found by name)
PACKAGE_LOADERS = {"module_from_spec", "exec_module"}


class UnreadableImport(ValueError):
    """A module loads code in a way the graph cannot follow (file and line in the message)."""


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` (a folder with ``__init__.py``): dotted name -> file (a package's
    file is its ``__init__.py``).  Names start with the folder's name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def extensions(package: Path = PACKAGE) -> dict[str, Path]:
    """Every compiled module of ``package`` -> its C source: a ``NAME.c`` in the package is the
    source of the extension module ``NAME`` beside it (setup.py builds it; tests/test_layers.py
    checks the two agree).  Such a module imports nothing of the package."""
    return {
        ".".join(path.relative_to(package.parent).with_suffix("").parts): path
        for path in sorted(package.rglob("*.c"))
    }


def _call_name(func: ast.expr) -> str | None:
    return (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )


def _relative(name: str, level: int, package: str) -> str:
    """``name`` imported ``level`` dots up from ``package``
    (``from ..x import y``: level 2, name x)."""
    parts = package.split(".")
    base = parts[: len(parts) - level + 1]
    return ".".join(base + ([name] if name else []))


def _walk(tree: ast.AST, runs: tuple[str, ...] | None):
    """Every node of ``tree`` (:func:`ast.walk`); with ``runs``, none inside a function or lambda
    but those named in ``runs``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if (
            runs is None
            or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            or (getattr(node, "name", None) in runs)
        ):
            todo.extend(ast.iter_child_nodes(node))


class _Reader:
    """The imports of one module (``name``, file ``path``) among the ``known`` modules."""

    def __init__(self, name: str, path: Path, known: set[str]):
        self.name, self.path, self.known = name, path, known
        self.package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.tree = ast.parse(path.read_text(), str(path))
        #: the names this module calls import_module/__import__ by
        #: (``from importlib import import_module as load``)
        self.import_calls = IMPORT_CALLS | {
            alias.asname
            for node in ast.walk(self.tree)
            if isinstance(node, ast.ImportFrom) and node.module in ("importlib", "builtins")
            for alias in node.names
            if alias.name in IMPORT_CALLS and alias.asname
        }
        self.project_loaders = (
            PROJECT_LOADERS if self._declares("LOADS_PROJECT_FILES") else set()
        ) | (PACKAGE_LOADERS if self._declares("LOADS_INSTALLED_PACKAGE") else set())
        self.loads_registered = self._declares("LOADS_REGISTERED")

    def _declares(self, flag: str) -> bool:
        """Whether the module sets ``flag = True`` at its top."""
        return any(
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and [getattr(t, "id", None) for t in node.targets] == [flag]
            and node.value.value is True
            for node in self.tree.body
        )

    def fail(self, node: ast.AST, what: str) -> UnreadableImport:
        return UnreadableImport(f"{self.path}:{node.lineno}: {what}")

    def imports(self, runs: tuple[str, ...] | None = None) -> tuple[set[str], set[str]]:
        """(modules imported by name, modules loaded from a list of names: plug-ins), of ``known``;
        with ``runs``, only those outside functions and in the functions ``runs`` names."""
        found: set[str] = set()
        plugins: set[str] = set()
        for node in _walk(self.tree, runs):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = (
                    _relative(node.module or "", node.level, self.package)
                    if node.level
                    else node.module
                )
                found |= {self._member(base, alias.name) for alias in node.names}
            elif isinstance(node, ast.Call) and _call_name(node.func) in self.import_calls:
                named, loaded = self._dynamic(node)
                found, plugins = found | named, plugins | loaded
            elif isinstance(node, ast.Call) and (
                _call_name(node.func) in OPAQUE_CALLS - self.project_loaders
                or (isinstance(node.func, ast.Name) and node.func.id in OPAQUE_BUILTINS)
            ):
                raise self.fail(
                    node, f"{_call_name(node.func)}() runs code the import graph cannot read"
                )
        if runs is None and f"{self.name.split('.')[0]}.registry" in found:
            plugins |= self._table_entries()
        ours = self.known - {self.name}
        return found & ours, plugins & ours

    def _table_entries(self) -> set[str]:
        """The modules this module's registry tables name (``"a.b:object"``, ``"a.b"``)."""
        return {
            node.value.partition(":")[0]
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.partition(":")[0] in self.known
        }

    def _member(self, base: str, member: str) -> str:
        """``from base import member``: the module ``base.member`` if there
        is one, else ``base``."""
        return f"{base}.{member}" if f"{base}.{member}" in self.known else base

    def _dynamic(self, call: ast.Call) -> tuple[set[str], set[str]]:
        """The modules an ``import_module``/``__import__`` call can load: (by a
        literal name, as plug-ins)."""
        if not call.args:
            raise self.fail(call, "an import call without a positional module name")
        if self.loads_registered:
            return set(), set()
        arg = call.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            name = arg.value
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                name = _relative(name[level:], level, self._package_argument(call))
            return {name} | self._fromlist(call, name), set()
        prefix = self._literal_prefix(arg)
        if prefix is not None:
            return set(), {m for m in self.known if m.startswith(prefix)}
        named = {
            node.value
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in self.known
        }
        if not named:
            raise self.fail(
                call,
                f"cannot tell which module {ast.unparse(call)} imports: give it a literal "
                "name, or name each module it may import in a string literal of this module",
            )
        return set(), named

    def _package_argument(self, call: ast.Call) -> str:
        package = (
            call.args[1]
            if len(call.args) > 1
            else next((k.value for k in call.keywords if k.arg == "package"), None)
        )
        if isinstance(package, ast.Constant) and isinstance(package.value, str):
            return package.value
        if isinstance(package, ast.Name) and package.id in ("__package__", "__name__"):
            return self.package
        raise self.fail(
            call, f"a relative import whose package is not a literal: {ast.unparse(call)}"
        )

    def _fromlist(self, call: ast.Call, name: str) -> set[str]:
        """``__import__(name, …, fromlist=[...])`` also loads ``name.<each listed module>``."""
        fromlist = (
            call.args[3]
            if len(call.args) > 3
            else next((k.value for k in call.keywords if k.arg == "fromlist"), None)
        )
        if not isinstance(fromlist, (ast.List, ast.Tuple)):
            return set()
        return {
            self._member(name, e.value)
            for e in fromlist.elts
            if isinstance(e, ast.Constant) and isinstance(e.value, str)
        }

    @staticmethod
    def _literal_prefix(arg: ast.expr) -> str | None:
        """The literal start of an f-string or of ``"literal" + …``; None when there is none."""
        if (
            isinstance(arg, ast.JoinedStr)
            and arg.values
            and isinstance(arg.values[0], ast.Constant)
        ):
            return arg.values[0].value
        if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
            left = arg.left
            if isinstance(left, ast.Constant) and isinstance(left.value, str):
                return left.value
            return _Reader._literal_prefix(left)
        return None


def module_imports(
    name: str,
    path: Path,
    known: set[str],
    plugins: bool = True,
    runs: tuple[str, ...] | None = None,
) -> set[str]:
    """The modules of ``known`` that module ``name`` (file ``path``) imports: any form, anywhere in
    its file; with ``runs``, only outside functions (what importing it runs) and in the functions
    ``runs`` names.  Without ``plugins``, leave out what it loads by a name it computes (a registry
    loading its plug-ins when first asked, after both are imported: a plug-in importing the
    registry back is no import cycle)."""
    named, loaded = _Reader(name, path, known).imports(runs)
    return named | loaded if plugins else named


def graph(
    package: Path = PACKAGE, plugins: bool = True, runs: tuple[str, ...] | None = None
) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (:func:`module_imports`); a compiled module
    (:func:`extensions`) imports none."""
    found, compiled = modules(package), extensions(package)
    known = set(found) | set(compiled)
    return {name: set() for name in compiled} | {
        name: module_imports(name, path, known, plugins, runs) for name, path in found.items()
    }


def closure(graph: dict[str, set[str]], roots: list[str]) -> set[str]:
    """Every module that importing ``roots`` can load: what they import, transitively, and the
    packages each of those lies in (importing ``a.b.c`` runs ``a`` and ``a.b`` first)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parents = [name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)]
        todo += [*graph[name], *(p for p in parents if p in graph)]
    return seen
