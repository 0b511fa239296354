"""OpenTelemetry spans in OTLP JSON as a :class:`Trace`: production traffic for the cache doctor.

The OpenTelemetry Collector's file exporter writes JSON Lines, each line one
``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``); a single JSON document with
``resourceSpans`` (an OTLP/HTTP JSON request body) is read as well. Values follow the OTLP JSON
mapping: attributes are ``{"key", "value": AnyValue}`` with ``stringValue``, ``boolValue``,
``intValue`` (a decimal string, or a number), ``doubleValue``, ``bytesValue``, ``arrayValue``
and ``kvlistValue``; times are UNIX nanoseconds (a decimal string, or a number).

Every span is read; the model calls among them (``_otel_genai.py``) become exchanges in the
order they started, each with ``body_exact=False``; agent runs, tool executions and other spans
are skipped with one note per kind. A duplicate span (same trace and span id, as an exporter's
retry writes) is read once. An unfinished last line (no newline after it) is dropped with a
note; anything else that is not OTLP JSON raises :class:`TraceError` naming the line and the
field. See docs/guides/opentelemetry.md.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, Final

from .._errors import TraceError
from .._model import Exchange, Trace
from ._build import decode_text, scrub_exchange
from ._fields import Malformed as _Malformed  # not OTLP JSON: names the field
from ._fields import kind_of as _kind
from ._otel_genai import ModelCall, OtelSpan, SpanNotes, model_call

__all__ = ["read", "read_otlp_json", "sniff", "sniff_otlp_json"]

_SNIFF: Final = re.compile(r'\A\ufeff?\s*\{\s*"resourceSpans"\s*:')
_OTHER_SIGNALS: Final = ("resourceLogs", "resourceMetrics", "resourceProfiles")
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
    """Whether text starting with ``head`` (its first few KB) is OTLP JSON with spans."""
    return _SNIFF.match(head) is not None


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


def _span(span: Any, where: str, scope: str, line: int) -> OtelSpan:
    span = _object(span, where)
    span_id = _string(span.get("spanId"), f"{where}.spanId")
    events = []
    for i, event in enumerate(_list(span.get("events"), f"{where}.events")):
        event = _object(event, f"{where}.events[{i}]")
        events.append(
            (
                _string(event.get("name"), f"{where}.events[{i}].name"),
                _time(event.get("timeUnixNano"), f"{where}.events[{i}].timeUnixNano"),
            )
        )
    return OtelSpan(
        where=f"line {line}, span {span_id or '(no id)'}",
        scope=scope,
        trace_id=_string(span.get("traceId"), f"{where}.traceId"),
        span_id=span_id,
        name=_string(span.get("name"), f"{where}.name"),
        start_ns=_time(span.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
        end_ns=_time(span.get("endTimeUnixNano"), f"{where}.endTimeUnixNano"),
        attributes=_attributes(
            _list(span.get("attributes"), f"{where}.attributes"), f"{where}.attributes"
        ),
        events=tuple(events),
    )


def _spans(document: Mapping[str, Any], line: int) -> Iterator[OtelSpan]:
    for r, resource in enumerate(_list(document.get("resourceSpans"), "resourceSpans")):
        at = f"resourceSpans[{r}]"
        resource = _object(resource, at)
        # instrumentationLibrarySpans: the name before OTLP 1.0, still written by old exporters.
        groups = resource.get("scopeSpans", resource.get("instrumentationLibrarySpans"))
        for s, group in enumerate(_list(groups, f"{at}.scopeSpans")):
            where = f"{at}.scopeSpans[{s}]"
            group = _object(group, where)
            scope = _object(
                group.get("scope", group.get("instrumentationLibrary")) or {}, f"{where}.scope"
            )
            name = _string(scope.get("name"), f"{where}.scope.name")
            for k, span in enumerate(_list(group.get("spans"), f"{where}.spans")):
                yield _span(span, f"{where}.spans[{k}]", name, line)


def _parse(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, str(exc)
    except RecursionError:
        return None, "nested too deeply"


def _documents(text: str, notes: list[str]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of each line; the whole text when it is one document."""
    lines = text.split("\n")
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    first = True
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        document, problem = _parse(line)
        if problem is None:
            yield number, document
        elif first and number != last:
            whole, whole_problem = _parse(text)
            if whole_problem is not None:
                raise _Malformed(
                    f"line {number} is not JSON ({problem}), nor is the whole file one JSON "
                    f"document ({whole_problem})"
                )
            yield number, whole
            return
        elif number == last and not text.endswith("\n"):
            notes.append(
                f"an unfinished last line (line {number}, {len(line)} characters) was dropped: "
                "the export stopped while writing it"
            )
        else:
            raise _Malformed(f"line {number} is not JSON ({problem})")
        first = False


def read_otlp_json(text: str, *, path: str | None = None) -> Trace:
    """The model calls of an OTLP JSON file's spans as a trace (see the module docstring).

    Raises :class:`TraceError` naming the line and the field when the text is not OTLP JSON.
    """
    notes: list[str] = []
    span_notes = SpanNotes()
    other: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    duplicates = 0
    calls: list[tuple[int, int, ModelCall]] = []
    number = 0
    try:
        for number, document in _documents(text.removeprefix("\ufeff"), notes):
            if not isinstance(document, dict) or "resourceSpans" not in document:
                signal = next(
                    (s for s in _OTHER_SIGNALS if isinstance(document, dict) and s in document),
                    None,
                )
                if signal is None:
                    raise _Malformed(
                        f"{_kind(document)} that is not an OTLP export request (expected "
                        "resourceSpans)"
                    )
                other[signal] += 1
                continue
            for span in _spans(document, number):
                if span.span_id:
                    if (span.trace_id, span.span_id) in seen:
                        duplicates += 1
                        continue
                    seen.add((span.trace_id, span.span_id))
                call = model_call(span, span_notes)
                if call is not None:
                    calls.append((call.started is None, len(calls), call))
    except _Malformed as exc:
        reason = str(exc)
        raise TraceError(
            reason if reason.startswith("line ") else f"line {number}: {reason}", path=path
        ) from None
    calls.sort(key=lambda c: (c[0], c[2].started or 0.0, c[1]))
    # body and answer were scrubbed span by span (_otel_genai.py); the conversation id here
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
            shapes=False,
        )
        for index, (_, _, call) in enumerate(calls)
    )
    for signal, count in sorted(other.items()):
        notes.append(f"{count} line(s) of {signal} (not spans) were skipped")
    if duplicates:
        notes.append(f"{duplicates} duplicate span(s) (same trace and span id) were read once")
    notes.extend(span_notes.lines())
    if exchanges:
        notes.append(
            "requests rebuilt from OpenTelemetry spans: their JSON spacing, key order and "
            "argument formatting are unknown"
        )
    return Trace(exchanges=exchanges, source="otel", path=path, notes=tuple(notes))


def sniff(head: str) -> bool:
    """The registry's sniff: OTLP JSON with spans (see :func:`sniff_otlp_json`)."""
    return sniff_otlp_json(head[:4096])


def read(data: bytes, path: str | None) -> Trace:
    """The registry's read: the file's bytes, decoded line by line (a torn tail dropped)."""
    text, torn = decode_text(data, path=path, line_based=True)
    trace = read_otlp_json(text, path=path)
    if torn is not None:
        trace = replace(trace, notes=(torn, *trace.notes))
    return trace
