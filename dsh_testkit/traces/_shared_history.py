"""Trace lines parsed against their conversation's previous line (issue 37, causes 1 and 2).

Every line of a trace file holds a whole request, and a chat request resends its conversation's
history: the 200th request of a session carries the 199 requests before it. Parsed line by line
with :func:`json.loads`, a conversation of n requests costs O(n²) parsing, O(n²) secret sniffing
and O(n²) memory (each line's messages are their own dicts), and nothing downstream can tell the
resent messages from new ones (the doctor's id-keyed memo of comparable texts never hits).

:class:`SharedHistory` parses a line's ``request.messages`` array against the arrays it read
before: when the raw text of an earlier array (a *tip*: the latest request of a conversation) is
the start of this one's, followed by ``,`` or ``]``, the earlier array's parsed messages stand
for that part, and only the elements after it are parsed. The rest of the record is parsed by the
standard library's own scanner (the C one), value by value, so every value equals what
:func:`~dsh_core._json_text.loads_json` gives for the line (the same bytes, parsed by the same
code); only object identity is shared. Anything unusual (a BOM, a ``messages`` that is not an
array, invalid or deeply nested JSON) falls back to the plain parse of the whole line, which also
raises exactly the plain parse's errors.

The secret sniff reads only the new text when the shared part came from a line that held nothing
key-shaped: the built-in rules look for substrings, runs of escapes and base64/hex runs, none of
which can cross the ``[`` and ``,``/``]`` the cut sits between, so the sniff of the line equals
the sniff of its new part. A user's regular expression could span the cut: with ``splice=False``
the whole line is sniffed.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import sys
from collections.abc import Callable
from typing import Any, Final

from dsh_core._json_text import MAX_JSON_DEPTH, loads_json

__all__ = ["SharedHistory"]

_HEAD: Final = 64
"""Characters of a messages array a tip is filed under (the start of its conversation); a
shorter array is not worth sharing and is not filed."""
_PER_HEAD: Final = 64
"""Tips kept per head, latest first (interleaved conversations with one system prompt share a
head; beyond this many, a conversation's lines are parsed whole: slower, never wrong)."""
_HEADS: Final = 1024
"""Heads kept, the least recently used dropped first."""
_TIPS: Final = 1024
"""Tips kept in all, the least recently filed dropped first: a tip holds its conversation's
history (parsed and raw), and a conversation that ended long ago is not resent (a long trace of
many short conversations would otherwise keep thousands of them)."""

_WHITESPACE: Final = frozenset(" \t\n\r")
_MESSAGES_KEY: Final = '"messages":['
"""Where the fast path looks for the request's messages (the compact form writers use)."""
_PLACEHOLDER: Final = "-7.3217770937e-299"
"""A number no writer produces, put where the messages array was (a line that holds its text
is read the careful way)."""
_PLACED: Final = object()
"""What the placeholder's text parses to (and no other number's: the same value written
otherwise is a float)."""


def _float_or_placed(text: str) -> Any:
    return _PLACED if text == _PLACEHOLDER else float(text)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant)
