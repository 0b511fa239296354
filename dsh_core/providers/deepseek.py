"""DeepSeek Chat Completions (OpenAI-compatible): the wire codec and the streaming provider.

This module is the one place the DeepSeek wire format lives (ARCHITECTURE: "wire formats live in
one place each"). Its pure functions are shared with the mock DeepSeek:

- :func:`serialize_request` / :func:`encode_request`: ``GenerateOptions`` → request body. A pure
  function of the options, message by message (:func:`serialize_message`), with a fixed key order
  and compact JSON, so the same options always give the same bytes and a grown log gives a request
  whose bytes extend the previous one's (the prefix cache depends on it).
- :func:`parse_request`: a wire body → :class:`ChatRequest`, checking every field's type and shape
  the way the server's deserializer does (:class:`WireFormatError` names the JSON path). API rules
  about meaning (every tool call answered, reasoning passed back) belong to the mock.
- :class:`ChunkTranslator`, :func:`translate_events`, :func:`translate_stream`: SSE payloads →
  the core's stream chunks; :func:`map_usage`; :func:`classify_http_error`.
- :data:`MODELS`: the model table (wire.md §1.2).

Wire facts and their sources: /work/shared/reference/wire.md §1; the reference adapter's
behaviour: dsh-testing-spec.md §3.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._header import ToolsPlaceholder
from .._json import FrozenDict, FrozenList, dumps_canonical
from .._messages import (
    ContentBlock,
    Message,
    OpaqueBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from .._stream import (
    BlockEnd,
    BlockStart,
    FinishReason,
    GenerateOptions,
    LlmFailure,
    ProviderError,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
    UsageChunk,
)
from . import _wire as w
from ._failures import classify_http_error as _classify
from ._failures import failure
from ._http import EventHandler, Secret, SseProvider
from ._models import MODELS, REASONING_EFFORT_ALIASES, ModelInfo, resolve_model, thinking_enabled
from ._sse import SseEvent
from ._translate import TranslatorBase, terminal_finish, translate_all, translate_async
from ._wire import WireFormatError

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "MODELS",
    "NO_OUTPUT",
    "REASONING_EFFORTS",
    "REASONING_EFFORT_ALIASES",
    "ROLES",
    "ChatMessage",
    "ChatRequest",
    "ChatTool",
    "ChatToolCall",
    "ChunkTranslator",
    "DeepSeekProvider",
    "ModelInfo",
    "WireFormatError",
    "classify_http_error",
    "encode_request",
    "map_usage",
    "parse_request",
    "serialize_message",
    "serialize_request",
    "translate_events",
    "translate_stream",
]

DEFAULT_BASE_URL = "https://api.deepseek.com"
API_KEY_ENV = "DEEPSEEK_API_KEY"
BASE_URL_ENV = "DEEPSEEK_BASE_URL"
NO_OUTPUT = "(no output)"
"""What a tool message says when the tool's result has no text (the API wants a string)."""

# --------------------------------------------------------------------------------------------
# Serialization: GenerateOptions → wire body

REASONING_EFFORTS = ("off", "low", "high", "max")
"""Efforts a request may carry: ``off`` disables thinking; the others enable it and are sent as
``reasoning_effort``."""


def _unsupported(code: str, message: str) -> ProviderError:
    return ProviderError(failure(code, message))


def _thinking(options: GenerateOptions) -> tuple[dict[str, str] | None, str | None]:
    """``(thinking, reasoning_effort)`` for a request (dsh-testing-spec §3.2)."""
    if options.purpose == "session-title":
        return {"type": "disabled"}, None
    effort = options.reasoning_effort
    if effort is None:
        return None, None
    if effort == "off":
        return {"type": "disabled"}, None
    if effort in REASONING_EFFORTS:
        return {"type": "enabled"}, effort
    raise _unsupported(
        "UNSUPPORTED_REASONING_EFFORT",
        f"reasoning effort {effort!r} is not one of {', '.join(REASONING_EFFORTS)}",
    )


def _text_of(blocks: Iterable[ContentBlock], where: str) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, OpaqueBlock) and block.type == "image":
            raise _unsupported(
                "UNSUPPORTED_CONTENT",
                f"{where} holds an image; this adapter sends text only",
            )
    return "".join(parts)


