"""The servers' shared plumbing keeps the layers apart: the mock and the proxy import nothing of
the doctor, the Explorer or compare (not at load time, not in a function, not for types), the
proxy nothing private of the mock, and the doctor does not pull the mock's server in."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "dsh_testkit"


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports anywhere in it (functions and ``TYPE_CHECKING`` blocks
    included), resolved to its absolute name."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def modules_of(room: str) -> list[Path]:
    return sorted((PACKAGE / room).rglob("*.py"))


@pytest.mark.parametrize("room", ["mock", "proxy", "_loopback"])
def test_the_servers_import_nothing_of_the_doctor_explorer_or_compare(room: str) -> None:
    above = ("dsh_testkit.doctor", "dsh_testkit.explorer", "dsh_testkit.compare")
    found = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in modules_of(room)
        for name in imported_modules(path)
        if name.startswith(above)
    }
    assert not found


def test_the_proxy_imports_nothing_of_the_mock() -> None:
    found = {
        f"{path.name}: {name}"
        for path in modules_of("proxy")
        for name in imported_modules(path)
        if name.startswith("dsh_testkit.mock")
    }
    assert not found


def test_the_relay_and_the_proxy_server_do_not_import_each_other() -> None:
    relay = imported_modules(PACKAGE / "proxy" / "_relay.py")
    server = imported_modules(PACKAGE / "proxy" / "_server.py")
    assert not any(name.startswith("dsh_testkit.proxy._server") for name in relay)
    assert any(name.startswith("dsh_testkit.proxy._relay") for name in server)


def test_the_loopback_room_imports_no_other_room_of_the_kit() -> None:
    found = {
        f"{path.name}: {name}"
        for path in modules_of("_loopback")
        for name in imported_modules(path)
        if name.startswith("dsh_testkit.") and not name.startswith("dsh_testkit._loopback")
    }
    assert not found


def test_importing_the_doctor_loads_neither_server() -> None:
    code = (
        "import sys, dsh_testkit.doctor\n"
        "loaded = [m for m in ('dsh_testkit.mock._server', 'dsh_testkit.proxy', "
        "'dsh_testkit._loopback.server') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
