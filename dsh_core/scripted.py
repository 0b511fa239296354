"""A scripted, in-process model provider for tests, plus helpers that build its responses.

::

    provider = ScriptedProvider(
        tool_call_response(tool_call("call_1", "read", {"path": "a.txt"})),
        text_response("The file says hello."),
    )

Each call of ``provider.stream(request)`` records the request in :attr:`ScriptedProvider.requests`
and plays the next script entry: a :class:`Response` (chunks, then optionally an exception or a
hang until the request is cancelled), or a callable of the request returning one. An exhausted
script raises :class:`ScriptExhaustedError` naming the request that found it empty.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._errors import DshError
from ._messages import ReasoningBlock, TextBlock, ToolCallBlock
from ._request import GenerateOptions
from ._stream import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    LlmFailure,
    ProviderError,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
    UsageChunk,
)

__all__ = [
    "Response",
    "ScriptEntry",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ToolCallSpec",
    "empty_response",
    "error_response",
    "hang_response",
    "max_tokens_response",
    "raise_response",
    "reasoning_response",
    "text_response",
    "tool_call",
    "tool_call_response",
]


class ScriptExhaustedError(DshError, AssertionError):
    """The script had no entry left for a request (``.request``, ``.index``)."""

    def __init__(self, request: GenerateOptions, index: int) -> None:
        last = request.messages[-1].text[:60] if request.messages else ""
        super().__init__(
            f"ScriptedProvider script exhausted: request #{index + 1} "
            f"(model {request.model!r}, purpose {request.purpose!r}, last message {last!r}) "
            "has no scripted response; add one with provider.push(...)"
        )
        self.request = request
        self.index = index


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """One scripted call: yield ``chunks``, then raise ``error`` or hang until cancelled."""

    chunks: tuple[StreamChunk, ...] = ()
    error: BaseException | None = None
    """Raised after the chunks (a ``ProviderError`` models an HTTP error or an EOF mid-stream)."""
    hang: bool = False
    """After the chunks, wait until the request's cancel token fires, then finish ``aborted``."""

    def __post_init__(self) -> None:
        if not isinstance(self.chunks, tuple):
            object.__setattr__(self, "chunks", tuple(self.chunks))


ScriptEntry: TypeAlias = "Response | Callable[[GenerateOptions], Response | Sequence[StreamChunk]]"


class ScriptedProvider:
    """Plays a queue of scripted responses and records every request it receives."""

    def __init__(self, *script: ScriptEntry) -> None:
        self._script: deque[ScriptEntry] = deque(script)
        self.requests: list[GenerateOptions] = []
        """Every request received, in order (one-shots such as compaction included)."""

    def push(self, *entries: ScriptEntry) -> None:
        """Append entries to the script."""
        self._script.extend(entries)

    @property
    def remaining(self) -> int:
        return len(self._script)

    @property
    def loop_requests(self) -> list[GenerateOptions]:
        """The conversation requests only (no ``purpose`` such as ``compaction``)."""
        return [r for r in self.requests if r.purpose is None]

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        index = len(self.requests)
        self.requests.append(options)
        if not self._script:
            raise ScriptExhaustedError(options, index)
        entry = self._script.popleft()
        response = entry(options) if callable(entry) else entry
        if not isinstance(response, Response):
            response = Response(chunks=tuple(response))
        return _play(response, options)


