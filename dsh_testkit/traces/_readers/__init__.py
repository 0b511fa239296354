"""Readers: every recording of an agent's traffic as a :class:`Trace`, through one registry.

Each input format has one module here with a cheap ``sniff(head)`` (the first 64 KiB of the
file as text) and a ``read(data, path)`` (the file's bytes). :data:`READERS` lists them in the
order they are asked; :func:`identify` asks once and names the reader, and :func:`load_trace`
reads a file with it. The kind comes from the content, never the file name:

- ``dsh-trace``: the trace file ``dsh-testkit proxy --out`` and ``RequestCapture.save`` write;
- ``session-log``: a ``dsh_core`` session log (requests rebuilt, the log's own facts kept);
- ``cassette``: a dsh cassette (YAML);
- ``otel``: OpenTelemetry spans and log records of any common GenAI instrumentation, as the
  collector's file exporter writes them (OTLP JSON lines, length-prefixed protobuf, zstd);
- ``mock-requests``: the mock's request log (``GET /_dsh/requests`` saved as JSON);
- ``har``: a HAR 1.2 file.

A recording compressed with zstd or gzip (the reference harness's ``session.jsonl.zstd``, a
gzipped HAR, the collector's zstd stream) is read as the file it holds: the magic bytes say so,
not the name (``dsh_testkit.traces._compression``; a torn last frame is noted, what came before read).

:func:`trace_of` also takes objects: a :class:`Trace`, a path, anything with a ``to_trace()``
method (a ``RequestCapture``, a ``MockDeepSeek``, a ``ProxyServer``), a list of the mock's
request records or of captured requests, or a list of wire bodies.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from .._compression import CompressedDataError, compression_of, decompressed
from .._errors import TraceError
from .._model import Trace, paused_gc
from . import _cassette, _har, _mock_log, _otlp, _session_log, _trace_file
from ._build import TraceBuilder, json_or_none

__all__ = ["READERS", "TraceReader", "identify", "load_trace", "loads_trace", "trace_of"]

_HEAD_BYTES: Final = 65536


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceReader:
    """One input format: how to recognise it and how to read it."""

    name: str
    """The format's name (``session-log``, ``dsh-trace``, ``cassette``, …)."""
    description: str
    """What it is, for messages (``a dsh_core session log``)."""
    sniff: Callable[[str], bool]
    """Whether a file starting with this text is of this format (cheap: no parsing of the
    whole file)."""
    read: Callable[[bytes, str | None], Trace]
    """The file's bytes (and its path, for messages) as a trace; :class:`TraceError` when it
    is not readable as this format."""
    sniff_binary: Callable[[bytes], bool] | None = None
    """For a binary format: whether a file starting with these bytes is of it."""


READERS: Final[tuple[TraceReader, ...]] = (
    TraceReader(
        name="dsh-trace",
        description="a dsh-trace file (dsh-testkit proxy --out, RequestCapture.save)",
        sniff=_trace_file.sniff,
        read=_trace_file.read,
    ),
    TraceReader(
        name="session-log",
        description="a dsh_core session log",
        sniff=_session_log.sniff,
        read=_session_log.read,
    ),
    TraceReader(
        name="cassette",
        description="a dsh cassette",
        sniff=_cassette.sniff,
        read=_cassette.read,
    ),
    TraceReader(
        name="otel",
        description="OpenTelemetry GenAI spans and log records (the collector's file exporter: "
        "OTLP JSON or protobuf)",
        sniff=_otlp.sniff,
        read=_otlp.read,
        sniff_binary=_otlp.sniff_binary,
    ),
    TraceReader(
        name="har",
        description="a HAR 1.2 file",
        sniff=_har.sniff,
        read=_har.read,
    ),
    TraceReader(
        name="mock-requests",
        description="the mock's request log (GET /_dsh/requests saved as JSON)",
        sniff=_mock_log.sniff,
        read=_mock_log.read,
    ),
)
"""Every reader, in the order :func:`identify` asks them."""


def _unknown(path: str | None) -> TraceError:
    kinds = "; ".join(r.description for r in READERS)
    return TraceError(f"not a recognized trace: expected one of: {kinds}", path=path)


