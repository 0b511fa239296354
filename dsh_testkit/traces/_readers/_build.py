"""What every reader shares: building a trace exchange by exchange, decoding text, timing.

A reader finds requests in its format and hands each to :class:`TraceBuilder.add`, which keeps
model requests (a JSON body with a ``messages`` list), skips the rest with one note, scrubs
what the recording did not already scrub, and numbers the exchanges in trace order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from dsh_core import loads_json

from ..._secrets import scrub_headers, scrub_json, scrub_url
from .._errors import TraceError
from .._model import Exchange, LogEvent, Outcome, Trace, TraceSource, TraceUsage
from .._wire import endpoint_of

__all__ = [
    "CONVERSATION_HEADERS",
    "TraceBuilder",
    "decode_text",
    "header_key",
    "json_or_none",
    "time_resolution",
]

CONVERSATION_HEADERS: Final = (
    "x-dsh-conversation",
    "x-deepseek-harness-session-id",
    "x-session-id",
)
"""Request headers read as an explicit conversation key, first found wins: ``x-dsh-conversation``
(ours: any client can set it), the reference harness's session id, a generic session id."""


def header_key(headers: Sequence[tuple[str, str]] | Mapping[str, Any] | None) -> str | None:
    """The explicit conversation key a request's headers carry (:data:`CONVERSATION_HEADERS`)."""
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    lowered: dict[str, str] = {}
    for name, value in pairs:
        text = value[0] if isinstance(value, list) and value else value
        lowered.setdefault(str(name).lower(), str(text))
    for name in CONVERSATION_HEADERS:
        if lowered.get(name):
            return lowered[name]
    return None


def json_or_none(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return loads_json(text.decode("utf-8") if isinstance(text, bytes) else text)
    except ValueError:  # not JSON, or nested deeper than the limit: not a recording
        return None


def json_document(text: str, *, path: str | None, what: str) -> Any:
    """A whole-file JSON document; a :class:`TraceError` saying it does not parse (and where)
    otherwise, so a file cut short is not reported as one of the wrong shape."""
    try:
        return loads_json(text)
    except ValueError as exc:
        raise TraceError(
            f"{what} must be one JSON document; this one does not parse: {exc}", path=path
        ) from None


def decode_text(data: bytes, *, path: str | None, line_based: bool) -> tuple[str, str | None]:
    """A recording's bytes as text, and a note when a torn tail was dropped.

    Files are UTF-8. A line-based file (JSON Lines) whose last line is cut, even inside a
    multi-byte character, loses that line with a note: the recorder stopped while writing it.
    Anything else that is not UTF-8 is a :class:`TraceError` naming the line.
    """
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        bad = exc.start
    line = data.count(b"\n", 0, bad) + 1
    tail_start = data.rfind(b"\n", 0, bad) + 1
    if line_based and b"\n" not in data[bad:]:
        kept = data[:tail_start].decode("utf-8", "strict")
        return kept, (
            f"an unfinished last line (line {line}, {len(data) - tail_start} bytes, cut inside "
            "a multi-byte character) was dropped: the recording stopped while writing it"
        )
    raise TraceError(f"line {line} is not UTF-8 text (byte {bad})", path=path)


def time_resolution(times: Iterable[float | None]) -> float | None:
    """How finely a recording's times are given: 1 s, 1 ms or finer (``None``: no times)."""
    seen = [t for t in times if t is not None]
    if not seen:
        return None
    if all(float(t).is_integer() for t in seen):
        return 1.0
    if all(abs(t * 1000 - round(t * 1000)) < 1e-6 for t in seen):
        return 0.001
    return 1e-6


class TraceBuilder:
    """Collects exchanges; skips non-model requests with one note."""

    def __init__(self, source: TraceSource, path: str | None, *, scrubbed: bool = False) -> None:
        self.scrubbed = scrubbed
        """Whether the recording is already scrubbed (a dsh-trace file is, when written)."""
        self.source: TraceSource = source
        self.path = path
        self.exchanges: list[Exchange] = []
        self.skipped = 0
        self.notes: list[str] = []
        self.resolution: float | None = None
        """The recording's time resolution when the reader knows it (else measured)."""

    def add(
        self,
        *,
        url: str | None,
        body: Any,
        content: bytes | None = None,
        method: str | None = None,
        headers: Sequence[tuple[str, str]] = (),
        status: int | None = None,
        error: str | None = None,
        response: Mapping[str, Any] | None = None,
        usage: TraceUsage | None = None,
        started: float | None = None,
        first_byte: float | None = None,
        finished: float | None = None,
        conversation: str | None = None,
        outcome: Outcome | None = None,
        body_exact: bool = True,
        log_events: tuple[LogEvent, ...] = (),
    ) -> Exchange | None:
        endpoint = endpoint_of(url, body)
        if endpoint is None:
            self.skipped += 1
            return None
        exchange = Exchange(
            index=len(self.exchanges),
            endpoint=endpoint,
            url=scrub_url(url) if url else None,
            body=dict(body) if self.scrubbed else scrub_json(dict(body)),
            content=content,
            method=method,
            headers=tuple(headers) if self.scrubbed else tuple(scrub_headers(headers)),
            status=status,
            error=error,
            response=response,
            usage=usage,
            started=started,
            first_byte=first_byte,
            finished=finished,
            conversation=conversation if conversation is not None else header_key(headers),
            outcome=outcome,
            body_exact=body_exact,
            log_events=log_events,
        )
        self.exchanges.append(exchange)
        return exchange

    def trace(self) -> Trace:
        notes = list(self.notes)
        if self.skipped:
            notes.append(
                f"{self.skipped} request(s) that are not model requests (no JSON `messages` "
                "list) were skipped"
            )
        resolution = self.resolution
        if resolution is None:
            # A gap is one time minus another: it is as coarse as the coarser of the two.
            found = [
                r
                for r in (
                    time_resolution(e.started for e in self.exchanges),
                    time_resolution(e.finished for e in self.exchanges),
                )
                if r is not None
            ]
            resolution = max(found) if found else None
        return Trace(
            exchanges=tuple(self.exchanges),
            source=self.source,
            path=self.path,
            notes=tuple(notes),
            time_resolution=resolution,
        )
