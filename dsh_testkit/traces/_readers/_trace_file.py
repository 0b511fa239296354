"""Reader: the ``dsh-trace`` file (``dsh-testkit proxy --out``, :meth:`RequestCapture.save`).

JSON Lines whose first line is ``{"format": "dsh-trace", ...}``; each further line one exchange
(``_file.py`` holds the format). Records carry what the recorder knew: the request (parsed, and
its exact text when that differs from compact JSON), the assembled answer, usage, status and
error, timing, the conversation key, and how the exchange ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import TraceError
from .._file import read_trace_lines
from .._model import LogEvent, Trace, TraceSource, TraceUsage
from ._build import TraceBuilder, json_or_none

__all__ = ["read", "records_trace", "sniff"]

_OUTCOMES = ("delivered", "abandoned", "interrupted", "upstream-timeout")


def sniff(head: str) -> bool:
    first = json_or_none(head.lstrip().split("\n", 1)[0])
    return isinstance(first, Mapping) and first.get("format") == "dsh-trace"


def _log_events(value: Any) -> tuple[LogEvent, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        LogEvent(seq=int(e["seq"]), kind=e["kind"], detail=str(e["detail"]))
        for e in value
        if isinstance(e, Mapping)
        and e.get("kind") in ("header", "compaction", "prune", "rewrite", "resume")
    )


def read(data: bytes, path: str | None) -> Trace:
    # The trace file's own line reader decodes line by line (a torn tail dropped with a note).
    header, records, notes = read_trace_lines(data, path=path)
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
    builder = TraceBuilder(source, path, scrubbed=scrubbed)
    builder.resolution = 1e-6 if source == "proxy" else None
    builder.notes.extend(notes)
    for number, record in records:
        # Files our writer wrote are scrubbed already; a hand-made one is scrubbed here.
        builder.scrubbed = scrubbed and not record.get("_mayHoldKey", True)
        try:
            usage = record.get("usage")
            request_text = record.get("requestText")
            headers = record.get("headers") or ()
            outcome = record.get("outcome")
            error = record.get("error")
            builder.add(
                url=record.get("url"),
                body=record.get("request"),
                content=request_text.encode("utf-8", "surrogateescape")
                if isinstance(request_text, str)
                else None,
                method=record.get("method"),
                headers=tuple((str(k), str(v)) for k, v in headers),
                status=record.get("status"),
                error=str(error) if error is not None else None,
                response=record.get("response"),
                usage=TraceUsage.from_json(usage) if isinstance(usage, Mapping) else None,
                started=record.get("started"),
                first_byte=record.get("firstByte"),
                finished=record.get("finished"),
                conversation=record.get("conversation"),
                outcome=outcome if outcome in _OUTCOMES else None,
                body_exact=record.get("bodyExact", True) is not False,
                log_events=_log_events(record.get("logEvents")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"line {number}: malformed exchange ({exc})", path=path) from None
    return builder.trace()
