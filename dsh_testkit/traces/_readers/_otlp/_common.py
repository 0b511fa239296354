"""What every convention's reader shares: the model-call record, notes, and message builders.

Each convention (``_conventions.py``) turns the spans (and log records) it recognises into
:class:`ModelCall`\\ s: one chat-completions request, rebuilt (system message(s) first, tool
calls with ``arguments`` as a JSON string, tools as ``{"type": "function", "function": …}``),
the assistant message answered, the usage, the times. ``_calls.py`` then joins, deduplicates
and orders them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ....scrub._scrubber import scrub_json
from ..._model import TraceUsage
from .._fields import GroupedNotes
from ._records import OtelSpan

__all__ = [
    "ARGUMENTS",
    "CHAT_OPERATIONS",
    "PARAMETERS",
    "ModelCall",
    "SpanNotes",
    "Unreadable",
    "arguments_text",
    "assistant_from_parts",
    "chat_messages",
    "operation_of",
    "parameters_of",
    "seconds",
    "structured",
    "text_of",
]

CHAT_OPERATIONS: Final = frozenset({"chat", "generate_content", "text_completion"})
"""``gen_ai.operation.name`` values of a call that sends messages to a model."""

PARAMETERS: Final = {
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
    "gen_ai.request.presence_penalty": "presence_penalty",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.stop_sequences": "stop",
}
"""Request parameters the GenAI conventions record, and their chat-completions names."""

WIRE_PARAMETERS: Final = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "thinking",
    "reasoning_effort",
    "logprobs",
    "top_logprobs",
    "user",
)
"""Chat-completions parameters kept when an instrumentation records the request's own
parameters (OpenInference's ``llm.invocation_parameters``, Logfire's ``request_data``)."""

ARGUMENTS: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Arguments given as JSON objects are written compactly: their wire form is unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One model call as a convention's reader rebuilt it."""

    convention: str
    """The reader that rebuilt it (``genai``, ``openinference``, …)."""
    span: OtelSpan
    """The span that describes it (for a call told by log records: the span they belong to)."""
    body: dict[str, Any]
    response: dict[str, Any] | None
    usage: TraceUsage | None
    started: float | None
    finished: float | None
    first_byte: float | None = None
    conversation: str | None = None
    stream_tail: bool = False
    """The answer half of a streamed call, written when the stream ended (Logfire's
    ``streaming response … took`` log span): merged into the call it answers."""
    unrecorded: tuple[str, ...] = ()
    """What the instrumentation does not record of this call, as notes."""

    @property
    def scope(self) -> str:
        return self.span.scope


class Unreadable(Exception):
    """A model-call span whose messages cannot be rebuilt: ``kind`` groups the notes."""

    def __init__(self, kind: str, reason: str) -> None:
        self.kind = kind
        self.reason = reason
        super().__init__(reason)


class SharedMessages:
    """One object per distinct message of a read.

    A call resends its history, and an instrumentation writes that history anew on every span,
    so each call held its own copy of every earlier message: about 20 KB a call for the
    benchmark's traffic, growing with the conversation. A message equal to one read before is
    that one, as a dsh-trace file's shared history gives it (and the doctor's per-message memo
    then hits). Two messages are the same when their ``repr`` is: for the values a reader
    makes (dicts, lists, strings, numbers, booleans, ``None``) that is type-strict (``1``,
    ``1.0`` and ``True`` differ, as ``==`` would not say) and keeps key order. The memo holds
    each text's hash and length, not the text; a hit is checked against the kept message's own
    ``repr``.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], list[Any]] = {}

    def share(self, messages: list[Any]) -> list[Any]:
        """``messages``, each replaced by the same message read before, if any."""
        out = []
        seen = self._seen
        for message in messages:
            try:
                text = repr(message)
                kept = seen.setdefault((hash(text), len(text)), [])
                same = next((k for k in kept if k is message or repr(k) == text), None)
            except RecursionError:  # nested past what repr walks: kept as it is
                out.append(message)
                continue
            if same is None:  # the first of its text (or of its hash)
                kept.append(message)
                same = message
            out.append(same)
        return out


class SpanNotes(GroupedNotes):
    """What the reader skipped or could not tell, one note per kind (with a count and the first
    span it happened to), and the spans that are not model calls, by what they are; and the
    read's :class:`SharedMessages`."""

    def __init__(self) -> None:
        super().__init__("span")
        self.shared = SharedMessages()
        """The messages of the calls read so far, each once."""
        self.skipped: Counter[str] = Counter()
        """Spans that are not model calls, by a label (``gen_ai.operation.name
        'execute_tool'``, ``OpenInference kind 'TOOL'``, …)."""
        self.unrecorded: dict[str, str] = {}
        """What an instrumentation does not record, once per kind."""

    def lines(self) -> list[str]:
        out = [
            f"{count} span(s) {what} are not model calls and were skipped"
            for what, count in sorted(self.skipped.items())
        ]
        out += list(self.unrecorded.values())
        return [*out, *super().lines()]


