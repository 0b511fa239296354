"""Reader: the ``dsh-trace`` file (``dsh-testkit proxy --out``, :meth:`RequestCapture.save`).

JSON Lines whose first line is ``{"format": "dsh-trace", ...}``; each further line one exchange
(``_file.py`` holds the format). Records carry what the recorder knew: the request (parsed, and
its exact text when that differs from compact JSON), the assembled answer, usage, status and
error, timing, the conversation key, and how the exchange ended.

A field of the wrong type (a status ``"12"``, a conversation ``[1]``, a response that is not an
object, a token count ``"12"`` or ``true``) is a :class:`TraceError` naming the line and the
field; a figure that cannot be true (a negative or absurd token count, a time after 2100) is left
out with a note (``_fields.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import TraceError
from .._file import read_trace_lines
from .._model import Exchange, LogEvent, Trace, TraceSource, TraceUsage
from ._build import TraceBuilder, json_or_none, without_bom
from ._fields import (
    Malformed,
    optional_int,
    optional_object,
    optional_string,
    optional_time,
)

__all__ = ["read", "records_trace", "sniff"]

_OUTCOMES = ("delivered", "abandoned", "interrupted", "upstream-timeout")


def sniff(head: str) -> bool:
    first = json_or_none(head.removeprefix("\ufeff").lstrip().split("\n", 1)[0])
    return isinstance(first, Mapping) and first.get("format") == "dsh-trace"


def _log_events(value: Any) -> tuple[LogEvent, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        LogEvent(seq=int(e["seq"]), kind=e["kind"], detail=str(e["detail"]))
        for e in value
        if isinstance(e, Mapping)
        and e.get("kind") in ("header", "compaction", "prune", "rewrite", "resume", "reset")
    )


def _usage(usage: Mapping[str, Any]) -> TraceUsage:
    """The record's usage: integers (else :class:`Malformed`); the builder leaves out figures
    that are not counts (negative, absurd, a hit above the prompt)."""
    prompt: Any = optional_int(usage.get("promptTokens"), "usage.promptTokens")
    return TraceUsage(
        prompt_tokens=prompt,  # None: no count, left out by the builder with a note
        hit_tokens=optional_int(usage.get("hitTokens"), "usage.hitTokens"),
        completion_tokens=optional_int(usage.get("completionTokens"), "usage.completionTokens"),
    )


def read(data: bytes, path: str | None) -> Trace:
    # The trace file's own line reader decodes line by line (a torn tail dropped with a note).
    header, records, notes = read_trace_lines(without_bom(data), path=path)
    source = header.get("source")
    return records_trace(
        records,
        source=source if source in ("proxy", "capture", "memory") else "proxy",
        path=path,
        notes=notes,
        scrubbed=True,
    )


def records_trace(
    records: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    source: TraceSource,
    path: str | None = None,
    notes: Sequence[str] = (),
    scrubbed: bool = False,
) -> Trace:
    """Trace-file records (with their line numbers) as a trace."""
    builder = trace_builder(source, path, scrubbed=scrubbed)
    builder.notes.extend(notes)
    for number, record in records:
        add_record(builder, number, record, scrubbed=scrubbed)
    return builder.trace()


def trace_builder(
    source: TraceSource, path: str | None, *, scrubbed: bool, keep: bool = True
) -> TraceBuilder:
    """The builder a trace file's records go through (``keep=False``: a stream's)."""
    builder = TraceBuilder(source, path, scrubbed=scrubbed, keep=keep)
    builder.resolution = 1e-6 if source == "proxy" else None
    return builder


def add_record(
    builder: TraceBuilder, number: int, record: Mapping[str, Any], *, scrubbed: bool
) -> Exchange | None:
    """One trace-file record (line ``number``) through ``builder``."""
    path = builder.path
    # Files our writer wrote are scrubbed already; a hand-made one is scrubbed here.
    builder.scrubbed = scrubbed and not record.get("_mayHoldKey", True)
    try:
        usage = optional_object(record.get("usage"), "usage")
        request_text = optional_string(record.get("requestText"), "requestText")
        headers = record.get("headers") or ()
        outcome = record.get("outcome")
        error = record.get("error")
        return builder.add(
            url=optional_string(record.get("url"), "url"),
            body=record.get("request"),
            content=request_text.encode("utf-8", "surrogateescape")
            if request_text is not None
            else None,
            method=optional_string(record.get("method"), "method"),
            headers=tuple((str(k), str(v)) for k, v in headers),
            status=optional_int(record.get("status"), "status"),
            error=str(error) if error is not None else None,
            response=optional_object(record.get("response"), "response"),
            usage=_usage(usage) if usage is not None else None,
            started=optional_time(record.get("started"), "started"),
            first_byte=optional_time(record.get("firstByte"), "firstByte"),
            finished=optional_time(record.get("finished"), "finished"),
            conversation=optional_string(record.get("conversation"), "conversation"),
            outcome=outcome if outcome in _OUTCOMES else None,
            body_exact=record.get("bodyExact", True) is not False,
            log_events=_log_events(record.get("logEvents")),
            where=f"line {number}",
        )
    except Malformed as exc:
        raise TraceError(f"line {number}: {exc}", path=path) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"line {number}: malformed exchange ({exc})", path=path) from None
