"""Answers as the readers find them, brought to one shape: the assembled message and the usage.

Recordings hold an answer either as one JSON body or as the server-sent events of a stream.
Both are folded here into the assistant message a client would assemble (so the doctor can
compare it with what the client sent back next time) and the provider's usage figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from dsh_core.providers._models import Endpoint
from dsh_core.providers._sse import SseEvent, parse_events

from ._model import TraceUsage

__all__ = [
    "answer_of_events",
    "answer_of_json",
    "answer_of_text",
    "endpoint_of",
    "error_of_json",
    "error_of_text",
    "usage_of",
]


def endpoint_of(url: str | None, body: Any) -> Endpoint | None:
    """``chat`` or ``anthropic`` for a model request, ``None`` for anything else.

    The path decides when it is telling (``/chat/completions``, ``/messages``); otherwise the
    body's shape does (a ``messages`` list; a top-level ``system`` or ``max_tokens`` with
    content blocks reads as Anthropic).
    """
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        return None
    path = urlsplit(url).path if url else ""
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/messages"):
        return "anthropic"
    if "system" in body and not any(
        isinstance(m, Mapping) and m.get("role") == "system" for m in body["messages"]
    ):
        return "anthropic"
    return "chat"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(usage: Any, endpoint: Endpoint) -> TraceUsage | None:
    """The provider's usage object as :class:`TraceUsage` (``None`` if it is not one)."""
    if not isinstance(usage, Mapping):
        return None
    if endpoint == "anthropic" or "input_tokens" in usage:
        read = _int(usage.get("cache_read_input_tokens"))
        written = _int(usage.get("cache_creation_input_tokens")) or 0
        uncached = _int(usage.get("input_tokens"))
        if uncached is None:
            return None
        return TraceUsage(
            prompt_tokens=uncached + (read or 0) + written,
            hit_tokens=read,
            completion_tokens=_int(usage.get("output_tokens")),
        )
    prompt = _int(usage.get("prompt_tokens"))
    if prompt is None:
        return None
    hit = _int(usage.get("prompt_cache_hit_tokens"))
    if hit is None:
        details = usage.get("prompt_tokens_details")
        if isinstance(details, Mapping):
            hit = _int(details.get("cached_tokens"))
    return TraceUsage(
        prompt_tokens=prompt, hit_tokens=hit, completion_tokens=_int(usage.get("completion_tokens"))
    )