def operation_of(span: OtelSpan) -> str | None:
    """The span's GenAI operation when it is a model call (``None`` otherwise)."""
    operation = span.attributes.get("gen_ai.operation.name")
    if operation is None and span.attributes.get("llm.request.type") == "chat":
        return "chat"  # OpenLLMetry before it wrote gen_ai.operation.name
    return operation if isinstance(operation, str) and operation in CHAT_OPERATIONS else None


def structured(attributes: Mapping[str, Any], key: str) -> Any:
    """An attribute that holds JSON: a JSON-encoded string, or structured (arrayValue, kvlist)."""
    value = attributes.get(key)
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        raise Unreadable(
            f"not-json:{key}",
            f"{key} is not valid JSON (cut short by an attribute length limit?); the span was "
            "skipped",
        ) from None


def text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else ARGUMENTS.encode(value)


def arguments_text(value: Any) -> str:
    """Tool-call arguments as the wire's JSON string (objects encoded compactly)."""
    if isinstance(value, str):
        return value
    return "{}" if value is None else ARGUMENTS.encode(value)


def _content(part: Mapping[str, Any]) -> str:
    content = part.get("content")
    if not isinstance(content, str):
        raise Unreadable(
            "no-content",
            "message text was not recorded (the instrumentation's content capture is off?); "
            "the span was skipped",
        )
    return content


def _plain(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    """A user/system/tool message: one text part as a string, several parts as a list."""
    if len(content) == 1 and content[0].get("type") == "text":
        return {"role": role, "content": content[0]["text"]}
    return {"role": role, "content": content}


def assistant_from_parts(parts: Sequence[Mapping[str, Any]], where: str) -> dict[str, Any]:
    """A GenAI assistant message (parts) as a chat assistant message."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        kind = part["type"]
        if part.get("builtin") is True:
            continue  # a provider-side tool (web search, code execution): not a chat message
        if kind == "text":
            texts.append(_content(part))
        elif kind in ("reasoning", "thinking"):
            reasoning.append(_content(part))
        elif kind == "tool_call":
            name = part.get("name")
            if not isinstance(name, str):
                raise Unreadable("bad-part", f"a tool_call part in {where} has no name")
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments_text(part.get("arguments"))},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


def _from_parts(role: str, parts: Sequence[Any], where: str) -> list[dict[str, Any]]:
    """A GenAI message as chat messages: tool results become ``tool`` messages of their own."""
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise Unreadable("bad-part", f"{where}.parts[{j}] is not a part with a type")
    if role == "assistant":
        return [assistant_from_parts(parts, where)]
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
            out.append({"role": "tool", "tool_call_id": part.get("id"), "content": text_of(result)})
        elif kind == "text":
            if part.get("visible") is False or answers:
                continue  # pydantic-ai: an earlier request's system prompt, not sent this time
            content.append({"type": "text", "text": _content(part)})
        elif kind not in ("reasoning", "thinking", "tool_call"):
            content.append(dict(part))  # media and other parts, as the instrumentation wrote them
    if content:
        out.append(_plain(role, content))
    return out


def chat_messages(value: Any, key: str) -> list[dict[str, Any]]:
    """GenAI messages (``[{"role", "parts"}]``, or chat messages already) as chat messages."""
    if not isinstance(value, list):
        raise Unreadable(f"shape:{key}", f"{key} is not a list of messages; the span was skipped")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(value):
        where = f"{key}[{i}]"
        role = message.get("role") if isinstance(message, Mapping) else None
        if not isinstance(role, str):
            raise Unreadable(f"shape:{key}", f"{where} is not a message with a role")
        parts = message.get("parts")
        if parts is None and ("content" in message or "tool_calls" in message):
            out.append(wire_message(message))  # already a chat message ({"role", "content", …})
        elif isinstance(parts, list):
            out.extend(_from_parts(role, parts, where))
        else:
            raise Unreadable(f"shape:{key}", f"{where} has no parts list")
    return out


def wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message as an instrumentation wrote it, with tool-call arguments as JSON text
    and only the wire's fields (``role``, ``content``, ``reasoning_content``, ``tool_calls``,
    ``tool_call_id``, ``name``)."""
    out: dict[str, Any] = {"role": message.get("role")}
    for key in ("content", "reasoning_content", "name", "tool_call_id"):
        if key in message:
            out[key] = message[key]
    if out["role"] == "assistant" and "content" not in out:
        out["content"] = None
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [_wire_call(c) for c in calls if isinstance(c, Mapping)]
    return out


def _wire_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), Mapping) else call
    assert isinstance(function, Mapping)
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {
            "name": function.get("name"),
            "arguments": arguments_text(function.get("arguments")),
        },
    }


