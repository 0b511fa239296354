"""OTLP protobuf (``TracesData`` / ``LogsData``) decoded into the OTLP JSON documents.

The collector's file exporter with ``format: proto`` writes each export as protobuf, and an
OTLP/HTTP exporter posts ``application/x-protobuf`` bodies (the Python SDK's only choice). Both
are ``TracesData`` / ``LogsData`` messages, wire-identical to ``ExportTraceServiceRequest`` /
``ExportLogsServiceRequest`` (opentelemetry-proto 1.x: field 1 repeated resource groups).

The subset of the protobuf wire format OTLP uses is small (varints, 64- and 32-bit fixed,
length-delimited), so it is decoded here by a schema of the messages read, into exactly the
dicts the OTLP JSON mapping gives (camelCase keys, hex ids, AnyValue kinds), and the one JSON
parser (``_json.py``) reads both forms. This keeps the kit free of a ``protobuf`` runtime
dependency, whose versions an agent's own OpenTelemetry packages pin. The tests compare it with
``opentelemetry-proto``'s own decoding of real exports.

Decoding is strict about wire types: a known field with another wire type is an error, and
unknown fields are skipped (proto3's forward compatibility). Traces and logs have the same
outer layout, but their records differ in every field's wire type, so :func:`decode_export`
tells them apart by which schema decodes.
"""

from __future__ import annotations

import base64
import struct
from typing import Any, Final, Literal, TypeAlias

__all__ = ["ProtobufError", "decode_export", "decode_message"]


class ProtobufError(ValueError):
    """Bytes that are not the OTLP message asked for."""


_Kind: TypeAlias = Literal[
    "string", "id", "bytes", "uint", "int64", "bool", "double", "fixed64", "fixed32", "message"
]
_Field: TypeAlias = tuple[str, _Kind, bool, "dict[int, _Field] | None", str | None]
"""(JSON name, kind, repeated, sub-schema, AnyValue kind name)."""

_VARINT: Final = 0
_I64: Final = 1
_LEN: Final = 2
_I32: Final = 5
_WIRE: Final[dict[str, int]] = {
    "string": _LEN,
    "id": _LEN,
    "bytes": _LEN,
    "message": _LEN,
    "uint": _VARINT,
    "int64": _VARINT,
    "bool": _VARINT,
    "double": _I64,
    "fixed64": _I64,
    "fixed32": _I32,
}

