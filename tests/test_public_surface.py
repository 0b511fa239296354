"""The public surface of both packages: chosen, exact, and what the docs import.

One test for every public module (httpx's ``test_exported_members``, grown to the whole tree):

- a public module is one whose dotted path has no underscore-named part; every such module of
  ``dsh_core`` and ``dsh_testkit`` is listed in :data:`PUBLIC` (a new one fails until it is
  chosen, not found by accident);
- its ``__all__`` is sorted (ruff's RUF022 order) and unique, and equal to what it really offers:
  in a package's ``__init__``, every name it binds (its re-exports are its API); in a plain
  module, the names it defines (its imports are its implementation, as PEP 8 says);
- each exported class and function is defined under that module (an exception's ``__module__``
  is its public home), and each exported constant or alias is imported from under it, except the
  deliberate re-exports in :data:`REEXPORTS`;
- every exception of the error tree (``DshError`` and all its subclasses) names, in
  ``__module__``, a public module that exports it by that name: a failing test's traceback shows
  ``dsh_testkit.cassettes.CassetteMismatch``, a path the reader can import;
- every ``import`` in the docs' and README's Python examples, and every ``dsh_core.…`` /
  ``dsh_testkit.…`` path the pages name in backticks, is public.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import dsh_core
import dsh_testkit

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = (
    "dsh_core",
    "dsh_core.persistence",
    "dsh_core.providers",
    "dsh_core.providers.anthropic",
    "dsh_core.providers.deepseek",
    "dsh_core.scripted",
    "dsh_testkit",
    "dsh_testkit.calibration",
    "dsh_testkit.capture",
    "dsh_testkit.cassettes",
    "dsh_testkit.compare",
    "dsh_testkit.doctor",
    "dsh_testkit.explorer",
    "dsh_testkit.golden",
    "dsh_testkit.mock",
    "dsh_testkit.prompt",
    "dsh_testkit.proxy",
    "dsh_testkit.pytest_plugin",
    "dsh_testkit.replay",
    "dsh_testkit.reports",
    "dsh_testkit.scrub",
    "dsh_testkit.strategies",
    "dsh_testkit.traces",
    "dsh_testkit.trajectory",
)
"""Every public module: the packages and modules a user imports from."""

COMMANDS = ("dsh_testkit.cli", "dsh_testkit.cli.__main__")
"""Public-named modules that are a command, not an API: ``dsh-testkit`` and ``python -m``."""

REEXPORTS: dict[str, frozenset[str]] = {
    # The model table's cache facts are one type in the core and in the prompt model's
    # simulator options; the prompt model offers it where its other options are.
    "dsh_testkit.prompt": frozenset({"UnitVisibility"}),
}
"""Deliberate re-exports of a name defined outside the exporting module, each with its reason."""

PLUGIN_NAMESPACE = re.compile(r"^(pytest_\w+|dsh_\w+)$")
"""In the pytest plugin, hooks (``pytest_*``) and fixtures (``dsh_*``) are pytest's, not an API."""


def _walk(package: types.ModuleType) -> Iterator[str]:
    yield package.__name__
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        yield info.name


ALL_MODULES = sorted({*_walk(dsh_core), *_walk(dsh_testkit)})


def _is_public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def _ruf022_key(name: str) -> tuple[int, str]:
    # RUF022's isort-style order: SCREAMING_CASE, then CamelCase, then the rest.
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _source(module: types.ModuleType) -> ast.Module:
    assert module.__file__ is not None
    return ast.parse(Path(module.__file__).read_text(encoding="utf-8"))


def _is_kit_import(node: ast.ImportFrom) -> bool:
    return node.level > 0 or (node.module or "").split(".")[0] in {"dsh_core", "dsh_testkit"}


