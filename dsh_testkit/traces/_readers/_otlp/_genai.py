"""The OpenTelemetry GenAI semantic conventions, in each of their published shapes.

A model call is a span with ``gen_ai.operation.name`` ``chat`` (or ``generate_content``,
``text_completion``; OpenLLMetry before 0.54 wrote ``llm.request.type = chat``). Its messages
live in one of four places, one reader each (docs/guides/opentelemetry.md has the attributes
and each instrumentation's habits):

- **attributes** (:func:`read_attributes`; the current conventions): ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` (``[{"role", "parts": [...]}]`` with parts ``text``, ``tool_call``,
  ``tool_call_response``, ``reasoning``), ``gen_ai.system_instructions``,
  ``gen_ai.tool.definitions``; a JSON string or structured values, both read. pydantic-ai,
  Logfire, OpenLLMetry ≥ 0.54, ``opentelemetry-instrumentation-openai-v2`` with
  ``…CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``, the OpenAI Agents SDK bridge;
- **indexed attributes** (:func:`read_indexed`; OpenLLMetry before 0.54):
  ``gen_ai.prompt.N.role`` / ``.content`` / ``.tool_calls.M.{id,name,arguments}`` /
  ``.tool_call_id``, ``gen_ai.completion.N.*``, ``llm.request.functions.N.*``;
- **span events** (:func:`read_span_events`; the conventions 1.27–1.30 as Azure AI Inference
  writes them): ``gen_ai.{system,user,assistant,tool}.message`` and ``gen_ai.choice`` events,
  each message in ``gen_ai.event.content`` (JSON) or in the event's attributes;
- **log records joined to the span** (:func:`read_log_events`) by trace and span id: the same
  events as log records (``opentelemetry-instrumentation-openai-v2`` by default with content
  capture on, OpenLLMetry with ``use_attributes=False``; the body holds the message, the event
  name its role), or one ``gen_ai.client.inference.operation.details`` record per call with
  the messages in its attributes (openai-v2's ``EVENT_ONLY`` / ``SPAN_AND_EVENT``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._common import (
    ModelCall,
    SpanNotes,
    Unreadable,
    arguments_text,
    build_call,
    chat_messages,
    operation_of,
    parameters_of,
    request_model,
    structured,
    wire_message,
)
from ._records import OtelLog, OtelSpan
from ._usage import usage_of

__all__ = [
    "DETAILS_EVENT",
    "MESSAGE_EVENTS",
    "chat_tools",
    "genai_tools",
    "has_log_events",
    "has_message_events",
    "indexed",
    "is_model_call",
    "read_attributes",
    "read_indexed",
    "read_log_events",
    "read_span_events",
    "system_messages",
]

MESSAGE_EVENTS: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
"""The conventions' message events (span events or log records), and the role each names."""
CHOICE_EVENT: Final = "gen_ai.choice"
DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"


