"""One GenAI model-call span as a chat-completions request: body, answer, usage, timing.

Instrumentations describe a model call with the OpenTelemetry GenAI semantic conventions
(docs/guides/opentelemetry.md has the attributes and each instrumentation's habits):

- ``gen_ai.input.messages`` / ``gen_ai.output.messages``: ``[{"role", "parts": [...]}]`` with
  parts ``text`` (``content``), ``tool_call`` (``id``, ``name``, ``arguments``),
  ``tool_call_response`` (``id``, ``response``; pydantic-ai writes ``result``), ``reasoning``
  (pydantic-ai: ``thinking``); ``gen_ai.system_instructions`` (parts) and
  ``gen_ai.tool.definitions`` (``{"type", "name", "description", "parameters"}``);
- the older indexed attributes OpenLLMetry wrote before its 0.54 releases:
  ``gen_ai.prompt.N.role`` / ``.content`` / ``.tool_calls.M.{id,name,arguments}`` /
  ``.tool_call_id``, ``gen_ai.completion.N.*``, ``llm.request.functions.N.*``.

Each becomes a chat-completions body (system message(s) first, tool calls with ``arguments`` as
a JSON string, tools as ``{"type": "function", "function": {...}}``), the assistant message
answered, the usage and the span's times. The body is a rebuild, not the bytes sent: spacing, key
order, argument formatting and anything the instrumentation does not record (``tool_choice``,
``strict``, the thinking switch) are unknown, which is why the exchanges say ``body_exact=False``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ...scrub._scrubber import scrub_json
from .._model import TraceUsage
from ._fields import GroupedNotes, is_count

__all__ = ["ModelCall", "OtelSpan", "SpanNotes", "model_call"]

CHAT_OPERATIONS: Final = frozenset({"chat", "generate_content"})
"""``gen_ai.operation.name`` values of a call that sends messages to a model."""

CHUNK_EVENTS: Final = frozenset({"gen_ai.content.completion.chunk", "llm.content.completion.chunk"})
"""Span events OpenLLMetry adds per streamed chunk: the first one's time is the first byte's."""

# Where each usage figure is found, first present wins.
_PROMPT_TOKENS: Final = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_COMPLETION_TOKENS: Final = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
_HIT_TOKENS: Final = (
    "gen_ai.usage.cache_read.input_tokens",  # the semantic conventions
    "gen_ai.usage.cache_read_input_tokens",  # OpenLLMetry before the conventions named it
    "gen_ai.usage.details.prompt_cache_hit_tokens",  # DeepSeek's own figure, as pydantic-ai passes it
)
OMITS_ZERO_USAGE: Final = frozenset({"pydantic-ai"})
"""Instrumentation scopes that write a usage count only when it is not zero (pydantic-ai's
``RequestUsage.opentelemetry_attributes``): there an absent cache-read count means 0. Elsewhere
an absent count is unknown."""

_PARAMETERS: Final = {
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
    "gen_ai.request.presence_penalty": "presence_penalty",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.stop_sequences": "stop",
}
"""Request parameters the conventions record, and their chat-completions names."""

_ARGUMENTS: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Arguments given as JSON objects are written compactly: their wire form is unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelSpan:
    """One span of an OTLP JSON file, its attributes decoded from OTLP ``AnyValue``\\ s."""

    where: str
    """``line N, span <id>``: where a note points."""
    scope: str
    """The instrumentation scope's name (``pydantic-ai``, ``opentelemetry.instrumentation.…``)."""
    trace_id: str
    span_id: str
    name: str
    start_ns: int | None
    """Start in UNIX nanoseconds; ``None`` when unset (0)."""
    end_ns: int | None
    attributes: Mapping[str, Any]
    events: tuple[tuple[str, int | None], ...]
    """(name, time in UNIX nanoseconds) of each span event."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """What one model-call span tells of its request (see :func:`model_call`)."""

    body: dict[str, Any]
    response: dict[str, Any] | None
    usage: TraceUsage | None
    started: float | None
    finished: float | None
    first_byte: float | None
    conversation: str | None


class _Unreadable(Exception):
    """A model-call span whose messages cannot be rebuilt: ``kind`` groups the notes."""

    def __init__(self, kind: str, reason: str) -> None:
        self.kind = kind
        self.reason = reason
        super().__init__(reason)


class SpanNotes(GroupedNotes):
    """What the reader skipped or could not tell, one note per kind (with a count and the first
    span it happened to), and the spans that are not model calls, by operation."""

    def __init__(self) -> None:
        super().__init__("span")
        self.skipped: Counter[str] = Counter()

    def lines(self) -> list[str]:
        out = []
        for operation, count in sorted(self.skipped.items()):
            what = (
                "without gen_ai.operation.name"
                if operation == ""
                else f"with gen_ai.operation.name {operation!r}"
            )
            out.append(f"{count} span(s) {what} are not model calls and were skipped")
        return [*out, *super().lines()]


def _count(attributes: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any] | None:
    for key in keys:
        if key in attributes:
            return key, attributes[key]
    return None


def _usage(span: OtelSpan, notes: SpanNotes) -> TraceUsage | None:
    attributes = span.attributes
    found = {
        name: _count(attributes, keys)
        for name, keys in (
            ("prompt", _PROMPT_TOKENS),
            ("completion", _COMPLETION_TOKENS),
            ("hit", _HIT_TOKENS),
        )
    }
    for pair in found.values():
        if pair is not None and not is_count(pair[1]):
            notes.add(
                "usage-not-count",
                f"a usage attribute is not a token count ({pair[0]} = {pair[1]!r:.40}); the "
                "span's usage was left out",
                span.where,
            )
            return None
    omits_zero = span.scope in OMITS_ZERO_USAGE and any(pair is not None for pair in found.values())
    prompt, completion, hit = (
        pair[1] if pair is not None else (0 if omits_zero else None) for pair in found.values()
    )
    if prompt is None:
        return None
    if hit is not None and hit > prompt:
        notes.add(
            "usage-hit-over-prompt",
            "a cache-read count exceeds the input tokens; the cache figure was left out",
            span.where,
        )
        hit = None
    return TraceUsage(prompt_tokens=prompt, hit_tokens=hit, completion_tokens=completion)


def _structured(attributes: Mapping[str, Any], key: str) -> Any:
    """An attribute that holds JSON: a JSON-encoded string, or structured (arrayValue, kvlist)."""
    value = attributes.get(key)
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        raise _Unreadable(
            f"not-json:{key}",
            f"{key} is not valid JSON (cut short by an attribute length limit?); the span was "
            "skipped",
        ) from None


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else _ARGUMENTS.encode(value)


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "{}" if value is None else _ARGUMENTS.encode(value)


def _plain(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    """A user/system/tool message: one text part as a string, several parts as a list."""
    if len(content) == 1 and content[0].get("type") == "text":
        return {"role": role, "content": content[0]["text"]}
    return {"role": role, "content": content}


def _assistant(parts: Sequence[Mapping[str, Any]], where: str) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        kind = part["type"]
        if part.get("builtin") is True:
            continue  # a provider-side tool (web search, code execution): not a chat message
        if kind == "text":
            texts.append(_content(part, where))
        elif kind in ("reasoning", "thinking"):
            reasoning.append(_content(part, where))
        elif kind == "tool_call":
            name = part.get("name")
            if not isinstance(name, str):
                raise _Unreadable("bad-part", f"a tool_call part in {where} has no name")
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {"name": name, "arguments": _arguments(part.get("arguments"))},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


def _content(part: Mapping[str, Any], where: str) -> str:
    content = part.get("content")
    if not isinstance(content, str):
        raise _Unreadable(
            "no-content",
            "message text was not recorded (the instrumentation's content capture is off?); "
            "the span was skipped",
        )
    return content


def _from_parts(role: str, parts: Sequence[Any], where: str) -> list[dict[str, Any]]:
    """A GenAI message as chat messages: tool results become ``tool`` messages of their own."""
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise _Unreadable("bad-part", f"{where}.parts[{j}] is not a part with a type")
    if role == "assistant":
        return [_assistant(parts, where)]
    out: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    # The OpenAI Agents SDK's bridge writes a tool result twice, as text and as the response.
    answers = role == "tool" and any(p["type"] == "tool_call_response" for p in parts)
    for part in parts:
        kind = part["type"]
        if kind == "tool_call_response":
            if content:
                out.append(_plain(role, content))
                content = []
            result = part["response"] if "response" in part else part.get("result")
            out.append(
                {"role": "tool", "tool_call_id": part.get("id"), "content": _text_of(result)}
            )
        elif kind == "text":
            if part.get("visible") is False or answers:
                continue  # pydantic-ai: an earlier request's system prompt, not sent this time
            content.append({"type": "text", "text": _content(part, where)})
        elif kind not in ("reasoning", "thinking", "tool_call"):
            content.append(dict(part))  # media and other parts, as the instrumentation wrote them
    if content:
        out.append(_plain(role, content))
    return out


def _messages(value: Any, key: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _Unreadable(f"shape:{key}", f"{key} is not a list of messages; the span was skipped")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(value):
        where = f"{key}[{i}]"
        role = message.get("role") if isinstance(message, Mapping) else None
        if not isinstance(role, str):
            raise _Unreadable(f"shape:{key}", f"{where} is not a message with a role")
        parts = message.get("parts")
        if parts is None and "content" in message:
            out.append(dict(message))  # already a chat message ({"role", "content", …})
        elif isinstance(parts, list):
            out.extend(_from_parts(role, parts, where))
        else:
            raise _Unreadable(f"shape:{key}", f"{where} has no parts list")
    return out


def _system_messages(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = attributes.get("gen_ai.system_instructions")
    if isinstance(raw, str) and not raw.lstrip().startswith(("[", "{")):
        return [{"role": "system", "content": raw}]  # plain text, not parts
    value = _structured(attributes, "gen_ai.system_instructions")
    if value is None:
        return []
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise _Unreadable(
            "shape:gen_ai.system_instructions",
            "gen_ai.system_instructions is not a list of parts; the span was skipped",
        )
    return [
        {"role": "system", "content": _content(part, "gen_ai.system_instructions")}
        for part in value
        if isinstance(part, Mapping)
        and part.get("type") == "text"
        and part.get("visible") is not False
    ]


def _tools(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    value = _structured(attributes, "gen_ai.tool.definitions")
    if value is None:
        return _legacy_tools(attributes)
    if not isinstance(value, list):
        raise _Unreadable(
            "shape:gen_ai.tool.definitions",
            "gen_ai.tool.definitions is not a list; the span was skipped",
        )
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


# -- OpenLLMetry's indexed attributes (before its 0.54 releases) --------------------------------


def _indexed(attributes: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
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
    calls = _indexed(fields, "tool_calls.")
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
                    "arguments": _arguments(call.get("arguments")),
                },
            }
            for _, call in sorted(calls.items())
        ]
    if "tool_call_id" in fields:
        message["tool_call_id"] = fields["tool_call_id"]
    return message


def _legacy_tools(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    functions = _indexed(attributes, "llm.request.functions.")
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


# -- the call ------------------------------------------------------------------------------------


def operation_of(span: OtelSpan) -> str | None:
    """The span's operation when it is a model call (``None`` otherwise)."""
    operation = span.attributes.get("gen_ai.operation.name")
    if operation is None and span.attributes.get("llm.request.type") == "chat":
        return "chat"  # OpenLLMetry before it wrote gen_ai.operation.name
    return operation if isinstance(operation, str) and operation in CHAT_OPERATIONS else None


