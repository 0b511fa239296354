"""The errors of traces and the cache doctor (part of ``dsh_testkit``'s one tree).

::

    TestkitError
    ├── TraceError          a file or object cannot be read as a trace (``.path``, ``.reason``)
    └── CacheUnfriendly     ``assert_cache_friendly`` found cache-breaking requests
                            (``.conversation``, ``.findings``)   [AssertionError]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import TestkitError

__all__ = ["CacheUnfriendly", "TraceError"]


class TraceError(TestkitError, ValueError):
    """A file or object could not be read as a trace: what it is, and what was expected."""

    def __init__(self, reason: str, *, path: str | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)


class CacheUnfriendly(TestkitError, AssertionError):
    """Requests of a conversation that a prefix cache could not fully reuse, with their causes.

    ``.findings`` holds the doctor's findings (cause code, request index, sentence, evidence).
    """

    def __init__(self, message: str, *, conversation: str, findings: Sequence[Any]) -> None:
        self.conversation = conversation
        self.findings = tuple(findings)
        super().__init__(message)
