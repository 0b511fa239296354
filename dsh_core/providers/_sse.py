"""A spec-strict, incremental Server-Sent Events parser (WHATWG HTML, "Parsing an event stream").

Both DeepSeek wire formats stream SSE: Chat Completions sends ``data: {json}`` events ended by
``data: [DONE]`` and ``: keep-alive`` comments while queued; the Anthropic-format endpoint sends
named events (``event: message_start``). :class:`SseParser` turns bytes, split anywhere (even inside
a UTF-8 sequence or between ``\\r`` and ``\\n``), into :class:`SseEvent` values; how the bytes were
split into reads never changes the result. A whole body held as text (a recording) is read by
:func:`parse_events`, and cut into its events' own text by :func:`split_events` (what cassettes
replay chunk by chunk and the scrubber scrubs event by event); the three share one definition of
a line end and of the blank line that ends an event, so the kit has one SSE splitter.

Why not httpx-sse: it reads lines from an ``httpx.Response``, drops comments silently (a keep-alive
must re-arm the caller's idle watchdog) and, at end of stream, cannot tell a clean end from a cut
inside an event. The reference harness learned the hard way that a
final ``data: [DONE]`` without its blank line is truncation, not success: here it is never
dispatched, and :meth:`SseParser.close` raises :class:`SseTruncatedError`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .._errors import DshError
from .._json_text import dumps_canonical

__all__ = [
    "SSE_DONE",
    "SseEvent",
    "SseParser",
    "SseTruncatedError",
    "parse_events",
    "split_events",
]

_LINE_END = re.compile(r"\r\n|\r|\n")
"""A line end, as specified: CRLF, a lone CR, or LF."""
_EVENT_END = re.compile(r"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r|\n)")
"""A line end followed by an empty line (which dispatches the event), never cutting a CRLF."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SseEvent:
    """One dispatched event."""

    event: str = "message"
    """The ``event:`` field; ``message`` when the event named none."""
    data: str = ""
    """The ``data:`` lines joined with ``\\n`` (the literal ``[DONE]`` for DeepSeek's end marker)."""
    id: str | None = None
    """The last event id seen on the stream so far (ids persist across events, as specified)."""
    retry: int | None = None
    """A ``retry:`` value (milliseconds) that arrived with this event."""

    def encode(self) -> bytes:
        """The event as wire bytes, ending with the blank line that dispatches it."""
        if "\r" in self.data:
            raise ValueError("SSE data cannot carry a carriage return: it ends a line")
        lines: list[str] = []
        if self.event != "message":
            lines.append(f"event: {self.event}")
        if self.id is not None:
            lines.append(f"id: {self.id}")
        if self.retry is not None:
            lines.append(f"retry: {self.retry}")
        lines.extend(f"data: {line}" for line in self.data.split("\n"))
        return ("\n".join(lines) + "\n\n").encode("utf-8")

    @classmethod
    def of_json(cls, payload: object, *, event: str = "message") -> SseEvent:
        """An event whose data is ``payload`` as compact JSON (UTF-8, no ASCII escaping, key
        order kept), as both DeepSeek formats send it; ``event`` names it (the Anthropic format's
        ``message_start`` …), ``message`` sends no ``event:`` line."""
        return cls(event=event, data=dumps_canonical(payload))

    @staticmethod
    def comment(text: str = "") -> bytes:
        """An SSE comment line (``: keep-alive``), which parsers pass over; no event."""
        if "\r" in text or "\n" in text:
            raise ValueError("an SSE comment is one line")
        return f": {text}\n\n".encode() if text else b":\n\n"


SSE_DONE: Final = SseEvent(data="[DONE]")
"""Chat Completions' end-of-stream event: ``data: [DONE]``."""


class SseTruncatedError(DshError, ValueError):
    """The stream ended inside an event (or inside a line): the partial event was discarded.

    ``pending`` is the undispatched text (partial line and buffered fields), for diagnostics.
    """

    def __init__(self, pending: str) -> None:
        shown = pending if len(pending) <= 80 else pending[:77] + "..."
        super().__init__(
            f"event stream ended inside an event; discarded {shown!r}. "
            "An event is complete only after its blank line"
        )
        self.pending = pending


# A traceback names it where users import it from, not this private module.
SseTruncatedError.__module__ = "dsh_core.providers"


