"""Chat Completions serialization: ``GenerateOptions`` → request body.

A pure function of the options, message by message (:func:`serialize_message`), with a fixed key
order and compact JSON, so the same options always give the same bytes and a grown log gives a
request whose bytes extend the previous one's (the prefix cache depends on it; docs/wire.md §2).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..._json_text import dumps_canonical
from ..._messages import (
    ContentBlock,
    Message,
    OpaqueBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..._request import GenerateOptions
from .._options import (
    NO_OUTPUT,
    options_thinking,
    sendable_prefix,
    sendable_tools,
    unsupported,
)

__all__ = ["encode_request", "serialize_message", "serialize_request"]


def _text_of(blocks: Iterable[ContentBlock], where: str) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, OpaqueBlock) and block.type == "image":
            raise unsupported(
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


def serialize_request(options: GenerateOptions, *, stream: bool = True) -> dict[str, Any]:
    """The Chat Completions body for ``options``.

    Keys in this order, optional ones only when set (never null): ``model``, ``messages``,
    ``stream``, ``stream_options`` (``{include_usage: true}``, streaming only), ``thinking``,
    ``reasoning_effort``, ``tools``, ``temperature``, ``max_tokens``, ``stop``. The system prompt
    comes first as a system message. Raises ``ProviderError`` (``UNSUPPORTED_REASONING_EFFORT``,
    ``UNSUPPORTED_CONTENT``, ``INVALID_REQUEST``) for options the wire cannot carry.
    """
    thinking, effort = options_thinking(options)
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
    tools = sendable_tools(options)
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
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