_SPLICED_DECODER: Final = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_float=_float_or_placed
)
# typeshed types make_scanner as taking itself and omits scanstring; both are what json.loads runs
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = json.scanner.make_scanner(
    _DECODER  # type: ignore[arg-type]
)
"""The standard library's scanner (the C one): one JSON value from a position."""
_SCAN_STRING: Final[Callable[[str, int, bool], tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]


class _Fallback(Exception):
    """The line is read by the plain parser (unusual shape or invalid JSON)."""


class _Tip:
    __slots__ = ("clean", "inner", "messages")

    def __init__(self, inner: str, messages: tuple[Any, ...], clean: bool) -> None:
        self.inner = inner
        """The raw text of the messages array between ``[`` and the end of its last element."""
        self.messages = messages
        """Its parsed elements."""
        self.clean = clean
        """Whether the line it came from held nothing the sniff flags."""


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


class SharedHistory:
    """A parser of trace lines that shares the messages a line resends from an earlier line.

    ``load(line)`` returns what ``loads_json(line)`` returns (and raises what it raises);
    ``may_hold_secret`` then says what ``sniff(line)`` says, reading only the line's new part
    when it can (see the module docstring; ``splice=False``: always the whole line).
    """

    def __init__(self, sniff: Callable[[str], bool], *, splice: bool = True) -> None:
        self._sniff = sniff
        self._splice = splice
        self._heads: dict[str, list[_Tip]] = {}
        self._filed: dict[int, _Tip] = {}
        """Every tip kept, by ``id``, in the order filed (the oldest first)."""
        self._line = ""
        self._cut: tuple[int, int, _Tip] | None = None
        """The last line's shared span (``[`` + 1, end) and the tip it came from."""
        self._spliced = 0
        self._pending: list[tuple[int, int, tuple[Any, ...], _Tip | None]] = []
        self._next: _Tip | None = None
        self.shared_characters = 0
        """Characters of the lines read so far that were not parsed again (for benchmarks)."""
        # Deeper than the recursion limit the C scanner gives up; a depth limit below it needs
        # a look at the whole value: both are the plain parse's business.
        self._enabled = sys.getrecursionlimit() <= MAX_JSON_DEPTH

    # -- parsing -----------------------------------------------------------------------------

    def load(self, line: str) -> Any:
        """The parsed record of ``line`` (as :func:`loads_json` parses it)."""
        self._line = line
        self._cut = None
        self._spliced = 0
        self._pending = []
        self._next = None
        if not self._enabled:
            return loads_json(line)
        found = self._spliced_load(line)
        if found is not None:
            return found
        self._cut = None
        self._spliced = 0
        self._pending = []
        try:
            start = _skip(line, 0)
            if start >= len(line) or line[start] != "{":
                raise _Fallback
            record, end = self._object(line, start, top=True)
            if _skip(line, end) != len(line):
                raise _Fallback  # extra data: the plain parser's error
        except (_Fallback, ValueError, StopIteration, IndexError, RecursionError):
            self._cut = None
            self._pending = []
            return loads_json(line)
        return record

    def _spliced_load(self, line: str) -> dict[str, Any] | None:
        """The common line, fast: its messages array read as :meth:`_messages` reads it (the
        tip's part shared, the rest scanned), the rest of the line parsed at once by the C
        decoder with a placeholder where the array was. ``None`` (nothing decided) unless the
        placeholder comes back as ``request.messages`` (so the array was that one: not a
        ``"messages"`` key elsewhere, inside a string or overwritten by a later one)."""
        at = line.find(_MESSAGES_KEY)
        if at < 0 or _PLACEHOLDER in line:
            return None
        opening = at + len(_MESSAGES_KEY) - 1
        try:
            items, end = self._messages(line, opening)
            record = _SPLICED_DECODER.decode(line[:opening] + _PLACEHOLDER + line[end:])
        except (_Fallback, ValueError, StopIteration, IndexError, RecursionError):
            return None
        if not isinstance(record, dict):
            return None
        request = record.get("request")
        if not isinstance(request, dict) or request.get("messages") is not _PLACED:
            return None
        request["messages"] = items
        found: dict[str, Any] = record
        return found

    def _object(self, text: str, at: int, *, top: bool) -> tuple[dict[str, Any], int]:
        """The object opening at ``at`` (``{``): each value by the standard scanner, but the
        top-level ``request`` object walked to its ``messages`` array."""
        out: dict[str, Any] = {}
        at = _skip(text, at + 1)
        if text[at] == "}":
            return out, at + 1
        while True:
            if text[at] != '"':
                raise _Fallback
            key, at = _SCAN_STRING(text, at + 1, True)
            at = _skip(text, at)
            if text[at] != ":":
                raise _Fallback
            at = _skip(text, at + 1)
            value: Any
            if top and key == "request" and text[at] == "{":
                value, at = self._object(text, at, top=False)
            elif not top and key == "messages" and text[at] == "[":
                value, at = self._messages(text, at)
            else:
                value, at = _SCAN(text, at)
            out[key] = value
            at = _skip(text, at)
            if text[at] == "}":
                return out, at + 1
            if text[at] != ",":
                raise _Fallback
            at = _skip(text, at + 1)

    def _messages(self, text: str, at: int) -> tuple[list[Any], int]:
        """The messages array opening at ``at``: an earlier array's elements for the longest
        tip whose raw text starts it, then the elements after that parsed."""
        body = at + 1
        tip = self._tip(text, body)
        items: list[Any]
        if tip is not None:
            items = list(tip.messages)
            at = body + len(tip.inner)
            last = at
            self._spliced += 1
            self._cut = (body, at, tip)
        else:
            items = []
            at = _skip(text, body)
            if text[at] == "]":
                self._pending.append((body, body, (), None))
                return items, at + 1
            value, at = _SCAN(text, at)
            items.append(value)
            last = at
        while True:
            at = _skip(text, at)
            if text[at] == "]":
                break
            if text[at] != ",":
                raise _Fallback
            value, at = _SCAN(text, _skip(text, at + 1))
            items.append(value)
            last = at
        self._pending.append((body, last, tuple(items), tip))
        return items, at + 1

    def _tip(self, text: str, body: int) -> _Tip | None:
        best: _Tip | None = None
        for tip in self._heads.get(text[body : body + _HEAD], ()):  # each at least _HEAD long
            size = len(tip.inner)
            if (
                (best is None or size > len(best.inner))
                and text.startswith(tip.inner, body)
                and text[body + size : body + size + 1] in (",", "]")
            ):
                best = tip
        return best

    # -- the sniff and the tips ----------------------------------------------------------------

    def may_hold_secret(self) -> bool:
        """What the sniff says of the line just loaded (only its new part when it can), and the
        line's messages filed as the tip of their conversation."""
        line = self._line
        cut = self._cut
        if self._splice and self._spliced == 1 and cut is not None and cut[2].clean:
            body, end, _ = cut
            flagged = self._sniff(line[:body] + line[end:])
            self.shared_characters += end - body
        else:
            flagged = self._sniff(line)
        for body, last, items, came_from in self._pending:
            if last - body >= _HEAD:
                self._file(_Tip(line[body:last], items, clean=not flagged), came_from)
        self._pending = []
        self._cut = None
        return flagged

    def _file(self, tip: _Tip, came_from: _Tip | None) -> None:
        head = tip.inner[:_HEAD]
        tips = self._heads.pop(head, None) or []
        if came_from is not None and came_from in tips:
            tips.remove(came_from)  # the conversation moved on
            self._filed.pop(id(came_from), None)
        tips.insert(0, tip)
        self._filed[id(tip)] = tip
        for dropped in tips[_PER_HEAD:]:
            self._filed.pop(id(dropped), None)
        del tips[_PER_HEAD:]
        self._heads[head] = tips
        while len(self._heads) > _HEADS:
            for dropped in self._heads.pop(next(iter(self._heads))):
                self._filed.pop(id(dropped), None)
        while len(self._filed) > _TIPS:
            oldest = self._filed.pop(next(iter(self._filed)))
            kept = self._heads.get(oldest.inner[:_HEAD])
            if kept is not None and oldest in kept:
                kept.remove(oldest)
                if not kept:
                    del self._heads[oldest.inner[:_HEAD]]
