"""The doctor's errors (part of ``dsh_testkit``'s one tree).

::

    TestkitError
    ├── CacheUnfriendly     ``assert_cache_friendly`` found requests that lost cache hits
    │                       (``.conversation``, ``.findings``)   [AssertionError]
    └── CacheRegression     a run's caching or estimated cost got worse than its baseline's
                            beyond the thresholds (``.comparison``, ``.scenarios``)
                            [AssertionError]

(``assert_prefix_stable`` raises the tree's :class:`~dsh_testkit._errors.PrefixInstability`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._errors import TestkitError

if TYPE_CHECKING:
    from ._compare_values import RunComparison

__all__ = ["CacheRegression", "CacheUnfriendly"]


class CacheUnfriendly(TestkitError, AssertionError):
    """Requests that lost prompt-cache hits (or were refused), with their causes.

    ``.findings`` holds the doctor's findings (cause code, severity, what it cost, evidence);
    ``.conversation`` the key of the first conversation with one.
    """

    def __init__(self, message: str, *, conversation: str, findings: Sequence[Any]) -> None:
        self.conversation = conversation
        self.findings = tuple(findings)
        super().__init__(message)


class CacheRegression(TestkitError, AssertionError):
    """A change made caching or the estimated cost worse beyond the thresholds.

    ``.comparison`` is the :class:`RunComparison`; ``.scenarios`` the scenarios that regressed.
    """

    def __init__(self, message: str, *, comparison: RunComparison) -> None:
        self.comparison = comparison
        self.scenarios = tuple(s for s in comparison.scenarios if s.verdict == "regression")
        super().__init__(message)


# A failing test names them where users import them from, not this private module.
CacheUnfriendly.__module__ = CacheRegression.__module__ = "dsh_testkit.doctor"
