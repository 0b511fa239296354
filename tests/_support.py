"""Helpers shared by test modules (plain module: conftest.py keeps only fixtures and hooks)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

REFERENCE_LOGS = (
    Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "reference-logs"
)
"""Real logs of the reference harness, beside the checkout (absent on some machines)."""


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``dsh-testkit ARGS…`` in a fresh Python, as a user runs it (text output captured)."""
    return subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", *args],
        cwd=cwd or Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


PLAIN_USER_INI = """
[pytest]
addopts = --strict-markers -p no:cacheprovider
filterwarnings = error
xfail_strict = true
"""
"""A user's strict pytest settings, without an async plugin's."""

USER_INI = PLAIN_USER_INI + "asyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
"""The same under pytest-asyncio (installed here), whose own warning asks for the loop scope."""


def user_project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *, ini: str | None = USER_INI
) -> pytest.Pytester:
    """A user's project in ``pytester``: no key, no DeepSeek URL and no ``CI`` from this machine
    (``CI=true`` refuses recording, tested apart), untruncated summary lines, and ``ini`` (none
    with ``None``) as its pytest.ini."""
    for name in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "300")
    if ini is not None:
        pytester.makefile(".ini", pytest=ini)
    return pytester


_LIMITED: Final = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


def with_open_file_limit(nofile: int, *argv: str) -> list[str]:
    """``python ARGV…`` as a command line, run with at most ``nofile`` open files.

    The limit is set in the child's own Python, which then becomes the command (``execv``): a
    ``preexec_fn`` would run Python between fork and exec in the test process, whose other
    threads (servers of earlier tests) can hold a lock the child then waits on for ever.
    """
    return [sys.executable, "-c", _LIMITED, str(nofile), *argv]


def patch_depth(cls: type, name: str) -> int:
    """How many patches stand between ``cls``'s attribute ``name`` and the method its library
    defines. A patch is a function that calls the one it replaced, which its closure holds (a
    cell whose function has the same name); ``__wrapped__`` is not trusted (``functools.wraps``
    copies the original's module and name, so only the code's file tells the library's own
    apart). A chain that cannot be followed fails, naming the function it stopped at."""
    package = Path(importlib.import_module(cls.__module__.split(".")[0]).__file__ or "").parent
    function = vars(cls)[name]
    depth = 0
    while not Path(function.__code__.co_filename).is_relative_to(package):
        inner = []
        for cell in function.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(held) and getattr(held, "__name__", None) == name:
                inner.append(held)
        assert len(inner) == 1, f"{cls.__qualname__}.{name}: cannot follow {function!r}"
        function, depth = inner[0], depth + 1
    return depth
