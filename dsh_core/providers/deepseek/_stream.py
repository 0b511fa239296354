"""Chat Completions responses: usage, HTTP errors, and the stream translation.

:class:`ChunkTranslator` turns ``chat.completion.chunk`` payloads into the core's stream chunks;
:func:`translate_events` / :func:`translate_stream` drive it over recorded or live events;
:func:`map_usage` and :func:`classify_http_error` read the usage object and error answers
(docs/wire.md §1.5–§1.9).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._json_text import loads_json
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
    "ChunkTranslator",
    "classify_http_error",
    "map_usage",
    "translate_events",
    "translate_stream",
]


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
    """Turns Chat Completions stream payloads into stream chunks (docs/wire.md §1.5).

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
            payload = loads_json(event.data)  # NaN is not JSON; deep nesting must not overflow
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
