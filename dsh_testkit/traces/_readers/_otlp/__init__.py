"""OpenTelemetry as a :class:`Trace`: the model calls any common GenAI instrumentation records.

Files are read in every form the OpenTelemetry Collector's ``file`` exporter writes, told apart
by their content:

- **JSON** (``format: json``, the default): one OTLP JSON export request per line, spans and
  log records interleaved in any order when the traces and logs pipelines share the file; a
  single JSON document (an OTLP/HTTP JSON body) as well;
- **protobuf** (``format: proto``): each message preceded by its size as a 4-byte big-endian
  integer; traces and logs are told apart by which message decodes (``_protobuf.py``);
- **zstd** (``compression: zstd``): each message compressed alone into one zstd frame and
  length-prefixed (JSON too, then without newlines); with the ``exporter.file.nativeCompression``
  feature gate, or ``zstd`` / ``gzip`` applied afterwards, the whole file is one compressed
  stream of the plain form, which the registry decompresses first (``dsh_testkit.traces._compression``).

The records become model calls through the conventions' registry (``_conventions.py``: the
GenAI conventions in each of their shapes, OpenInference, Logfire, LlamaIndex under
OpenLLMetry), joined, merged and deduplicated (``_calls.py``), each an exchange with
``body_exact=False`` in the order the calls started. A file from which no call can be rebuilt
gives an empty trace whose first note says why (the CLI turns it into exit status 2). An
unfinished last line or message (a writer that stopped) is dropped with a note; anything else
that is not OTLP raises :class:`TraceError` naming where. See docs/guides/opentelemetry.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from ..._compression import ZSTD_MAGIC, CompressedDataError, decompressed
from ..._errors import TraceError
from ..._model import Exchange, Trace
from .._build import BOM, decode_text, scrub_exchange
from .._fields import Malformed
from .._fields import kind_of as _kind
from ._calls import model_calls
from ._common import SpanNotes
from ._json import SIGNALS, documents, documents_of_bytes, logs_of, sniff_otlp_json, spans_of
from ._protobuf import ProtobufError, decode_export
from ._records import OtelLog, OtelSpan

__all__ = [
    "OtlpRecords",
    "framed_documents",
    "read",
    "read_otlp_json",
    "sniff",
    "sniff_binary",
    "sniff_otlp_json",
    "trace_of_records",
]

_MAX_MESSAGE: Final = 1 << 30
"""A length prefix above this is not one (the collector's messages are far smaller)."""


def sniff(head: str) -> bool:
    """The registry's sniff: OTLP JSON (spans, logs, or another signal's lines first)."""
    return sniff_otlp_json(head[:4096])


def sniff_binary(head: bytes) -> bool:
    """Whether bytes starting with ``head`` are the collector's length-prefixed messages:
    protobuf (``0x0A``: field 1, a resource group) or a zstd frame after the first size."""
    if len(head) < 8:
        return False
    size = int.from_bytes(head[:4], "big")
    if not 0 < size <= _MAX_MESSAGE:
        return False
    return head[4] == 0x0A or head[4:8] == ZSTD_MAGIC


class OtlpRecords:
    """Spans and log records gathered from export requests (a file's, or a live stream of
    OTLP/HTTP exports), each read once: an exporter's retry writes a span again."""

    def __init__(self) -> None:
        self.spans: list[OtelSpan] = []
        self.logs: list[OtelLog] = []
        self.other: Counter[str] = Counter()
        """Export requests of other signals (metrics, profiles), by signal."""
        self.duplicates = 0
        self._seen: set[tuple[str, str]] = set()

    def add_document(self, document: Any, at: str) -> None:
        """One export request (its OTLP JSON); :class:`Malformed` when it is not one."""
        if not isinstance(document, Mapping) or not any(s in document for s in SIGNALS):
            raise Malformed(
                f"{_kind(document)} that is not an OTLP export request (expected "
                "resourceSpans, resourceLogs, …)"
            )
        if "resourceSpans" in document:
            for span in spans_of(document, at, len(self.spans) + self.duplicates):
                if span.span_id:
                    if (span.trace_id, span.span_id) in self._seen:
                        self.duplicates += 1
                        continue
                    self._seen.add((span.trace_id, span.span_id))
                self.spans.append(span)
        if "resourceLogs" in document:
            self.logs.extend(logs_of(document, at, len(self.logs)))
        for signal in SIGNALS[2:]:
            if signal in document:
                self.other[signal] += 1


def framed_documents(data: bytes, notes: list[str]) -> Iterator[tuple[str, Any]]:
    """The export requests of a collector ``format: proto`` file (or its ``compression: zstd``
    form, JSON or protobuf inside each frame), as OTLP JSON documents."""
    at = 0
    number = 0
    size = len(data)
    while at < size:
        number += 1
        if size - at < 4 or at + 4 + int.from_bytes(data[at : at + 4], "big") > size:
            notes.append(
                f"an unfinished last message (message {number}, from byte {at:,}) was dropped: "
                "the export stopped while writing it"
            )
            return
        length = int.from_bytes(data[at : at + 4], "big")
        payload = data[at + 4 : at + 4 + length]
        where = f"message {number} (byte {at:,})"
        if payload.startswith(ZSTD_MAGIC):
            try:
                found = decompressed(payload)
            except CompressedDataError as exc:
                raise Malformed(f"{where}: {exc}") from None
            if found.note is not None:
                raise Malformed(f"{where}: its zstd frame is cut short")
            payload = found.data
        if payload.lstrip()[:1] == b"{":
            try:
                document = json.loads(payload)
            except (ValueError, RecursionError) as exc:
                raise Malformed(f"{where} is not JSON ({exc})") from None
        else:
            try:
                document = decode_export(payload)
            except ProtobufError as exc:
                raise Malformed(f"{where}: {exc}") from None
        yield f"message {number}", document
        at += 4 + length


def trace_of_records(records: OtlpRecords, *, path: str | None, notes: Sequence[str] = ()) -> Trace:
    """The model calls of the gathered records as a trace (see the module docstring)."""
    lines = list(notes)
    span_notes = SpanNotes()
    calls = model_calls(records.spans, records.logs, span_notes, lines)
    exchanges = tuple(
        scrub_exchange(
            Exchange(
                index=index,
                endpoint="chat",
                body=call.body,
                response=call.response,
                usage=call.usage,
                started=call.started,
                finished=call.finished,
                first_byte=call.first_byte,
                conversation=call.conversation,
                body_exact=False,
            ),
            shapes=False,  # body and answer were scrubbed call by call
        )
        for index, call in enumerate(calls)
    )
    for signal, count in sorted(records.other.items()):
        lines.append(f"{count} export request(s) of {signal} (not spans or logs) were skipped")
    if records.duplicates:
        lines.append(
            f"{records.duplicates} duplicate span(s) (same trace and span id) were read once"
        )
    found = Counter(call.convention for call in calls)
    if found:
        read = ", ".join(f"{count} by {name}" for name, count in sorted(found.items()))
        lines.append(f"model calls read per convention: {read}")
    lines.extend(span_notes.lines())
    if exchanges:
        lines.append(
            "requests rebuilt from OpenTelemetry records: their JSON spacing, key order and "
            "argument formatting are unknown"
        )
    else:
        lines.insert(0, _why_empty(records, span_notes))
    return Trace(exchanges=exchanges, source="otel", path=path, notes=tuple(lines))


def _why_empty(records: OtlpRecords, notes: SpanNotes) -> str:
    what = f"{len(records.spans)} span(s) and {len(records.logs)} log record(s)"
    problems = notes.lines()
    if not records.spans and not records.logs:
        return "no model call can be rebuilt: the file holds no spans or log records"
    if not records.spans:
        return (
            f"no model call can be rebuilt from {what}: the log records belong to spans that "
            "are not in this file (export the traces pipeline too)"
        )
    reason = problems[0] if problems else "none is a model call"
    return f"no model call can be rebuilt from {what}: {reason}"


def read(data: bytes, path: str | None) -> Trace:
    """The registry's read: an OTLP file in any of its forms (see the module docstring)."""
    records = OtlpRecords()
    notes: list[str] = []
    number = 0
    try:
        if sniff_binary(data[:16]):
            for at, document in framed_documents(data, notes):
                records.add_document(document, at)
        else:
            text, torn = decode_text(data, path=path, line_based=True)
            if torn is not None:
                notes.append(torn)
                found = documents(text.removeprefix("\ufeff"), notes)
            else:  # all UTF-8: read from the bytes a line at a time, the text let go
                del text
                start = len(BOM) if data.startswith(BOM) else 0
                start += len(BOM) if data.startswith(BOM, start) else 0  # (as removeprefix)
                found = documents_of_bytes(data, notes, start=start)
            for number, document in found:
                records.add_document(document, f"line {number}")
    except Malformed as exc:
        reason = str(exc)
        where = reason if reason.startswith(("line ", "message ")) else f"line {number}: {reason}"
        raise TraceError(where, path=path) from None
    return trace_of_records(records, path=path, notes=notes)


def read_otlp_json(text: str, *, path: str | None = None) -> Trace:
    """The model calls of an OTLP JSON text as a trace (see the module docstring)."""
    return read(text.encode("utf-8", "surrogateescape"), path)
