"""The pytest plugin (entry point ``pytest11``): options, markers and fixtures.

Importing this module stays light: heavy dependencies (vcrpy, respx, syrupy, hypothesis) are
imported inside the fixtures that need them.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh", "dsh-testkit: mock DeepSeek, cassettes and replay")
    group.addoption(
        "--dsh-record-mode",
        choices=("none", "missing", "all"),
        default="none",
        help="cassette record mode: none (replay only, network blocked), missing, all",
    )
