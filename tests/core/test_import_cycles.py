"""No import cycles between the modules of dsh_core and dsh_testkit.

The imports are read from the source (``ast``), not by importing: an edge is a module-level
import of another module of the package (``from ._x import y`` names ``_x``; ``from . import
_x`` names ``_x``; an import of a package runs its ``__init__``, which is an edge to the package
only). Imports inside functions run lazily and are not edges. A package's own ``__init__``
importing its submodules is the usual layout, not a cycle: a submodule reaching its package
back through ``from .. import name`` is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _modules(package: str) -> dict[str, tuple[Path, bool]]:
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _imported_names(
    body: Sequence[ast.stmt], here: str, is_package: bool, *, typing_only: bool
) -> Iterator[str]:
    """Dotted names a module's top level imports (``typing_only``: also under TYPE_CHECKING)."""
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                if typing_only:
                    yield from _imported_names(node.body, here, is_package, typing_only=True)
                yield from _imported_names(node.orelse, here, is_package, typing_only=typing_only)
                continue
            for branch in (node.body, node.orelse):
                yield from _imported_names(branch, here, is_package, typing_only=typing_only)
        elif isinstance(node, ast.Try):
            for branch in (node.body, *(h.body for h in node.handlers), node.orelse):
                yield from _imported_names(branch, here, is_package, typing_only=typing_only)
        elif isinstance(node, ast.ClassDef):
            yield from _imported_names(node.body, here, is_package, typing_only=typing_only)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = here.split(".") if is_package else here.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            yield from (f"{module}.{alias.name}" for alias in node.names)


def import_graph(*packages: str, typing_only: bool = False) -> dict[str, set[str]]:
    modules: dict[str, tuple[Path, bool]] = {}
    for package in packages:
        modules.update(_modules(package))
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges: set[str] = set()
        for imported in _imported_names(tree.body, name, is_package, typing_only=typing_only):
            parts = imported.split(".")
            # The most specific module the name denotes (a submodule, else its package).
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in modules:
                    if candidate != name:
                        edges.add(candidate)
                    break
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_walker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.slow
@pytest.mark.parametrize("packages", [("dsh_core",), ("dsh_testkit",)])
def test_no_runtime_import_cycle(packages: tuple[str, ...]) -> None:
    graph = import_graph(*packages)
    assert len(graph) > 10
    assert cycles(graph) == []


def test_no_import_cycle_in_the_core_even_for_type_checking() -> None:
    """Tools and pre-step hooks get narrow contexts, so ``_tools`` needs nothing from ``_loop``."""
    graph = import_graph("dsh_core", typing_only=True)
    assert "dsh_core._tools" in graph["dsh_core._loop"]
    assert "dsh_core._loop" not in graph["dsh_core._tools"]
    assert cycles(graph) == []
