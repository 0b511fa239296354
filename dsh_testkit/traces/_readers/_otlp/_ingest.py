"""OTLP/HTTP exports received live, whatever serves them: bytes in, records kept, a reply out.

An agent's OpenTelemetry SDK (or a collector's ``otlphttp`` exporter) posts each batch to
``/v1/traces`` or ``/v1/logs``: protobuf (``application/x-protobuf``, the Python SDK's only
choice) or OTLP JSON (``application/json``), possibly compressed (``Content-Encoding: gzip``;
``deflate`` and ``zstd`` too). :class:`OtlpIngest` turns each body into records kept in order and
answers what the OTLP/HTTP specification asks: the request's own content type, an empty
``Export…ServiceResponse`` on success, 400 with a ``google.rpc.Status`` (code 3,
INVALID_ARGUMENT) for data that does not decode, 415 for a content type that is neither.
:meth:`OtlpIngest.trace` gives the model calls received so far as a :class:`Trace`, for the
doctor and the live Explorer.

It does no I/O and knows no server: a loopback server hands it the path, the headers' values and
the body, and sends back what it returns (after its own Host/Origin checks).
"""

from __future__ import annotations

import json
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Final

from ..._compression import CompressedDataError, decompressed
from ..._model import Trace
from .._fields import Malformed
from . import OtlpRecords, trace_of_records
from ._protobuf import ProtobufError, decode_message

__all__ = ["OTLP_PATHS", "IngestReply", "OtlpIngest"]

OTLP_PATHS: Final = {"/v1/traces": "resourceSpans", "/v1/logs": "resourceLogs"}
"""The OTLP/HTTP paths read, and the signal each carries."""
_JSON: Final = "application/json"
_PROTOBUF: Final = "application/x-protobuf"
_INVALID_ARGUMENT: Final = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestReply:
    """What to answer an export."""

    status: int
    content_type: str
    body: bytes
    accepted: int = 0
    """Spans or log records kept from this export."""


def _status_body(content_type: str, message: str) -> bytes:
    """A ``google.rpc.Status`` (code, message) in the request's encoding."""
    if content_type == _PROTOBUF:
        text = message.encode("utf-8")
        return bytes([0x08, _INVALID_ARGUMENT, 0x12]) + _varint(len(text)) + text
    return json.dumps({"code": _INVALID_ARGUMENT, "message": message}).encode("utf-8")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _decoded(body: bytes, encoding: str | None) -> bytes:
    kind = (encoding or "identity").strip().lower()
    if kind in ("identity", ""):
        return body
    if kind == "gzip":
        found = decompressed(body)
        if found.compression != "gzip" or found.note is not None:
            raise ValueError("the gzip body is not complete gzip data")
        return found.data
    if kind == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some clients send
    if kind == "zstd":
        found = decompressed(body)
        if found.compression != "zstd" or found.note is not None:
            raise ValueError("the zstd body is not complete zstd data")
        return found.data
    raise ValueError(f"Content-Encoding {encoding!r} is not one of gzip, deflate, zstd")


class OtlpIngest:
    """Exports received live, kept in order; thread-safe."""

    def __init__(self, *, path: str | None = None) -> None:
        self.path = path
        """What the trace says it was read from (a label: ``otlp:/v1/traces``)."""
        self._records = OtlpRecords()
        self._lock = threading.Lock()
        self._exports = 0

    def receive(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str | None,
        content_encoding: str | None = None,
    ) -> IngestReply:
        """Take one export posted to ``path`` (``/v1/traces`` or ``/v1/logs``)."""
        signal = OTLP_PATHS.get(path.rstrip("/"))
        media = (content_type or "").split(";", 1)[0].strip().lower()
        reply_type = _PROTOBUF if media == _PROTOBUF else _JSON
        if signal is None:
            return IngestReply(
                status=404, content_type=reply_type, body=_status_body(reply_type, f"no {path}")
            )
        if media not in (_JSON, _PROTOBUF):
            return IngestReply(
                status=415,
                content_type=_JSON,
                body=_status_body(
                    _JSON, f"Content-Type must be {_PROTOBUF} or {_JSON}, not {content_type!r}"
                ),
            )
        try:
            raw = _decoded(body, content_encoding)
            document: Any
            if media == _PROTOBUF:
                document = decode_message(raw, signal)  # type: ignore[arg-type]
            else:
                document = json.loads(raw)
                if not isinstance(document, dict):
                    raise ValueError("the body is not a JSON object")
                document.setdefault(signal, [])
            with self._lock:
                self._exports += 1
                before = len(self._records.spans) + len(self._records.logs)
                self._records.add_document(document, f"export {self._exports}")
                accepted = len(self._records.spans) + len(self._records.logs) - before
        except (ValueError, ProtobufError, Malformed, CompressedDataError, RecursionError) as exc:
            return IngestReply(
                status=400,
                content_type=reply_type,
                body=_status_body(reply_type, f"the export does not decode: {exc}"),
            )
        return IngestReply(
            status=200,
            content_type=reply_type,
            body=b"" if reply_type == _PROTOBUF else b"{}",
            accepted=accepted,
        )

    def trace(self) -> Trace:
        """The model calls received so far (see :func:`trace_of_records`)."""
        with self._lock:
            records = OtlpRecords()
            records.spans = list(self._records.spans)
            records.logs = list(self._records.logs)
            records.other = self._records.other.copy()
            records.duplicates = self._records.duplicates
        return trace_of_records(records, path=self.path)