def _head(data: bytes) -> str:
    return data[:_HEAD_BYTES].decode("utf-8", "replace")


def _sniffed(head: str) -> str:
    """What the sniffers see: the head without a byte order mark (each reader skips it too)."""
    return head[:_HEAD_BYTES].removeprefix("\ufeff")


def identify(head: str | bytes) -> TraceReader | None:
    """The reader for a file starting with ``head`` (text or bytes), ``None`` if none knows it.

    Compressed bytes are decompressed as far as they go first (give the whole file, or at
    least its first frame, for a compressed recording)."""
    if isinstance(head, bytes) and compression_of(head[:8]) is not None:
        try:
            head = decompressed(head).data
        except CompressedDataError:
            return None
    text = _sniffed(_head(head) if isinstance(head, bytes) else head)
    for reader in READERS:
        if reader.sniff(text):
            return reader
    if isinstance(head, bytes):
        for reader in READERS:
            if reader.sniff_binary is not None and reader.sniff_binary(head[:_HEAD_BYTES]):
                return reader
    return None


def loads_trace(data: str | bytes, *, path: str | None = None) -> Trace:
    """A trace from a recording's content; the kind is detected from it (and compression, see
    the module docstring)."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    torn = None
    if compression_of(raw[:8]) is not None:
        try:
            found = decompressed(raw, path=path)
        except CompressedDataError as exc:
            raise TraceError(str(exc).removeprefix(f"{path}: "), path=path) from None
        raw, torn = found.data, found.note
    reader = identify(raw)
    if reader is None:
        raise _unknown(path)
    with paused_gc():
        trace = reader.read(raw, path)
    if torn is not None:
        trace = replace(trace, notes=(torn, *trace.notes))
    return trace


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file of any supported kind (see the module docstring).

    Raises :class:`TraceError` for content of no known kind, ``OSError`` when it cannot be read.
    """
    name = os.fspath(path)
    with open(name, "rb") as file:
        data = file.read()
    return loads_trace(data, path=name)


def _bodies_trace(items: Sequence[Any]) -> Trace:
    builder = TraceBuilder("memory", None)
    for item in items:
        body = json_or_none(item) if isinstance(item, (bytes, str)) else item
        if not isinstance(body, Mapping):
            raise TraceError(
                "a trace is made of wire bodies, captured or received requests; got "
                f"{type(item).__name__}"
            )
        builder.add(url=None, body=body, content=item if isinstance(item, bytes) else None)
    return builder.trace()


def trace_of(value: Any) -> Trace:
    """Anything that holds an agent's requests, as a :class:`Trace`.

    Accepts a :class:`Trace`; a path (``str`` or ``os.PathLike``) read with :func:`load_trace`;
    an object with a ``to_trace()`` method (``RequestCapture``, ``MockDeepSeek``,
    ``ProxyServer``); a list of the mock's ``ReceivedRequest`` or of ``CapturedRequest``; a list
    of wire bodies (dicts, JSON text or bytes). Raises :class:`TraceError` naming the type
    otherwise.
    """
    if isinstance(value, Trace):
        return value
    if isinstance(value, (str, os.PathLike)):
        return load_trace(value)
    to_trace = getattr(value, "to_trace", None)
    if callable(to_trace):
        trace = to_trace()
        if not isinstance(trace, Trace):
            raise TraceError(f"{type(value).__name__}.to_trace() did not return a Trace")
        return trace
    if isinstance(value, Sequence) and not isinstance(value, (bytes, str)):
        items = list(value)
        with paused_gc():
            if items and all(callable(getattr(r, "to_trace_record", None)) for r in items):
                return _trace_file.records_trace(
                    [(i + 1, r.to_trace_record()) for i, r in enumerate(items)],
                    source="capture",
                    scrubbed=True,
                )
            if items and all(
                hasattr(r, "to_json") and hasattr(r, "endpoint") and hasattr(r, "seq")
                for r in items
            ):
                return _mock_log.records_trace([r.to_json() for r in items], source="memory")
            return _bodies_trace(items)
    raise TraceError(
        "expected a Trace, a path, a RequestCapture, a MockDeepSeek or a list of requests; got "
        f"{type(value).__name__}"
    )
