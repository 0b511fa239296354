"""Messages API responses: usage, HTTP errors, and the named-event stream translation.

:class:`EventTranslator` turns ``message_start`` … ``message_stop``, ``ping`` and ``error``
events into the core's stream chunks; :func:`map_usage` reads ``cache_read_input_tokens`` as
``cache_read_tokens``; :func:`classify_http_error` (docs/wire.md §3, §4).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..._json_text import dumps_canonical, loads_json
from ..._messages import (
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
)
from ..._stream import (
    BlockEnd,
    BlockStart,
    FinishReason,
    LlmFailure,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
    UsageChunk,
)
from .. import _wire as w
from .._failures import classify_http_error as _classify
from .._failures import failure
from .._sse import SseEvent
from .._translate import TranslatorBase, terminal_finish, translate_all, translate_async
from .._wire import WireFormatError

__all__ = [
    "EventTranslator",
    "classify_http_error",
    "map_usage",
    "translate_events",
    "translate_stream",
]


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
            payload = loads_json(event.data)  # NaN is not JSON; deep nesting must not overflow
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