def parameters_of(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The request parameters the GenAI attributes record, by their chat-completions names."""
    return {
        name: attributes[key]
        for key, name in PARAMETERS.items()
        if key in attributes and attributes[key] is not None
    }


def seconds(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e9


FIRST_BYTE_EVENTS: Final = frozenset(
    {"gen_ai.content.completion.chunk", "llm.content.completion.chunk", "First Token Stream Event"}
)
"""Span events written as a stream's chunks arrive (OpenLLMetry's per chunk, OpenInference's
first token): the first one's time is the first byte's."""


def request_model(value: Any, operation: Any = None) -> str | None:
    """A recorded request model, when it is one: not empty, and not the operation's name
    (Azure AI Inference records ``gen_ai.request.model = "chat"``)."""
    if not isinstance(value, str) or not value.strip() or value == operation:
        return None
    return value


def _has_reasoning(message: Mapping[str, Any] | None) -> bool:
    return isinstance(message, Mapping) and bool(message.get("reasoning_content"))


def build_call(
    *,
    convention: str,
    span: OtelSpan,
    notes: SpanNotes,
    body: dict[str, Any],
    response: dict[str, Any] | None,
    usage: TraceUsage | None,
    finished_ns: int | None = None,
    stream_tail: bool = False,
    unrecorded: Sequence[tuple[str, str]] = (),
) -> ModelCall:
    """The call, its body and answer scrubbed, its times checked, and what is not recorded said.

    A body without a model (the instrumentation did not record the request's) gets the thinking
    mode its answer shows: DeepSeek answers every thinking-mode request with reasoning, so an
    answer with reasoning means thinking was on and one without means it was off (marked in
    ``thinking``, with a note); without either the doctor would assume the default and judge
    the wrong rules.
    """
    gaps = list(unrecorded)
    if "model" not in body:
        gaps.append(
            (
                "no-model",
                "the request model is not recorded (or not as the request named it): the "
                "report cannot name it"
                + (
                    ", and the thinking mode is taken from the answers (a thinking-mode answer "
                    "always carries reasoning)"
                    if response is not None
                    else ""
                ),
            )
        )
        if response is not None and "thinking" not in body:
            enabled = _has_reasoning(response)
            body["thinking"] = {"type": "enabled" if enabled else "disabled"}
    if "tools" not in body and any(
        m.get("tool_calls") or m.get("role") == "tool" for m in body.get("messages", ())
    ):
        gaps.append(
            (
                "no-tools",
                "model calls that use tools carry no tool definitions (the instrumentation does "
                "not record them): changes to the tool list cannot be seen",
            )
        )
    for kind, text in gaps:
        notes.unrecorded.setdefault(kind, f"{text} ({span.scope or 'no scope'})")
    started = span.start_ns
    finished = span.end_ns if finished_ns is None else finished_ns
    if started is not None and finished is not None and finished < started:
        notes.add(
            "time-backwards", "a span ends before it starts; its end was left out", span.where
        )
        finished = None
    chunks = [
        e.time_ns
        for e in span.events
        if e.name in FIRST_BYTE_EVENTS
        and e.time_ns is not None
        and (started is None or e.time_ns >= started)
    ]
    conversation = span.attributes.get("gen_ai.conversation.id", span.attributes.get("session.id"))
    body = scrub_json(body)
    if isinstance(body.get("messages"), list):
        body["messages"] = notes.shared.share(body["messages"])  # (the body is this call's own)
    return ModelCall(
        convention=convention,
        span=span,
        body=body,
        response=scrub_json(response) if response is not None else None,
        usage=usage,
        started=seconds(started),
        finished=seconds(finished),
        first_byte=seconds(min(chunks)) if chunks else None,
        conversation=conversation if isinstance(conversation, str) and conversation else None,
        stream_tail=stream_tail,
        unrecorded=tuple(text for _, text in gaps),
    )