def _body(span: OtelSpan) -> dict[str, Any] | None:
    attributes = span.attributes
    if "gen_ai.input.messages" in attributes:
        messages = _messages(
            _structured(attributes, "gen_ai.input.messages"), "gen_ai.input.messages"
        )
    else:
        prompts = _indexed(attributes, "gen_ai.prompt.")
        if not prompts:
            return None
        messages = [_legacy_message(fields) for _, fields in sorted(prompts.items())]
    if not messages or messages[0].get("role") != "system":
        # pydantic-ai keeps the system prompt apart; the OpenAI Agents SDK's bridge writes it in
        # both places, and then the messages have it first already.
        messages = [*_system_messages(attributes), *messages]
    body: dict[str, Any] = {}
    model = attributes.get("gen_ai.request.model", attributes.get("gen_ai.response.model"))
    if isinstance(model, str):
        body["model"] = model
    body["messages"] = messages
    tools = _tools(attributes)
    if tools:
        body["tools"] = tools
    for key, name in _PARAMETERS.items():
        if key in attributes and attributes[key] is not None:
            body[name] = attributes[key]
    if attributes.get("gen_ai.is_streaming", attributes.get("llm.is_streaming")) is True:
        body["stream"] = True
    return body


def _response(span: OtelSpan) -> dict[str, Any] | None:
    attributes = span.attributes
    if "gen_ai.output.messages" in attributes:
        key = "gen_ai.output.messages"
        messages = _messages(_structured(attributes, key), key)
    else:
        completions = _indexed(attributes, "gen_ai.completion.")
        messages = [_legacy_message(fields) for _, fields in sorted(completions.items())]
    return next((m for m in messages if m.get("role") == "assistant"), None)


