"""OpenInference (Arize Phoenix's conventions): ``openinference-instrumentation-openai``,
``-langchain``, ``-llama-index`` and the others built on them.

A model call is a span with ``openinference.span.kind = LLM`` that records messages; LlamaIndex
also marks wrappers (``_prepare_chat_with_tools``, an outer ``chat``) as LLM spans without
messages, which are not calls. Messages are flattened into indexed attributes:
``llm.input_messages.N.message.role`` / ``.content`` / ``.contents.K.message_content.*`` /
``.tool_calls.M.tool_call.{id,function.name,function.arguments}`` / ``.tool_call_id``, the
answer likewise under ``llm.output_messages``. The openai instrumentation also keeps the
request as sent (``input.value``: the ``create()`` arguments as JSON), which is read first: it
is the closest to the wire of any shape.

Where OpenInference differs from what a reader would guess:

- ``llm.model_name`` is the **response**'s model for openai and LangChain (and OpenInference's
  GenAI mode copies it into ``gen_ai.request.model``): the request's model is read from
  ``llm.invocation_parameters`` (``model`` / ``model_name``) or ``input.value`` instead;
- the usage keeps a cache read of 0 (``llm.token_count.prompt_details.cache_read``), and the
  provider's own usage object is in ``output.value`` (openai) or LangChain's ``token_usage``;
- the SDK's attribute count limit (128 by default) evicts the **oldest** attributes, so a long
  conversation's flattened messages lose their first ones: a span whose message indexes do
  not start at 0, or have holes, is skipped with a note (raise
  ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._common import (
    WIRE_PARAMETERS,
    ModelCall,
    SpanNotes,
    Unreadable,
    build_call,
    request_model,
    wire_message,
)
from ._genai import chat_tools, indexed
from ._records import OtelLog, OtelSpan
from ._usage import usage_of

__all__ = ["claims", "read"]

_INPUT: Final = "llm.input_messages."
_OUTPUT: Final = "llm.output_messages."


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _wire_request(attributes: Mapping[str, Any]) -> dict[str, Any] | None:
    """``input.value`` when it is a chat request's arguments (the openai instrumentation's)."""
    if attributes.get("input.mime_type") != "application/json":
        return None
    value = _json(attributes.get("input.value"))
    if not isinstance(value, Mapping):
        return None
    messages = value.get("messages")
    if not isinstance(messages, list) or not all(
        isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in messages
    ):
        return None
    return dict(value)


def claims(span: OtelSpan) -> bool:
    """An OpenInference LLM span (with messages or not: see :func:`read`)."""
    return span.attributes.get("openinference.span.kind") == "LLM"


def _content(fields: Mapping[str, Any]) -> Any:
    if "message.content" in fields:
        return fields["message.content"]
    parts = indexed(fields, "message.contents.")
    if not parts:
        return None
    out: list[dict[str, Any]] = []
    for _, part in sorted(parts.items()):
        kind = part.get("message_content.type")
        if kind == "text":
            out.append({"type": "text", "text": part.get("message_content.text", "")})
        elif kind == "image":
            url = part.get("message_content.image.image.url")
            out.append({"type": "image_url", "image_url": {"url": url}})
    if len(out) == 1 and out[0]["type"] == "text":
        return out[0]["text"]
    return out


def _message(fields: Mapping[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": fields.get("message.role")}
    content = _content(fields)
    if content is not None or "message.content" in fields:
        message["content"] = content
    calls = indexed(fields, "message.tool_calls.")
    if calls:
        message["tool_calls"] = [
            {
                "id": call.get("tool_call.id"),
                "function": {
                    "name": call.get("tool_call.function.name"),
                    "arguments": call.get("tool_call.function.arguments"),
                },
            }
            for _, call in sorted(calls.items())
        ]
    if "message.tool_call_id" in fields:
        message["tool_call_id"] = fields["message.tool_call_id"]
    if fields.get("message.role") == "tool" and "message.name" in fields:
        message["name"] = fields["message.name"]
    return wire_message(message)


def _flattened(span: OtelSpan, prefix: str) -> list[dict[str, Any]]:
    found = indexed(span.attributes, prefix)
    if not found:
        return []
    numbers = sorted(found)
    if numbers != list(range(len(numbers))):
        missing = next(i for i in range(numbers[-1] + 1) if i not in found)
        raise Unreadable(
            "evicted",
            f"its {prefix}N messages lack message {missing}: the SDK's attribute count limit "
            "evicted the oldest attributes (raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT); the span "
            "was skipped",
        )
    return [_message(found[n]) for n in numbers]


def _tools(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    schemas = indexed(attributes, "llm.tools.")
    tools = []
    for _, fields in sorted(schemas.items()):
        schema = _json(fields.get("tool.json_schema"))
        if isinstance(schema, Mapping):
            tools.append(schema)
    return chat_tools(tools)


def _raw_usage(attributes: Mapping[str, Any]) -> tuple[Any, str | None]:
    output = _json(attributes.get("output.value"))
    if not isinstance(output, Mapping):
        return None, None
    if isinstance(output.get("usage"), Mapping):
        return output["usage"], "output.value usage"
    llm_output = output.get("llm_output")
    if isinstance(llm_output, Mapping) and isinstance(llm_output.get("token_usage"), Mapping):
        return llm_output["token_usage"], "output.value llm_output.token_usage"
    try:
        message = output["generations"][0][0]["message"]["kwargs"]
        usage = message["response_metadata"]["token_usage"]
    except (KeyError, IndexError, TypeError):
        return None, None
    return (
        (usage, "output.value response_metadata.token_usage")
        if isinstance(usage, Mapping)
        else (None, None)
    )


def read(span: OtelSpan, notes: SpanNotes, logs: Sequence[OtelLog]) -> ModelCall | None:
    """The call an OpenInference LLM span tells; ``None`` for a wrapper without messages."""
    attributes = span.attributes
    wire = _wire_request(attributes)
    flattened = _flattened(span, _INPUT) if wire is None else []
    if wire is None and not flattened:
        notes.skipped["OpenInference LLM spans without messages (wrappers around a call)"] += 1
        return None
    if span.dropped_attributes:
        notes.add(
            "dropped-attributes",
            "the SDK dropped attributes at its attribute count limit (the oldest go first: "
            "raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT); what is left was read",
            span.where,
        )
    parameters = _json(attributes.get("llm.invocation_parameters"))
    parameters = parameters if isinstance(parameters, Mapping) else {}
    body: dict[str, Any] = {}
    model = request_model(
        parameters.get("model") or parameters.get("model_name") or (wire or {}).get("model")
    )
    if model is not None:
        body["model"] = model
    source: Mapping[str, Any]
    if wire is not None:
        body["messages"] = [wire_message(m) for m in wire["messages"]]
        tools = wire.get("tools")
        source = wire
    else:
        body["messages"] = flattened
        tools = None
        source = parameters
    for name in WIRE_PARAMETERS:
        if name in source and source[name] is not None:
            body[name] = source[name]
    chat = chat_tools(tools) if isinstance(tools, list) else _tools(attributes)
    if not chat and isinstance(parameters.get("tools"), list):
        chat = chat_tools(parameters["tools"])
    if chat:
        body["tools"] = chat
    output = _flattened(span, _OUTPUT)
    response = next((m for m in output if m.get("role") == "assistant"), None)
    raw, where = _raw_usage(attributes)
    return build_call(
        convention="openinference",
        span=span,
        notes=notes,
        body=body,
        response=response,
        usage=usage_of(span, notes, raw=raw, raw_origin=where),
    )
