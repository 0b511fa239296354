"""Logfire's openai instrumentation (``logfire.instrument_openai()``, scope ``logfire.openai``).

Its spans follow the GenAI conventions (``gen_ai.input.messages`` …) in its default version 2;
version 1 (``instrument_openai(version=1)``) keeps the request as sent instead, in
``request_data`` (the ``create()`` arguments: messages, model, tools, parameters) and the
answer in ``response_data``. Both keep the provider's own usage object in ``gen_ai.usage.raw``
(zeros included), while ``gen_ai.usage.cache_read.input_tokens`` is written only when it is not
0: the raw usage is read first (``_usage.py``).

A **streamed** call is two spans: ``Chat Completion with …`` (the request, ended when the
stream object is returned, without answer or usage) and, when the stream ends, a zero-length
``streaming response from … took …s`` span (``logfire.span_type = log``) with the answer and
the usage. The second is read as the call's tail (:attr:`ModelCall.stream_tail`) and merged into
the first (``_calls.py``): one request, from the first span's start to the stream's end.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._common import (
    WIRE_PARAMETERS,
    ModelCall,
    SpanNotes,
    build_call,
    chat_messages,
    request_model,
    structured,
    wire_message,
)
from ._genai import genai_tools, read_attributes
from ._records import OtelLog, OtelSpan
from ._usage import usage_of

__all__ = ["SCOPE", "claims", "read"]

SCOPE: Final = "logfire.openai"


def claims(span: OtelSpan) -> bool:
    return span.scope == SCOPE and (
        "gen_ai.input.messages" in span.attributes or _request_data(span) is not None
    )


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _request_data(span: OtelSpan) -> Mapping[str, Any] | None:
    data = _json(span.attributes.get("request_data"))
    if isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        return data
    return None


def read(span: OtelSpan, notes: SpanNotes, logs: Sequence[OtelLog]) -> ModelCall:
    attributes = span.attributes
    tail = attributes.get("logfire.span_type") == "log"
    response_data = _json(attributes.get("response_data"))
    raw: Any = attributes.get("gen_ai.usage.raw")
    origin = "gen_ai.usage.raw"
    if raw is None and isinstance(response_data, Mapping):
        raw, origin = response_data.get("usage"), "response_data.usage"
    usage = usage_of(span, notes, raw=raw, raw_origin=origin)
    data = _request_data(span)
    if data is None:  # version 2: the conventions' attributes
        call = read_attributes(span, notes, logs)
        return dataclasses.replace(call, convention="logfire", usage=usage, stream_tail=tail)
    body: dict[str, Any] = {}
    model = request_model(data.get("model"))
    if model is not None:
        body["model"] = model
    body["messages"] = chat_messages(data["messages"], "request_data.messages")
    tools = data.get("tools")
    if isinstance(tools, list) and tools:
        body["tools"] = [dict(t) for t in tools if isinstance(t, Mapping)]
    else:
        found = genai_tools(attributes)
        if found:
            body["tools"] = found
    for name in WIRE_PARAMETERS:
        if name in data and data[name] is not None:
            body[name] = data[name]
    if "temperature" not in body and attributes.get("gen_ai.request.temperature") is not None:
        body["temperature"] = attributes["gen_ai.request.temperature"]
    response = None
    if isinstance(response_data, Mapping) and isinstance(response_data.get("message"), Mapping):
        response = wire_message({**response_data["message"], "role": "assistant"})
    elif "gen_ai.output.messages" in attributes:
        key = "gen_ai.output.messages"
        output = chat_messages(structured(attributes, key), key)
        response = next((m for m in output if m.get("role") == "assistant"), None)
    return build_call(
        convention="logfire",
        span=span,
        notes=notes,
        body=body,
        response=response,
        usage=usage,
        stream_tail=tail,
    )