def _imported_from(module: types.ModuleType, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.__name__.split(".")
    if not hasattr(module, "__path__"):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements that run at import: the module body, into ``if``/``try`` blocks, but not
    ``if TYPE_CHECKING:`` (nothing there is bound at run time)."""
    for node in tree.body:
        if isinstance(node, ast.If):
            if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                continue
            yield from _top_level(ast.Module(body=[*node.body, *node.orelse], type_ignores=[]))
        elif isinstance(node, ast.Try):
            yield from _top_level(ast.Module(body=[*node.body, *node.orelse], type_ignores=[]))
        else:
            yield node


def _bindings(module: types.ModuleType) -> dict[str, str | None]:
    """The public names a module offers, each with where it was imported from (``None``:
    defined here). A package offers what it defines and what it imports from the kit; a plain
    module only what it defines."""
    offered: dict[str, str | None] = {}
    is_package = hasattr(module, "__path__")
    for node in _top_level(_source(module)):
        if isinstance(node, ast.ImportFrom) and is_package and _is_kit_import(node):
            origin = _imported_from(module, node)
            for alias in node.names:
                name = alias.asname or alias.name
                if isinstance(getattr(module, name, None), types.ModuleType):
                    continue  # a submodule, not a name
                offered[name] = origin
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            offered[node.name] = None
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    offered[target.id] = None
    offered = {name: origin for name, origin in offered.items() if not name.startswith("_")}
    if module.__name__ == "dsh_testkit.pytest_plugin":
        offered = {n: o for n, o in offered.items() if not PLUGIN_NAMESPACE.match(n)}
    return offered


def _under(path: str, package: str) -> bool:
    return path == package or path.startswith(package + ".")


def test_every_public_module_is_listed() -> None:
    public = [name for name in ALL_MODULES if _is_public(name) and name not in COMMANDS]
    assert sorted(PUBLIC) == public


@pytest.mark.parametrize("name", PUBLIC)
def test_all_is_sorted_unique_and_exactly_what_the_module_offers(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), "duplicates in __all__"
    assert exported == sorted(exported, key=_ruf022_key), "__all__ is not in RUF022 order"
    offered = _bindings(module)
    lazy = set(exported) - set(offered)
    if lazy:  # names a module hands out on first use, through its __getattr__
        assert "__getattr__" in vars(module), f"not defined: {sorted(lazy)}"
    assert set(offered) <= set(exported), {
        "missing from __all__": sorted(set(offered) - set(exported))
    }
    for exported_name in exported:
        getattr(module, exported_name)  # every name resolves, lazy ones too


@pytest.mark.parametrize("name", PUBLIC)
def test_each_exported_name_is_defined_under_its_module(name: str) -> None:
    module = importlib.import_module(name)
    offered = _bindings(module)
    allowed = REEXPORTS.get(name, frozenset())
    foreign: list[str] = []
    for exported_name in module.__all__:
        value = getattr(module, exported_name)
        if isinstance(value, type) or inspect.isfunction(value):
            home = value.__module__
        else:
            home = offered.get(exported_name) or name
        if not _under(home, name) and exported_name not in allowed:
            foreign.append(f"{exported_name} (from {home})")
    assert not foreign, f"{name} re-exports names defined elsewhere: {foreign}"


def test_the_reexport_allowlist_is_live() -> None:
    for name, allowed in REEXPORTS.items():
        assert allowed <= set(importlib.import_module(name).__all__), name


# ------------------------------------------------------------------------------ the error tree


def _error_tree() -> list[type[BaseException]]:
    for name in ALL_MODULES:
        if not name.endswith(".__main__"):  # running it is the command
            importlib.import_module(name)
    found: list[type[BaseException]] = []
    todo: list[type[BaseException]] = [dsh_core.DshError]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.append(cls)
            todo.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__.split(".")[0] in {"dsh_core", "dsh_testkit"}]


ERRORS = _error_tree()


def test_the_error_tree_is_found_whole() -> None:
    names = {cls.__name__ for cls in ERRORS}
    assert {"DshError", "TestkitError", "CassetteMismatch", "PrefixInstability"} <= names
    assert {"CacheUnfriendly", "CacheRegression", "TraceError", "ProxyError"} <= names
    assert {"MockError", "LogLockedError", "WireFormatError", "ScriptExhaustedError"} <= names


@pytest.mark.parametrize("error", ERRORS, ids=lambda cls: cls.__qualname__)
def test_every_exception_is_exported_by_the_public_module_it_names(
    error: type[BaseException],
) -> None:
    home = error.__module__
    assert home in PUBLIC, f"{error.__qualname__}.__module__ is {home!r}, not a public module"
    module = importlib.import_module(home)
    assert error.__qualname__ in module.__all__, f"{home} does not export {error.__qualname__}"
    assert getattr(module, error.__qualname__) is error


def test_a_failing_assertion_names_its_public_path() -> None:
    from dsh_testkit.cassettes import CassetteMismatch

    error = CassetteMismatch(
        "no match",
        path="c.yaml",
        index=0,
        request="GET /",
        closest=None,
        closest_index=None,
        diff=(),
    )
    assert f"{type(error).__module__}.{type(error).__qualname__}" == (
        "dsh_testkit.cassettes.CassetteMismatch"
    )


# ------------------------------------------------------------------------------------ the docs

PAGES = [
    page
    for page in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    if page.name != "ARCHITECTURE.md"  # the lead's map of the tree, rewritten apart
]
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
NAMED_PATH = re.compile(r"`(?:from )?((?:dsh_core|dsh_testkit)(?:\.\w+)+)")


def _example_imports() -> Iterator[tuple[str, str, str]]:
    """``(page:line, module, name)`` for every ``from dsh_… import name`` of every example."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for fence in FENCE.finditer(text):
            first_line = text.count("\n", 0, fence.start()) + 2
            try:
                tree = ast.parse(fence.group(1))
            except SyntaxError:
                continue  # a fragment; tests/test_docs.py runs the whole examples
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and _is_kit_import(node):
                    where = f"{page.relative_to(ROOT)}:{first_line + node.lineno - 1}"
                    for alias in node.names:
                        yield where, node.module or "", alias.name


def _named_paths() -> Iterator[tuple[str, str]]:
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for match in NAMED_PATH.finditer(line):
                yield f"{page.relative_to(ROOT)}:{number}", match.group(1)


def _problem(path: str, *, public_only: bool) -> str | None:
    """What is wrong with the name ``path`` (``module.name.attribute``), or ``None``: a public
    module's name must be one it exports; a private module's (where allowed) must exist."""
    parts = path.split(".")
    cut = max(n for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in ALL_MODULES)
    module_name = ".".join(parts[:cut])
    if public_only and not _is_public(module_name):
        return f"{module_name} is private"
    rest = parts[cut:]
    if not rest:
        return None
    module = importlib.import_module(module_name)
    if _is_public(module_name) and rest[0] not in getattr(module, "__all__", ()):
        return f"{module_name} does not export {rest[0]}"
    value: object = module
    for attribute in rest:
        if not hasattr(value, attribute):
            return f"{'.'.join(rest)} has no {attribute}"
        value = getattr(value, attribute)
    return None


def test_the_docs_examples_import_only_public_names() -> None:
    imports = list(_example_imports())
    assert len(imports) > 20
    wrong = []
    for where, module_name, name in imports:
        if module_name not in PUBLIC:
            wrong.append(f"{where}: {module_name} is not a public module")
        elif name not in importlib.import_module(module_name).__all__:
            wrong.append(f"{where}: {module_name} does not export {name}")
    assert not wrong, "\n".join(wrong)


def test_the_paths_the_docs_name_are_public() -> None:
    named = list(_named_paths())
    assert len(named) > 10
    wrong = [
        f"{where}: {path}: {why}"
        for where, path in named
        if (why := _problem(path, public_only=True))
    ]
    assert not wrong, "\n".join(wrong)


CODE_PATH = re.compile(r"\b((?:dsh_core|dsh_testkit)(?:\.\w+)+)")


def test_the_paths_the_docstrings_name_exist() -> None:
    """A docstring that names ``dsh_testkit.doctor.X`` names an exported ``X``; one that names a
    private module's member names one that exists (the documentation site links them)."""
    wrong = []
    for package in ("dsh_core", "dsh_testkit"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if line.lstrip().startswith(("from ", "import ")):
                    continue
                for match in CODE_PATH.finditer(line):
                    named = match.group(1).rstrip(".")
                    if why := _problem(named, public_only=False):
                        wrong.append(f"{path.relative_to(ROOT)}:{number}: {named}: {why}")
    assert not wrong, "\n".join(wrong)
