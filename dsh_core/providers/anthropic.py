"""DeepSeek's Anthropic-format endpoint (Messages API): the wire codec and the streaming provider.

``POST {base}/v1/messages`` with base ``https://api.deepseek.com/anthropic`` (wire.md §3, §4).
Same shape as :mod:`dsh_core.providers.deepseek`: :func:`serialize_request` /
:func:`encode_request` (pure, byte-stable), :func:`parse_request` (structure only, raising
:class:`WireFormatError` with the JSON path), :class:`EventTranslator` (the named SSE events
``message_start`` … ``message_stop``, ``ping``, ``error`` → stream chunks), :func:`map_usage`
(``cache_read_input_tokens`` → ``cache_read_tokens``), :func:`classify_http_error`.

Mapping of the log's blocks: reasoning ↔ ``thinking`` blocks (sent back on every turn: the
endpoint answers 400 when thinking is missing on a later tool turn), tool calls ↔ ``tool_use``
(arguments parsed into the ``input`` object), tool results ↔ ``tool_result`` blocks at the head
of a user message. A system-role message in the history becomes a user message (the format has
no system role inside ``messages``).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._header import ToolsPlaceholder
from .._json import FrozenDict, FrozenList, dumps_canonical, loads_json
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
from ._models import MODELS, resolve_model, thinking_enabled
from ._sse import SseEvent
from ._translate import TranslatorBase, terminal_finish, translate_all, translate_async
from ._wire import WireFormatError
from .deepseek import NO_OUTPUT, _thinking, _unsupported, sendable_prefix

__all__ = [
    "ANTHROPIC_VERSION",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "AnthropicMessage",
    "AnthropicProvider",
    "AnthropicRequest",
    "EventTranslator",
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

DEFAULT_BASE_URL = "https://api.deepseek.com/anthropic"
BASE_URL_ENV = "DEEPSEEK_ANTHROPIC_BASE_URL"
ANTHROPIC_VERSION = "2023-06-01"
"""Sent as ``anthropic-version`` (DeepSeek ignores it; Anthropic-format clients always send it)."""
DEFAULT_MAX_TOKENS = 8192
"""``max_tokens`` (required by the format) for a model outside :data:`deepseek.MODELS` when the
request sets none."""

# --------------------------------------------------------------------------------------------
# Serialization


def _max_tokens(
    options: GenerateOptions, thinking: dict[str, str] | None, effort: str | None
) -> int:
    """The request's ``max_tokens``, else the server's own default for the model (wire.md §1.3)."""
    if options.max_tokens is not None:
        return options.max_tokens
    model = MODELS.get(options.model)  # a Claude name gets the format's own default
    if model is None:
        return DEFAULT_MAX_TOKENS
    if not thinking_enabled(model, thinking_type=None if thinking is None else thinking["type"]):
        return model.default_output_tokens
    if effort == "max":
        return model.default_output_tokens_max_effort
    return model.default_output_tokens_thinking


def _check_block(block: ContentBlock, where: str) -> None:
    if isinstance(block, OpaqueBlock) and block.type == "image":
        raise _unsupported(
            "UNSUPPORTED_CONTENT", f"{where} holds an image; this adapter sends text only"
        )


def _tool_input(arguments: str) -> Any:
    """The ``input`` object of a tool call from its raw arguments (``{}`` when not an object)."""
    try:
        value = loads_json(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _result_text(result: ToolResultBlock, where: str) -> str:
    parts: list[str] = []
    for block in result.content:
        _check_block(block, where)
        if isinstance(block, TextBlock):
            parts.append(block.text)
    return "".join(parts) or NO_OUTPUT


def serialize_message(message: Message, *, thinking: bool = True) -> dict[str, Any]:
    """The wire message of one log message (always an array of content blocks).

    - assistant: its blocks in order: reasoning → ``thinking``, non-empty text → ``text``, tool
      call → ``tool_use`` (``input`` parsed from the raw arguments; not an object → ``{}``). A
      tool-use turn without reasoning opens with an empty ``{"type": "thinking", "thinking":
      ""}`` when ``thinking`` is on: the endpoint refuses a later tool turn without a thinking
      block in thinking mode (wire.md §3), as the chat endpoint needs ``reasoning_content: ""``;
    - user: ``tool_result`` blocks first (they answer the previous assistant turn), then the
      non-empty text blocks;
    - system (in history): a user message with its text.

    A message that would be empty carries one empty text block. An image raises
    ``ProviderError`` (``UNSUPPORTED_CONTENT``); plugin blocks are skipped.
    """
    where = f"message {message.id}"
    content: list[dict[str, Any]] = []
    if message.role == "assistant":
        if (
            thinking
            and any(isinstance(b, ToolCallBlock) for b in message.content)
            and not any(isinstance(b, ReasoningBlock) for b in message.content)
        ):
            content.append({"type": "thinking", "thinking": ""})
        for block in message.content:
            _check_block(block, where)
            if isinstance(block, ReasoningBlock):
                content.append({"type": "thinking", "thinking": block.text})
            elif isinstance(block, TextBlock) and block.text:
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolCallBlock):
                content.append(
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "input": _tool_input(block.arguments),
                    }
                )
    else:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": block.tool_call_id,
                    "content": _result_text(block, f"{where} tool result {block.tool_call_id}"),
                }
                if block.is_error:
                    result["is_error"] = True
                content.append(result)
        for block in message.content:
            _check_block(block, where)
            if isinstance(block, TextBlock) and block.text:
                content.append({"type": "text", "text": block.text})
    if not content:
        content.append({"type": "text", "text": ""})
    role = "assistant" if message.role == "assistant" else "user"
    return {"role": role, "content": content}


def serialize_request(options: GenerateOptions, *, stream: bool = True) -> dict[str, Any]:
    """The Messages API body for ``options``.

    Keys in this order, optional ones only when set: ``model``, ``max_tokens`` (the request's,
    else the model's server default), ``system``, ``messages``, ``tools`` (``{name,
    description, input_schema}``), ``thinking``, ``output_config`` (``{effort}``),
    ``temperature``, ``stop_sequences``, ``stream``.
    """
    thinking, effort = _thinking(options)
    body: dict[str, Any] = {
        "model": options.model,
        "max_tokens": _max_tokens(options, thinking, effort),
    }
    if options.system:
        body["system"] = options.system
    thinking_on = thinking is None or thinking["type"] == "enabled"
    body["messages"] = [
        serialize_message(m, thinking=thinking_on)
        for m in (*sendable_prefix(options), *options.messages)
    ]
    if isinstance(options.tools, ToolsPlaceholder):
        raise _unsupported(
            "INVALID_REQUEST",
            f"the request's tools are {options.tools.describe()}; a provider needs the real schemas",
        )
    if options.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in options.tools
        ]
    if thinking is not None:
        body["thinking"] = thinking
    if effort is not None:
        body["output_config"] = {"effort": effort}
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.stop is not None:
        body["stop_sequences"] = list(options.stop)
    if stream:
        body["stream"] = True
    return body


def encode_request(options: GenerateOptions, *, stream: bool = True) -> bytes:
    """:func:`serialize_request` as compact UTF-8 JSON: the exact bytes sent."""
    return dumps_canonical(serialize_request(options, stream=stream)).encode("utf-8")


# --------------------------------------------------------------------------------------------
# Parsing (structure only)

_USER_BLOCKS = ("text", "image", "document", "search_result", "tool_result")
_ASSISTANT_BLOCKS = (
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicMessage:
    """One parsed wire message; ``content`` is a string or an array of checked (frozen) blocks."""

    role: str
    """``user`` or ``assistant``."""
    content: str | FrozenList
    extra: FrozenDict = field(default_factory=FrozenDict)

    @property
    def blocks(self) -> tuple[FrozenDict, ...]:
        """The content as blocks (a string is one text block)."""
        if isinstance(self.content, str):
            return (FrozenDict({"type": "text", "text": self.content}),)
        return tuple(self.content)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicRequest:
    """A parsed Messages API body (wire.md §3, §4). ``None``: absent or null."""

    model: str
    max_tokens: int
    messages: tuple[AnthropicMessage, ...]
    system: str | FrozenList | None = None
    tools: tuple[FrozenDict, ...] | None = None
    tool_choice: FrozenDict | None = None
    thinking: FrozenDict | None = None
    output_config: FrozenDict | None = None
    reasoning: FrozenDict | None = None
    """``{"effort": …}``: one copy of the V4.1 docs shows this toggle; accepted as well."""
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: tuple[str, ...] | None = None
    metadata: FrozenDict | None = None
    stream: bool | None = None
    extra: FrozenDict = field(default_factory=FrozenDict)

    @property
    def thinking_type(self) -> str | None:
        """``enabled``, ``disabled``, ``adaptive``, or ``None`` when the request does not say."""
        return None if self.thinking is None else str(self.thinking["type"])

    @property
    def thinking_on(self) -> bool:
        """Whether this request runs in thinking mode: :func:`~dsh_core.providers.thinking_enabled`
        for the model serving it on this endpoint (Claude names mapped), ``thinking.type`` and
        ``reasoning.effort``."""
        effort = None if self.reasoning is None else self.reasoning.get("effort")
        return thinking_enabled(
            resolve_model(self.model, endpoint="anthropic"),
            thinking_type=self.thinking_type,
            effort=effort if isinstance(effort, str) else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The body again; for a body made by :func:`serialize_request`, the same body."""
        out: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.system is not None:
            out["system"] = self.system
        out["messages"] = [m.to_json() for m in self.messages]
        tail: dict[str, Any] = {
            "tools": None if self.tools is None else list(self.tools),
            "tool_choice": self.tool_choice,
            "thinking": self.thinking,
            "output_config": self.output_config,
            "reasoning": self.reasoning,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "stop_sequences": None if self.stop_sequences is None else list(self.stop_sequences),
            "metadata": self.metadata,
            "stream": self.stream,
        }
        out.update((k, v) for k, v in tail.items() if v is not None)
        out.update(self.extra)
        return out

    def encode(self) -> bytes:
        return dumps_canonical(self.to_json()).encode("utf-8")


