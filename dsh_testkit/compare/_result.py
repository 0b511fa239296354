"""What ``compare_runs`` returns: the figures of two runs side by side, and the check a build
gates on (which raises with the text report, so it sits above the renderer)."""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import TestkitError
from ._render import comparison_text
from ._values import ComparisonFigures, RunSummary

__all__ = ["CacheRegression", "NothingCompared", "RunComparison"]


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


class NothingCompared(TestkitError, ValueError):
    """Two runs gave nothing to compare: one holds no recording, or no scenario of one pairs
    with a scenario of the other (a renamed suite, a wrong artifact path). Never a verdict: an
    empty run must not pass a gate. ``.base`` and ``.new`` are what each side read
    (:class:`~dsh_testkit.compare.RunSummary`)."""

    def __init__(self, message: str, *, base: RunSummary, new: RunSummary) -> None:
        self.base = base
        self.new = new
        super().__init__(message)


# A failing test names them where users import them from, not this private module.
CacheRegression.__module__ = "dsh_testkit.compare"
NothingCompared.__module__ = "dsh_testkit.compare"
