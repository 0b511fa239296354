"""OTLP JSON: export requests (``{"resourceSpans": …}``, ``{"resourceLogs": …}``) as records.

The OpenTelemetry Collector's file exporter writes JSON Lines, each line one export request; the
traces and logs pipelines may share one file, so span lines and log lines interleave in any order
(a call's log records are often exported before its span, which ends after them). A single JSON
document (an OTLP/HTTP JSON request body) is read as well. Values follow the OTLP JSON mapping:
attributes are ``{"key", "value": AnyValue}`` with ``stringValue``, ``boolValue``,
``intValue`` (a decimal string, or a number), ``doubleValue``, ``bytesValue``, ``arrayValue``
and ``kvlistValue``; times are UNIX nanoseconds (a decimal string, or a number); unknown fields
are ignored, as the mapping requires. The protobuf forms are decoded into the same documents
(``_protobuf.py``), so one parser reads every form.

Anything that is not OTLP JSON raises :class:`Malformed` naming the field; the caller adds the
line.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, AnyStr, Final

from .._fields import Malformed as _Malformed  # not OTLP JSON: names the field
from .._fields import kind_of as _kind
from ._records import OtelEvent, OtelLog, OtelSpan

__all__ = ["SIGNALS", "any_value", "documents", "logs_of", "sniff_otlp_json", "spans_of"]

SIGNALS: Final = ("resourceSpans", "resourceLogs", "resourceMetrics", "resourceProfiles")
"""The top-level key of each OTLP export request (traces, logs, metrics, profiles)."""
_SNIFF: Final = re.compile(
    r'\{\s*"(?:resourceSpans|resourceLogs|resourceMetrics|resourceProfiles)"\s*:'
)
MAX_DEPTH: Final = 64
"""AnyValues nested deeper than this are refused (no instrumentation nests so deep)."""
_INTEGER: Final = re.compile(r"-?[0-9]{1,20}")
_INT64: Final = (-(2**63), 2**64 - 1)
"""intValue is int64 and times are fixed64: one range holds both."""
_SPECIAL_DOUBLES: Final = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


def sniff_otlp_json(head: str) -> bool:
    """Whether text starting with ``head`` (its first few KB) is OTLP JSON: an export request
    of any signal first (a logs line may come before the spans; a file of metrics alone is
    recognised too, and then says it holds no model call)."""
    return _SNIFF.match(head.removeprefix("\ufeff").lstrip()) is not None


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _Malformed(f"{where} must be a JSON object, not {_kind(value)}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Malformed(f"{where} must be a JSON list, not {_kind(value)}")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Malformed(f"{where} must be a string, not {_kind(value)}")
    return value


def _integer(value: Any, where: str) -> int:
    """An int64/uint64 as the OTLP JSON mapping writes it: a decimal string or a number."""
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    else:
        raise _Malformed(f"{where} must be an integer (a decimal string), not {value!r:.40}")
    if not _INT64[0] <= number <= _INT64[1]:
        raise _Malformed(f"{where} is out of the 64-bit range: {value!r:.40}")
    return number


def _time(value: Any, where: str) -> int | None:
    if value is None:
        return None
    number = _integer(value, where)
    if number < 0:
        raise _Malformed(f"{where} must not be negative: {value!r:.40}")
    return number or None  # 0 means unset


def any_value(value: Any, where: str, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as plain data (lists, dicts, str, int, float, bool, ``None``)."""
    if depth > MAX_DEPTH:
        raise _Malformed(f"{where} nests values more than {MAX_DEPTH} deep")
    value = _object(value, where)
    if not value:
        return None
    if len(value) != 1:
        raise _Malformed(f"{where} must hold one value, it has {', '.join(sorted(value))}")
    ((kind, inner),) = value.items()
    if kind == "stringValue":
        return _string(inner, f"{where}.stringValue")
    if kind == "boolValue":
        if not isinstance(inner, bool):
            raise _Malformed(f"{where}.boolValue must be true or false, not {inner!r:.40}")
        return inner
    if kind == "intValue":
        return _integer(inner, f"{where}.intValue")
    if kind == "doubleValue":
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return float(inner)
        if isinstance(inner, str) and inner in _SPECIAL_DOUBLES:
            return _SPECIAL_DOUBLES[inner]
        raise _Malformed(f"{where}.doubleValue must be a number, not {inner!r:.40}")
    if kind == "bytesValue":
        return _string(inner, f"{where}.bytesValue")  # base64, kept as it is
    if kind == "arrayValue":
        values = _list(_object(inner, f"{where}.arrayValue").get("values"), f"{where}.values")
        return [any_value(v, f"{where}.values[{i}]", depth + 1) for i, v in enumerate(values)]
    if kind == "kvlistValue":
        pairs = _list(_object(inner, f"{where}.kvlistValue").get("values"), f"{where}.values")
        return _attributes(pairs, f"{where}.values", depth + 1)
    raise _Malformed(f"{where} has an unknown value kind {kind!r:.40}")