def serialize_message(message: Message, *, thinking: bool = True) -> list[dict[str, Any]]:
    """The wire messages of one log message (a user message may become several).

    - system → ``{role: system, content}`` (its text blocks joined);
    - assistant → ``{role: assistant, content, reasoning_content?, tool_calls?}``: ``content`` is
      ``""`` when there is no text, never null (a null made the live API answer 400 and broke the
      session for good); ``reasoning_content`` is sent byte-exact on every turn that reasoned, and
      as ``""`` on a turn without reasoning when ``thinking`` is on (the API refuses an omitted
      key in thinking mode with tools, but accepts an empty one);
    - user → one ``{role: tool, tool_call_id, content}`` per tool-result block (a tool message
      must follow the assistant turn it answers), then ``{role: user, content}`` when it has text
      or has no tool results at all; a result without text says ``(no output)``.

    Plugin blocks this build does not model are skipped; an image raises ``ProviderError``
    (``UNSUPPORTED_CONTENT``) because this adapter is text-only.
    """
    where = f"message {message.id}"
    if message.role == "system":
        return [{"role": "system", "content": _text_of(message.content, where)}]
    if message.role == "assistant":
        text = _text_of(message.content, where)
        reasoning = "".join(b.text for b in message.content if isinstance(b, ReasoningBlock))
        out: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning or thinking:
            out["reasoning_content"] = reasoning
        calls = [
            {
                "id": b.id,
                "type": "function",
                "function": {"name": b.name, "arguments": b.arguments},
            }
            for b in message.content
            if isinstance(b, ToolCallBlock)
        ]
        if calls:
            out["tool_calls"] = calls
        return [out]
    wire: list[dict[str, Any]] = []
    results = [b for b in message.content if isinstance(b, ToolResultBlock)]
    for result in results:
        content = _text_of(result.content, f"{where} tool result {result.tool_call_id}")
        wire.append(
            {"role": "tool", "tool_call_id": result.tool_call_id, "content": content or NO_OUTPUT}
        )
    text = _text_of(message.content, where)
    if text or not results:
        wire.append({"role": "user", "content": text})
    return wire


def sendable_prefix(options: GenerateOptions) -> tuple[Message, ...]:
    """The request's message prefix, refused (``INVALID_REQUEST``) while it holds placeholders."""
    for entry in options.message_prefix:
        if isinstance(entry, str):
            raise _unsupported(
                "INVALID_REQUEST",
                f"the request's message prefix holds the placeholder {entry!r}; a provider "
                "needs the real messages",
            )
    return tuple(m for m in options.message_prefix if not isinstance(m, str))


def serialize_request(options: GenerateOptions, *, stream: bool = True) -> dict[str, Any]:
    """The Chat Completions body for ``options``.

    Keys in this order, optional ones only when set (never null): ``model``, ``messages``,
    ``stream``, ``stream_options`` (``{include_usage: true}``, streaming only), ``thinking``,
    ``reasoning_effort``, ``tools``, ``temperature``, ``max_tokens``, ``stop``. The system prompt
    comes first as a system message. Raises ``ProviderError`` (``UNSUPPORTED_REASONING_EFFORT``,
    ``UNSUPPORTED_CONTENT``, ``INVALID_REQUEST``) for options the wire cannot carry.
    """
    thinking, effort = _thinking(options)
    thinking_on = thinking != {"type": "disabled"}
    messages: list[dict[str, Any]] = []
    if options.system:
        messages.append({"role": "system", "content": options.system})
    for message in (*sendable_prefix(options), *options.messages):
        messages.extend(serialize_message(message, thinking=thinking_on))
    body: dict[str, Any] = {"model": options.model, "messages": messages, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if thinking is not None:
        body["thinking"] = thinking
    if effort is not None:
        body["reasoning_effort"] = effort
    if isinstance(options.tools, ToolsPlaceholder):
        raise _unsupported(
            "INVALID_REQUEST",
            f"the request's tools are {options.tools.describe()}; a provider needs the real schemas",
        )
    if options.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in options.tools
        ]
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    if options.stop is not None:
        body["stop"] = list(options.stop)
    return body


def encode_request(options: GenerateOptions, *, stream: bool = True) -> bytes:
    """:func:`serialize_request` as compact UTF-8 JSON: the exact bytes sent."""
    return dumps_canonical(serialize_request(options, stream=stream)).encode("utf-8")


# --------------------------------------------------------------------------------------------
# Parsing: wire body → ChatRequest (structure only)

