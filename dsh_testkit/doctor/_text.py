"""Texts compared: where two versions first differ, excerpts for highlighting, and whether
the changed token looks volatile (a time, a date, an id, a counter); and volatile values found
by what they are (:func:`volatile_value`, :func:`clock_values`), not by a change that already
happened."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from dsh_core._differences import locate_text_difference

__all__ = [
    "TextDiff",
    "clock_values",
    "is_bare_date",
    "locate",
    "one_line",
    "own_date",
    "text_diff",
    "token_around",
    "volatile_span",
    "volatile_value",
]

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
    start = _common_prefix(a, b, limit)
    end = _common_prefix(a[::-1], b[::-1], limit - start)  # the common suffix
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


def _common_prefix(a: str, b: str, limit: int) -> int:
    """How many leading characters ``a`` and ``b`` share, at most ``limit``: halving the
    unknown part and comparing slices (in C) rather than a character at a time, so a volatile
    system prompt's first difference is found in a dozen comparisons."""
    lo, hi = 0, limit  # a[:lo] == b[:lo]; they differ before hi + 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


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


_VOLATILE_VALUE: Final = re.compile(
    r"(?<![0-9])(?:"
    r"(?P<datetime>\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?)"
    r"|(?P<time>\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?)"
    r"|(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"|(?P<epoch>1[0-9]{9}(?:[0-9]{3})?(?:\.[0-9]+)?)"
    r")(?![0-9])"
    r"|(?<![A-Za-z0-9_-])(?P<hex>(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{12,})"
    r"(?![A-Za-z0-9_-])"
    r"|(?<![A-Za-z0-9_-])(?P<id>(?:[A-Za-z]+[-_])?(?=[A-Za-z0-9_-]*[0-9])"
    r"(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]{16,})(?![A-Za-z0-9_-])"
)
"""A volatile value found inside any text (not only as a whole changed token): a date or a
date-time, a time with seconds, a UUID, a Unix time (10 or 13 digits), a long hex id, a random
id. Stricter than :data:`_VOLATILE_TOKEN`: no plain numbers, names of days or months, or ``HH:MM``
alone, which a constant rule (``13. …``, ``09:00–17:00``) holds as well."""

_REACH: Final = 40
"""Characters either side of a changed span searched for the volatile value it cuts through."""


def volatile_value(text: str, lo: int, hi: int) -> str | None:
    """The volatile value (:data:`_VOLATILE_VALUE`) that overlaps ``text[lo:hi]`` (a span where
    two versions differ, possibly empty: an insertion point), or ``None``."""
    start = max(0, lo - _REACH)
    for found in _VOLATILE_VALUE.finditer(text, start, min(len(text), hi + _REACH)):
        a, b = found.span()
        if (a < hi and b > lo) or (lo == hi and a < lo < b):
            return found.group(0)
    return None


_BARE_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


def own_date(value: str, started: float | None) -> bool:
    """Whether ``value`` is a bare date within a day of ``started`` (any time zone)."""
    if _BARE_DATE.fullmatch(value) is None or started is None or started < 1e9:
        return False
    parsed = _parsed(value)
    when = datetime.fromtimestamp(started, UTC)
    return parsed is not None and abs(parsed + timedelta(hours=12) - when) <= _DAY


def is_bare_date(value: str) -> bool:
    """A date without a time (``2024-06-01``): a fixed date as often as a clock's."""
    return _BARE_DATE.fullmatch(value) is not None


def _values(text: str) -> Iterator[re.Match[str]]:
    yield from _VOLATILE_VALUE.finditer(text)


_DAY: Final = timedelta(hours=26)
"""How far a date may be from the request's (UTC) date and still be its own: any time zone."""


def _parsed(value: str) -> datetime | None:
    text = value.replace(" UTC", "Z").replace("UTC", "Z").replace(" ", "T", 1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def clock_values(text: str, started: float | None) -> list[tuple[str, int]]:
    """The values in ``text`` that read a clock (``(value, offset)``): a date-time or a time
    with seconds, whenever the request was sent; with the request's time known (``started``, a
    Unix time), also a bare date or a Unix time within a day of it (without it a bare date may
    be a fixed one: a release, a knowledge cutoff)."""
    out: list[tuple[str, int]] = []
    when = datetime.fromtimestamp(started, UTC) if started is not None and started >= 1e9 else None
    for found in _values(text):
        kind, value = found.lastgroup, found.group(0)
        if kind == "time" or (kind == "datetime" and ":" in value):
            out.append((value, found.start()))
        elif kind == "datetime" and when is not None:
            parsed = _parsed(value[:10])
            if parsed is not None and abs(parsed + timedelta(hours=12) - when) <= _DAY:
                out.append((value, found.start()))
        elif kind == "epoch" and when is not None:
            seconds = float(value) / (1000 if len(value.split(".")[0]) == 13 else 1)
            if abs(seconds - when.timestamp()) <= _DAY.total_seconds():
                out.append((value, found.start()))
    return out


def locate(a: str, b: str) -> tuple[str, tuple[str, str]]:
    found = locate_text_difference(a, b)
    if found is None:
        return "", ("", "")
    return f"line {found.line} column {found.column}", (found.expected, found.actual)


def one_line(text: str) -> str:
    """``text`` with its line breaks and tabs written as ``\\n``, ``\\r``, ``\\t``: evidence
    stays on its line of a text report, and whitespace that is the difference shows."""
    return text.translate(_CONTROLS)
