"""The import graph of dsh_core and dsh_testkit, counted honestly: no circle, rooms layered.

The imports are read from the source (``ast``), not by importing, and every import counts: at
module level, inside a function, under ``TYPE_CHECKING``. An edge is an import of another module
of the packages (``from ._x import y`` names ``_x``; ``from . import _x`` names ``_x``; an import
of a package runs its ``__init__``, which is an edge to the package). A package's own
``__init__`` importing its submodules is the usual layout, not a circle; a submodule reaching its
package back through ``from .. import name`` is.

The rooms of ``dsh_testkit`` and what each may import are the table "What may import what" in
docs/ARCHITECTURE.md: the test reads that table, so the page and the code cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def modules(package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted module name → (file, is a package's ``__init__``)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def imported_names(tree: ast.AST, here: str, is_package: bool) -> Iterator[str]:
    """Every dotted name a module imports, wherever the import stands."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = here.split(".") if is_package else here.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            yield from (f"{module}.{alias.name}" for alias in node.names)


def import_graph(*packages: str) -> dict[str, set[str]]:
    found: dict[str, tuple[Path, bool]] = {}
    for package in packages:
        found.update(modules(package))
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges: set[str] = set()
        for imported in imported_names(tree, name, is_package):
            parts = imported.split(".")
            # The most specific module the name denotes (a submodule, else its package).
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in found:
                    if candidate != name:
                        edges.add(candidate)
                    break
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
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


def test_the_walker_finds_a_circle_and_counts_lazy_and_typing_imports(tmp_path: Path) -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .b import B\n"
        "def f():\n    from ..c import d\n"
    )
    names = set(imported_names(ast.parse(source), "pkg.sub.a", False))
    assert names == {"typing.TYPE_CHECKING", "pkg.sub.b.B", "pkg.c.d"}


@pytest.mark.parametrize("package", ["dsh_core", "dsh_testkit"])
def test_no_import_circle_of_any_kind(package: str) -> None:
    graph = import_graph(package)
    assert len(graph) > 10
    assert circles(graph) == []


def test_dsh_core_never_imports_the_testkit() -> None:
    graph = import_graph("dsh_core", "dsh_testkit")
    assert not [
        (name, edge)
        for name, edges in graph.items()
        if name.startswith("dsh_core")
        for edge in edges
        if edge.startswith("dsh_testkit")
    ]


# ------------------------------------------------------------------------------ rooms


def room_rules() -> dict[str, set[str]]:
    """The table "What may import what" of docs/ARCHITECTURE.md: room → rooms it may import."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("### What may import what", 1)[1].split("\n#", 1)[0]
    rules: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        room = cells[0].strip("`")
        allowed = set(re.findall(r"`([^`]+)`", cells[2]))
        rules[room] = allowed
    return rules


def room_of(module: str, rooms: set[str]) -> str:
    """The room a module belongs to: the longest room name that is the module or a prefix."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in rooms:
            return candidate
    raise AssertionError(f"{module} belongs to no room of docs/ARCHITECTURE.md's table")


def test_the_table_names_every_room_and_only_rooms_that_exist() -> None:
    rules = room_rules()
    assert "dsh_testkit.doctor" in rules and "dsh_core" in rules
    existing = set(modules("dsh_testkit")) | set(modules("dsh_core"))
    for room in rules:
        assert room in existing, f"the table names {room}, which is no module or package"
    for allowed in rules.values():
        assert allowed <= set(rules), allowed - set(rules)
    for module in existing:
        room_of(module, set(rules))


def test_each_room_imports_only_what_the_architecture_page_allows() -> None:
    rules = room_rules()
    graph = import_graph("dsh_core", "dsh_testkit")
    broken = sorted(
        f"{name} imports {edge} ({room_of(name, set(rules))} may not import "
        f"{room_of(edge, set(rules))})"
        for name, edges in graph.items()
        for edge in edges
        if room_of(edge, set(rules)) != room_of(name, set(rules))
        and room_of(edge, set(rules)) not in rules[room_of(name, set(rules))]
    )
    assert broken == []


def test_no_underscore_name_crosses_rooms() -> None:
    """A room uses another room through names without a leading underscore (its own surface, or
    a named function of its private modules), never through one of its private names."""
    rules = room_rules()
    found = []
    known = modules("dsh_testkit")
    for name, (path, is_package) in known.items():
        here = room_of(name, set(rules))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
            if room_of(module, set(rules)) == here:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and f"{module}.{alias.name}" not in known:
                    found.append(f"{name}: {module}.{alias.name}")
    assert found == []