ROLES = ("system", "user", "assistant", "tool", "latest_reminder")
_PART_TYPES = ("text", "image_url", "file")
_USER_ID = re.compile(r"^[A-Za-z0-9_-]{1,512}$")
_WIRE_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatToolCall:
    """One entry of an assistant message's ``tool_calls``."""

    id: str
    name: str
    arguments: str
    """The raw JSON string, as sent."""
    type: str = "function"
    index: int | None = None
    """Present when a client echoes the streamed ``index`` back (the API ignores it)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.index is None else {"index": self.index}
        out.update(
            id=self.id, type=self.type, function={"name": self.name, "arguments": self.arguments}
        )
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One parsed wire message. Absent and ``null`` fields are both ``None``."""

    role: str
    """``system``, ``user``, ``assistant``, ``tool`` or ``latest_reminder``."""
    content: str | FrozenList | None
    """A string, an array of content parts (frozen objects), or ``None`` (assistant only)."""
    name: str | None = None
    reasoning_content: str | None = None
    tool_calls: tuple[ChatToolCall, ...] | None = None
    tool_call_id: str | None = None
    prefix: bool | None = None
    """Beta chat-prefix completion flag on a final assistant message."""
    extra: FrozenDict = field(default_factory=FrozenDict)
    """Fields this parser does not model, kept for the caller to judge."""

    @property
    def text(self) -> str:
        """The content as text (text parts joined; other parts skipped)."""
        if isinstance(self.content, str):
            return self.content
        if self.content is None:
            return ""
        return "".join(p.get("text", "") for p in self.content if p.get("type") == "text")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        out["content"] = self.content
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.tool_calls is not None:
            out["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.prefix is not None:
            out["prefix"] = self.prefix
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatTool:
    """One function tool of ``tools``."""

    name: str
    description: str | None = None
    parameters: FrozenDict | None = None
    """JSON Schema of the arguments; ``None``: a function without arguments."""
    strict: bool | None = None

    def to_json(self) -> dict[str, Any]:
        function: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        if self.parameters is not None:
            function["parameters"] = self.parameters
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """A parsed Chat Completions body (wire.md §1.3). ``None`` means the field was absent or null."""

    model: str
    messages: tuple[ChatMessage, ...]
    stream: bool | None = None
    stream_options: FrozenDict | None = None
    thinking: FrozenDict | None = None
    """``{"type": "enabled" | "disabled"}``."""
    reasoning_effort: str | None = None
    tools: tuple[ChatTool, ...] | None = None
    tool_choice: str | FrozenDict | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: str | tuple[str, ...] | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    response_format: FrozenDict | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    user_id: str | None = None
    user: str | None = None
    """The OpenAI-style end-user field, for clients that send it instead of ``user_id``."""
    extra: FrozenDict = field(default_factory=FrozenDict)
    """Top-level fields this parser does not model (``n``, ``seed``, …), for the caller to judge."""

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.get("include_usage"))

    @property
    def thinking_type(self) -> str | None:
        """``enabled``, ``disabled``, or ``None`` when the request leaves it to the model."""
        return None if self.thinking is None else str(self.thinking["type"])

    @property
    def thinking_on(self) -> bool:
        """Whether this request runs in thinking mode: :func:`~dsh_core.providers.thinking_enabled`
        for its model (on the chat endpoint), ``thinking.type`` and ``reasoning_effort``."""
        return thinking_enabled(
            resolve_model(self.model, endpoint="chat"),
            thinking_type=self.thinking_type,
            effort=self.reasoning_effort,
        )

    def to_json(self) -> dict[str, Any]:
        """The body again; for a body made by :func:`serialize_request`, the same body."""
        out: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_json() for m in self.messages],
        }
        tail: dict[str, Any] = {
            "stream": self.stream,
            "stream_options": self.stream_options,
            "thinking": self.thinking,
            "reasoning_effort": self.reasoning_effort,
            "tools": None if self.tools is None else [t.to_json() for t in self.tools],
            "tool_choice": self.tool_choice,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop) if isinstance(self.stop, tuple) else self.stop,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "response_format": self.response_format,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "user_id": self.user_id,
            "user": self.user,
        }
        out.update((k, v) for k, v in tail.items() if v is not None)
        out.update(self.extra)
        return out

    def encode(self) -> bytes:
        return dumps_canonical(self.to_json()).encode("utf-8")


