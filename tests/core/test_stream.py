"""The provider vocabulary: chunk JSON, usage, failures, finish reasons, the block assembler,
cancellation (``CancelToken`` and the loop's ``CancelGuard``) and ``GenerateOptions``."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import (
    BlockEnd,
    BlockStart,
    CancelToken,
    ContentBlock,
    Finish,
    FinishReason,
    GenerateOptions,
    InvalidEventError,
    LlmCallConfig,
    LlmFailure,
    OpaqueBlock,
    Provider,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSchema,
    UsageChunk,
    freeze_json,
    user_message,
)
from dsh_core._assembly import BlockAssembler, message_from_blocks
from dsh_core._cancel import Aborted, CancelGuard
from dsh_core._stream import chunk_from_json
from dsh_testkit.strategies import epoch_headers, messages

# --------------------------------------------------------------------------------------------
# TokenUsage


def test_usage_json_omits_absent_optional_counts() -> None:
    usage = TokenUsage(input_tokens=3, output_tokens=4)
    assert usage.to_json() == {"inputTokens": 3, "outputTokens": 4}
    assert TokenUsage.from_json(usage.to_json()) == usage
    assert usage.prompt_tokens == 3


def test_usage_json_keeps_every_count_and_prompt_tokens_sums_the_buckets() -> None:
    usage = TokenUsage(
        input_tokens=10,
        output_tokens=5,
        cache_read_tokens=90,
        cache_write_tokens=7,
        reasoning_tokens=2,
    )
    assert usage.to_json() == {
        "inputTokens": 10,
        "outputTokens": 5,
        "cacheReadTokens": 90,
        "cacheWriteTokens": 7,
        "reasoningTokens": 2,
    }
    assert TokenUsage.from_json(usage.to_json()) == usage
    assert usage.prompt_tokens == 107  # reasoning is part of the output, not the prompt
    zero = TokenUsage.from_json({"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0})
    assert zero.cache_read_tokens == 0  # zero is kept, not mistaken for absent


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"outputTokens": 1}, "usage.inputTokens must be a non-negative integer, got None"),
        ({"inputTokens": 1}, "usage.outputTokens must be a non-negative integer, got None"),
        (
            {"inputTokens": -1, "outputTokens": 1},
            "usage.inputTokens must be a non-negative integer, got -1",
        ),
        (
            {"inputTokens": 1, "outputTokens": 1.5},
            "usage.outputTokens must be a non-negative integer, got 1.5",
        ),
        (
            {"inputTokens": True, "outputTokens": 1},
            "usage.inputTokens must be a non-negative integer, got True",
        ),
        (
            {"inputTokens": 1, "outputTokens": 1, "cacheReadTokens": "9"},
            "usage.cacheReadTokens must be a non-negative integer, got '9'",
        ),
        (
            {"inputTokens": 1, "outputTokens": 1, "cacheWriteTokens": -2},
            "usage.cacheWriteTokens must be a non-negative integer, got -2",
        ),
        (
            {"inputTokens": 1, "outputTokens": 1, "reasoningTokens": False},
            "usage.reasoningTokens must be a non-negative integer, got False",
        ),
        ([1, 2], "usage must be an object, got [1, 2]"),
        (None, "usage must be an object, got None"),
    ],
)
def test_invalid_usage_names_the_count(obj: Any, message: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        TokenUsage.from_json(obj)
    assert str(info.value) == message


# --------------------------------------------------------------------------------------------
# LlmFailure, ProviderError, FinishReason


def test_failure_json_omits_defaults() -> None:
    failure = LlmFailure(message="boom", code="SERVER")
    assert failure.to_json() == {"message": "boom", "code": "SERVER"}
    assert LlmFailure.from_json(failure.to_json()) == failure


def test_failure_json_round_trips_every_field() -> None:
    failure = LlmFailure(
        message="slow down",
        code="RATE_LIMIT",
        status=429,
        retryable=True,
        retry_after_ms=1500,
        request_id="req-1",
    )
    assert failure.to_json() == {
        "message": "slow down",
        "code": "RATE_LIMIT",
        "status": 429,
        "retryable": True,
        "providerRetryAfterMs": 1500,
        "requestId": "req-1",
    }
    assert LlmFailure.from_json(failure.to_json()) == failure


def test_a_bare_failure_object_gets_an_empty_message_and_the_unknown_code() -> None:
    assert LlmFailure.from_json({}) == LlmFailure(message="", code="UNKNOWN")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ("boom", "failure must be an object, got 'boom'"),
        ({"status": "429"}, "failure.status must be an HTTP status code, got '429'"),
        ({"status": True}, "failure.status must be an HTTP status code, got True"),
        ({"retryable": "false"}, "failure.retryable must be a boolean, got 'false'"),
        (
            {"providerRetryAfterMs": -5},
            "failure.providerRetryAfterMs must be a non-negative integer, got -5",
        ),
        ({"requestId": 7}, "failure.requestId must be a string, got 7"),
    ],
)
def test_invalid_failures_are_refused_not_coerced(obj: Any, message: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        LlmFailure.from_json(obj)
    assert str(info.value) == message


def test_provider_error_message_names_code_status_and_message() -> None:
    with_status = ProviderError(LlmFailure(message="bad key", code="AUTH", status=401))
    assert str(with_status) == "AUTH (HTTP 401): bad key"
    assert with_status.failure.status == 401
    assert str(ProviderError(LlmFailure(message="eof", code="STREAM_CLOSED"))) == (
        "STREAM_CLOSED: eof"
    )


@pytest.mark.parametrize("kind", ["stop", "tool-calls", "max-tokens", "error", "aborted"])
def test_finish_reason_round_trips_every_kind(kind: Any) -> None:
    reason = FinishReason(kind=kind)
    assert reason.to_json() == {"kind": kind}
    assert FinishReason.from_json(reason.to_json()) == reason


def test_finish_reason_carries_its_failure_and_reads_the_reference_error_key() -> None:
    failure = LlmFailure(message="x", code="AUTH")
    reason = FinishReason(kind="error", failure=failure)
    assert reason.to_json() == {"kind": "error", "failure": {"message": "x", "code": "AUTH"}}
    assert FinishReason.from_json(reason.to_json()) == reason
    # The reference harness's older logs call it "error".
    assert FinishReason.from_json({"kind": "error", "error": {"message": "x", "code": "AUTH"}}) == (
        reason
    )


@pytest.mark.parametrize("obj", [{"kind": "done"}, {}, "stop", None, {"kind": None}])
def test_an_invalid_finish_reason_is_refused(obj: Any) -> None:
    with pytest.raises(InvalidEventError) as info:
        FinishReason.from_json(obj)
    assert str(info.value) == f"finish reason must be {{kind: …}}, got {obj!r}"


# --------------------------------------------------------------------------------------------
# Chunk JSON

EXAMPLES: list[tuple[StreamChunk, dict[str, Any]]] = [
    (
        BlockStart(index=0, block_type="text"),
        {"type": "block-start", "index": 0, "blockType": "text"},
    ),
    (TextDelta(index=1, text="hi"), {"type": "text-delta", "index": 1, "text": "hi"}),
    (
        ReasoningDelta(index=2, text="hm"),
        {"type": "reasoning-delta", "index": 2, "text": "hm"},
    ),
    (
        ToolCallDelta(index=3, id="c1", name="read", arguments_delta='{"a"'),
        {
            "type": "tool-call-delta",
            "index": 3,
            "id": "c1",
            "name": "read",
            "argumentsDelta": '{"a"',
        },
    ),
    (
        ToolCallDelta(index=3, id="c1", arguments_delta=":1}"),
        {"type": "tool-call-delta", "index": 3, "id": "c1", "argumentsDelta": ":1}"},
    ),
    (
        BlockEnd(index=4, block=ToolCallBlock(id="c1", name="read", arguments="{}")),
        {
            "type": "block-end",
            "index": 4,
            "block": {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
        },
    ),
    (
        UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=2)),
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}},
    ),
    (
        Finish(reason=FinishReason(kind="stop")),
        {"type": "finish", "reason": {"kind": "stop"}},
    ),
    (
        Finish(reason=FinishReason(kind="max-tokens"), replay_state=freeze_json({"k": [1]})),
        {"type": "finish", "reason": {"kind": "max-tokens"}, "replayState": {"k": [1]}},
    ),
]


@pytest.mark.parametrize(("chunk", "obj"), EXAMPLES, ids=lambda v: getattr(v, "type", ""))
def test_every_chunk_type_has_the_reference_json_form(chunk: StreamChunk, obj: Any) -> None:
    assert chunk.to_json() == obj
    assert list(chunk.to_json()) == list(obj)  # key order too: logs are compared as text
    assert chunk_from_json(obj) == chunk


def test_a_mapping_replay_state_is_frozen() -> None:
    from types import MappingProxyType

    chunk = chunk_from_json(
        {"type": "finish", "reason": {"kind": "stop"}, "replayState": MappingProxyType({"a": 1})}
    )
    assert isinstance(chunk, Finish) and chunk.replay_state == {"a": 1}
    with pytest.raises(TypeError):
        chunk.replay_state["a"] = 2


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ("text", "a chunk must be an object, got 'text'"),
        ({"type": "sparkle"}, "unknown chunk type 'sparkle'"),
        ({}, "unknown chunk type None"),
        (
            {"type": "block-start", "blockType": "text"},
            "chunk block-start: index must be a non-negative integer",
        ),
        (
            {"type": "block-start", "index": -1, "blockType": "text"},
            "chunk block-start: index must be a non-negative integer",
        ),
        (
            {"type": "block-start", "index": True, "blockType": "text"},
            "chunk block-start: index must be a non-negative integer",
        ),
        ({"type": "block-start", "index": 0}, "chunk block-start: blockType must be a string"),
        ({"type": "text-delta", "index": 0, "text": 5}, "chunk text-delta: text must be a string"),
        (
            {"type": "reasoning-delta", "index": 0},
            "chunk reasoning-delta: text must be a string",
        ),
        (
            {"type": "reasoning-delta", "index": 0.0, "text": ""},
            "chunk reasoning-delta: index must be a non-negative integer",
        ),
        (
            {"type": "tool-call-delta", "index": 0, "argumentsDelta": ""},
            "chunk tool-call-delta: id must be a string",
        ),
        (
            {"type": "tool-call-delta", "index": 0, "id": "c"},
            "chunk tool-call-delta: argumentsDelta must be a string",
        ),
        (
            {"type": "tool-call-delta", "index": 0, "id": "c", "name": 3, "argumentsDelta": ""},
            "chunk tool-call-delta: name must be a string, got 3",
        ),
        (
            {"type": "block-end", "index": 0, "block": "text"},
            "block must be an object with a string type, got 'text'",
        ),
        ({"type": "block-end", "block": {"type": "text", "text": ""}}, "chunk block-end: index"),
        ({"type": "usage"}, "usage must be an object, got None"),
        (
            {"type": "usage", "usage": {"inputTokens": 1}},
            "usage.outputTokens must be a non-negative integer",
        ),
        ({"type": "finish"}, "finish reason must be {kind: …}, got None"),
        (
            {"type": "finish", "reason": {"kind": "stop"}, "replayState": [1]},
            "chunk finish: replayState must be an object, got [1]",
        ),
        (
            {"type": "finish", "reason": {"kind": "stop"}, "replayState": "opaque"},
            "chunk finish: replayState must be an object, got 'opaque'",
        ),
    ],
)
def test_invalid_chunks_are_refused_with_what_and_where(obj: Any, message: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        chunk_from_json(obj)
    assert str(info.value).startswith(message)


def test_a_null_tool_call_name_reads_as_absent() -> None:
    chunk = chunk_from_json(
        {"type": "tool-call-delta", "index": 0, "id": "c", "name": None, "argumentsDelta": ""}
    )
    assert chunk == ToolCallDelta(index=0, id="c", arguments_delta="")


# --- generated chunks: to_json then chunk_from_json is the identity

indexes = st.integers(0, 2**40)
texts = st.text(max_size=12)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(TextBlock, text=texts),
    st.builds(ReasoningBlock, text=texts),
    st.builds(ToolCallBlock, id=texts, name=texts, arguments=texts),
    st.builds(
        ToolResultBlock,
        tool_call_id=texts,
        content=st.lists(st.builds(TextBlock, text=texts), max_size=2).map(tuple),
        is_error=st.none() | st.booleans(),
    ),
    st.dictionaries(texts, json_values, max_size=3).map(
        lambda d: OpaqueBlock(type="image", data=freeze_json({**d, "type": "image"}))
    ),
)
counts = st.integers(0, 2**40)
usages = st.builds(
    TokenUsage,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=st.none() | counts,
    cache_write_tokens=st.none() | counts,
    reasoning_tokens=st.none() | counts,
)
failures = st.builds(
    LlmFailure,
    message=texts,
    code=st.sampled_from(["RATE_LIMIT", "SERVER", "AUTH", "UNKNOWN"]),
    status=st.none() | st.integers(100, 599),
    retryable=st.booleans(),
    retry_after_ms=st.none() | counts,
    request_id=st.none() | texts,
)
reasons = st.builds(
    FinishReason,
    kind=st.sampled_from(["stop", "tool-calls", "max-tokens", "error", "aborted"]),
    failure=st.none() | failures,
)
chunks: st.SearchStrategy[StreamChunk] = st.one_of(
    st.builds(BlockStart, index=indexes, block_type=st.sampled_from(["text", "reasoning", "x"])),
    st.builds(TextDelta, index=indexes, text=texts),
    st.builds(ReasoningDelta, index=indexes, text=texts),
    st.builds(
        ToolCallDelta, index=indexes, id=texts, arguments_delta=texts, name=st.none() | texts
    ),
    st.builds(BlockEnd, index=indexes, block=blocks),
    st.builds(UsageChunk, usage=usages),
    st.builds(
        Finish,
        reason=reasons,
        replay_state=st.none() | st.dictionaries(texts, json_values, max_size=3).map(freeze_json),
    ),
)


@given(chunks)
def test_chunk_json_round_trips(chunk: StreamChunk) -> None:
    assert chunk_from_json(chunk.to_json()) == chunk


@given(chunks)
def test_each_chunk_class_parses_its_own_json(chunk: StreamChunk) -> None:
    parsed = type(chunk).from_json(chunk.to_json())
    assert parsed == chunk and type(parsed) is type(chunk)


CHUNK_CLASSES: list[Any] = [
    BlockStart,
    TextDelta,
    ReasoningDelta,
    ToolCallDelta,
    BlockEnd,
    UsageChunk,
    Finish,
]
CHUNK_JSON: dict[str, dict[str, Any]] = {obj["type"]: obj for _, obj in EXAMPLES}


def _chunk_type(cls: Any) -> str:
    return str(cls.__dataclass_fields__["type"].default)


@pytest.mark.parametrize("cls", CHUNK_CLASSES, ids=lambda c: c.__name__)
def test_a_chunk_class_refuses_every_other_chunk_type(cls: Any) -> None:
    own = _chunk_type(cls)
    assert cls.from_json(CHUNK_JSON[own]).to_json() == CHUNK_JSON[own]
    for other, obj in CHUNK_JSON.items():
        if other == own:
            continue
        with pytest.raises(InvalidEventError) as info:
            cls.from_json(obj)
        assert str(info.value) == (
            f"{cls.__name__}.from_json needs a chunk of type {own!r}, got type {other!r}; "
            "use chunk_from_json to parse a chunk of any type"
        )


@pytest.mark.parametrize("cls", CHUNK_CLASSES, ids=lambda c: c.__name__)
def test_a_chunk_class_refuses_json_that_is_not_a_chunk(cls: Any) -> None:
    own = _chunk_type(cls)
    with pytest.raises(InvalidEventError) as info:
        cls.from_json([CHUNK_JSON[own]])
    assert str(info.value) == f"{cls.__name__}.from_json needs a {own!r} chunk object, got list"
    with pytest.raises(InvalidEventError, match=r"got type None"):
        cls.from_json({k: v for k, v in CHUNK_JSON[own].items() if k != "type"})


def test_a_chunk_class_reports_the_field_errors_of_its_own_type() -> None:
    with pytest.raises(InvalidEventError, match="chunk text-delta: index must be"):
        TextDelta.from_json({"type": "text-delta", "index": -1, "text": "x"})
    with pytest.raises(InvalidEventError, match=r"usage\.outputTokens must be"):
        UsageChunk.from_json({"type": "usage", "usage": {"inputTokens": 1}})
    with pytest.raises(InvalidEventError, match="block must be an object"):
        BlockEnd.from_json({"type": "block-end", "index": 0, "block": "text"})


# --------------------------------------------------------------------------------------------
# BlockAssembler


def feed(*chunks: StreamChunk) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


def test_an_empty_stream_assembles_nothing_and_counts_as_stop() -> None:
    assembler = feed()
    assert assembler.blocks() == ()
    assert assembler.finish is None and assembler.usage is None
    assert assembler.finish_reason == FinishReason(kind="stop")


def test_open_blocks_assemble_from_their_deltas_in_first_seen_order() -> None:
    assembler = feed(
        ReasoningDelta(index=5, text="think"),
        TextDelta(index=1, text="Hel"),
        ReasoningDelta(index=5, text="ing"),
        TextDelta(index=1, text="lo"),
        BlockStart(index=0, block_type="text"),  # first seen last: it comes last
    )
    assert assembler.blocks() == (
        ReasoningBlock(text="thinking"),
        TextBlock(text="Hello"),
        TextBlock(text=""),
    )


def test_a_block_end_is_authoritative_and_the_first_close_wins() -> None:
    assembler = feed(
        TextDelta(index=0, text="draft"),
        BlockEnd(index=0, block=TextBlock(text="final")),
        TextDelta(index=0, text=" ignored"),  # a delta after the close changes nothing
        BlockStart(index=0, block_type="text"),  # nor does a re-open
        BlockEnd(index=0, block=TextBlock(text="second close")),
    )
    assert assembler.blocks() == (TextBlock(text="final"),)
    call = ToolCallBlock(id="c1", name="read", arguments="{}")
    closed_call = feed(
        BlockEnd(index=1, block=call),
        ToolCallDelta(index=1, id="c2", name="write", arguments_delta="{]"),
    )
    assert closed_call.blocks() == (call,)


def test_feeding_something_that_is_not_a_chunk_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not a stream chunk: 'text'"):
        BlockAssembler().feed("text")  # type: ignore[arg-type]


def test_a_block_end_without_deltas_takes_its_place_at_the_close() -> None:
    assembler = feed(
        TextDelta(index=1, text="a"),
        BlockEnd(index=0, block=ReasoningBlock(text="r")),
        BlockEnd(index=1, block=TextBlock(text="a!")),
    )
    assert assembler.blocks() == (TextBlock(text="a!"), ReasoningBlock(text="r"))


def test_an_open_tool_call_gets_its_id_and_name_from_the_first_fragments() -> None:
    assembler = feed(
        ToolCallDelta(index=2, id="", arguments_delta='{"p'),  # no id yet
        ToolCallDelta(index=2, id="c9", name="read", arguments_delta='ath"'),
        ToolCallDelta(index=2, id="c-other", name="write", arguments_delta=":1}"),
    )
    assert assembler.blocks() == (ToolCallBlock(id="c9", name="read", arguments='{"path":1}'),)


def test_an_open_tool_call_without_id_or_name_gets_call_index_and_empty_name() -> None:
    assembler = feed(
        BlockStart(index=3, block_type="tool-call"),
        ToolCallDelta(index=3, id="", arguments_delta="{}"),
    )
    assert assembler.blocks() == (ToolCallBlock(id="call-3", name="", arguments="{}"),)
    assert feed(BlockStart(index=7, block_type="tool-call")).blocks() == (
        ToolCallBlock(id="call-7", name="", arguments=""),
    )


def test_an_unknown_open_block_kind_assembles_as_text() -> None:
    assert feed(BlockStart(index=0, block_type="image")).blocks() == (TextBlock(text=""),)


def test_max_tokens_drops_tool_calls_open_or_closed() -> None:
    assembler = feed(
        TextDelta(index=0, text="Let me "),
        ToolCallDelta(index=1, id="c1", name="read", arguments_delta="{"),
        BlockEnd(index=2, block=ToolCallBlock(id="c2", name="read", arguments="{}")),
        Finish(reason=FinishReason(kind="max-tokens")),
    )
    assert assembler.blocks() == (TextBlock(text="Let me "),)
    assert assembler.finish_reason.kind == "max-tokens"


def test_other_finishes_keep_tool_calls_and_the_last_usage_wins() -> None:
    first, last = (
        TokenUsage(input_tokens=1, output_tokens=1),
        TokenUsage(input_tokens=9, output_tokens=9),
    )
    call = ToolCallBlock(id="c1", name="read", arguments="{}")
    finish = Finish(reason=FinishReason(kind="tool-calls"))
    assembler = feed(
        UsageChunk(usage=first), BlockEnd(index=0, block=call), UsageChunk(usage=last), finish
    )
    assert assembler.blocks() == (call,)
    assert assembler.usage == last
    assert assembler.finish is finish and assembler.finish_reason.kind == "tool-calls"


def test_interrupted_blocks_keep_non_blank_text_and_reasoning_only() -> None:
    assembler = feed(
        TextDelta(index=0, text="partial answer"),
        ReasoningDelta(index=1, text="  \n"),  # blank: dropped
        ToolCallDelta(index=2, id="c1", name="read", arguments_delta="{"),  # a call: dropped
        BlockEnd(index=3, block=ReasoningBlock(text="closed thought")),
        BlockEnd(index=4, block=TextBlock(text="")),  # empty: dropped
        BlockEnd(index=5, block=OpaqueBlock(type="image", data=freeze_json({"type": "image"}))),
    )
    assert assembler.interrupted_blocks() == (
        TextBlock(text="partial answer"),
        ReasoningBlock(text="closed thought"),
    )


def test_message_from_blocks_is_an_assistant_message_with_a_model_source() -> None:
    message = message_from_blocks(
        (TextBlock(text="hi"),), provider="deepseek", model="deepseek-chat", id="a1"
    )
    assert message.to_json() == {
        "id": "a1",
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
    }


# --- the law: streaming a block list (any chunking, any interleaving) reassembles it


def _pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=3)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _block_chunks(draw: st.DrawFn, index: int, block: ContentBlock) -> list[StreamChunk]:
    """One block's chunks (its block-start first): deltas only, or deltas then a block-end."""
    kind = block.type if isinstance(block, (TextBlock, ReasoningBlock, ToolCallBlock)) else "x"
    out: list[StreamChunk] = [BlockStart(index=index, block_type=kind)]
    closes = draw(st.booleans()) or kind == "x"
    if isinstance(block, TextBlock):
        out += [TextDelta(index=index, text=p) for p in _pieces(draw, block.text)]
    elif isinstance(block, ReasoningBlock):
        out += [ReasoningDelta(index=index, text=p) for p in _pieces(draw, block.text)]
    elif isinstance(block, ToolCallBlock):
        parts = _pieces(draw, block.arguments)
        out += [
            ToolCallDelta(
                index=index, id=block.id, name=block.name if i == 0 else None, arguments_delta=p
            )
            for i, p in enumerate(parts)
        ]
    if closes:
        out.append(BlockEnd(index=index, block=block))
    return out


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[ContentBlock], FinishReason, list[StreamChunk]]:
    content: list[ContentBlock] = draw(
        st.lists(
            st.one_of(
                st.builds(TextBlock, text=texts),
                st.builds(ReasoningBlock, text=texts),
                st.builds(ToolCallBlock, id=texts.filter(bool), name=texts, arguments=texts),
                st.builds(
                    ToolResultBlock,
                    tool_call_id=texts,
                    content=st.just((TextBlock(text="r"),)),
                ),
            ),
            max_size=5,
        )
    )
    indexes = draw(st.lists(st.integers(0, 50), min_size=len(content), unique=True))
    per_block = [_block_chunks(draw, i, b) for i, b in zip(indexes, content, strict=False)]
    # Every block-start comes first, in block order; the rest interleaves arbitrarily.
    out: list[StreamChunk] = [chunks_of[0] for chunks_of in per_block]
    queues = [chunks_of[1:] for chunks_of in per_block]
    while any(queues):
        live = [q for q in queues if q]
        queue = live[draw(st.integers(0, len(live) - 1))]
        out.append(queue.pop(0))
        if draw(st.booleans()):
            out.append(UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=len(out))))
    reason = draw(reasons)
    return content, reason, [*out, Finish(reason=reason)]