def system_messages(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = attributes.get("gen_ai.system_instructions")
    if isinstance(raw, str) and not raw.lstrip().startswith(("[", "{")):
        return [{"role": "system", "content": raw}]  # plain text, not parts
    value = structured(attributes, "gen_ai.system_instructions")
    if value is None:
        return []
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise Unreadable(
            "shape:gen_ai.system_instructions",
            "gen_ai.system_instructions is not a list of parts; the span was skipped",
        )
    out = []
    for part in value:
        if (
            isinstance(part, Mapping)
            and part.get("type") == "text"
            and part.get("visible") is not False
        ):
            content = part.get("content")
            if not isinstance(content, str):
                raise Unreadable("no-content", "system instructions were not recorded")
            out.append({"role": "system", "content": content})
    return out


def genai_tools(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``gen_ai.tool.definitions`` (flat or chat shape) as chat tools; the older
    ``llm.request.functions.N.*``; ``None`` when neither is recorded."""
    value = structured(attributes, "gen_ai.tool.definitions")
    if value is None:
        return _legacy_tools(attributes)
    if not isinstance(value, list):
        raise Unreadable(
            "shape:gen_ai.tool.definitions",
            "gen_ai.tool.definitions is not a list; the span was skipped",
        )
    return chat_tools(value)


def chat_tools(value: Sequence[Any]) -> list[dict[str, Any]]:
    """Tool definitions, flat (``{"type", "name", "parameters"}``) or chat-shaped, as chat
    tools."""
    tools: list[dict[str, Any]] = []
    for tool in value:
        if not isinstance(tool, Mapping):
            continue
        if isinstance(tool.get("function"), Mapping) or tool.get("type", "function") != "function":
            tools.append(dict(tool))  # chat shape already, or not a function tool
            continue
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        tools.append({"type": "function", "function": function})
    return tools


def _base_body(span: OtelSpan, messages: list[dict[str, Any]]) -> dict[str, Any]:
    attributes = span.attributes
    if not messages or messages[0].get("role") != "system":
        # pydantic-ai keeps the system prompt apart; the OpenAI Agents SDK's bridge writes it in
        # both places, and then the messages have it first already.
        messages = [*system_messages(attributes), *messages]
    body: dict[str, Any] = {}
    model = request_model(
        attributes.get("gen_ai.request.model"), attributes.get("gen_ai.operation.name")
    )
    if model is not None:
        body["model"] = model
    body["messages"] = messages
    tools = genai_tools(attributes)
    if tools:
        body["tools"] = tools
    body.update(parameters_of(attributes))
    if attributes.get("gen_ai.is_streaming", attributes.get("llm.is_streaming")) is True:
        body["stream"] = True
    return body


def _assistant_of(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    found = next((m for m in messages if m.get("role") == "assistant"), None)
    return dict(found) if found is not None else None


# -- attributes -----------------------------------------------------------------------------


def read_attributes(span: OtelSpan, notes: SpanNotes, logs: Sequence[OtelLog]) -> ModelCall:
    """A call told by ``gen_ai.input.messages`` (the current conventions)."""
    attributes = span.attributes
    key = "gen_ai.input.messages"
    body = _base_body(span, chat_messages(structured(attributes, key), key))
    response = None
    if "gen_ai.output.messages" in attributes:
        key = "gen_ai.output.messages"
        response = _assistant_of(chat_messages(structured(attributes, key), key))
    return build_call(
        convention="genai",
        span=span,
        notes=notes,
        body=body,
        response=response,
        usage=usage_of(span, notes),
    )


# -- indexed attributes (OpenLLMetry before 0.54) --------------------------------------------


def indexed(attributes: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``prefix.N.rest`` attributes grouped by N: ``{N: {rest: value}}``."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        number, _, rest = key[len(prefix) :].partition(".")
        if number.isdigit() and rest:
            found.setdefault(int(number), {})[rest] = value
    return found


def _legacy_content(value: Any) -> Any:
    """Content lists were written JSON-encoded; a string that is one is read back as the list."""
    if isinstance(value, str) and value.startswith('[{"'):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(parsed, list) and all(isinstance(p, Mapping) and "type" in p for p in parsed):
            return parsed
    return value


def _legacy_message(fields: Mapping[str, Any]) -> dict[str, Any]:
    role = fields.get("role")
    message: dict[str, Any] = {"role": role if isinstance(role, str) else "user"}
    calls = indexed(fields, "tool_calls.")
    if "content" in fields or not calls:
        message["content"] = _legacy_content(fields.get("content"))
    elif role == "assistant":
        message["content"] = None
    if calls:
        message["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {
                    "name": call.get("name"),
                    "arguments": arguments_text(call.get("arguments")),
                },
            }
            for _, call in sorted(calls.items())
        ]
    if "tool_call_id" in fields:
        message["tool_call_id"] = fields["tool_call_id"]
    return message


def _legacy_tools(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    functions = indexed(attributes, "llm.request.functions.")
    if not functions:
        return None
    tools = []
    for _, fields in sorted(functions.items()):
        function: dict[str, Any] = {k: fields[k] for k in ("name", "description") if k in fields}
        if "parameters" in fields:
            parameters = fields["parameters"]
            try:
                function["parameters"] = (
                    json.loads(parameters) if isinstance(parameters, str) else parameters
                )
            except (ValueError, RecursionError):
                function["parameters"] = parameters
        tools.append({"type": "function", "function": function})
    return tools


def read_indexed(span: OtelSpan, notes: SpanNotes, logs: Sequence[OtelLog]) -> ModelCall:
    """A call told by ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``."""
    attributes = span.attributes
    prompts = indexed(attributes, "gen_ai.prompt.")
    body = _base_body(span, [_legacy_message(fields) for _, fields in sorted(prompts.items())])
    completions = indexed(attributes, "gen_ai.completion.")
    response = _assistant_of([_legacy_message(f) for _, f in sorted(completions.items())])
    return build_call(
        convention="genai-indexed",
        span=span,
        notes=notes,
        body=body,
        response=response,
        usage=usage_of(span, notes),
    )


# -- events: span events and log records -----------------------------------------------------


def _payload(value: Any, where: str) -> Mapping[str, Any]:
    """An event's message: a mapping, or JSON text of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise Unreadable(
                "not-json:event", f"a message event in {where} is not JSON (cut short?)"
            ) from None
    if not isinstance(value, Mapping):
        raise Unreadable("shape:event", f"a message event in {where} holds no message")
    return value


def _event_message(name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    role = payload.get("role")
    message = dict(payload)
    message["role"] = role if isinstance(role, str) and role else MESSAGE_EVENTS[name]
    if message["role"] == "tool" and "tool_call_id" not in message and "id" in message:
        message["tool_call_id"] = message["id"]
    return wire_message(message)


def _choice(payload: Mapping[str, Any]) -> dict[str, Any]:
    inner = payload.get("message")
    message = dict(inner) if isinstance(inner, Mapping) else {}
    for key in ("content", "tool_calls"):  # OpenLLMetry's events put them beside "message"
        if key in payload and key not in message:
            message[key] = payload[key]
    message["role"] = "assistant"
    return wire_message(message)


def _from_events(
    span: OtelSpan, events: Sequence[tuple[str, Any]], where: str, notes: SpanNotes
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    messages: list[dict[str, Any]] = []
    response = None
    for name, raw in events:
        payload = _payload(raw, where)
        if name == CHOICE_EVENT:
            if response is None:  # the first choice (n > 1 is not a chat agent's)
                response = _choice(payload)
        else:
            message = _event_message(name, payload)
            if message["role"] == "tool" and not message.get("tool_call_id"):
                notes.unrecorded.setdefault(
                    "no-tool-call-id",
                    "tool results are recorded without the id of the call they answer "
                    f"({span.scope})",
                )
            messages.append(message)
    return messages, response


def _event_content(attributes: Mapping[str, Any]) -> Any:
    if "gen_ai.event.content" in attributes:
        return attributes["gen_ai.event.content"]
    return {k.removeprefix("gen_ai."): v for k, v in attributes.items() if k != "gen_ai.system"}


def has_message_events(span: OtelSpan) -> bool:
    return any(e.name in MESSAGE_EVENTS for e in span.events)


def read_span_events(span: OtelSpan, notes: SpanNotes, logs: Sequence[OtelLog]) -> ModelCall:
    """A call whose messages are span events (``gen_ai.event.content`` JSON, as Azure AI
    Inference writes it, or the message's fields as the event's attributes)."""
    events = [
        (e.name, _event_content(e.attributes))
        for e in span.events
        if e.name in MESSAGE_EVENTS or e.name == CHOICE_EVENT
    ]
    messages, response = _from_events(span, events, span.where, notes)
    return build_call(
        convention="genai-span-events",
        span=span,
        notes=notes,
        body=_base_body(span, messages),
        response=response,
        usage=usage_of(span, notes),
    )


def read_log_events(span: OtelSpan, notes: SpanNotes, logs: Sequence[OtelLog]) -> ModelCall:
    """A call whose messages are log records joined to its span: one record per message (the
    body the message, the event name its role), or one details record per call."""
    details = [log for log in logs if log.event_name == DETAILS_EVENT]
    if details:
        record = details[-1]
        attributes = record.attributes
        key = "gen_ai.input.messages"
        messages = chat_messages(structured(attributes, key), key)
        merged = {**span.attributes, **attributes}
        body = _base_body(
            span,
            messages
            if messages and messages[0].get("role") == "system"
            else [*system_messages(attributes), *messages],
        )
        if "tools" not in body:
            tools = genai_tools(attributes)
            if tools:
                body["tools"] = tools
        response = None
        if "gen_ai.output.messages" in attributes:
            key = "gen_ai.output.messages"
            response = _assistant_of(chat_messages(structured(attributes, key), key))
        usage = usage_of(span, notes, attributes=merged)
        return build_call(
            convention="genai-log-events",
            span=span,
            notes=notes,
            body=body,
            response=response,
            usage=usage,
        )
    events = [
        (log.event_name, log.body)
        for log in sorted(logs, key=lambda log: log.order)
        if log.event_name in MESSAGE_EVENTS or log.event_name == CHOICE_EVENT
    ]
    messages, response = _from_events(span, events, logs[0].where if logs else span.where, notes)
    return build_call(
        convention="genai-log-events",
        span=span,
        notes=notes,
        body=_base_body(span, messages),
        response=response,
        usage=usage_of(span, notes),
    )


def has_log_events(logs: Sequence[OtelLog]) -> bool:
    return any(
        log.event_name in MESSAGE_EVENTS or log.event_name in (CHOICE_EVENT, DETAILS_EVENT)
        for log in logs
    )


def is_model_call(span: OtelSpan) -> bool:
    return operation_of(span) is not None