def _block(value: object, param: str, allowed: tuple[str, ...]) -> None:
    obj = w.need_object(value, param)
    kind = w.need_variant(w.required(obj, "type", param), w.child(param, "type"), allowed)

    def string(key: str) -> None:
        w.need_str(w.required(obj, key, param), w.child(param, key))

    if kind == "text":
        string("text")
    elif kind == "thinking":
        string("thinking")
        signature = obj.get("signature")
        if signature is not None:
            w.need_str(signature, w.child(param, "signature"))
    elif kind == "redacted_thinking":
        string("data")
    elif kind in ("tool_use", "server_tool_use"):
        string("id")
        string("name")
        w.need_object(w.required(obj, "input", param), w.child(param, "input"))
    elif kind == "tool_result":
        string("tool_use_id")
        content = obj.get("content")
        if content is not None and not isinstance(content, str):
            where = w.child(param, "content")
            for i, inner in enumerate(w.need_list(content, where)):
                _block(inner, w.child(where, i), ("text", "image", "document", "search_result"))
        is_error = obj.get("is_error")
        if is_error is not None:
            w.need_bool(is_error, w.child(param, "is_error"))
    elif kind in ("image", "document"):
        w.need_object(w.required(obj, "source", param), w.child(param, "source"))
    elif kind == "web_search_tool_result":
        string("tool_use_id")


