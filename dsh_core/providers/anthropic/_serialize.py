"""Messages API serialization: ``GenerateOptions`` → request body (pure, byte-stable).

Mapping of the log's blocks: reasoning ↔ ``thinking`` blocks (sent back on every turn: the
endpoint answers 400 when thinking is missing on a later tool turn), tool calls ↔ ``tool_use``
(arguments parsed into the ``input`` object, :func:`tool_input`), tool results ↔ ``tool_result``
blocks at the head of a user message. A system-role message in the history becomes a user message
(the format has no system role inside ``messages``). Facts: docs/wire.md §3, §4.
"""

from __future__ import annotations

from typing import Any

from ..._json_text import dumps_canonical, loads_json
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
from .._models import MODELS, thinking_enabled
from .._options import (
    NO_OUTPUT,
    options_thinking,
    sendable_prefix,
    sendable_tools,
    unsupported,
)

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "encode_request",
    "serialize_message",
    "serialize_request",
    "tool_input",
]

DEFAULT_MAX_TOKENS = 8192
"""Sent as ``anthropic-version`` (DeepSeek ignores it; Anthropic-format clients always send it)."""
DEFAULT_MAX_TOKENS = 8192
"""``max_tokens`` (required by the format) when the request sets none and the model is not in
:data:`dsh_core.providers.MODELS` (a Claude name, an unknown id)."""


def _max_tokens(
    options: GenerateOptions, thinking: dict[str, str] | None, effort: str | None
) -> int:
    """The request's ``max_tokens``, else the model's server default (docs/wire.md §1.3)."""
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
        raise unsupported(
            "UNSUPPORTED_CONTENT", f"{where} holds an image; this adapter sends text only"
        )


def tool_input(arguments: str) -> dict[str, Any]:
    """The ``tool_use.input`` object of a call's raw arguments: the parsed JSON object, or ``{}``
    when they are empty, blank, not JSON or not an object (the format's ``input`` is always an
    object). The mock renders its answers' ``tool_use`` blocks with this same function."""
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
      block in thinking mode (docs/wire.md §3), as the chat endpoint needs ``reasoning_content: ""``;
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
                        "input": tool_input(block.arguments),
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
    thinking, effort = options_thinking(options)
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
    tools = sendable_tools(options)
    if tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
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