def _parts(value: object, param: str, allowed: tuple[str, ...]) -> FrozenList:
    items = w.need_list(value, param)
    for i, part in enumerate(items):
        where = w.child(param, i)
        obj = w.need_object(part, where)
        kind = w.need_variant(w.required(obj, "type", where), w.child(where, "type"), allowed)
        if kind == "text":
            w.need_str(w.required(obj, "text", where), w.child(where, "text"))
        elif kind == "image_url":
            image = w.need_object(w.required(obj, "image_url", where), w.child(where, "image_url"))
            where = w.child(where, "image_url")
            w.need_str(w.required(image, "url", where), w.child(where, "url"))
        else:
            w.need_object(w.required(obj, "file", where), w.child(where, "file"))
    result: FrozenList = w.frozen(items, param)
    return result


def _content(value: object, param: str, allowed: tuple[str, ...]) -> str | FrozenList:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _parts(value, param, allowed)
    w.fail(param, f"invalid type: {w.kind_of(value)}, expected a string or an array of parts")


def _tool_call(value: object, param: str) -> ChatToolCall:
    obj = w.need_object(value, param)
    index = w.optional(obj, "index")
    call_id = w.need_str(w.required(obj, "id", param), w.child(param, "id"))
    kind = w.need_variant(w.required(obj, "type", param), w.child(param, "type"), ("function",))
    where = w.child(param, "function")
    function = w.need_object(w.required(obj, "function", param), where)
    return ChatToolCall(
        id=call_id,
        type=kind,
        name=w.need_str(w.required(function, "name", where), w.child(where, "name")),
        arguments=w.need_str(w.required(function, "arguments", where), w.child(where, "arguments")),
        index=None if index is None else w.need_int(index, w.child(param, "index"), minimum=0),
    )


_MESSAGE_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "system": (),
        "user": (),
        "assistant": ("reasoning_content", "tool_calls", "prefix"),
        "tool": ("tool_call_id",),
        "latest_reminder": (),
    }
)


def _message(value: object, param: str) -> ChatMessage:
    obj = w.need_object(value, param)
    role = w.need_variant(w.required(obj, "role", param), w.child(param, "role"), ROLES)
    name = w.optional(obj, "name")
    if name is not None:
        w.need_str(name, w.child(param, "name"))
    content_param = w.child(param, "content")
    known = ("role", "content", "name", *_MESSAGE_FIELDS[role])
    reasoning: str | None = None
    calls: tuple[ChatToolCall, ...] | None = None
    call_id: str | None = None
    prefix: bool | None = None
    content: str | FrozenList | None
    if role == "assistant":
        raw = w.optional(obj, "content")
        content = None if raw is None else _content(raw, content_param, ("text",))
        raw_reasoning = w.optional(obj, "reasoning_content")
        if raw_reasoning is not None:
            reasoning = w.need_str(raw_reasoning, w.child(param, "reasoning_content"))
        raw_calls = w.optional(obj, "tool_calls")
        if raw_calls is not None:
            where = w.child(param, "tool_calls")
            calls = tuple(
                _tool_call(c, w.child(where, i))
                for i, c in enumerate(w.need_list(raw_calls, where))
            )
        raw_prefix = w.optional(obj, "prefix")
        if raw_prefix is not None:
            prefix = w.need_bool(raw_prefix, w.child(param, "prefix"))
    else:
        raw = w.required(obj, "content", param)
        if role == "user":
            content = _content(raw, content_param, _PART_TYPES)
        elif role == "latest_reminder":
            content = w.need_str(raw, content_param)
        else:
            content = _content(raw, content_param, ("text",))
        if role == "tool":
            call_id = w.need_str(
                w.required(obj, "tool_call_id", param), w.child(param, "tool_call_id")
            )
    return ChatMessage(
        role=role,
        content=content,
        name=name,
        reasoning_content=reasoning,
        tool_calls=calls,
        tool_call_id=call_id,
        prefix=prefix,
        extra=w.extras(obj, known, param),
    )