def _message(value: object, param: str) -> AnthropicMessage:
    obj = w.need_object(value, param)
    role = w.need_variant(
        w.required(obj, "role", param), w.child(param, "role"), ("user", "assistant")
    )
    raw = w.required(obj, "content", param)
    where = w.child(param, "content")
    content: str | FrozenList
    if isinstance(raw, str):
        content = raw
    else:
        allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
        for i, block in enumerate(w.need_list(raw, where)):
            _block(block, w.child(where, i), allowed)
        content = w.frozen(raw, where)
    return AnthropicMessage(
        role=role, content=content, extra=w.extras(obj, ("role", "content"), param)
    )


def _tools(value: object, param: str) -> tuple[FrozenDict, ...]:
    """Tools: the name rules apply to custom tools (a server tool's name is DeepSeek's own)."""
    tools: list[FrozenDict] = []
    items = w.need_list(value, param)
    w.check_tool_count(len(items), param)
    custom: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        where = w.child(param, i)
        obj = w.need_object(item, where)
        name_where = w.child(where, "name")
        name = w.need_str(w.required(obj, "name", where), name_where)
        if obj.get("type") in (None, "custom"):
            custom.append((name, name_where))
    w.check_tool_names(custom)
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = w.child(param, i)
        obj = item
        name_where = w.child(where, "name")
        name = obj["name"]
        kind = obj.get("type")
        if kind is None or kind == "custom":
            description = obj.get("description")
            if description is not None:
                w.need_str(description, w.child(where, "description"))
            w.need_object(w.required(obj, "input_schema", where), w.child(where, "input_schema"))
        else:
            w.need_str(kind, w.child(where, "type"))  # a server tool, e.g. web_search_20250305
        if name in seen:
            w.fail(name_where, f"duplicate tool name {name!r}", code="duplicate_name", value=name)
        seen.add(name)
        tools.append(w.frozen(obj, where))
    return tuple(tools)


