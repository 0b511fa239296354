"""Texts compared: where two versions first differ, excerpts for highlighting, and whether
the changed token looks volatile (a time, a date, an id, a counter)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from dsh_core._differences import locate_text_difference

__all__ = ["TextDiff", "locate", "one_line", "text_diff", "token_around", "volatile_span"]

_CONTROLS: Final = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}

_EXCERPT: Final = 240
"""Characters of context kept on each side of a difference for the page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDiff:
    """Two versions of one text, cut around their first difference, for highlighting."""

    before: str
    after: str
    start: int
    """Where the differing characters begin in both excerpts (the common prefix's length)."""
    before_end: int
    """Where they end in :attr:`before` (the common suffix starts there)."""
    after_end: int
    """Where they end in :attr:`after`."""

    @property
    def spans(self) -> tuple[str, str]:
        """The differing characters: ``(before, after)``."""
        return self.before[self.start : self.before_end], self.after[self.start : self.after_end]

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "start": self.start,
            "beforeEnd": self.before_end,
            "afterEnd": self.after_end,
        }


def text_diff(a: str, b: str) -> TextDiff | None:
    """The first difference of two texts with :data:`_EXCERPT` characters around it."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    start = 0
    while start < limit and a[start] == b[start]:
        start += 1
    end = 0
    while end < limit - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    lo = max(0, start - _EXCERPT)
    a_hi = min(len(a), len(a) - end + _EXCERPT)
    b_hi = min(len(b), len(b) - end + _EXCERPT)
    return TextDiff(
        before=a[lo:a_hi],
        after=b[lo:b_hi],
        start=start - lo,
        before_end=len(a) - end - lo,
        after_end=len(b) - end - lo,
    )


_VOLATILE_TOKEN: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{1,2}/\d{1,2}/\d{2,4}"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}"
    r"|[0-9]+(?:[.,][0-9]+)?"
    r"|(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
    r"|(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
    r"|(?:[A-Za-z]+[-_])?(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])"
    r"[A-Za-z0-9_-]{16,}"
)
"""What a volatile value looks like, as a whole token: a date or date-time, a time, a UUID, a
hex id, a number (a counter, a Unix time), a day or month name, a random id (16+ characters
mixing digits and both cases, optionally prefixed like ``req_``)."""

_WORD: Final = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_:.+/,")


def token_around(text: str, lo: int, hi: int) -> str:
    """The word-like token ``text[lo:hi]`` sits in (extended over letters, digits, ``-_:.+/,``)."""
    while lo > 0 and text[lo - 1] in _WORD:
        lo -= 1
    while hi < len(text) and text[hi] in _WORD:
        hi += 1
    token = text[lo:hi].strip(".,:;/")
    return token


def _looks_volatile(token: str) -> bool:
    return bool(token) and _VOLATILE_TOKEN.fullmatch(token) is not None


def volatile_span(diff: TextDiff) -> str | None:
    """``'old' → 'new'`` when the changed token on each side looks volatile, else ``None``."""
    old = token_around(diff.before, diff.start, diff.before_end)
    new = token_around(diff.after, diff.start, diff.after_end)
    if not old and not new:
        return None
    if (old and not _looks_volatile(old)) or (new and not _looks_volatile(new)):
        return None
    if not old:
        return f"{new!r} added"
    if not new:
        return f"{old!r} removed"
    return f"{old!r} → {new!r}"


def locate(a: str, b: str) -> tuple[str, tuple[str, str]]:
    found = locate_text_difference(a, b)
    if found is None:
        return "", ("", "")
    return f"line {found.line} column {found.column}", (found.expected, found.actual)


def one_line(text: str) -> str:
    """``text`` with its line breaks and tabs written as ``\\n``, ``\\r``, ``\\t``: evidence
    stays on its line of a text report, and whitespace that is the difference shows."""
    return text.translate(_CONTROLS)
