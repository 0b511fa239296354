"""LlamaIndex under OpenLLMetry (``opentelemetry-instrumentation-llamaindex``).

Its model-call spans (``<LLM class>.task``, ``traceloop.span.kind = task``) carry the GenAI
attributes, but those lose every tool call (an assistant turn that called a tool is written
with no parts, in the history and in the answer) and write an empty request model. The same
span also keeps LlamaIndex's own objects as JSON in ``traceloop.entity.input`` /
``traceloop.entity.output``: the chat messages as LlamaIndex holds them (``role``, ``blocks``,
``additional_kwargs.tool_calls`` / ``tool_call_id``) and the tools it sends (``kwargs.tools``).
Those are complete, so the request is rebuilt from them; the usage still comes from the GenAI
attributes (releases before 0.54 write no cache figure at all). Releases before 0.54 wrote each
message as a JSON string inside the list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._common import ModelCall, SpanNotes, Unreadable, build_call, operation_of, wire_message
from ._genai import chat_tools
from ._records import OtelLog, OtelSpan
from ._usage import usage_of

__all__ = ["SCOPE", "claims", "read"]

SCOPE: Final = "opentelemetry.instrumentation.llamaindex"


def _json(value: Any) -> Any:
    while isinstance(value, str):  # 0.53 wrote a JSON string of a JSON string
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def _entity(span: OtelSpan, key: str) -> Any:
    return _json(span.attributes.get(key))


def claims(span: OtelSpan) -> bool:
    if span.scope != SCOPE or operation_of(span) is None:
        return False
    found = _entity(span, "traceloop.entity.input")
    return isinstance(found, Mapping) and isinstance(found.get("messages"), list)


def _text(blocks: Any) -> str | None:
    if not isinstance(blocks, list):
        return None
    texts = [
        b.get("text", "")
        for b in blocks
        if isinstance(b, Mapping) and b.get("block_type") == "text"
    ]
    return "".join(texts) if texts else None


def _message(value: Any, where: str) -> dict[str, Any]:
    value = _json(value)
    if not isinstance(value, Mapping) or not isinstance(value.get("role"), str):
        raise Unreadable("shape:entity", f"{where} is not a LlamaIndex chat message")
    extra = value.get("additional_kwargs")
    extra = extra if isinstance(extra, Mapping) else {}
    message: dict[str, Any] = {"role": value["role"]}
    content = _text(value.get("blocks"))
    if content is None and isinstance(value.get("content"), str):
        content = value["content"]
    message["content"] = content
    calls = extra.get("tool_calls")
    if not calls and isinstance(value.get("blocks"), list):
        calls = [
            {
                "id": b.get("tool_call_id"),
                "function": {"name": b.get("tool_name"), "arguments": b.get("tool_kwargs")},
            }
            for b in value["blocks"]
            if isinstance(b, Mapping) and b.get("block_type") == "tool_call"
        ]
    if calls:
        message["tool_calls"] = calls
    if isinstance(extra.get("tool_call_id"), str):
        message["tool_call_id"] = extra["tool_call_id"]
    if isinstance(extra.get("reasoning_content"), str):
        message["reasoning_content"] = extra["reasoning_content"]
    return wire_message(message)


def read(span: OtelSpan, notes: SpanNotes, logs: Sequence[OtelLog]) -> ModelCall:
    found = _entity(span, "traceloop.entity.input")
    assert isinstance(found, Mapping)
    messages = [
        _message(m, f"traceloop.entity.input messages[{i}]")
        for i, m in enumerate(found["messages"])
    ]
    body: dict[str, Any] = {"messages": messages}
    kwargs = found.get("kwargs")
    if isinstance(kwargs, Mapping):
        if isinstance(kwargs.get("tools"), list) and kwargs["tools"]:
            body["tools"] = chat_tools(kwargs["tools"])
        for name in ("tool_choice", "parallel_tool_calls"):
            if name in kwargs:
                body[name] = kwargs[name]
    output = _entity(span, "traceloop.entity.output")
    response = None
    if isinstance(output, Mapping) and isinstance(output.get("message"), Mapping):
        response = _message(output["message"], "traceloop.entity.output message")
    return build_call(
        convention="llamaindex",
        span=span,
        notes=notes,
        body=body,
        response=response,
        usage=usage_of(span, notes),
    )
