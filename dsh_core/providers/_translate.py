"""Driving a translator over an event sequence without HTTP (recorded streams, the mock, tests).

Both adapters' ``translate_events`` / ``translate_stream`` are this loop with their translator:
stop at the translator's terminal event, turn a malformed payload into ``MALFORMED_RESPONSE``,
and end an event source that stops early with ``STREAM_CLOSED`` — so every translated stream
ends with exactly one ``Finish``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable
from typing import Protocol

from .._stream import Finish, FinishReason, LlmFailure, StreamChunk
from ._failures import failure
from ._http import finish_with
from ._sse import SseEvent
from ._wire import WireFormatError

__all__ = ["Translator", "TranslatorBase", "terminal_finish", "translate_all", "translate_async"]


class Translator(Protocol):
    def handle_event(self, event: SseEvent) -> tuple[list[StreamChunk], bool]: ...

    def fail(self, fault: LlmFailure, *, aborted: bool = False) -> list[StreamChunk]: ...


class TranslatorBase:
    """What both adapters' translators share: ``done``, and ending a stream with a failure."""

    done: bool

    def fail(self, fault: LlmFailure, *, aborted: bool = False) -> list[StreamChunk]:
        """End the stream with an error (or aborted) finish; open blocks stay open."""
        if self.done:
            return []
        self.done = True
        return [finish_with(fault, aborted=aborted)]


def terminal_finish(reason: FinishReason | None, *, produced: bool) -> Finish:
    """The stream's last chunk: its finish (``stop`` when none came); a ``stop`` with nothing
    produced is the API's degenerate empty completion, an ``EMPTY_RESPONSE`` error."""
    reason = reason or FinishReason(kind="stop")
    if reason.kind == "stop" and not produced:
        reason = FinishReason(
            kind="error",
            failure=failure(
                "EMPTY_RESPONSE", "model returned a completed response with no content"
            ),
        )
    return Finish(reason=reason)


def _malformed(exc: WireFormatError) -> LlmFailure:
    return failure("MALFORMED_RESPONSE", f"malformed event: {exc}")


def translate_all(
    translator: Translator, events: Iterable[SseEvent], closed: LlmFailure
) -> list[StreamChunk]:
    out: list[StreamChunk] = []
    for event in events:
        try:
            chunks, done = translator.handle_event(event)
        except WireFormatError as exc:
            return out + translator.fail(_malformed(exc))
        out.extend(chunks)
        if done:
            return out
    return out + translator.fail(closed)


async def translate_async(
    translator: Translator,
    events: AsyncIterable[SseEvent] | Iterable[SseEvent],
    closed: LlmFailure,
) -> AsyncIterator[StreamChunk]:
    async def source() -> AsyncGenerator[SseEvent, None]:
        if isinstance(events, AsyncIterable):
            async for event in events:
                yield event
        else:
            for event in events:
                yield event

    async with contextlib.aclosing(source()) as stream:
        async for event in stream:
            try:
                chunks, done = translator.handle_event(event)
            except WireFormatError as exc:
                for chunk in translator.fail(_malformed(exc)):
                    yield chunk
                return
            for chunk in chunks:
                yield chunk
            if done:
                return
    for chunk in translator.fail(closed):
        yield chunk
