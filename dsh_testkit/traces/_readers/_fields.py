"""What the readers check of a recorded exchange's fields, in one wording for every format.

A recording is input from anywhere (a hand-made trace, a third-party HAR, a PR's artifact), so
each field is checked as it is read, never later in the doctor where a wrong type would become
a traceback. Two rules, the same in every reader:

- **A field of the wrong type** in a format with a schema of its own (a dsh-trace line, the
  mock's request record: a status ``"12"``, a conversation ``[1]``, a response that is not an
  object, a token count ``"12"``, ``true`` or ``1e400``) means the file is not what it claims
  to be: the reader raises :class:`~dsh_testkit.traces.TraceError` naming the line (or record)
  and the field (``line 2: status must be an integer, not '12'``). The readers raise
  :class:`Malformed` with the field's name and add where it was.
- **A figure of the right type that cannot be true** (a negative or absurd token count, a
  cache-hit count above the prompt, a status outside 100..599, a time before 1970 or after
  2100) is left out with a note, grouped by kind (:class:`GroupedNotes`): the figure becomes
  unknown, the rest of the exchange is still read, and no report shows a hit rate above 100 %
  or below 0. A whole file is not refused for one figure a recorder got wrong.
- **A provider's usage inside a recorded answer** (HAR, cassette, OpenTelemetry attributes) is
  foreign data: a figure of any wrong value is left out with a note, never an error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from dsh_core._json import json_kind

__all__ = [
    "MAX_COUNT",
    "MAX_TIME",
    "STATUS_RANGE",
    "GroupedNotes",
    "Malformed",
    "is_count",
    "is_time",
    "kind_of",
    "optional_int",
    "optional_object",
    "optional_string",
    "optional_time",
]

MAX_COUNT: Final = 10**12
"""Token counts above this are not counts (no request holds a trillion tokens)."""
MAX_TIME: Final = 4_102_444_800.0
"""Times are UNIX seconds (or seconds relative within one trace): from 0 up to 2100-01-01.
A larger one is not a time in seconds (milliseconds, nanoseconds, a broken clock)."""
STATUS_RANGE: Final = range(100, 600)
"""The HTTP status codes there are."""


class Malformed(Exception):
    """A field of the wrong type: the message names the field (the caller adds the line and
    the path, and raises :class:`~dsh_testkit.traces.TraceError`)."""


def kind_of(value: Any) -> str:
    """A JSON value's kind for messages, in JSON's words (``null``, ``a string``, ``an array``,
    …: one wording with the session log's checks)."""
    return json_kind(value)


def optional_int(value: Any, where: str) -> int | None:
    """An integer field (``null``: absent); a bool or a float is not one."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise Malformed(f"{where} must be an integer, not {value!r:.40}")


def optional_time(value: Any, where: str) -> float | None:
    """A time in seconds (``null``: absent): a finite JSON number. Its range is checked by the
    builder (out of range: left out with a note)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value) if isinstance(value, float) else value
        if isinstance(number, float) and not math.isfinite(number):
            raise Malformed(f"{where} must be a finite number of seconds, not {value!r:.40}")
        return number
    raise Malformed(f"{where} must be a number of seconds, not {value!r:.40}")


def optional_string(value: Any, where: str) -> str | None:
    """A string field (``null``: absent)."""
    if value is None or isinstance(value, str):
        return value
    raise Malformed(f"{where} must be a string, not {kind_of(value)} {value!r:.40}")


def optional_object(value: Any, where: str) -> Mapping[str, Any] | None:
    """A JSON object field (``null``: absent)."""
    if value is None or isinstance(value, Mapping):
        return value
    raise Malformed(f"{where} must be a JSON object, not {kind_of(value)} {value!r:.40}")


def is_count(value: Any) -> bool:
    """Whether ``value`` is a token count: an integer (not a bool) from 0 to :data:`MAX_COUNT`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def is_time(value: float) -> bool:
    """Whether a number of seconds is a time a recording can hold (see :data:`MAX_TIME`)."""
    return 0 <= value <= MAX_TIME


class GroupedNotes:
    """What a reader left out, one note per kind: its first wording, how many times, and where
    it happened first (``… (3 exchange(s); first: line 2)``)."""

    def __init__(self, unit: str) -> None:
        self.unit = unit
        """What is counted (``span``, ``exchange``)."""
        self._kinds: dict[str, tuple[str, str]] = {}
        self._counts: Counter[str] = Counter()

    def add(self, kind: str, text: str, where: str) -> None:
        self._kinds.setdefault(kind, (text, where))
        self._counts[kind] += 1

    def lines(self) -> list[str]:
        return [
            f"{text} ({self._counts[kind]} {self.unit}(s); first: {where})"
            for kind, (text, where) in self._kinds.items()
        ]
