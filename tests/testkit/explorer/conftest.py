"""A real Chromium for the Cache Explorer's browser tests (Playwright for Python, driving the
system's browser at /usr/bin/chromium); the tests that need it skip, saying how to install it,
where it is absent. ``.ci/run`` installs it, so CI always runs them."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.explorer_screenshots import CHROMIUM, CHROMIUM_ARGS

ARGS = list(CHROMIUM_ARGS)
"""Headless and offline (the docs' screenshots use the same flags)."""

INSTALL = (
    "Chromium is not installed at /usr/bin/chromium: install it with "
    "`apt-get install -y --no-install-recommends chromium` (Debian, Ubuntu; .ci/run does this "
    "when it runs as root) to run the Cache Explorer's browser tests"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A persistent Chromium context with a fresh profile (one per test module)."""
    if shutil.which(CHROMIUM) is None:
        pytest.skip(INSTALL)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the dev dependency group pins playwright
        pytest.skip(
            "playwright is not installed: `make .venv/.installed` installs the dev dependency group"
        )
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": 1400, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


class Page:
    """A browser page and what its console said (errors and warnings, uncaught exceptions)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"{message.type}: {message.text}")

    def _dialog(self, dialog: Any) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def open(self, url: str) -> Any:
        self.page.goto(url)
        self.page.wait_for_selector("#app[data-state=ready]", timeout=60_000)
        return self.page

    def open_file(self, path: Path) -> Any:
        return self.open(path.as_uri())


@pytest.fixture
def tab(browser: Any) -> Iterator[Page]:
    page = browser.new_page()
    try:
        yield Page(page)
    finally:
        page.close()
