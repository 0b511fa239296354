"""The scripted test provider and its response helpers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_core import (
    CancelToken,
    Finish,
    GenerateOptions,
    ProviderError,
    ToolCallBlock,
    ToolCallDelta,
    user_message,
)
from dsh_core._assembly import BlockAssembler
from dsh_core.scripted import (
    Response,
    ScriptedProvider,
    ScriptExhaustedError,
    empty_response,
    error_response,
    hang_response,
    max_tokens_response,
    raise_response,
    reasoning_response,
    text_response,
    tool_call,
    tool_call_response,
)


def _request(purpose: str | None = None, cancel: CancelToken | None = None) -> GenerateOptions:
    return GenerateOptions(
        provider="p",
        model="m",
        messages=(user_message("hello there", id="u"),),
        purpose=purpose,
        cancel=cancel,
    )


async def _collect(provider: ScriptedProvider, request: GenerateOptions | None = None) -> list[Any]:
    return [chunk async for chunk in provider.stream(request or _request())]


def _assembled(chunks: list[Any]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


async def test_text_response_streams_deltas_usage_and_stop() -> None:
    chunks = await _collect(ScriptedProvider(text_response("hello world", chunk_size=4)))
    assert [c.type for c in chunks] == [
        "block-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]
    assembled = _assembled(chunks)
    assert assembled.blocks()[0].text == "hello world"  # type: ignore[union-attr]
    assert assembled.finish_reason.kind == "stop"
    assert assembled.usage is not None and assembled.usage.output_tokens == 2


async def test_reasoning_response_has_two_blocks() -> None:
    chunks = await _collect(ScriptedProvider(reasoning_response("hmm", "ok", usage=(3, 4))))
    blocks = _assembled(chunks).blocks()
    assert [b.type for b in blocks] == ["reasoning", "text"]
    assert _assembled(chunks).usage.input_tokens == 3  # type: ignore[union-attr]


async def test_tool_calls_arrive_fragmented_and_reassemble() -> None:
    response = tool_call_response(
        tool_call("c1", "read", {"path": "some/long/path.txt"}),
        tool_call("c2", "list", '{"dir": "."}'),
        text="checking",
    )
    chunks = await _collect(ScriptedProvider(response))
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta) and c.id == "c1"]
    assert len(deltas) == 3 and deltas[0].name == "read" and deltas[1].name is None
    assert "".join(d.arguments_delta for d in deltas) == '{"path":"some/long/path.txt"}'
    assembled = _assembled(chunks)
    assert assembled.finish_reason.kind == "tool-calls"
    calls = [b for b in assembled.blocks() if isinstance(b, ToolCallBlock)]
    assert [(c.id, c.name) for c in calls] == [("c1", "read"), ("c2", "list")]
    with pytest.raises(ValueError, match="at least one call"):
        tool_call_response()


async def test_max_tokens_response_leaves_an_open_call_the_assembler_drops() -> None:
    chunks = await _collect(
        ScriptedProvider(max_tokens_response("text", partial_call=tool_call("x", "w", "{}")))
    )
    assembled = _assembled(chunks)
    assert assembled.finish_reason.kind == "max-tokens"
    assert [b.type for b in assembled.blocks()] == ["text"]
    assert not any(c.type == "block-end" and c.index == 1 for c in chunks)


async def test_error_and_raise_responses() -> None:
    (finish,) = await _collect(
        ScriptedProvider(error_response("RATE_LIMIT", status=429, retry_after_ms=5))
    )
    assert isinstance(finish, Finish) and finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert (finish.reason.failure.code, finish.reason.failure.retry_after_ms) == ("RATE_LIMIT", 5)
    provider = ScriptedProvider(raise_response("AUTH", status=401, retryable=False, message="nope"))
    with pytest.raises(ProviderError, match=r"AUTH \(HTTP 401\): nope"):
        await _collect(provider)


async def test_empty_and_plain_chunk_sequences() -> None:
    assert await _collect(ScriptedProvider(empty_response())) == []
    chunks = list(text_response("a").chunks)
    assert await _collect(ScriptedProvider(lambda request: chunks)) == chunks


async def test_hang_finishes_aborted_once_cancelled() -> None:
    token = CancelToken()
    provider = ScriptedProvider(hang_response())
    task = asyncio.ensure_future(_collect(provider, _request(cancel=token)))
    while not provider.requests:
        await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    token.cancel()
    chunks = await task
    assert [c.type for c in chunks] == ["block-start", "text-delta", "finish"]
    assert chunks[-1].reason.kind == "aborted"


async def test_a_cancelled_request_stops_before_the_next_chunk() -> None:
    token = CancelToken()
    token.cancel()
    chunks = await _collect(ScriptedProvider(text_response("abc")), _request(cancel=token))
    assert [c.type for c in chunks] == ["finish"]


async def test_callables_see_the_request_and_everything_is_recorded() -> None:
    seen: list[GenerateOptions] = []

    def respond(request: GenerateOptions) -> Response:
        seen.append(request)
        return text_response(f"echo {request.messages[-1].text}")

    provider = ScriptedProvider(respond)
    provider.push(text_response("summary"))
    assert provider.remaining == 2
    first = _request()
    await _collect(provider, first)
    await _collect(provider, _request(purpose="compaction"))
    assert seen == [first] and provider.requests[0] is first
    assert provider.loop_requests == [first]
    assert provider.remaining == 0


async def test_an_exhausted_script_names_the_request() -> None:
    provider = ScriptedProvider()
    with pytest.raises(ScriptExhaustedError) as info:
        provider.stream(_request(purpose="compaction"))
    assert str(info.value) == (
        "ScriptedProvider script exhausted: request #1 (model 'm', purpose 'compaction', "
        "last message 'hello there') has no scripted response; add one with provider.push(...)"
    )
    assert info.value.index == 0 and info.value.request.purpose == "compaction"


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        text_response("x", chunk_size=0)


async def test_hang_without_a_token_waits_until_the_consumer_gives_up() -> None:
    provider = ScriptedProvider(hang_response(after=[]))
    task = asyncio.ensure_future(_collect(provider, _request()))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_responses_normalize_their_inputs() -> None:
    from dsh_core import TokenUsage

    chunks = list(text_response("a").chunks)
    assert Response(chunks=chunks).chunks == tuple(chunks)  # type: ignore[arg-type]
    usage = TokenUsage(input_tokens=1, output_tokens=2, cache_read_tokens=3)
    assert text_response("a", usage=usage).chunks[-2].usage is usage  # type: ignore[union-attr]