_ANY_VALUE: dict[int, _Field] = {}
_KEY_VALUE: dict[int, _Field] = {
    1: ("key", "string", False, None, None),
    2: ("value", "message", False, _ANY_VALUE, None),
}
_ARRAY: dict[int, _Field] = {1: ("values", "message", True, _ANY_VALUE, None)}
_KVLIST: dict[int, _Field] = {1: ("values", "message", True, _KEY_VALUE, None)}
_ANY_VALUE.update(
    {
        1: ("stringValue", "string", False, None, None),
        2: ("boolValue", "bool", False, None, None),
        3: ("intValue", "int64", False, None, None),
        4: ("doubleValue", "double", False, None, None),
        5: ("arrayValue", "message", False, _ARRAY, None),
        6: ("kvlistValue", "message", False, _KVLIST, None),
        7: ("bytesValue", "bytes", False, None, None),
    }
)
_RESOURCE: dict[int, _Field] = {
    1: ("attributes", "message", True, _KEY_VALUE, None),
    2: ("droppedAttributesCount", "uint", False, None, None),
}
_SCOPE: dict[int, _Field] = {
    1: ("name", "string", False, None, None),
    2: ("version", "string", False, None, None),
    3: ("attributes", "message", True, _KEY_VALUE, None),
    4: ("droppedAttributesCount", "uint", False, None, None),
}
_EVENT: dict[int, _Field] = {
    1: ("timeUnixNano", "fixed64", False, None, None),
    2: ("name", "string", False, None, None),
    3: ("attributes", "message", True, _KEY_VALUE, None),
    4: ("droppedAttributesCount", "uint", False, None, None),
}
_LINK: dict[int, _Field] = {
    1: ("traceId", "id", False, None, None),
    2: ("spanId", "id", False, None, None),
    3: ("traceState", "string", False, None, None),
    4: ("attributes", "message", True, _KEY_VALUE, None),
    5: ("droppedAttributesCount", "uint", False, None, None),
    6: ("flags", "fixed32", False, None, None),
}
_STATUS: dict[int, _Field] = {
    2: ("message", "string", False, None, None),
    3: ("code", "uint", False, None, None),
}
_SPAN: dict[int, _Field] = {
    1: ("traceId", "id", False, None, None),
    2: ("spanId", "id", False, None, None),
    3: ("traceState", "string", False, None, None),
    4: ("parentSpanId", "id", False, None, None),
    5: ("name", "string", False, None, None),
    6: ("kind", "uint", False, None, None),
    7: ("startTimeUnixNano", "fixed64", False, None, None),
    8: ("endTimeUnixNano", "fixed64", False, None, None),
    9: ("attributes", "message", True, _KEY_VALUE, None),
    10: ("droppedAttributesCount", "uint", False, None, None),
    11: ("events", "message", True, _EVENT, None),
    12: ("droppedEventsCount", "uint", False, None, None),
    13: ("links", "message", True, _LINK, None),
    14: ("droppedLinksCount", "uint", False, None, None),
    15: ("status", "message", False, _STATUS, None),
    16: ("flags", "fixed32", False, None, None),
}
_SCOPE_SPANS: dict[int, _Field] = {
    1: ("scope", "message", False, _SCOPE, None),
    2: ("spans", "message", True, _SPAN, None),
    3: ("schemaUrl", "string", False, None, None),
}
_RESOURCE_SPANS: dict[int, _Field] = {
    1: ("resource", "message", False, _RESOURCE, None),
    2: ("scopeSpans", "message", True, _SCOPE_SPANS, None),
    3: ("schemaUrl", "string", False, None, None),
}
_TRACES: dict[int, _Field] = {1: ("resourceSpans", "message", True, _RESOURCE_SPANS, None)}
_LOG_RECORD: dict[int, _Field] = {
    1: ("timeUnixNano", "fixed64", False, None, None),
    2: ("severityNumber", "uint", False, None, None),
    3: ("severityText", "string", False, None, None),
    5: ("body", "message", False, _ANY_VALUE, None),
    6: ("attributes", "message", True, _KEY_VALUE, None),
    7: ("droppedAttributesCount", "uint", False, None, None),
    8: ("flags", "fixed32", False, None, None),
    9: ("traceId", "id", False, None, None),
    10: ("spanId", "id", False, None, None),
    11: ("observedTimeUnixNano", "fixed64", False, None, None),
    12: ("eventName", "string", False, None, None),
}
_SCOPE_LOGS: dict[int, _Field] = {
    1: ("scope", "message", False, _SCOPE, None),
    2: ("logRecords", "message", True, _LOG_RECORD, None),
    3: ("schemaUrl", "string", False, None, None),
}
_RESOURCE_LOGS: dict[int, _Field] = {
    1: ("resource", "message", False, _RESOURCE, None),
    2: ("scopeLogs", "message", True, _SCOPE_LOGS, None),
    3: ("schemaUrl", "string", False, None, None),
}
_LOGS: dict[int, _Field] = {1: ("resourceLogs", "message", True, _RESOURCE_LOGS, None)}

SCHEMAS: Final[dict[str, dict[int, _Field]]] = {"resourceSpans": _TRACES, "resourceLogs": _LOGS}
"""The top-level messages read, by the signal's JSON key."""

_MAX_DEPTH: Final = 80
"""Messages nested deeper than this are refused (AnyValues nest; OTLP itself does not)."""


