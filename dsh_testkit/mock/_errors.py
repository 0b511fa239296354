"""Errors of the mock DeepSeek, a branch of the test kit's tree::

    DshError
    └── TestkitError
        └── MockError              the mock was misused or misconfigured
            ├── ScriptError        a script entry or script file is invalid (``.path``)
            └── MockServerError    the loopback server could not start or stop (``.host``, ``.port``)

Errors a *client* of the mock sees are not Python exceptions: they are the API's own HTTP error
bodies (see :class:`~dsh_testkit.mock._api_errors.ApiError`).
"""

from __future__ import annotations

from .._errors import TestkitError

__all__ = ["MockError", "MockServerError", "ScriptError"]


class MockError(TestkitError):
    """Base of every error the mock raises on purpose."""


class ScriptError(MockError, ValueError):
    """A script entry or script file is invalid. ``path`` names where, e.g. ``entries[2].status``."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class MockServerError(MockError, RuntimeError):
    """The loopback server could not start or stop."""

    def __init__(self, message: str, *, host: str, port: int) -> None:
        super().__init__(f"mock server {host}:{port}: {message}")
        self.host = host
        self.port = port


# A traceback names each error where users import it from, not this private module.
for _error in (MockError, MockServerError, ScriptError):
    _error.__module__ = "dsh_testkit.mock"