def _object_with(obj: Mapping[str, Any], key: str, strings: tuple[str, ...]) -> FrozenDict | None:
    """An optional object field whose listed members, when present, must be strings."""
    value = obj.get(key)
    if value is None:
        return None
    inner = w.need_object(value, key)
    for member in strings:
        if inner.get(member) is not None:
            w.need_str(inner[member], w.child(key, member))
    result: FrozenDict = w.frozen(inner, key)
    return result


_REQUEST_FIELDS = (
    "model",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "reasoning",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "stream",
)


def parse_request(body: Mapping[str, Any] | bytes | str) -> AnthropicRequest:
    """Check a Messages API body's structure and return it as an :class:`AnthropicRequest`.

    Raises :class:`WireFormatError` naming the JSON path of the first offending field. Fields
    the endpoint ignores (``container``, ``service_tier``, …) are kept in ``extra``.
    """
    obj = w.decode_body(body)
    model = w.need_str(w.required(obj, "model", ""), "model")
    max_tokens = w.need_int(w.required(obj, "max_tokens", ""), "max_tokens", minimum=1)
    raw_messages = w.need_list(w.required(obj, "messages", ""), "messages")
    if not raw_messages:
        w.fail("messages", "must contain at least one message", code="empty")
    messages = tuple(_message(m, w.child("messages", i)) for i, m in enumerate(raw_messages))
    system = obj.get("system")
    if system is not None and not isinstance(system, str):
        for i, block in enumerate(w.need_list(system, "system")):
            _block(block, w.child("system", i), ("text",))
        system = w.frozen(system, "system")
    tool_choice = obj.get("tool_choice")
    if tool_choice is not None:
        choice = w.need_object(tool_choice, "tool_choice")
        kind = w.need_variant(
            w.required(choice, "type", "tool_choice"),
            "tool_choice.type",
            ("auto", "any", "tool", "none"),
        )
        if kind == "tool":
            w.need_str(w.required(choice, "name", "tool_choice"), "tool_choice.name")
        tool_choice = w.frozen(choice, "tool_choice")
    thinking = obj.get("thinking")
    if thinking is not None:
        thinking_obj = w.need_object(thinking, "thinking")
        w.need_variant(
            w.required(thinking_obj, "type", "thinking"),
            "thinking.type",
            ("enabled", "disabled", "adaptive"),
        )
        budget = thinking_obj.get("budget_tokens")
        if budget is not None:
            w.need_int(budget, "thinking.budget_tokens", minimum=0)
        thinking = w.frozen(thinking_obj, "thinking")
    stop = obj.get("stop_sequences")
    stop_sequences = (
        None
        if stop is None
        else tuple(
            w.need_str(s, w.child("stop_sequences", i))
            for i, s in enumerate(w.need_list(stop, "stop_sequences"))
        )
    )

    def number(key: str, low: float, high: float) -> float | None:
        value = obj.get(key)
        return None if value is None else w.need_number(value, key, low=low, high=high)

    top_k = obj.get("top_k")
    stream = obj.get("stream")
    return AnthropicRequest(
        model=model,
        max_tokens=max_tokens,
        messages=messages,
        system=system,
        tools=None if obj.get("tools") is None else _tools(obj["tools"], "tools"),
        tool_choice=tool_choice,
        thinking=thinking,
        output_config=_object_with(obj, "output_config", ("effort",)),
        reasoning=_object_with(obj, "reasoning", ("effort",)),
        temperature=number("temperature", 0, 2),
        top_p=number("top_p", 0, 1),
        top_k=None if top_k is None else w.need_int(top_k, "top_k", minimum=0),
        stop_sequences=stop_sequences,
        metadata=_object_with(obj, "metadata", ("user_id",)),
        stream=None if stream is None else w.need_bool(stream, "stream"),
        extra=w.extras(obj, _REQUEST_FIELDS, ""),
    )


# --------------------------------------------------------------------------------------------
# Response side


