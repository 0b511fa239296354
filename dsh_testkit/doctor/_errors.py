"""The doctor's errors (part of ``dsh_testkit``'s one tree).

::

    TestkitError
    └── CacheUnfriendly     ``assert_cache_friendly`` found requests that lost cache hits
                            (``.conversation``, ``.findings``)   [AssertionError]
    └── ReportFormatError   a cache report JSON document of a version not read here, or
                            malformed (``expand_report``)

(``compare``'s :class:`~dsh_testkit.compare.CacheRegression` is its sibling in the tree.)

(``assert_prefix_stable`` raises the tree's :class:`~dsh_testkit.doctor.PrefixInstability`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import TestkitError

__all__ = ["CacheUnfriendly", "ReportFormatError"]


class CacheUnfriendly(TestkitError, AssertionError):
    """Requests that lost prompt-cache hits (or were refused), with their causes.

    ``.findings`` holds the doctor's findings (cause code, severity, what it cost, evidence);
    ``.conversation`` the key of the first conversation with one.
    """

    def __init__(self, message: str, *, conversation: str, findings: Sequence[Any]) -> None:
        self.conversation = conversation
        self.findings = tuple(findings)
        super().__init__(message)


class ReportFormatError(TestkitError, ValueError):
    """A cache report JSON document this version cannot read: another ``formatVersion``, not a
    cache report, or a compact document missing what it refers to."""


# A failing test names it where users import them from, not this private module.
CacheUnfriendly.__module__ = "dsh_testkit.doctor"
ReportFormatError.__module__ = "dsh_testkit.doctor"
