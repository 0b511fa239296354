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
the body, and sends back what it returns (after its own Host/Origin checks). :meth:`OtlpIngest.answer`
is the whole route both servers mount (``dsh-testkit serve`` and ``proxy``): ``POST /v1/traces``
and ``/v1/logs`` take an export, other methods there are 405, and ``GET /_dsh/otlp`` gives back
every export received so far as OTLP JSON lines (one export a line, the OTel Collector's
``file`` exporter's form, which ``dsh-testkit cache-report`` reads), with the exporting
request's own credentials and every key shape removed.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ....scrub._scrubber import credentials_of, scrub_json
from ..._compression import CompressedDataError, decompressed
from ..._model import Trace
from .._fields import Malformed
from . import OtlpRecords, trace_of_records
from ._protobuf import ProtobufError, decode_message

__all__ = ["OTLP_EXPORTS_PATH", "OTLP_PATHS", "IngestReply", "OtlpIngest", "otlp_route"]

OTLP_PATHS: Final = {"/v1/traces": "resourceSpans", "/v1/logs": "resourceLogs"}
"""The OTLP/HTTP paths read, and the signal each carries."""
OTLP_EXPORTS_PATH: Final = "/_dsh/otlp"
"""Where a server gives back the exports it received (``GET``: OTLP JSON lines)."""
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
    allow: str | None = None
    """The ``Allow`` header of a 405."""

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        """Besides ``content-type`` and ``content-length``."""
        return (("allow", self.allow),) if self.allow else ()


def _status_body(content_type: str, message: str) -> bytes:
    """A ``google.rpc.Status`` (code, message) in the request's encoding."""
    if content_type == _PROTOBUF:
        text = message.encode("utf-8")
        return bytes([0x08, _INVALID_ARGUMENT, 0x12]) + _varint(len(text)) + text
    return json.dumps({"code": _INVALID_ARGUMENT, "message": message}).encode("utf-8")


def otlp_route(path: str) -> bool:
    """Whether ``path`` (without its query) is one of :meth:`OtlpIngest.answer`'s."""
    route = path.rstrip("/") or "/"
    return route == OTLP_EXPORTS_PATH or route in OTLP_PATHS


def _not_allowed(allow: str) -> IngestReply:
    return IngestReply(
        status=405,
        content_type=_JSON,
        body=_status_body(_JSON, f"Method Not Allowed: {allow} only"),
        allow=allow,
    )


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
        self._lines: list[bytes] = []
        """Each export received, scrubbed, as one OTLP JSON line."""

    def answer(
        self, method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> IngestReply | None:
        """The answer of a server's OTLP route to a request for ``path`` (without its query),
        or ``None`` when ``path`` is not one of it (:data:`OTLP_PATHS`,
        :data:`OTLP_EXPORTS_PATH`)."""
        route = path.rstrip("/") or "/"
        if route == OTLP_EXPORTS_PATH:
            if method not in ("GET", "HEAD"):
                return _not_allowed("GET")
            with self._lock:
                lines = b"".join(self._lines)
            return IngestReply(status=200, content_type="application/x-ndjson", body=lines)
        if route not in OTLP_PATHS:
            return None
        if method != "POST":
            return _not_allowed("POST")

        def header(name: str) -> str | None:
            values = [v for k, v in headers if k.lower() == name]
            return ", ".join(values) if values else None

        return self.receive(
            route,
            body,
            content_type=header("content-type"),
            content_encoding=header("content-encoding"),
            credentials=credentials_of(headers),
        )

    def receive(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str | None,
        content_encoding: str | None = None,
        credentials: Sequence[str] = (),
    ) -> IngestReply:
        """Take one export posted to ``path`` (``/v1/traces`` or ``/v1/logs``); ``credentials``:
        the exporting request's own (removed from what :meth:`answer` gives back)."""
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
                line = json.dumps(
                    scrub_json(document, credentials), ensure_ascii=False, separators=(",", ":")
                )
                self._lines.append(line.encode("utf-8") + b"\n")
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