def _seconds(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e9


def model_call(span: OtelSpan, notes: SpanNotes) -> ModelCall | None:
    """The request a model-call span describes; ``None`` (with a note) when the span is not a
    model call or its messages cannot be rebuilt."""
    if operation_of(span) is None:
        operation = span.attributes.get("gen_ai.operation.name")
        notes.skipped[operation if isinstance(operation, str) else ""] += 1
        return None
    try:
        body = _body(span)
        if body is None:
            notes.add(
                "no-messages",
                "model-call spans without recorded messages (the instrumentation's content "
                "capture is off?) were skipped",
                span.where,
            )
            return None
        response = _response(span)
        body = scrub_json(body)
        response = scrub_json(response) if response is not None else None
    except _Unreadable as problem:
        notes.add(problem.kind, problem.reason, span.where)
        return None
    except RecursionError:
        notes.add(
            "too-deep", "messages nested too deeply to read; the span was skipped", span.where
        )
        return None
    if "tools" not in body and any(
        m.get("tool_calls") or m.get("role") == "tool" for m in body["messages"]
    ):
        notes.add(
            "no-tools",
            "model calls that use tools carry no tool definitions (the instrumentation does not "
            "record them): changes to the tool list cannot be seen",
            span.where,
        )
    started, finished = span.start_ns, span.end_ns
    if started is not None and finished is not None and finished < started:
        notes.add(
            "time-backwards", "a span ends before it starts; its end was left out", span.where
        )
        finished = None
    chunks = [
        t
        for name, t in span.events
        if name in CHUNK_EVENTS and t is not None and (started is None or t >= started)
    ]
    conversation = span.attributes.get("gen_ai.conversation.id")
    return ModelCall(
        body=body,
        response=response,
        usage=_usage(span, notes),
        started=_seconds(started),
        finished=_seconds(finished),
        first_byte=_seconds(min(chunks)) if chunks else None,
        conversation=conversation if isinstance(conversation, str) and conversation else None,
    )