@given(streams())
def test_streaming_blocks_reassembles_them(
    case: tuple[list[ContentBlock], FinishReason, list[StreamChunk]],
) -> None:
    content, reason, chunks_ = case
    assembler = feed(*chunks_)
    assert assembler.finish_reason == reason
    if reason.kind == "max-tokens":
        assert assembler.blocks() == tuple(b for b in content if not isinstance(b, ToolCallBlock))
    else:
        assert assembler.blocks() == tuple(content)
    assert assembler.interrupted_blocks() == tuple(
        b for b in content if isinstance(b, (TextBlock, ReasoningBlock)) and b.text.strip()
    )
    usages = [c.usage for c in chunks_ if isinstance(c, UsageChunk)]
    assert assembler.usage == (usages[-1] if usages else None)


# --------------------------------------------------------------------------------------------
# CancelToken and CancelGuard


async def test_a_cancel_token_fires_once_with_the_first_reason() -> None:
    token = CancelToken()
    assert not token.cancelled and token.reason is None
    waiter = asyncio.ensure_future(token.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    token.cancel("timeout")
    token.cancel("user")  # a second cancel changes nothing
    await waiter
    assert token.cancelled and token.reason == "timeout"
    await token.wait()  # returns at once once fired


async def test_the_default_cancel_reason_is_user() -> None:
    token = CancelToken()
    token.cancel()
    assert token.reason == "user"


async def test_a_guard_passes_results_through_and_exposes_its_token() -> None:
    token = CancelToken()
    guard = CancelGuard(token)
    assert guard.token is token
    guard.check()  # not fired: no error

    async def answer() -> int:
        return 42

    assert await guard(answer()) == 42
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.set_result("done")
    assert await guard(future) == "done"  # a plain awaitable works too
    await guard.aclose()


async def test_a_guard_propagates_the_work_s_own_error() -> None:
    guard = CancelGuard(CancelToken())

    async def broken() -> None:
        raise KeyError("inner")

    with pytest.raises(KeyError, match="inner"):
        await guard(broken())
    await guard.aclose()


async def test_a_fired_token_aborts_the_await_and_cancels_the_work() -> None:
    token = CancelToken()
    guard = CancelGuard(token)
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def fire() -> None:
        await started.wait()
        token.cancel("stop button")

    firing = asyncio.ensure_future(fire())
    with pytest.raises(Aborted) as info:
        await guard(slow())
    await firing
    assert info.value.reason == "stop button" and str(info.value) == "cancelled (stop button)"
    assert cancelled.is_set()
    with pytest.raises(Aborted):
        guard.check()
    await guard.aclose()


async def test_a_token_already_fired_closes_a_coroutine_without_running_it() -> None:
    token = CancelToken()
    token.cancel("early")
    guard = CancelGuard(token)
    ran = []

    async def work() -> None:
        ran.append(1)

    coro = work()
    with pytest.raises(Aborted, match=r"cancelled \(early\)"):
        await guard(coro)
    assert ran == [] and coro.cr_frame is None  # type: ignore[attr-defined]  # closed: no "never awaited" warning either


async def test_a_token_already_fired_cancels_a_future() -> None:
    token = CancelToken()
    token.cancel()
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    with pytest.raises(Aborted, match=r"cancelled \(user\)"):
        await CancelGuard(token)(future)
    assert future.cancelled()


class _Awaitable:
    """An awaitable that is neither a coroutine nor a future."""

    def __init__(self) -> None:
        self.awaited = False

    def __await__(self) -> Generator[Any, None, int]:
        self.awaited = True
        yield from asyncio.sleep(0).__await__()
        return 7


async def test_a_plain_awaitable_is_wrapped_and_left_alone_when_already_fired() -> None:
    guard = CancelGuard(CancelToken())
    assert await guard(_Awaitable()) == 7
    fired = CancelToken()
    fired.cancel()
    pending = _Awaitable()
    with pytest.raises(Aborted):
        await CancelGuard(fired)(pending)
    assert not pending.awaited


async def test_an_outer_cancellation_cancels_the_guarded_work() -> None:
    guard = CancelGuard(CancelToken())
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    outer = asyncio.ensure_future(guard(slow()))
    await started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert cancelled.is_set()
    await guard.aclose()


async def test_one_waiter_serves_every_await_and_aclose_reaps_it() -> None:
    guard = CancelGuard(CancelToken())

    async def value(x: int) -> int:
        return x

    assert await guard(value(1)) == 1
    waiter = guard._waiter
    assert waiter is not None and not waiter.done()
    assert await guard(value(2)) == 2
    assert guard._waiter is waiter  # reused, not one task per await
    await guard.aclose()
    assert waiter.cancelled() and guard._waiter is None
    await guard.aclose()  # idempotent


async def test_aclose_after_the_token_fired_leaves_the_finished_waiter() -> None:
    token = CancelToken()
    guard = CancelGuard(token)

    async def value() -> int:
        return 1

    await guard(value())
    token.cancel()
    await asyncio.sleep(0)
    waiter = guard._waiter
    assert waiter is not None and waiter.done() and not waiter.cancelled()
    await guard.aclose()
    assert guard._waiter is None


# --------------------------------------------------------------------------------------------
# GenerateOptions and Provider


TOOL = ToolSchema(name="read", description="Read.", parameters=freeze_json({"type": "object"}))


def test_mutable_lists_become_tuples() -> None:
    hi = user_message("hi", id="u1")
    options = GenerateOptions(
        provider="p",
        model="m",
        messages=[hi],
        stop=["<END>"],  # type: ignore[arg-type]
        tools=[TOOL],  # type: ignore[arg-type]
    )
    assert options.messages == (hi,) and isinstance(options.messages, tuple)
    assert options.stop == ("<END>",)
    assert options.tools == (TOOL,)
    assert hash(options) == hash(
        GenerateOptions(provider="p", model="m", messages=(hi,), stop=("<END>",), tools=(TOOL,))
    )


def test_config_is_the_call_config_fields() -> None:
    options = GenerateOptions(
        provider="p",
        model="m",
        messages=(),
        reasoning_effort="high",
        temperature=0.5,
        max_tokens=99,
        stop=("x",),
        system="be brief",
        session_id="s1",
    )
    assert options.config == LlmCallConfig(
        provider="p",
        model="m",
        reasoning_effort="high",
        temperature=0.5,
        max_tokens=99,
        stop=("x",),
    )


def test_to_json_minimal_and_full() -> None:
    assert GenerateOptions(provider="p", model="m", messages=()).to_json() == {
        "provider": "p",
        "model": "m",
        "messages": [],
    }
    hi = user_message("hi", id="u1")
    full = GenerateOptions(
        provider="p",
        model="m",
        messages=(hi,),
        temperature=0,
        system="sys",
        tools=(TOOL,),
        session_id="s1",
        purpose="compaction",
    )
    body = full.to_json()
    assert body == {
        "provider": "p",
        "model": "m",
        "temperature": 0,
        "messages": [hi.to_json()],
        "system": "sys",
        "tools": [TOOL.to_json()],
        "sessionId": "s1",
        "purpose": "compaction",
    }
    assert full.canonical_json() == (
        '{"provider":"p","model":"m","temperature":0,"messages":[{"id":"u1","role":"user",'
        '"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}],"system":"sys",'
        '"tools":[{"name":"read","description":"Read.","parameters":{"type":"object"}}],'
        '"sessionId":"s1","purpose":"compaction"}'
    )
    # a str is accepted and becomes a ToolsPlaceholder
    placeholder = GenerateOptions(provider="p", model="m", messages=(), tools="{{tools}}")  # type: ignore[arg-type]
    assert placeholder.to_json()["tools"] == "{{tools}}"


def test_the_cancel_token_is_not_part_of_the_value() -> None:
    a = GenerateOptions(provider="p", model="m", messages=(), cancel=CancelToken())
    b = GenerateOptions(provider="p", model="m", messages=())
    assert a == b and "cancel" not in repr(a) and "cancel" not in a.to_json()
    assert a.canonical_json() == b.canonical_json()


requests = st.builds(
    lambda header, msgs, session_id, purpose: dataclasses.replace(
        GenerateOptions.from_header(header, msgs, session_id=session_id), purpose=purpose
    ),
    epoch_headers(),
    st.lists(messages(), max_size=4),
    st.none() | texts,
    st.none() | st.sampled_from(["compaction", "title"]),
)


@pytest.mark.slow
@settings(max_examples=60)  # each example is a whole request
@given(requests)
def test_generate_options_json_round_trips(request: GenerateOptions) -> None:
    again = GenerateOptions.from_json(request.to_json())
    assert again == request
    assert again.canonical_json() == request.canonical_json()
    # From plain JSON text too, as a recorded request is read back.
    assert GenerateOptions.from_json(json.loads(request.canonical_json())) == request


def test_generate_options_from_json_reads_the_full_and_the_placeholder_forms() -> None:
    hi = user_message("hi", id="u1")
    full = GenerateOptions(
        provider="p",
        model="m",
        messages=(hi,),
        reasoning_effort="high",
        temperature=0.5,
        max_tokens=9,
        stop=("x",),
        system="sys",
        tools=(TOOL,),
        session_id="s1",
        purpose="compaction",
    )
    parsed = GenerateOptions.from_json(full.to_json())
    assert parsed == full and parsed.messages == (hi,) and parsed.tools == (TOOL,)
    assert parsed.cancel is None
    placeholder = GenerateOptions(  # a str tools becomes a ToolsPlaceholder
        provider="p",
        model="m",
        messages=(),
        system="{{system}}",
        tools="{{tools}}",  # type: ignore[arg-type]
    )
    assert GenerateOptions.from_json(placeholder.to_json()) == placeholder
    empty = GenerateOptions(provider="p", model="m", messages=(), system="", tools=())
    assert GenerateOptions.from_json(empty.to_json()).to_json() == empty.to_json()


BASE_REQUEST: dict[str, Any] = {"provider": "p", "model": "m", "messages": []}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "a request must be an object, got list"),
        ({**BASE_REQUEST, "messages": "hi"}, "request.messages must be an array, got str"),
        ({"provider": "p", "model": "m"}, "request.messages must be an array, got NoneType"),
        ({**BASE_REQUEST, "cancel": True}, "request has unknown keys ['cancel']"),
        ({"model": "m", "messages": []}, "request: config lacks provider/model"),
        ({**BASE_REQUEST, "maxTokens": "9"}, "request: config.maxTokens must be an integer"),
        ({**BASE_REQUEST, "system": 3}, "request: header system must be a string, got a number"),
        ({**BASE_REQUEST, "tools": "all"}, "request: header tools must be an array of tool"),
        ({**BASE_REQUEST, "tools": [{"name": "t"}]}, "request: tool 't': parameters must be"),
        (
            {**BASE_REQUEST, "tools": [TOOL.to_json(), TOOL.to_json()]},
            "request: duplicate tool name 'read'",
        ),
        (
            {**BASE_REQUEST, "messages": [{"id": "u1", "role": "bot"}]},
            "request.messages[0]: message u1: role must be system|user|assistant",
        ),
        ({**BASE_REQUEST, "sessionId": 7}, "request.sessionId must be a string, got 7"),
        ({**BASE_REQUEST, "purpose": ["x"]}, "request.purpose must be a string, got ['x']"),
    ],
)
def test_invalid_request_json_names_the_field(obj: Any, message: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        GenerateOptions.from_json(obj)
    assert str(info.value).startswith(message), str(info.value)


def test_any_object_with_a_stream_method_is_a_provider() -> None:
    class Echo:
        async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
            yield Finish(reason=FinishReason(kind="stop"))

    assert isinstance(Echo(), Provider)
    assert not isinstance(object(), Provider)