def _count(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return None if value is None else w.need_int(value, w.child("usage", key), minimum=0)


def map_usage(usage: Mapping[str, Any]) -> TokenUsage:
    """Anthropic-format usage → :class:`TokenUsage`.

    ``input_tokens`` (the uncached remainder) → ``input_tokens``; ``cache_read_input_tokens`` →
    ``cache_read_tokens``; ``cache_creation_input_tokens`` → ``cache_write_tokens`` (each kept
    when sent, ``0`` included); ``output_tokens`` → ``output_tokens``. The format reports no
    reasoning-token count.
    """
    usage = w.need_object(usage, "usage")
    return TokenUsage(
        input_tokens=_count(usage, "input_tokens") or 0,
        output_tokens=_count(usage, "output_tokens") or 0,
        cache_read_tokens=_count(usage, "cache_read_input_tokens"),
        cache_write_tokens=_count(usage, "cache_creation_input_tokens"),
    )


def classify_http_error(
    status: int,
    body: bytes | str | Mapping[str, Any] | None,
    headers: Mapping[str, str],
    *,
    now: float | None = None,
) -> LlmFailure:
    """A non-2xx response of the Anthropic-format endpoint → :class:`LlmFailure` (529
    ``overloaded_error`` is ``SERVER``, retryable; the ``request-id`` header is the request id)."""
    return _classify(status, body, headers, api="DeepSeek Anthropic API", now=now)


_ERROR_CODES: Mapping[str, str] = MappingProxyType(
    {
        "api_error": "SERVER",
        "overloaded_error": "SERVER",
        "timeout_error": "TIMEOUT",
        "rate_limit_error": "RATE_LIMIT",
        "authentication_error": "AUTH",
        "permission_error": "AUTH",
        "billing_error": "QUOTA",
        "invalid_request_error": "INVALID_REQUEST",
        "request_too_large": "INVALID_REQUEST",
    }
)
_CONTEXT = re.compile(r"prompt is too long|context window|context_length_exceeded", re.IGNORECASE)


def _stream_error(payload: Mapping[str, Any]) -> LlmFailure:
    error = payload.get("error")
    error = error if isinstance(error, Mapping) else {}
    kind = error.get("type")
    kind = kind if isinstance(kind, str) else "unknown_error"
    message = error.get("message")
    message = message if isinstance(message, str) and message else f"stream error: {kind}"
    code = _ERROR_CODES.get(kind, kind.upper())
    if code == "INVALID_REQUEST" and _CONTEXT.search(message):
        code = "CONTEXT_WINDOW_EXCEEDED"
    request_id = payload.get("request_id")
    return failure(code, message, request_id=request_id if isinstance(request_id, str) else None)


def _finish_reason(reason: str) -> FinishReason:
    if reason in ("end_turn", "stop_sequence"):
        return FinishReason(kind="stop")
    if reason == "tool_use":
        return FinishReason(kind="tool-calls")
    if reason in ("max_tokens", "model_context_window_exceeded"):
        return FinishReason(kind="max-tokens")
    return FinishReason(kind="error", failure=failure(reason.upper(), f"model stopped: {reason}"))


_BLOCK_KINDS: Mapping[str, str] = MappingProxyType(
    {"text": "text", "thinking": "reasoning", "tool_use": "tool-call"}
)
_DELTA_KINDS: Mapping[str, str] = MappingProxyType(
    {"text_delta": "text", "thinking_delta": "reasoning", "input_json_delta": "tool-call"}
)


@dataclass(slots=True)
class _Block:
    kind: str | None
    """``text``, ``reasoning``, ``tool-call``, or ``None`` for a block this adapter skips."""
    index: int | None = None
    """The stream-chunk block index, assigned when the block opens (lazily for text/thinking)."""
    parts: list[str] = field(default_factory=list)
    id: str = ""
    name: str | None = None
    start_input: Any = None
    closed: bool = False


class EventTranslator(TranslatorBase):
    """Turns the Messages API event stream into stream chunks.

    ``message_start`` carries the input-side usage; ``content_block_start`` / ``_delta`` /
    ``_stop`` build blocks (text and thinking blocks open at their first non-empty text, so an
    empty one produces nothing; a ``tool_use`` opens at once and announces its id and name;
    ``signature_delta`` and ``citations_delta`` are not part of the core's blocks); each block
    ends at its ``content_block_stop``. ``message_delta`` carries the stop reason and cumulative
    usage (merged field by field over ``message_start``'s, last wins); ``message_stop`` emits
    the usage and the finish (a ``stop`` with no blocks is ``EMPTY_RESPONSE``). An ``error``
    event ends the stream with an error finish; ``ping`` and unknown events are ignored.
    """

    def __init__(self) -> None:
        self._next = 0
        self._blocks: dict[int, _Block] = {}
        self._opened = 0
        self._usage: dict[str, Any] = {}
        self._finish: FinishReason | None = None
        self.message_id: str | None = None
        """The ``message_start`` message id."""
        self.done = False

    def _open(self, block: _Block, out: list[StreamChunk]) -> int:
        if block.index is None:
            block.index = self._next
            self._next += 1
            self._opened += 1
            assert block.kind is not None
            out.append(BlockStart(index=block.index, block_type=block.kind))
        return block.index

    def _append(self, block: _Block, text: str, out: list[StreamChunk]) -> None:
        if block.kind == "tool-call":
            index = self._open(block, out)
            block.parts.append(text)
            out.append(
                ToolCallDelta(index=index, id=block.id, name=block.name, arguments_delta=text)
            )
        elif text:
            index = self._open(block, out)
            block.parts.append(text)
            if block.kind == "text":
                out.append(TextDelta(index=index, text=text))
            else:
                out.append(ReasoningDelta(index=index, text=text))

    def _close(self, block: _Block, out: list[StreamChunk]) -> None:
        if block.closed:
            return
        block.closed = True
        if block.index is None:
            return
        text = "".join(block.parts)
        final: ContentBlock
        if block.kind == "text":
            final = TextBlock(text=text)
        elif block.kind == "reasoning":
            final = ReasoningBlock(text=text)
        else:
            if not text:
                text = dumps_canonical(block.start_input or {})
                out.append(
                    ToolCallDelta(
                        index=block.index, id=block.id, name=block.name, arguments_delta=text
                    )
                )
            final = ToolCallBlock(
                id=block.id or f"call-{block.index}", name=block.name or "", arguments=text
            )
        out.append(BlockEnd(index=block.index, block=final))

    def _block_at(self, payload: Mapping[str, Any], kind: str) -> tuple[_Block | None, int]:
        wire_index = w.need_int(w.required(payload, "index", ""), "index", minimum=0)
        block = self._blocks.get(wire_index)
        if block is None and kind != "content_block_start":
            raise WireFormatError(
                f"{kind} for content block {wire_index}, which was never started",
                param="index",
                code="invalid_stream",
            )
        return block, wire_index

    def feed(self, event: str, payload: Mapping[str, Any]) -> list[StreamChunk]:
        """The chunks one named event produces. Raises :class:`WireFormatError` on bad shapes."""
        if self.done:
            return []
        payload = w.need_object(payload, "")
        out: list[StreamChunk] = []
        if event == "message_start":
            message = w.need_object(w.required(payload, "message", ""), "message")
            message_id = message.get("id")
            self.message_id = message_id if isinstance(message_id, str) else None
            usage = message.get("usage")
            if usage is not None:
                self._merge_usage(usage)
        elif event == "content_block_start":
            block, wire_index = self._block_at(payload, event)
            if block is not None:
                raise WireFormatError(
                    f"content block {wire_index} started twice",
                    param="index",
                    code="invalid_stream",
                )
            start = w.need_object(w.required(payload, "content_block", ""), "content_block")
            kind = w.need_str(w.required(start, "type", "content_block"), "content_block.type")
            block = self._blocks[wire_index] = _Block(kind=_BLOCK_KINDS.get(kind))
            if block.kind == "tool-call":
                block.id = w.need_str(w.required(start, "id", "content_block"), "content_block.id")
                block.name = w.need_str(
                    w.required(start, "name", "content_block"), "content_block.name"
                )
                block.start_input = start.get("input")
                index = self._open(block, out)
                out.append(
                    ToolCallDelta(index=index, id=block.id, name=block.name, arguments_delta="")
                )
            elif block.kind == "text":
                self._append(block, w.need_str(start.get("text", ""), "content_block.text"), out)
            elif block.kind == "reasoning":
                self._append(
                    block, w.need_str(start.get("thinking", ""), "content_block.thinking"), out
                )
        elif event == "content_block_delta":
            block, wire_index = self._block_at(payload, event)
            assert block is not None
            delta = w.need_object(w.required(payload, "delta", ""), "delta")
            kind = w.need_str(w.required(delta, "type", "delta"), "delta.type")
            target = _DELTA_KINDS.get(kind)
            if target is not None and block.kind is not None and not block.closed:
                if target != block.kind:
                    raise WireFormatError(
                        f"{kind} for content block {wire_index}, a {block.kind} block",
                        param="delta.type",
                        code="invalid_stream",
                    )
                key = {"text": "text", "reasoning": "thinking", "tool-call": "partial_json"}[target]
                self._append(
                    block, w.need_str(w.required(delta, key, "delta"), f"delta.{key}"), out
                )
        elif event == "content_block_stop":
            block, _ = self._block_at(payload, event)
            assert block is not None
            self._close(block, out)
        elif event == "message_delta":
            message_delta = payload.get("delta")
            if message_delta is not None:
                reason = w.need_object(message_delta, "delta").get("stop_reason")
                if reason is not None:
                    self._finish = _finish_reason(w.need_str(reason, "delta.stop_reason"))
            usage = payload.get("usage")
            if usage is not None:
                self._merge_usage(usage)
        elif event == "message_stop":
            out.extend(self.finish())
        elif event == "error":
            out.extend(self.fail(_stream_error(payload)))
        return out

    def _merge_usage(self, usage: object) -> None:
        for key, value in w.need_object(usage, "usage").items():
            if value is not None:
                self._usage[key] = value
        map_usage(self._usage)  # refuse bad counts when they arrive, not at message_stop

    def finish(self) -> list[StreamChunk]:
        """The terminal chunks at ``message_stop``: ends of blocks still open, usage, finish."""
        if self.done:
            return []
        self.done = True
        out: list[StreamChunk] = []
        for block in self._blocks.values():
            self._close(block, out)
        if self._usage:
            out.append(UsageChunk(usage=map_usage(self._usage)))
        out.append(terminal_finish(self._finish, produced=bool(self._opened)))
        return out

    def handle_event(self, event: SseEvent) -> tuple[list[StreamChunk], bool]:
        """One SSE event → ``(chunks, done)``. The event name (or the payload's ``type`` when the
        event is unnamed) selects the handler; the data must be a JSON object."""
        if self.done:
            return [], True
        try:
            payload = json.loads(event.data)
        except ValueError:
            raise WireFormatError(
                f"event data is not JSON: {event.data[:120]!r}", param="data", code="invalid_json"
            ) from None
        payload = w.need_object(payload, "data")
        name = event.event
        if name == "message":
            kind = payload.get("type")
            name = kind if isinstance(kind, str) else name
        chunks = self.feed(name, payload)
        return chunks, self.done


def _closed_without_stop() -> LlmFailure:
    return failure(
        "STREAM_CLOSED",
        "DeepSeek Anthropic stream ended before message_stop; the answer is incomplete",
    )


def translate_events(events: Iterable[SseEvent]) -> list[StreamChunk]:
    """All chunks for a recorded event sequence.

    Ends with exactly one ``Finish``: the stream's own, ``MALFORMED_RESPONSE`` for a bad payload,
    or ``STREAM_CLOSED`` when the events stop before ``message_stop``.
    """
    return translate_all(EventTranslator(), events, _closed_without_stop())


def translate_stream(
    events: AsyncIterable[SseEvent] | Iterable[SseEvent],
) -> AsyncIterator[StreamChunk]:
    """:func:`translate_events` for a live event source, chunk by chunk."""
    return translate_async(EventTranslator(), events, _closed_without_stop())


class AnthropicProvider(SseProvider):
    """Streams a call to DeepSeek's Anthropic-format endpoint (``POST {base_url}/v1/messages``).

    Same contract as :class:`~dsh_core.providers.deepseek.DeepSeekProvider`: one request per
    call, one terminal ``Finish``, failures and cancellation as finishes, the key (``api_key``
    or ``DEEPSEEK_API_KEY``, sent as ``x-api-key``) never shown. Base URL: ``base_url``, else
    ``DEEPSEEK_ANTHROPIC_BASE_URL``, else ``https://api.deepseek.com/anthropic``.
    """

    api = "DeepSeek Anthropic API"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = BASE_URL_ENV
    path = "/v1/messages"

    def request_headers(self, options: GenerateOptions, key: Secret) -> dict[str, str]:
        headers = {
            "x-api-key": key.reveal(),
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        headers.update(self._extra_headers(options))
        return headers

    def encode(self, options: GenerateOptions) -> bytes:
        return encode_request(options)

    def new_handler(self) -> EventHandler:
        return EventTranslator().handle_event
