"""Chat Completions parsing: a wire body → :class:`ChatRequest`, structure only.

Every field's type and shape is checked the way the server's deserializer does
(:class:`~dsh_core.providers.WireFormatError` names the JSON path and a stable code). API rules
about meaning (every tool call answered, reasoning passed back) belong to the mock. Fields and
values: docs/wire.md §1.3, §1.4.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..._json import FrozenDict, FrozenList
from ..._json_text import dumps_canonical
from .. import _wire as w
from .._models import resolve_model, thinking_enabled

__all__ = ["ROLES", "ChatMessage", "ChatRequest", "ChatTool", "ChatToolCall", "parse_request"]

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
    """A parsed Chat Completions body (docs/wire.md §1.3). ``None`` means the field was absent or null."""

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
    w.fail(
        param,
        f"invalid type: {w.kind_of(value)}, expected a string or an array of parts",
        value=w.kind_of(value),
    )


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