def _attributes(pairs: list[Any], where: str, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, pair in enumerate(pairs):
        pair = _object(pair, f"{where}[{i}]")
        key = _string(pair.get("key"), f"{where}[{i}].key")
        value = pair.get("value")
        out[key] = None if value is None else any_value(value, f"{where}[{i}] ({key!r:.60})", depth)
    return out


def _hex_id(value: Any, where: str) -> str:
    """A trace or span id: hex in OTLP JSON (some writers use base64, as protobuf's JSON
    mapping does: 24 or 12 characters are read as base64)."""
    text = _string(value, where)
    if len(text) in (12, 24) and not all(c in "0123456789abcdefABCDEF" for c in text):
        try:
            return base64.b64decode(text, validate=True).hex()
        except ValueError:
            return text
    return text.lower()


def _span(span: Any, where: str, scope: str, at: str, order: int) -> OtelSpan:
    span = _object(span, where)
    span_id = _hex_id(span.get("spanId"), f"{where}.spanId")
    events = []
    for i, event in enumerate(_list(span.get("events"), f"{where}.events")):
        here = f"{where}.events[{i}]"
        event = _object(event, here)
        events.append(
            OtelEvent(
                name=_string(event.get("name"), f"{here}.name"),
                time_ns=_time(event.get("timeUnixNano"), f"{here}.timeUnixNano"),
                attributes=_attributes(
                    _list(event.get("attributes"), f"{here}.attributes"), f"{here}.attributes"
                ),
            )
        )
    dropped = span.get("droppedAttributesCount")
    return OtelSpan(
        where=f"{at}, span {span_id or '(no id)'}",
        scope=scope,
        trace_id=_hex_id(span.get("traceId"), f"{where}.traceId"),
        span_id=span_id,
        parent_id=_hex_id(span.get("parentSpanId"), f"{where}.parentSpanId"),
        name=_string(span.get("name"), f"{where}.name"),
        start_ns=_time(span.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
        end_ns=_time(span.get("endTimeUnixNano"), f"{where}.endTimeUnixNano"),
        attributes=_attributes(
            _list(span.get("attributes"), f"{where}.attributes"), f"{where}.attributes"
        ),
        events=tuple(events),
        dropped_attributes=0
        if dropped is None
        else max(0, _integer(dropped, f"{where}.droppedAttributesCount")),
        order=order,
    )


def _groups(
    document: Mapping[str, Any], signal: str, scoped: str, legacy: str, items: str
) -> Iterator[tuple[str, str, list[Any]]]:
    """(where, scope name, items) of each scope group of one signal's document."""
    for r, resource in enumerate(_list(document.get(signal), signal)):
        at = f"{signal}[{r}]"
        resource = _object(resource, at)
        # instrumentationLibrary…: the names before OTLP 1.0, still written by old exporters.
        groups = resource.get(scoped, resource.get(legacy))
        for s, group in enumerate(_list(groups, f"{at}.{scoped}")):
            where = f"{at}.{scoped}[{s}]"
            group = _object(group, where)
            scope = _object(
                group.get("scope", group.get("instrumentationLibrary")) or {}, f"{where}.scope"
            )
            name = _string(scope.get("name"), f"{where}.scope.name")
            yield where, name, _list(group.get(items), f"{where}.{items}")


def spans_of(document: Mapping[str, Any], at: str, first: int = 0) -> list[OtelSpan]:
    """The spans of one ``{"resourceSpans": …}`` document; ``at`` says where it is (``line
    3``), ``first`` numbers them in file order."""
    out: list[OtelSpan] = []
    groups = _groups(
        document, "resourceSpans", "scopeSpans", "instrumentationLibrarySpans", "spans"
    )
    for where, scope, spans in groups:
        for k, span in enumerate(spans):
            out.append(_span(span, f"{where}.spans[{k}]", scope, at, first + len(out)))
    return out


def _log(record: Any, where: str, scope: str, at: str, order: int) -> OtelLog:
    record = _object(record, where)
    attributes = _attributes(
        _list(record.get("attributes"), f"{where}.attributes"), f"{where}.attributes"
    )
    name = _string(record.get("eventName"), f"{where}.eventName")
    if not name and isinstance(attributes.get("event.name"), str):
        name = attributes["event.name"]  # SDKs before LogRecord.event_name (OTLP 1.5)
    time_ns = _time(record.get("timeUnixNano"), f"{where}.timeUnixNano")
    if time_ns is None:
        time_ns = _time(record.get("observedTimeUnixNano"), f"{where}.observedTimeUnixNano")
    body = record.get("body")
    span_id = _hex_id(record.get("spanId"), f"{where}.spanId")
    return OtelLog(
        where=f"{at}, log record {order + 1}" + (f" (span {span_id})" if span_id else ""),
        scope=scope,
        trace_id=_hex_id(record.get("traceId"), f"{where}.traceId"),
        span_id=span_id,
        event_name=name,
        time_ns=time_ns,
        body=None if body is None else any_value(body, f"{where}.body"),
        attributes=attributes,
        order=order,
    )


def logs_of(document: Mapping[str, Any], at: str, first: int = 0) -> list[OtelLog]:
    """The log records of one ``{"resourceLogs": …}`` document (see :func:`spans_of`)."""
    out: list[OtelLog] = []
    groups = _groups(
        document, "resourceLogs", "scopeLogs", "instrumentationLibraryLogs", "logRecords"
    )
    for where, scope, records in groups:
        for k, record in enumerate(records):
            out.append(_log(record, f"{where}.logRecords[{k}]", scope, at, first + len(out)))
    return out


def _parse(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, str(exc)
    except RecursionError:
        return None, "nested too deeply"


def _split(text: AnyStr, newline: AnyStr, start: int = 0) -> Iterator[AnyStr]:
    """``text[start:].split(newline)``, a piece at a time: an export's lines are not held twice
    over."""
    size = len(text)
    while start <= size:
        stop = text.find(newline, start)
        if stop < 0:
            stop = size
        yield text[start:stop]
        start = stop + 1


def _lines(text: str) -> Iterator[str]:
    return _split(text, "\n")


def _decoded_lines(data: bytes, start: int) -> Iterator[str]:
    """The lines of ``data[start:]`` (valid UTF-8), each decoded alone: what :func:`_lines`
    gives of the decoded text (a newline is one byte, and no other character's bytes hold it)."""
    return (line.decode("utf-8") for line in _split(data, b"\n", start))


def _last_line(text: str) -> int:
    """The number of the last line with more than white space in it (0: none), without a copy
    of the text."""
    end = len(text)
    while end and text[end - 1].isspace():
        end -= 1
    return text.count("\n", 0, end) + 1 if end else 0


def documents(text: str, notes: list[str]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of each line; the whole text when it is one document. An
    unfinished last line (no newline after it) is dropped with a note; another line that is
    not JSON raises :class:`Malformed` naming it."""
    return _documents(_lines(text), lambda: text, notes)


def documents_of_bytes(
    data: bytes, notes: list[str], *, start: int = 0
) -> Iterator[tuple[int, Any]]:
    """:func:`documents` of ``data[start:]`` decoded (valid UTF-8, as the caller checked), a line
    decoded at a time: a large export is not held as text beside its bytes while its spans are
    gathered (the text is decoded whole only to read the file as one document, or to say why a
    line is not JSON)."""
    return _documents(_decoded_lines(data, start), lambda: data[start:].decode("utf-8"), notes)


def _documents(
    lines: Iterator[str], whole: Callable[[], str], notes: list[str]
) -> Iterator[tuple[int, Any]]:
    first = True
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        document, problem = _parse(line)
        if problem is None:
            yield number, document
            first = False
            continue
        text = whole()
        last = _last_line(text)
        if first and number != last:
            whole_document, whole_problem = _parse(text)
            if whole_problem is not None:
                raise _Malformed(
                    f"line {number} is not JSON ({problem}), nor is the whole file one JSON "
                    f"document ({whole_problem})"
                )
            yield number, whole_document
            return
        if number == last and not text.endswith("\n"):
            notes.append(
                f"an unfinished last line (line {number}, {len(line)} characters) was dropped: "
                "the export stopped while writing it"
            )
        else:
            raise _Malformed(f"line {number} is not JSON ({problem})")
        first = False