def _tools(value: object, param: str) -> tuple[ChatTool, ...]:
    items = w.need_list(value, param)
    w.check_tool_count(len(items), param)
    names: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        where = w.child(param, i)
        obj = w.need_object(item, where)
        w.need_variant(w.required(obj, "type", where), w.child(where, "type"), ("function",))
        fn_where = w.child(where, "function")
        function = w.need_object(w.required(obj, "function", where), fn_where)
        name_where = w.child(fn_where, "name")
        names.append((w.need_str(w.required(function, "name", fn_where), name_where), name_where))
    w.check_tool_names(names)
    tools: list[ChatTool] = []
    for i, item in enumerate(items):
        where = w.child(param, i)
        obj = w.need_object(item, where)
        w.need_variant(w.required(obj, "type", where), w.child(where, "type"), ("function",))
        fn_where = w.child(where, "function")
        function = w.need_object(w.required(obj, "function", where), fn_where)
        name = names[i][0]
        description = w.optional(function, "description")
        parameters = w.optional(function, "parameters")
        strict = w.optional(function, "strict")
        tools.append(
            ChatTool(
                name=name,
                description=None
                if description is None
                else w.need_str(description, w.child(fn_where, "description")),
                parameters=None
                if parameters is None
                else w.frozen(
                    w.need_object(parameters, w.child(fn_where, "parameters")),
                    w.child(fn_where, "parameters"),
                ),
                strict=None if strict is None else w.need_bool(strict, w.child(fn_where, "strict")),
            )
        )
    return tuple(tools)


def _tool_choice(value: object, param: str) -> str | FrozenDict:
    if isinstance(value, str):
        return w.need_variant(value, param, ("none", "auto", "required"))
    obj = w.need_object(value, param)
    w.need_variant(w.required(obj, "type", param), w.child(param, "type"), ("function",))
    where = w.child(param, "function")
    function = w.need_object(w.required(obj, "function", param), where)
    w.need_str(w.required(function, "name", where), w.child(where, "name"))
    result: FrozenDict = w.frozen(obj, param)
    return result


_REQUEST_FIELDS = (
    "model",
    "messages",
    "stream",
    "stream_options",
    "thinking",
    "reasoning_effort",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "response_format",
    "logprobs",
    "top_logprobs",
    "user_id",
    "user",
)


def parse_request(body: Mapping[str, Any] | bytes | str) -> ChatRequest:
    """Check a Chat Completions body's structure and return it as a :class:`ChatRequest`.

    Raises :class:`WireFormatError` whose ``param`` is the JSON path of the first offending
    field (``messages[1].role``); the message follows the API's deserializer wording
    (``unknown variant `developer`, expected one of …``, ``missing field `model` ``). Fields the
    parser does not model are kept in ``extra``; meaning (tool calls answered, reasoning passed
    back, ``max_tokens`` within the model's limit) is the caller's to check.
    """
    obj = w.decode_body(body)
    model = w.need_str(w.required(obj, "model", ""), "model")
    raw_messages = w.need_list(w.required(obj, "messages", ""), "messages")
    if not raw_messages:
        w.fail("messages", "must contain at least one message", code="empty")
    messages = tuple(_message(m, w.child("messages", i)) for i, m in enumerate(raw_messages))

    def opt(key: str) -> Any:
        return w.optional(obj, key)

    stream = opt("stream")
    stream_options = opt("stream_options")
    if stream_options is not None:
        options_obj = w.need_object(stream_options, "stream_options")
        include = w.optional(options_obj, "include_usage")
        if include is not None:
            w.need_bool(include, "stream_options.include_usage")
        stream_options = w.frozen(options_obj, "stream_options")
    thinking = opt("thinking")
    if thinking is not None:
        thinking_obj = w.need_object(thinking, "thinking")
        w.need_variant(
            w.required(thinking_obj, "type", "thinking"), "thinking.type", ("enabled", "disabled")
        )
        thinking = w.frozen(thinking_obj, "thinking")
    effort = opt("reasoning_effort")
    stop = opt("stop")
    if stop is not None and not isinstance(stop, str):
        items = w.need_list(stop, "stop")
        if len(items) > 16:
            w.fail(
                "stop",
                f"at most 16 stop sequences are allowed, got {len(items)}",
                code="too_many",
                value=len(items),
                limit=16,
            )
        stop = tuple(w.need_str(s, w.child("stop", i)) for i, s in enumerate(items))
    response_format = opt("response_format")
    if response_format is not None:
        rf = w.need_object(response_format, "response_format")
        w.need_variant(
            w.required(rf, "type", "response_format"),
            "response_format.type",
            ("text", "json_object", "json_schema"),
        )
        response_format = w.frozen(rf, "response_format")
    user_id = opt("user_id")
    if user_id is not None and not _USER_ID.match(w.need_str(user_id, "user_id")):
        w.fail(
            "user_id",
            "must be 1-512 characters of [a-zA-Z0-9_-]",
            code="pattern_mismatch",
            value=user_id,
        )
    user = opt("user")
    max_tokens = opt("max_tokens")
    top_logprobs = opt("top_logprobs")
    if top_logprobs is not None:
        top_logprobs = w.need_int(top_logprobs, "top_logprobs", minimum=0)
        if top_logprobs > 20:
            w.fail(
                "top_logprobs",
                f"must be between 0 and 20, got {top_logprobs}",
                code="out_of_range",
                value=top_logprobs,
                limit=20,
            )

    def number(key: str, low: float, high: float) -> float | None:
        value = opt(key)
        return None if value is None else w.need_number(value, key, low=low, high=high)

    return ChatRequest(
        model=model,
        messages=messages,
        stream=None if stream is None else w.need_bool(stream, "stream"),
        stream_options=stream_options,
        thinking=thinking,
        reasoning_effort=None
        if effort is None
        else w.need_variant(effort, "reasoning_effort", _WIRE_EFFORTS),
        tools=None if opt("tools") is None else _tools(opt("tools"), "tools"),
        tool_choice=None
        if opt("tool_choice") is None
        else _tool_choice(opt("tool_choice"), "tool_choice"),
        temperature=number("temperature", 0, 2),
        top_p=number("top_p", 0, 1),
        max_tokens=None if max_tokens is None else w.need_int(max_tokens, "max_tokens", minimum=1),
        stop=stop,
        frequency_penalty=number("frequency_penalty", -2, 2),
        presence_penalty=number("presence_penalty", -2, 2),
        response_format=response_format,
        logprobs=None if opt("logprobs") is None else w.need_bool(opt("logprobs"), "logprobs"),
        top_logprobs=top_logprobs,
        user_id=user_id,
        user=None if user is None else w.need_str(user, "user"),
        extra=w.extras(obj, _REQUEST_FIELDS, ""),
    )