async def _play(response: Response, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
    cancel = options.cancel
    for chunk in response.chunks:
        await asyncio.sleep(0)  # a real suspension point: cancellation may land mid-stream
        if cancel is not None and cancel.cancelled:
            yield _aborted()
            return
        yield chunk
    if response.error is not None:
        raise response.error
    if response.hang:
        if cancel is None:
            await asyncio.Event().wait()  # no token: hang until the consumer gives up
        else:
            await cancel.wait()
        yield _aborted()


def _aborted() -> Finish:
    return Finish(
        reason=FinishReason(kind="aborted", failure=LlmFailure(message="aborted", code="ABORTED"))
    )


def _pieces(text: str, size: int) -> list[str]:
    if size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {size}")
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _usage(usage: TokenUsage | tuple[int, int] | None, output: int) -> TokenUsage:
    if usage is None:
        return TokenUsage(input_tokens=10, output_tokens=output)
    if isinstance(usage, TokenUsage):
        return usage
    return TokenUsage(input_tokens=usage[0], output_tokens=usage[1])


def _text_block(index: int, text: str, size: int, *, reasoning: bool = False) -> list[StreamChunk]:
    out: list[StreamChunk] = [
        BlockStart(index=index, block_type="reasoning" if reasoning else "text")
    ]
    for piece in _pieces(text, size):
        out.append(
            ReasoningDelta(index=index, text=piece)
            if reasoning
            else TextDelta(index=index, text=piece)
        )
    block = ReasoningBlock(text=text) if reasoning else TextBlock(text=text)
    out.append(BlockEnd(index=index, block=block))
    return out


def text_response(
    text: str, *, usage: TokenUsage | tuple[int, int] | None = None, chunk_size: int = 4
) -> Response:
    """A text answer in ``chunk_size``-character deltas, usage, finish ``stop``."""
    chunks = _text_block(0, text, chunk_size)
    chunks.append(UsageChunk(usage=_usage(usage, max(1, len(text) // 4))))
    chunks.append(Finish(reason=FinishReason(kind="stop")))
    return Response(chunks=tuple(chunks))


def reasoning_response(
    reasoning: str,
    text: str,
    *,
    usage: TokenUsage | tuple[int, int] | None = None,
    chunk_size: int = 4,
) -> Response:
    """Thinking (a reasoning block), then the visible answer, finish ``stop``."""
    chunks = _text_block(0, reasoning, chunk_size, reasoning=True)
    chunks += _text_block(1, text, chunk_size)
    chunks.append(UsageChunk(usage=_usage(usage, max(1, (len(reasoning) + len(text)) // 4))))
    chunks.append(Finish(reason=FinishReason(kind="stop")))
    return Response(chunks=tuple(chunks))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallSpec:
    """A tool call to script: its id, tool name and raw JSON arguments."""

    id: str
    name: str
    arguments: str


def tool_call(call_id: str, name: str, arguments: Mapping[str, Any] | str = "") -> ToolCallSpec:
    """A scripted call; ``arguments`` given as a mapping are dumped as compact JSON."""
    raw = (
        arguments
        if isinstance(arguments, str)
        else json.dumps(dict(arguments), separators=(",", ":"), ensure_ascii=False)
    )
    return ToolCallSpec(id=call_id, name=name, arguments=raw)


def _call_chunks(index: int, spec: ToolCallSpec, *, close: bool = True) -> list[StreamChunk]:
    # The arguments arrive fragmented: the name with the first five characters, then the rest
    # in two pieces, as a streaming model sends them.
    raw = spec.arguments
    head, rest = raw[:5], raw[5:]
    middle = len(rest) // 2
    out: list[StreamChunk] = [
        BlockStart(index=index, block_type="tool-call"),
        ToolCallDelta(index=index, id=spec.id, name=spec.name, arguments_delta=head),
    ]
    for piece in (rest[:middle], rest[middle:]):
        if piece:
            out.append(ToolCallDelta(index=index, id=spec.id, arguments_delta=piece))
    if close:
        block = ToolCallBlock(id=spec.id, name=spec.name, arguments=raw)
        out.append(BlockEnd(index=index, block=block))
    return out


def tool_call_response(
    *calls: ToolCallSpec,
    text: str | None = None,
    usage: TokenUsage | tuple[int, int] | None = None,
) -> Response:
    """Optional text, then one tool-call block per call (several calls: a parallel batch),
    arguments fragmented across deltas, usage, finish ``tool-calls``."""
    if not calls:
        raise ValueError("tool_call_response needs at least one call")
    chunks: list[StreamChunk] = []
    index = 0
    if text:
        chunks += _text_block(0, text, 4)
        index = 1
    for offset, spec in enumerate(calls):
        chunks += _call_chunks(index + offset, spec)
    chunks.append(UsageChunk(usage=_usage(usage, 5)))
    chunks.append(Finish(reason=FinishReason(kind="tool-calls")))
    return Response(chunks=tuple(chunks))


def max_tokens_response(
    text: str = "",
    *,
    partial_call: ToolCallSpec | None = None,
    usage: TokenUsage | tuple[int, int] | None = None,
) -> Response:
    """Output cut by the token limit: text, optionally an unfinished tool call (the loop drops
    it), usage, finish ``max-tokens``."""
    chunks: list[StreamChunk] = _text_block(0, text, 4) if text else []
    if partial_call is not None:
        chunks += _call_chunks(1 if text else 0, partial_call, close=False)
    chunks.append(UsageChunk(usage=_usage(usage, 12)))
    chunks.append(Finish(reason=FinishReason(kind="max-tokens")))
    return Response(chunks=tuple(chunks))


def _failure(
    code: str, message: str | None, status: int | None, retryable: bool, retry_after_ms: int | None
) -> LlmFailure:
    return LlmFailure(
        message=message or f"scripted {code} failure",
        code=code,
        status=status,
        retryable=retryable,
        retry_after_ms=retry_after_ms,
    )


def error_response(
    code: str = "SERVER",
    *,
    message: str | None = None,
    status: int | None = 500,
    retryable: bool = True,
    retry_after_ms: int | None = None,
    after: Iterable[StreamChunk] = (),
) -> Response:
    """A failed call reported in-stream: the ``after`` chunks, then finish ``error``."""
    failure = _failure(code, message, status, retryable, retry_after_ms)
    return Response(chunks=(*after, Finish(reason=FinishReason(kind="error", failure=failure))))


def raise_response(
    code: str = "SERVER",
    *,
    message: str | None = None,
    status: int | None = 500,
    retryable: bool = True,
    retry_after_ms: int | None = None,
    after: Iterable[StreamChunk] = (),
) -> Response:
    """A failed call reported by raising :class:`ProviderError` (after the ``after`` chunks:
    an EOF mid-stream when there are some)."""
    failure = _failure(code, message, status, retryable, retry_after_ms)
    return Response(chunks=tuple(after), error=ProviderError(failure))


def hang_response(after: Iterable[StreamChunk] | None = None) -> Response:
    """Stream ``after`` (default: an open text block saying ``partial``) and hang until cancelled."""
    chunks = (
        tuple(after)
        if after is not None
        else (BlockStart(index=0, block_type="text"), TextDelta(index=0, text="partial"))
    )
    return Response(chunks=chunks, hang=True)


def empty_response() -> Response:
    """A call that yields no chunk at all."""
    return Response()
