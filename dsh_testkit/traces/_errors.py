"""The errors of traces (part of ``dsh_testkit``'s one tree).

::

    TestkitError
    └── TraceError          a file or object cannot be read as a trace (``.path``, ``.reason``)
"""

from __future__ import annotations

from .._errors import TestkitError

__all__ = ["TraceError"]


class TraceError(TestkitError, ValueError):
    """A file or object could not be read as a trace: what it is, and what was expected."""

    def __init__(self, reason: str, *, path: str | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)


# A traceback names it where users import it from, not this private module.
TraceError.__module__ = "dsh_testkit.traces"