def answer_of_json(
    body: Any, endpoint: Endpoint
) -> tuple[Mapping[str, Any] | None, TraceUsage | None]:
    """The assistant message and usage of a non-streamed answer body."""
    if not isinstance(body, Mapping):
        return None, None
    usage = usage_of(body.get("usage"), endpoint)
    if endpoint == "anthropic":
        content = body.get("content")
        if not isinstance(content, list):
            return None, usage
        return {"role": "assistant", "content": content}, usage
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None, usage
    message = choices[0].get("message")
    return (dict(message) if isinstance(message, Mapping) else None), usage


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, the ABC check skipped for a plain dict (parsed JSON)."""
    return type(value) is dict or isinstance(value, Mapping)


class _ChatAssembler:
    """Folds chat-completion chunks into the message a client assembles.

    Every text is kept as a list of its pieces and joined once at the end, so a long answer
    streamed in many small deltas costs time linear in its length.
    """

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] | None = None
        self.calls: dict[Any, tuple[list[Any], list[str], list[str]]] = {}
        """index → ([id], name pieces, argument pieces)."""
        self.usage: TraceUsage | None = None
        self.seen = False

    def add(self, chunk: Mapping[str, Any]) -> None:
        raw_usage = chunk.get("usage")
        if raw_usage is not None:
            usage = usage_of(raw_usage, "chat")
            if usage is not None:
                self.usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            delta = choice.get("delta") if _is_mapping(choice) else None
            if not _is_mapping(delta):
                continue
            self.seen = True
            content = delta.get("content")
            if isinstance(content, str):
                self.content.append(content)
            reasoning = delta.get("reasoning_content")
            if isinstance(reasoning, str):
                if self.reasoning is None:
                    self.reasoning = []
                self.reasoning.append(reasoning)
            for call in delta.get("tool_calls") or ():
                if not _is_mapping(call):
                    continue
                at = call.get("index", len(self.calls))
                slot = self.calls.get(at)
                if slot is None:
                    slot = self.calls[at] = ([None], [], [])
                if call.get("id"):
                    slot[0][0] = call["id"]
                function = call.get("function")
                if _is_mapping(function):
                    name = function.get("name")
                    if isinstance(name, str):
                        slot[1].append(name)
                    arguments = function.get("arguments")
                    if isinstance(arguments, str):
                        slot[2].append(arguments)

    def message(self) -> dict[str, Any] | None:
        if not self.seen:
            return None
        out: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if self.reasoning is not None:
            out["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            out["tool_calls"] = [
                {
                    "id": self.calls[k][0][0],
                    "type": "function",
                    "function": {
                        "name": "".join(self.calls[k][1]),
                        "arguments": "".join(self.calls[k][2]),
                    },
                }
                for k in sorted(self.calls)
            ]
        return out


class _AnthropicAssembler:
    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.texts: dict[tuple[int, str], list[str]] = {}
        """(block index, field) → the pieces streamed into that field (joined at the end)."""
        self.partial: dict[int, list[str]] = {}
        self.input_tokens: dict[str, Any] = {}
        self.output_tokens: int | None = None

    def add(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and _is_mapping(event.get("message")):
            usage = event["message"].get("usage")
            if _is_mapping(usage):
                self.input_tokens = dict(usage)
        elif kind == "content_block_start" and _is_mapping(event.get("content_block")):
            at = int(event.get("index", len(self.blocks)))
            self.blocks[at] = dict(event["content_block"])
            for target in ("text", "thinking", "signature"):
                self.texts.pop((at, target), None)  # a restarted block starts over
        elif kind == "content_block_delta" and _is_mapping(event.get("delta")):
            at = int(event.get("index", 0))
            self.blocks.setdefault(at, {"type": "text", "text": ""})
            delta = event["delta"]
            for target in ("text", "thinking", "signature"):
                piece = delta.get(target)
                if isinstance(piece, str):
                    self.texts.setdefault((at, target), []).append(piece)
            if isinstance(delta.get("partial_json"), str):
                self.partial.setdefault(at, []).append(delta["partial_json"])
        elif kind == "message_delta" and _is_mapping(event.get("usage")):
            self.output_tokens = _int(event["usage"].get("output_tokens"))

    def result(self) -> tuple[dict[str, Any] | None, TraceUsage | None]:
        for (at, target), pieces in self.texts.items():
            block = self.blocks[at]
            block[target] = str(block.get(target, "")) + "".join(pieces)
        for at, pieces in self.partial.items():
            try:
                self.blocks[at]["input"] = json.loads("".join(pieces) or "{}")
            except ValueError:
                self.blocks[at]["input"] = "".join(pieces)
        usage = None
        if self.input_tokens:
            usage = usage_of(
                {**self.input_tokens, "output_tokens": self.output_tokens}, "anthropic"
            )
        if not self.blocks:
            return None, usage
        return {
            "role": "assistant",
            "content": [self.blocks[k] for k in sorted(self.blocks)],
        }, usage


def answer_of_events(
    events: Iterable[SseEvent], endpoint: Endpoint
) -> tuple[Mapping[str, Any] | None, TraceUsage | None]:
    """The assistant message and usage of a streamed answer, from its SSE events."""
    chat = _ChatAssembler()
    anthropic = _AnthropicAssembler()
    for event in events:
        data = event.data
        if not data or data == "[DONE]":
            continue
        try:
            payload = json.loads(data)
        except ValueError:
            continue
        if not _is_mapping(payload):
            continue
        if endpoint == "anthropic":
            anthropic.add(payload)
        else:
            chat.add(payload)
    if endpoint == "anthropic":
        return anthropic.result()
    return chat.message(), chat.usage


def answer_of_text(
    text: str, endpoint: Endpoint, *, event_stream: bool | None = None
) -> tuple[Mapping[str, Any] | None, TraceUsage | None]:
    """An answer body given as text: SSE when it says so (or looks like it), JSON otherwise.

    A stream is read by the core's SSE parser; a last event the recording ended without its
    blank line still counts (recorders trim it), a payload cut short does not parse."""
    if event_stream is None:
        event_stream = text.lstrip().startswith(("data:", "event:", ":"))
    if event_stream:
        return answer_of_events(parse_events(text, strict=False), endpoint)
    try:
        body = json.loads(text)
    except ValueError:
        return None, None
    return answer_of_json(body, endpoint)


def error_of_json(body: Any) -> str | None:
    """The message of an API error body (``{"error": {"message"}}`` on both endpoints, or a
    plain ``{"message"}`` / ``{"detail"}``), ``None`` when it is not one."""
    if not isinstance(body, Mapping):
        return None
    error = body.get("error")
    if isinstance(error, Mapping):
        message = error.get("message")
        return str(message) if message is not None else canonical_error(error)
    if isinstance(error, str):
        return error
    for key in ("message", "detail"):
        if isinstance(body.get(key), str):
            return str(body[key])
    return None


def canonical_error(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)[:500]


def error_of_text(text: str | None) -> str | None:
    """The API's error message in an answer body's text (JSON), or the text itself, cut."""
    if not text:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:500] or None
    return error_of_json(body) or canonical_error(body)