def _varint(data: bytes | memoryview, at: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if at >= end:
            raise ProtobufError("a varint runs past the end of its message")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7
        if shift > 63:
            raise ProtobufError("a varint longer than 10 bytes")


def _skip(data: memoryview, at: int, end: int, wire: int) -> int:
    if wire == _VARINT:
        return _varint(data, at, end)[1]
    if wire == _I64:
        at += 8
    elif wire == _I32:
        at += 4
    elif wire == _LEN:
        size, at = _varint(data, at, end)
        at += size
    else:
        raise ProtobufError(f"wire type {wire} (groups or invalid) in an OTLP message")
    if at > end:
        raise ProtobufError("a field runs past the end of its message")
    return at


def _message(
    data: memoryview, at: int, end: int, schema: dict[int, _Field], depth: int
) -> dict[str, Any]:
    if depth > _MAX_DEPTH:
        raise ProtobufError(f"messages nested more than {_MAX_DEPTH} deep")
    out: dict[str, Any] = {}
    while at < end:
        tag, at = _varint(data, at, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ProtobufError("field number 0")
        field = schema.get(number)
        if field is None:
            at = _skip(data, at, end, wire)
            continue
        name, kind, repeated, sub, _ = field
        if wire != _WIRE[kind]:
            raise ProtobufError(f"field {name} has wire type {wire}, not {_WIRE[kind]}")
        value: Any
        if wire == _VARINT:
            raw, at = _varint(data, at, end)
            if kind == "bool":
                value = bool(raw)
            elif kind == "int64":
                value = raw - (1 << 64) if raw >= 1 << 63 else raw
            else:
                value = raw
        elif wire == _I64:
            if at + 8 > end:
                raise ProtobufError(f"field {name} runs past the end of its message")
            if kind == "double":
                value = struct.unpack_from("<d", data, at)[0]
            else:
                value = int.from_bytes(data[at : at + 8], "little")
            at += 8
        elif wire == _I32:
            if at + 4 > end:
                raise ProtobufError(f"field {name} runs past the end of its message")
            value = int.from_bytes(data[at : at + 4], "little")
            at += 4
        else:
            size, at = _varint(data, at, end)
            stop = at + size
            if stop > end:
                raise ProtobufError(f"field {name} runs past the end of its message")
            if kind == "message":
                assert sub is not None
                value = _message(data, at, stop, sub, depth + 1)
            elif kind == "string":
                try:
                    value = bytes(data[at:stop]).decode("utf-8")
                except UnicodeDecodeError:
                    raise ProtobufError(f"field {name} is not UTF-8 text") from None
            elif kind == "id":
                value = bytes(data[at:stop]).hex()
            else:
                value = base64.b64encode(data[at:stop]).decode("ascii")
            at = stop
        if repeated:
            out.setdefault(name, []).append(value)
        else:
            out[name] = value  # the last one wins, as protobuf merges scalars
    if at != end:
        raise ProtobufError("a field runs past the end of its message")
    return out


def decode_message(data: bytes, signal: Literal["resourceSpans", "resourceLogs"]) -> dict[str, Any]:
    """One ``TracesData`` (``signal="resourceSpans"``) or ``LogsData`` message as its OTLP JSON
    document. Raises :class:`ProtobufError` when the bytes are not that message."""
    view = memoryview(data)
    document = _message(view, 0, len(view), SCHEMAS[signal], 0)
    document.setdefault(signal, [])
    return document


def decode_export(data: bytes) -> dict[str, Any]:
    """An export message whose signal is not known (a collector ``format: proto`` file holds
    traces or logs, with no marker): the schema that decodes it. Raises :class:`ProtobufError`
    when neither does (naming both reasons)."""
    problems = []
    for signal in ("resourceSpans", "resourceLogs"):
        try:
            return decode_message(data, signal)
        except (ProtobufError, RecursionError) as exc:
            problems.append(f"as traces: {exc}" if signal == "resourceSpans" else f"as logs: {exc}")
    raise ProtobufError("not an OTLP traces or logs message (" + "; ".join(problems) + ")")
