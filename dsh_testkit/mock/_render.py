"""Response rendering: one resolved answer → the API's JSON, chunk by chunk.

A :class:`Completion` is an answer with everything decided (ids, fragments, usage). This module
renders it as DeepSeek's streaming ``chat.completion.chunk`` payloads and non-streaming
``chat.completion`` body (docs/wire.md §1.5, §1.8: the V4 sequence, usage on the last content chunk,
never an extra empty-``choices`` chunk), and as the Anthropic-format message and event sequence of
DeepSeek's ``/anthropic`` endpoint (docs/wire.md §3, §4.1). Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from dsh_core.providers._sse import SSE_DONE as SSE_EVENT_DONE
from dsh_core.providers._sse import SseEvent
from dsh_core.providers.anthropic import tool_input

from ..prompt._cache_values import CacheUsage, anthropic_usage, deepseek_usage

__all__ = [
    "KEEP_ALIVE",
    "SSE_DONE",
    "Completion",
    "CompletionToolCall",
    "WireUsage",
    "anthropic_events",
    "anthropic_message",
    "anthropic_stop_reason",
    "chat_chunks",
    "chat_completion",
    "split_evenly",
    "split_text",
    "sse_data",
    "sse_event",
]

SSE_DONE: Final = SSE_EVENT_DONE.encode()
"""``data: [DONE]``: the end of a chat-completions stream."""
KEEP_ALIVE: Final = SseEvent.comment("keep-alive")
"""The comment DeepSeek sends while a request is queued."""


def sse_data(payload: object) -> bytes:
    """One ``data:`` event (DeepSeek uses no ``event:`` names), encoded by the providers' own
    :meth:`~dsh_core.providers._sse.SseEvent.of_json`."""
    return SseEvent.of_json(payload).encode()


def sse_event(name: str, payload: object) -> bytes:
    """One named event, as the Anthropic format sends them."""
    return SseEvent.of_json(payload, event=name).encode()


def split_text(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` code points (none for the empty string)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def split_evenly(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` nearly equal pieces by code points (fewer if it is shorter)."""
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class WireUsage:
    """Token counts of one answer, before any endpoint renders them."""

    prompt_tokens: int
    completion_tokens: int
    cache_hit_tokens: int = 0
    """Prompt tokens served from the prefix cache (≤ ``prompt_tokens``)."""
    reasoning_tokens: int | None = None
    """Reported (as ``completion_tokens_details``) only in thinking mode."""

    @property
    def cache_miss_tokens(self) -> int:
        return self.prompt_tokens - self.cache_hit_tokens

    @property
    def cache(self) -> CacheUsage:
        """The prompt side as the cache simulator reports it."""
        return CacheUsage(
            prompt_tokens=self.prompt_tokens,
            hit_tokens=self.cache_hit_tokens,
            miss_tokens=self.cache_miss_tokens,
        )

    def deepseek_json(self) -> dict[str, Any]:
        """DeepSeek's usage object, in the key order of real V4 captures (docs/wire.md §1.7)."""
        return deepseek_usage(
            self.cache,
            completion_tokens=self.completion_tokens,
            reasoning_tokens=self.reasoning_tokens,
        )

    def anthropic_json(self, *, output_tokens: int | None = None) -> dict[str, Any]:
        """The Anthropic-format usage: cache hits as ``cache_read_input_tokens``, no writes."""
        return dict(
            anthropic_usage(
                self.cache,
                output_tokens=self.completion_tokens if output_tokens is None else output_tokens,
            )
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionToolCall:
    """A tool call with its id decided and its argument fragments cut."""

    id: str
    name: str
    arguments: str
    fragments: tuple[str, ...]
    """The ``arguments`` deltas of a stream; their concatenation is ``arguments``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One answer with everything decided; rendering it is pure."""

    id: str
    created: int
    model: str
    """The model id as the client sent it (the API echoes it)."""
    thinking: bool
    """Whether the request ran in thinking mode (shapes the deltas)."""
    usage: WireUsage
    text: str = ""
    reasoning: str | None = None
    tool_calls: tuple[CompletionToolCall, ...] = ()
    finish_reason: str = "stop"
    chunk_size: int = 8
    system_fingerprint: str = "fp_mock_dsh_testkit"


def _chunk(c: Completion, delta: dict[str, Any], *, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": c.id,
        "object": "chat.completion.chunk",
        "created": c.created,
        "model": c.model,
        "system_fingerprint": c.system_fingerprint,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def chat_chunks(c: Completion, *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` payloads of a stream, in order (``[DONE]`` not included).

    The observed V4 sequence: a role chunk; reasoning deltas; content deltas; per tool call a
    first delta with id, name and ``arguments: ""`` then argument fragments; a last chunk with an
    empty delta, the ``finish_reason`` and the whole-request usage. With ``include_usage`` every
    other chunk carries ``"usage": null``; without it they have no ``usage`` key.
    """
    chunks: list[dict[str, Any]] = []
    if c.thinking:
        chunks.append(_chunk(c, {"role": "assistant", "content": None, "reasoning_content": ""}))
    else:
        chunks.append(_chunk(c, {"role": "assistant", "content": ""}))
    for piece in split_text(c.reasoning or "", c.chunk_size):
        chunks.append(_chunk(c, {"content": None, "reasoning_content": piece}))
    for piece in split_text(c.text, c.chunk_size):
        delta: dict[str, Any] = {"content": piece}
        if c.thinking:
            delta["reasoning_content"] = None
        chunks.append(_chunk(c, delta))
    for index, call in enumerate(c.tool_calls):
        head = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunks.append(_chunk(c, {"tool_calls": [head]}))
        for fragment in call.fragments:
            chunks.append(
                _chunk(c, {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            )
    last: dict[str, Any] = {"content": ""}
    if c.thinking:
        last["reasoning_content"] = None
    chunks.append(_chunk(c, last, finish=c.finish_reason))
    if include_usage:
        for chunk in chunks:
            chunk["usage"] = None
    chunks[-1]["usage"] = c.usage.deepseek_json()
    return chunks


def chat_completion(c: Completion) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` body (docs/wire.md §1.5)."""
    message: dict[str, Any] = {"role": "assistant", "content": c.text}
    if c.thinking or c.reasoning is not None:
        message["reasoning_content"] = c.reasoning or ""
    if c.tool_calls:
        message["tool_calls"] = [
            {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(c.tool_calls)
        ]
    return {
        "id": c.id,
        "object": "chat.completion",
        "created": c.created,
        "model": c.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": c.finish_reason}
        ],
        "usage": c.usage.deepseek_json(),
        "system_fingerprint": c.system_fingerprint,
    }


_STOP_REASONS: Final = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}


def anthropic_stop_reason(finish_reason: str) -> str:
    """The Anthropic ``stop_reason`` for a DeepSeek ``finish_reason``."""
    return _STOP_REASONS.get(finish_reason, "end_turn")


def _signature(reasoning: str) -> str:
    # DeepSeek's signatures are opaque; a digest keeps them deterministic and tied to the text.
    return hashlib.sha256(reasoning.encode("utf-8")).hexdigest()


def _anthropic_blocks(c: Completion) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if c.reasoning is not None:
        blocks.append(
            {"type": "thinking", "thinking": c.reasoning, "signature": _signature(c.reasoning)}
        )
    if c.text:
        blocks.append({"type": "text", "text": c.text})
    for call in c.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(call.arguments),
            }
        )
    return blocks


def anthropic_message(c: Completion) -> dict[str, Any]:
    """The non-streaming Anthropic-format message (thinking first, then text, then tool uses)."""
    return {
        "id": c.id,
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": _anthropic_blocks(c),
        "stop_reason": anthropic_stop_reason(c.finish_reason),
        "stop_sequence": None,
        "usage": c.usage.anthropic_json(),
    }


def anthropic_events(c: Completion) -> list[tuple[str, dict[str, Any]]]:
    """The Anthropic-format event sequence: ``message_start``, per block start/deltas/stop (a
    ``ping`` after the first start), ``message_delta`` with the final usage, ``message_stop``."""
    start_message = anthropic_message(c) | {
        "content": [],
        "stop_reason": None,
        "usage": c.usage.anthropic_json(output_tokens=1),
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start_message})
    ]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if c.reasoning is not None:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": p}
                for p in split_text(c.reasoning, c.chunk_size)
            ]
            + [{"type": "signature_delta", "signature": _signature(c.reasoning)}],
        )
    if c.text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in split_text(c.text, c.chunk_size)],
        )
    for call in c.tool_calls:
        block(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in ("", *call.fragments)],
        )
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": anthropic_stop_reason(c.finish_reason),
                    "stop_sequence": None,
                },
                "usage": c.usage.anthropic_json(),
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
