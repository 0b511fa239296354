"""The OTLP records the conventions read: spans (with their events) and log records.

Whatever the file's form (OTLP JSON lines, one JSON document, the collector's length-prefixed
protobuf, compressed or not), every span and log record becomes one of these values, its
attributes decoded from OTLP ``AnyValue``\\ s into plain data (``_json.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OtelEvent", "OtelLog", "OtelSpan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelEvent:
    """One span event (the GenAI conventions' span-event shape puts messages here)."""

    name: str
    time_ns: int | None
    attributes: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelSpan:
    """One span, its attributes decoded."""

    where: str
    """``line N, span <id>`` (or ``message N, …`` for protobuf): where a note points."""
    scope: str
    """The instrumentation scope's name (``pydantic-ai``, ``opentelemetry.instrumentation.…``)."""
    trace_id: str
    span_id: str
    parent_id: str
    """The parent span's id (``""`` for a root span)."""
    name: str
    start_ns: int | None
    """Start in UNIX nanoseconds; ``None`` when unset (0)."""
    end_ns: int | None
    attributes: Mapping[str, Any]
    events: tuple[OtelEvent, ...] = ()
    dropped_attributes: int = 0
    """Attributes the SDK dropped at its attribute count limit (``droppedAttributesCount``):
    the Python SDK evicts the oldest, so flattened message lists lose their first messages."""
    order: int = 0
    """Its position in the file, for a stable order among spans that started together."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelLog:
    """One log record (GenAI events: one message per record, or one record per call)."""

    where: str
    scope: str
    trace_id: str
    span_id: str
    event_name: str
    """``eventName`` (OTLP 1.5+), else the ``event.name`` attribute older SDKs wrote."""
    time_ns: int | None
    """``timeUnixNano``, else ``observedTimeUnixNano``."""
    body: Any
    attributes: Mapping[str, Any]
    order: int = 0
    """Its position in the file: the emission order, which the messages of a call follow."""