# --------------------------------------------------------------------------------------------
# Response side: usage, errors, stream translation


def _count(obj: Mapping[str, Any], key: str, param: str) -> int | None:
    value = obj.get(key)
    return None if value is None else w.need_int(value, w.child(param, key), minimum=0)


def map_usage(usage: Mapping[str, Any]) -> TokenUsage:
    """DeepSeek usage → :class:`TokenUsage` (disjoint buckets).

    ``prompt_cache_hit_tokens`` → ``cache_read_tokens`` (else ``prompt_tokens_details.
    cached_tokens``; absent when neither is sent, ``0`` is kept); ``prompt_cache_miss_tokens`` →
    ``input_tokens`` (else ``prompt_tokens`` minus the hits); ``completion_tokens`` →
    ``output_tokens``; ``completion_tokens_details.reasoning_tokens`` → ``reasoning_tokens``.
    Raises :class:`WireFormatError` for a count that is not a non-negative integer.
    """
    usage = w.need_object(usage, "usage")
    prompt = _count(usage, "prompt_tokens", "usage")
    hit = _count(usage, "prompt_cache_hit_tokens", "usage")
    details = usage.get("prompt_tokens_details")
    if hit is None and isinstance(details, Mapping):
        hit = _count(details, "cached_tokens", "usage.prompt_tokens_details")
    miss = _count(usage, "prompt_cache_miss_tokens", "usage")
    if miss is None:
        miss = max((prompt or 0) - (hit or 0), 0)
    completion_details = usage.get("completion_tokens_details")
    reasoning = (
        _count(completion_details, "reasoning_tokens", "usage.completion_tokens_details")
        if isinstance(completion_details, Mapping)
        else None
    )
    return TokenUsage(
        input_tokens=miss,
        output_tokens=_count(usage, "completion_tokens", "usage") or 0,
        cache_read_tokens=hit,
        reasoning_tokens=reasoning,
    )


def classify_http_error(
    status: int,
    body: bytes | str | Mapping[str, Any] | None,
    headers: Mapping[str, str],
    *,
    now: float | None = None,
) -> LlmFailure:
    """A non-2xx DeepSeek response → :class:`LlmFailure` (code, status, retryable, Retry-After
    in ms, request id). See :func:`dsh_core.providers._failures.classify_http_error`."""
    return _classify(status, body, headers, api="DeepSeek API", now=now)


@dataclass(slots=True)
class _ToolState:
    block: int
    id: str = ""
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