class SseParser:
    """Incremental SSE parser: :meth:`feed` bytes as they arrive, :meth:`close` at end of stream.

    Comments (lines starting with ``:``) are not events; each is passed, without the colon and
    one leading space, to ``on_comment`` (a keep-alive hook).
    """

    __slots__ = (
        "_closed",
        "_data",
        "_decoder",
        "_event_type",
        "_fields",
        "_last_id",
        "_on_comment",
        "_partial",
        "_retry",
        "_skip_lf",
        "_started",
    )

    def __init__(self, *, on_comment: Callable[[str], None] | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._on_comment = on_comment
        self._partial: list[str] = []
        self._skip_lf = False
        self._started = False
        self._closed = False
        self._data: list[str] = []
        self._event_type = ""
        self._retry: int | None = None
        self._fields: list[str] = []
        self._last_id: str | None = None

    @property
    def last_event_id(self) -> str | None:
        return self._last_id

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by ``chunk`` (possibly none)."""
        if self._closed:
            raise ValueError("SseParser.feed after close(): the stream has ended")
        return self._feed_text(self._decoder.decode(chunk))

    def close(self) -> list[SseEvent]:
        """End of stream. Returns no event: an event without its blank line is never dispatched.

        Raises :class:`SseTruncatedError` when the stream stopped inside a line or an event.
        """
        if self._closed:
            return []
        events = self._feed_text(self._decoder.decode(b"", final=True))
        self._closed = True
        pending = "".join(self._partial)
        if pending or self._fields:
            raise SseTruncatedError("\n".join([*self._fields, pending]).strip("\n"))
        return events

    def _pending(self) -> bool:
        """Whether the text so far stopped inside a line or an event."""
        return bool(self._partial or self._fields)

    def _feed_text(self, text: str) -> list[SseEvent]:
        if not text:
            return []
        if self._skip_lf:
            # The previous read ended with "\r": a "\n" opening this one belongs to it.
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if "\r" not in text and "\n" not in text:
            if text:
                self._partial.append(text)
            return []
        self._partial.append(text)
        buffer = "".join(self._partial)
        self._partial.clear()
        events: list[SseEvent] = []
        if "\r" not in buffer:
            # LF line ends only (what both DeepSeek formats send): one C-level split.
            *lines, rest = buffer.split("\n")
            for line in lines:
                self._line(line, events)
        else:
            position = 0
            for match in _LINE_END.finditer(buffer):
                self._line(buffer[position : match.start()], events)
                position = match.end()
            rest = buffer[position:]
        if rest:
            self._partial.append(rest)
        elif buffer.endswith("\r"):
            self._skip_lf = True
        return events

    def _line(self, line: str, events: list[SseEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[0] == ":":
            if self._on_comment is not None:
                comment = line[1:]
                self._on_comment(comment[1:] if comment.startswith(" ") else comment)
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)
        else:
            return  # unknown fields are ignored, as specified
        self._fields.append(line)

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._data:
            events.append(
                SseEvent(
                    event=self._event_type or "message",
                    data="\n".join(self._data),
                    id=self._last_id,
                    retry=self._retry,
                )
            )
        self._data = []
        self._event_type = ""
        self._retry = None
        self._fields = []


def split_events(text: str) -> list[str]:
    """A whole SSE body cut after each blank line that ends an event: each piece is one event's
    text exactly as sent, with its blank line (the last piece lacks it when the body stops
    inside an event). ``"".join(split_events(text)) == text`` always holds, a CRLF is never cut,
    and :class:`SseParser` reads the pieces one by one exactly as it reads the whole.
    """
    pieces: list[str] = []
    start = 0
    for match in _EVENT_END.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def parse_events(text: str, *, strict: bool = True) -> list[SseEvent]:
    """The events of a whole SSE body held as text (a recording), as :class:`SseParser` reads it.

    ``strict`` (the default): a body that stops inside an event raises
    :class:`SseTruncatedError`. ``strict=False`` keeps such a last event as it stands: what a
    reader of recordings wants, where a recorder may have trimmed the final blank line (a cut
    JSON payload still fails to parse where it is read).
    """
    parser = SseParser()
    events = parser._feed_text(text)
    if not strict and parser._pending():
        events += parser._feed_text("\n\n")
    events += parser.close()
    return events
