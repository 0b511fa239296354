"""What ``compare_runs`` returns: the figures of two runs side by side, and the check a build
gates on (which raises with the text report, so it sits above the renderer)."""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import TestkitError
from ._render import comparison_text
from ._values import ComparisonFigures

__all__ = ["CacheRegression", "RunComparison"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunComparison(ComparisonFigures):
    """Two runs compared: per scenario and in total, with the verdict a build gates on."""

    def check(self) -> None:
        """Raise :class:`CacheRegression` (the text report as its message) on a regression."""
        if self.verdict == "regression":
            raise CacheRegression(comparison_text(self, only_changes=True), comparison=self)


class CacheRegression(TestkitError, AssertionError):
    """A change made caching or the estimated cost worse beyond the thresholds.

    ``.comparison`` is the :class:`RunComparison`; ``.scenarios`` the scenarios that regressed.
    """

    def __init__(self, message: str, *, comparison: RunComparison) -> None:
        self.comparison = comparison
        self.scenarios = tuple(s for s in comparison.scenarios if s.verdict == "regression")
        super().__init__(message)


# A failing test names it where users import it from, not this private module.
CacheRegression.__module__ = "dsh_testkit.compare"
