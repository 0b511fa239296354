"""ChunkTranslator / translate_events / translate_stream and map_usage."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    LlmFailure,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
)
from dsh_core._assembly import BlockAssembler
from dsh_core.providers import WireFormatError
from dsh_core.providers._sse import SseEvent, SseParser
from dsh_core.providers.deepseek import (
    ChunkTranslator,
    map_usage,
    translate_events,
    translate_stream,
)

from ._helpers import USAGE, collect, delta, kinds, split_at, sse


def events(*payloads: Any) -> list[SseEvent]:
    parser = SseParser()
    return parser.feed(sse(*payloads))


def call(index: int, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index}
    out.update(fields)
    return out


THINK_THEN_TOOLS = (
    delta(role="assistant", content=None, reasoning_content=""),
    delta(content=None, reasoning_content="Let me "),
    delta(content=None, reasoning_content="check."),
    delta(content="Checking", reasoning_content=None),
    delta(
        tool_calls=[
            call(
                0,
                id="call_00_x",
                type="function",
                function={"name": "get_balance", "arguments": ""},
            )
        ]
    ),
    delta(tool_calls=[call(0, function={"arguments": '{"us'})]),
    delta(
        tool_calls=[
            call(
                1, id="call_01_y", type="function", function={"name": "get_date", "arguments": "{"}
            )
        ]
    ),
    delta(tool_calls=[call(0, function={"arguments": 'er":"a"}'})]),
    delta(tool_calls=[call(1, function={"arguments": "}"})]),
    delta(content="", reasoning_content=None, finish_reason="tool_calls", usage=USAGE),
    "[DONE]",
)


def test_reasoning_then_text_then_fragmented_parallel_tool_calls() -> None:
    chunks = translate_events(events(*THINK_THEN_TOOLS))
    assert chunks == [
        BlockStart(index=0, block_type="reasoning"),
        ReasoningDelta(index=0, text="Let me "),
        ReasoningDelta(index=0, text="check."),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="Checking"),
        BlockStart(index=2, block_type="tool-call"),
        ToolCallDelta(index=2, id="call_00_x", name="get_balance", arguments_delta=""),
        ToolCallDelta(index=2, id="call_00_x", name="get_balance", arguments_delta='{"us'),
        BlockStart(index=3, block_type="tool-call"),
        ToolCallDelta(index=3, id="call_01_y", name="get_date", arguments_delta="{"),
        ToolCallDelta(index=2, id="call_00_x", name="get_balance", arguments_delta='er":"a"}'),
        ToolCallDelta(index=3, id="call_01_y", name="get_date", arguments_delta="}"),
        BlockEnd(index=0, block=ReasoningBlock(text="Let me check.")),
        BlockEnd(index=1, block=TextBlock(text="Checking")),
        BlockEnd(
            index=2,
            block=ToolCallBlock(id="call_00_x", name="get_balance", arguments='{"user":"a"}'),
        ),
        BlockEnd(index=3, block=ToolCallBlock(id="call_01_y", name="get_date", arguments="{}")),
        UsageChunk(
            usage=TokenUsage(
                input_tokens=50, output_tokens=85, cache_read_tokens=256, reasoning_tokens=31
            )
        ),
        Finish(reason=FinishReason(kind="tool-calls")),
    ]


def test_assembled_message_matches_block_ends() -> None:
    assembler = BlockAssembler()
    for chunk in translate_events(events(*THINK_THEN_TOOLS)):
        assembler.feed(chunk)
    assert [type(b).__name__ for b in assembler.blocks()] == [
        "ReasoningBlock",
        "TextBlock",
        "ToolCallBlock",
        "ToolCallBlock",
    ]
    assert assembler.finish_reason.kind == "tool-calls"


@given(st.lists(st.integers(min_value=0, max_value=3000), max_size=40))
def test_translation_does_not_depend_on_read_boundaries(cuts: list[int]) -> None:
    body = sse(*THINK_THEN_TOOLS)
    parser = SseParser()
    got: list[SseEvent] = []
    for piece in split_at(body, cuts):
        got.extend(parser.feed(piece))
    assert translate_events(got) == translate_events(events(*THINK_THEN_TOOLS))


def test_empty_first_reasoning_does_not_open_a_block() -> None:
    chunks = translate_events(
        events(
            delta(role="assistant", content=None, reasoning_content=""),
            delta(content="hi", reasoning_content=None),
            delta(content="", finish_reason="stop"),
            "[DONE]",
        )
    )
    assert kinds(chunks) == ["block-start", "text-delta", "block-end", "finish"]
    assert chunks[0] == BlockStart(index=0, block_type="text")


def test_absent_reasoning_field_and_empty_chunks_are_fine() -> None:
    chunks = translate_events(
        events(
            {"id": "x", "choices": []},
            {"id": "x"},
            delta(content="a"),
            {"choices": [{"index": 0, "finish_reason": None}]},
            delta(finish_reason="stop"),
            "[DONE]",
        )
    )
    assert kinds(chunks) == ["block-start", "text-delta", "block-end", "finish"]


def test_trailing_usage_only_chunk_and_last_usage_wins() -> None:
    chunks = translate_events(
        events(
            delta(content="a", usage={"prompt_tokens": 1, "completion_tokens": 1}),
            delta(content="", finish_reason="stop", usage=None),
            {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
            "[DONE]",
        )
    )
    usage = [c for c in chunks if isinstance(c, UsageChunk)]
    assert usage == [UsageChunk(usage=TokenUsage(input_tokens=9, output_tokens=2))]
    assert kinds(chunks)[-2:] == ["usage", "finish"]


def test_no_usage_means_no_usage_chunk() -> None:
    chunks = translate_events(events(delta(content="a"), delta(finish_reason="stop"), "[DONE]"))
    assert "usage" not in kinds(chunks)


def test_default_finish_is_stop() -> None:
    chunks = translate_events(events(delta(content="a"), "[DONE]"))
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.kind == "stop"


def test_empty_completion_is_an_empty_response_error_even_with_usage() -> None:
    chunks = translate_events(
        events(
            delta(role="assistant", content="", reasoning_content=""),
            delta(
                content="", finish_reason="stop", usage={"prompt_tokens": 3, "completion_tokens": 0}
            ),
            "[DONE]",
        )
    )
    assert kinds(chunks) == ["usage", "finish"]
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == "EMPTY_RESPONSE"
    assert finish.reason.failure.retryable is True
    assert finish.reason.failure.message == "model returned a completed response with no content"


def test_reasoning_only_response_is_a_success() -> None:
    chunks = translate_events(
        events(delta(reasoning_content="just thinking"), delta(finish_reason="stop"), "[DONE]")
    )
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.kind == "stop"


def test_length_with_no_blocks_stays_max_tokens() -> None:
    chunks = translate_events(events(delta(finish_reason="length"), "[DONE]"))
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.kind == "max-tokens"


@pytest.mark.parametrize(
    ("reason", "code", "retryable"),
    [
        ("content_filter", "CONTENT_FILTER", False),
        ("insufficient_system_resource", "INSUFFICIENT_SYSTEM_RESOURCE", True),
    ],
)
def test_other_finish_reasons_are_errors(reason: str, code: str, retryable: bool) -> None:
    chunks = translate_events(
        events(delta(content="partial"), delta(finish_reason=reason), "[DONE]")
    )
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == code
    assert finish.reason.failure.message == f"model stopped: {reason}"
    assert finish.reason.failure.retryable is retryable
    assert kinds(chunks)[:3] == ["block-start", "text-delta", "block-end"]


def test_tool_deltas_without_id_name_or_arguments() -> None:
    chunks = translate_events(
        events(
            delta(tool_calls=[call(0)]),
            delta(tool_calls=[call(0, function={})]),
            delta(tool_calls=[call(0, function={"name": "late", "arguments": "{}"})]),
            delta(tool_calls=[call(0, id="late-id", function={"arguments": ""})]),
            delta(finish_reason="tool_calls"),
            "[DONE]",
        )
    )
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(d.id, d.name, d.arguments_delta) for d in deltas] == [
        ("", None, ""),
        ("", None, ""),
        ("", "late", "{}"),
        ("late-id", "late", ""),
    ]
    end = next(c for c in chunks if isinstance(c, BlockEnd))
    assert end.block == ToolCallBlock(id="late-id", name="late", arguments="{}")


def test_tool_call_that_never_gets_an_id() -> None:
    chunks = translate_events(
        events(delta(tool_calls=[call(0, function={"arguments": "{}"})]), "[DONE]")
    )
    end = next(c for c in chunks if isinstance(c, BlockEnd))
    assert end.block == ToolCallBlock(id="call-0", name="", arguments="{}")


def test_text_and_tool_interleave_keep_one_text_block() -> None:
    chunks = translate_events(
        events(
            delta(content="a"),
            delta(tool_calls=[call(0, id="c", function={"name": "f", "arguments": ""})]),
            delta(content="b"),
            "[DONE]",
        )
    )
    ends = [c for c in chunks if isinstance(c, BlockEnd)]
    assert ends[0] == BlockEnd(index=0, block=TextBlock(text="ab"))


def test_missing_done_is_stream_closed_not_success() -> None:
    chunks = translate_events(events(delta(content="partial")))
    assert kinds(chunks) == ["block-start", "text-delta", "finish"]
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.failure is not None
    assert finish.reason.kind == "error"
    assert finish.reason.failure.code == "STREAM_CLOSED"
    assert finish.reason.failure.retryable is False


def test_data_after_done_is_ignored() -> None:
    chunks = translate_events(events(delta(content="a"), "[DONE]", delta(content="late")))
    assert kinds(chunks) == ["block-start", "text-delta", "block-end", "finish"]


def test_named_events_are_ignored() -> None:
    chunks = translate_events(
        [SseEvent(event="ping", data="{}"), *events(delta(content="a"), "[DONE]")]
    )
    assert kinds(chunks)[0] == "block-start"


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ("{not-json", "event data is not JSON: '{not-json'"),
        ("[1]", "data: invalid type: an array, expected an object"),
        ({"choices": [None]}, "choices[0]: invalid type: null, expected an object"),
        ({"choices": {}}, "choices: invalid type: an object"),
        ({"choices": [{"delta": "x"}]}, "choices[0].delta"),
        ({"choices": [{"delta": {"content": 1}}]}, "choices[0].delta.content"),
        ({"choices": [{"delta": {"reasoning_content": 1}}]}, "reasoning_content"),
        ({"choices": [{"delta": {"tool_calls": [{}]}}]}, "tool_calls[0].index: missing field"),
        ({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": 5}]}}]}, "tool_calls[0].id"),
        ({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": 1}]}}]}, "function"),
        ({"choices": [{"finish_reason": 1}]}, "choices[0].finish_reason"),
        ({"choices": [], "usage": {"prompt_tokens": "many"}}, "usage.prompt_tokens"),
    ],
)
def test_malformed_payloads_end_with_malformed_response(payload: Any, fragment: str) -> None:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    chunks = translate_events([SseEvent(data=data), SseEvent(data="[DONE]")])
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.failure is not None
    assert finish.reason.failure.code == "MALFORMED_RESPONSE"
    assert fragment in finish.reason.failure.message


def test_translator_feed_raises_wire_format_error() -> None:
    translator = ChunkTranslator()
    with pytest.raises(WireFormatError) as caught:
        translator.feed({"choices": [{"delta": {"tool_calls": [{"index": -1}]}}]})
    assert caught.value.param == "choices[0].delta.tool_calls[0].index"


def test_translator_is_inert_after_its_finish() -> None:
    translator = ChunkTranslator()
    translator.finish()
    assert translator.feed(delta(content="x")) == []
    assert translator.finish() == []
    assert translator.fail(LlmFailure(message="m", code="X")) == []
    assert translator.handle_event(SseEvent(data="[DONE]")) == ([], True)


async def test_translate_stream_sync_and_async_sources() -> None:
    evs = events(delta(content="a"), "[DONE]")

    async def source() -> Any:
        for e in evs:
            yield e

    expected = translate_events(evs)
    assert await collect(translate_stream(evs)) == expected
    assert await collect(translate_stream(source())) == expected
    closed = await collect(translate_stream(evs[:1]))
    assert isinstance(closed[-1], Finish) and closed[-1].reason.failure is not None
    assert closed[-1].reason.failure.code == "STREAM_CLOSED"
    bad = await collect(translate_stream([SseEvent(data="nope")]))
    assert isinstance(bad[-1], Finish) and bad[-1].reason.failure is not None
    assert bad[-1].reason.failure.code == "MALFORMED_RESPONSE"


def test_map_usage_live_example() -> None:
    assert map_usage(USAGE) == TokenUsage(
        input_tokens=50, output_tokens=85, cache_read_tokens=256, reasoning_tokens=31
    )


def test_map_usage_fallbacks() -> None:
    # Only the OpenAI-style mirror: hits from cached_tokens, misses = prompt - hits.
    assert map_usage(
        {
            "prompt_tokens": 283,
            "completion_tokens": 69,
            "prompt_tokens_details": {"cached_tokens": 256},
        }
    ) == TokenUsage(input_tokens=27, output_tokens=69, cache_read_tokens=256)
    # No cache information at all: no cache_read_tokens (absent, not 0).
    assert map_usage({"prompt_tokens": 3, "completion_tokens": 1}) == TokenUsage(
        input_tokens=3, output_tokens=1
    )
    # A zero hit count is kept.
    assert (
        map_usage(
            {
                "prompt_tokens": 3,
                "completion_tokens": 1,
                "prompt_cache_hit_tokens": 0,
                "prompt_cache_miss_tokens": 3,
            }
        ).cache_read_tokens
        == 0
    )
    # The native fields win over the mirror.
    assert map_usage(
        {
            "prompt_tokens": 10,
            "prompt_cache_hit_tokens": 4,
            "prompt_cache_miss_tokens": 6,
            "prompt_tokens_details": {"cached_tokens": 0},
        }
    ) == TokenUsage(input_tokens=6, output_tokens=0, cache_read_tokens=4)


@pytest.mark.parametrize(
    ("usage", "param"),
    [
        ({"prompt_tokens": -1}, "usage.prompt_tokens"),
        ({"completion_tokens": 1.5}, "usage.completion_tokens"),
        (
            {"prompt_tokens_details": {"cached_tokens": "x"}},
            "usage.prompt_tokens_details.cached_tokens",
        ),
        (
            {"completion_tokens_details": {"reasoning_tokens": True}},
            "usage.completion_tokens_details.reasoning_tokens",
        ),
        ([], "usage"),
    ],
)
def test_map_usage_refuses_bad_counts(usage: Any, param: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        map_usage(usage)
    assert caught.value.param == param


async def test_translate_stream_async_source_that_ends_early() -> None:
    async def source() -> Any:
        for e in events(delta(content="a")):
            yield e

    chunks = await collect(translate_stream(source()))
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.failure is not None
    assert chunks[-1].reason.failure.code == "STREAM_CLOSED"