def _finish_reason(reason: str) -> FinishReason:
    if reason == "stop":
        return FinishReason(kind="stop")
    if reason == "tool_calls":
        return FinishReason(kind="tool-calls")
    if reason == "length":
        return FinishReason(kind="max-tokens")
    return FinishReason(kind="error", failure=failure(reason.upper(), f"model stopped: {reason}"))


class ChunkTranslator(TranslatorBase):
    """Turns Chat Completions stream payloads into stream chunks (dsh-testing-spec §3.4).

    Per payload, per choice: a non-empty ``reasoning_content`` opens (once) and extends the
    reasoning block — the empty first ``""`` opens nothing; a non-empty ``content`` does the same
    for the text block; each ``tool_calls[]`` fragment opens a tool-call block per wire ``index``
    and carries the remembered id and name with its ``arguments`` fragment; a ``finish_reason``
    becomes the pending finish. A truthy ``usage`` replaces the pending usage (last wins; it may
    ride on the last content chunk or trail alone). :meth:`finish` (at ``[DONE]``) closes every
    block in opening order, then emits the usage, then the finish; a ``stop`` with nothing
    produced is an ``EMPTY_RESPONSE`` error.
    """

    def __init__(self) -> None:
        self._next = 0
        self._order: list[int] = []
        self._text: tuple[int, list[str]] | None = None
        self._reasoning: tuple[int, list[str]] | None = None
        self._tools: dict[int, _ToolState] = {}
        self._finish: FinishReason | None = None
        self._usage: TokenUsage | None = None
        self.done = False
        """True once a terminal ``Finish`` was produced; later input is ignored."""

    def _open(self, kind: str, out: list[StreamChunk]) -> int:
        index = self._next
        self._next += 1
        self._order.append(index)
        out.append(BlockStart(index=index, block_type=kind))
        return index

    def feed(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        """The chunks one ``chat.completion.chunk`` payload produces.

        Raises :class:`WireFormatError` when the payload's shape is wrong.
        """
        if self.done:
            return []
        payload = w.need_object(payload, "")
        out: list[StreamChunk] = []
        choices = payload.get("choices")
        if choices is not None:
            for i, choice in enumerate(w.need_list(choices, "choices")):
                self._choice(w.need_object(choice, f"choices[{i}]"), f"choices[{i}]", out)
        usage = payload.get("usage")
        if usage:
            self._usage = map_usage(usage)
        return out

    def _choice(self, choice: Mapping[str, Any], param: str, out: list[StreamChunk]) -> None:
        delta = choice.get("delta")
        if delta is not None:
            where = w.child(param, "delta")
            delta = w.need_object(delta, where)
            reasoning = delta.get("reasoning_content")
            if reasoning is not None and w.need_str(reasoning, w.child(where, "reasoning_content")):
                if self._reasoning is None:
                    self._reasoning = (self._open("reasoning", out), [])
                self._reasoning[1].append(reasoning)
                out.append(ReasoningDelta(index=self._reasoning[0], text=reasoning))
            content = delta.get("content")
            if content is not None and w.need_str(content, w.child(where, "content")):
                if self._text is None:
                    self._text = (self._open("text", out), [])
                self._text[1].append(content)
                out.append(TextDelta(index=self._text[0], text=content))
            calls = delta.get("tool_calls")
            if calls is not None:
                calls_where = w.child(where, "tool_calls")
                for i, call in enumerate(w.need_list(calls, calls_where)):
                    self._tool_fragment(call, w.child(calls_where, i), out)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._finish = _finish_reason(w.need_str(reason, w.child(param, "finish_reason")))

    def _tool_fragment(self, call: object, param: str, out: list[StreamChunk]) -> None:
        obj = w.need_object(call, param)
        wire_index = w.need_int(w.required(obj, "index", param), w.child(param, "index"), minimum=0)
        state = self._tools.get(wire_index)
        if state is None:
            state = self._tools[wire_index] = _ToolState(block=self._open("tool-call", out))
        call_id = obj.get("id")
        if call_id is not None and w.need_str(call_id, w.child(param, "id")) and not state.id:
            state.id = call_id
        fragment = ""
        function = obj.get("function")
        if function is not None:
            fn_where = w.child(param, "function")
            function = w.need_object(function, fn_where)
            name = function.get("name")
            if name is not None and w.need_str(name, w.child(fn_where, "name")) and not state.name:
                state.name = name
            arguments = function.get("arguments")
            if arguments is not None:
                fragment = w.need_str(arguments, w.child(fn_where, "arguments"))
        state.arguments.append(fragment)
        out.append(
            ToolCallDelta(index=state.block, id=state.id, name=state.name, arguments_delta=fragment)
        )

    def finish(self) -> list[StreamChunk]:
        """The terminal chunks at ``[DONE]``: block ends (opening order), usage, finish."""
        if self.done:
            return []
        self.done = True
        out: list[StreamChunk] = []
        blocks: dict[int, ContentBlock] = {}
        if self._reasoning is not None:
            blocks[self._reasoning[0]] = ReasoningBlock(text="".join(self._reasoning[1]))
        if self._text is not None:
            blocks[self._text[0]] = TextBlock(text="".join(self._text[1]))
        for state in self._tools.values():
            blocks[state.block] = ToolCallBlock(
                id=state.id or f"call-{state.block}",
                name=state.name or "",
                arguments="".join(state.arguments),
            )
        out.extend(BlockEnd(index=index, block=blocks[index]) for index in self._order)
        if self._usage is not None:
            out.append(UsageChunk(usage=self._usage))
        out.append(terminal_finish(self._finish, produced=bool(self._order)))
        return out

    def handle_event(self, event: SseEvent) -> tuple[list[StreamChunk], bool]:
        """One SSE event → ``(chunks, done)``. ``[DONE]`` finishes; other data must be JSON.

        Events with an ``event:`` name are not Chat Completions payloads and are ignored.
        """
        if self.done:
            return [], True
        if event.event != "message":
            return [], False
        if event.data == "[DONE]":
            return self.finish(), True
        try:
            payload = json.loads(event.data)
        except ValueError:
            shown = event.data[:120]
            raise WireFormatError(
                f"event data is not JSON: {shown!r}", param="data", code="invalid_json"
            ) from None
        return self.feed(w.need_object(payload, "data")), False


def _closed_without_done() -> LlmFailure:
    return failure("STREAM_CLOSED", "DeepSeek stream ended before [DONE]; the answer is incomplete")


def translate_events(events: Iterable[SseEvent]) -> list[StreamChunk]:
    """All chunks for a recorded event sequence.

    Ends with exactly one ``Finish``: the stream's own, ``MALFORMED_RESPONSE`` for a bad payload,
    or ``STREAM_CLOSED`` when the events stop before ``[DONE]``.
    """
    return translate_all(ChunkTranslator(), events, _closed_without_done())


def translate_stream(
    events: AsyncIterable[SseEvent] | Iterable[SseEvent],
) -> AsyncIterator[StreamChunk]:
    """:func:`translate_events` for a live event source, chunk by chunk."""
    return translate_async(ChunkTranslator(), events, _closed_without_done())


# --------------------------------------------------------------------------------------------
# The provider


class DeepSeekProvider(SseProvider):
    """Streams a DeepSeek Chat Completions call (``POST {base_url}/chat/completions``).

    Implements :class:`dsh_core.Provider`. Exactly one HTTP request per :meth:`stream` call; the
    stream always ends with one ``Finish`` — failures (HTTP errors, transport errors, timeouts,
    truncation, malformed payloads) arrive as ``Finish(kind="error")`` and cancellation through
    ``options.cancel`` as ``Finish(kind="aborted")``; nothing is retried here.

    The API key comes from ``api_key`` or, at each call, the environment variable
    ``DEEPSEEK_API_KEY``; it never appears in ``repr``, failures or exceptions. The base URL comes
    from ``base_url``, else ``DEEPSEEK_BASE_URL``, else ``https://api.deepseek.com``. Pass an
    ``httpx.AsyncClient`` (not closed by the provider) or a ``transport`` for the provider's own
    client (closed by :meth:`aclose`); ``idle_timeout`` bounds each wait for bytes.
    """

    api = "DeepSeek API"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = BASE_URL_ENV
    api_key_env = API_KEY_ENV
    path = "/chat/completions"

    def request_headers(self, options: GenerateOptions, key: Secret) -> dict[str, str]:
        headers = {
            "authorization": f"Bearer {key.reveal()}",
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        headers.update(self._extra_headers(options))
        return headers

    def encode(self, options: GenerateOptions) -> bytes:
        return encode_request(options)

    def new_handler(self) -> EventHandler:
        return ChunkTranslator().handle_event
