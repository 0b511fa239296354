"""Rendering a resolved answer as the API's JSON: chunk sequence, usage placement, shapes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from dsh_core.providers.anthropic import tool_input
from dsh_testkit.mock._render import (
    Completion,
    CompletionToolCall,
    WireUsage,
    anthropic_events,
    anthropic_message,
    chat_chunks,
    chat_completion,
    split_evenly,
    split_text,
)
from dsh_testkit.prompt._cache_values import anthropic_usage, deepseek_usage

USAGE = WireUsage(
    prompt_tokens=306, completion_tokens=85, cache_hit_tokens=256, reasoning_tokens=31
)


def completion(**fields: object) -> Completion:
    base: dict[str, object] = {
        "id": "0f0e",
        "created": 1,
        "model": "deepseek-v4-flash",
        "thinking": True,
        "usage": USAGE,
    }
    base.update(fields)
    return Completion(**base)  # type: ignore[arg-type]


def test_usage_matches_the_observed_v4_field_order_and_sums() -> None:
    assert json.dumps(USAGE.deepseek_json(), separators=(",", ":")) == (
        '{"prompt_tokens":306,"completion_tokens":85,"total_tokens":391,'
        '"prompt_tokens_details":{"cached_tokens":256},'
        '"completion_tokens_details":{"reasoning_tokens":31},'
        '"prompt_cache_hit_tokens":256,"prompt_cache_miss_tokens":50}'
    )
    plain = WireUsage(prompt_tokens=10, completion_tokens=2).deepseek_json()
    assert "completion_tokens_details" not in plain
    assert USAGE.anthropic_json() == {
        "input_tokens": 50,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 256,
        "output_tokens": 85,
    }


@st.composite
def wire_usages(draw: st.DrawFn) -> WireUsage:
    prompt = draw(st.integers(0, 10**6))
    return WireUsage(
        prompt_tokens=prompt,
        completion_tokens=draw(st.integers(0, 10**5)),
        cache_hit_tokens=draw(st.integers(0, prompt)),
        reasoning_tokens=draw(st.none() | st.integers(0, 10**5)),
    )


@given(wire_usages(), st.none() | st.integers(0, 10))
def test_wire_usage_is_rendered_by_the_cache_module_alone(
    usage: WireUsage, output_tokens: int | None
) -> None:
    """One implementation of each usage object: ``WireUsage`` delegates to the cache module's
    ``deepseek_usage`` / ``anthropic_usage`` (same keys, same order)."""
    deepseek = deepseek_usage(
        usage.cache,
        completion_tokens=usage.completion_tokens,
        reasoning_tokens=usage.reasoning_tokens,
    )
    assert list(usage.deepseek_json().items()) == list(deepseek.items())
    anthropic = anthropic_usage(
        usage.cache,
        output_tokens=usage.completion_tokens if output_tokens is None else output_tokens,
    )
    assert list(usage.anthropic_json(output_tokens=output_tokens).items()) == list(
        anthropic.items()
    )
    assert usage.cache.miss_tokens == usage.prompt_tokens - usage.cache_hit_tokens


def test_thinking_stream_follows_the_observed_v4_sequence() -> None:
    c = completion(
        reasoning="think",
        text="answer",
        tool_calls=(
            CompletionToolCall(
                id="call_00_x", name="f", arguments='{"a":1}', fragments=('{"a"', ":1}")
            ),
        ),
        finish_reason="tool_calls",
        chunk_size=4,
    )
    deltas = [ch["choices"][0]["delta"] for ch in chat_chunks(c, include_usage=False)]
    assert deltas == [
        {"role": "assistant", "content": None, "reasoning_content": ""},
        {"content": None, "reasoning_content": "thin"},
        {"content": None, "reasoning_content": "k"},
        {"content": "answ", "reasoning_content": None},
        {"content": "er", "reasoning_content": None},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_00_x",
                    "type": "function",
                    "function": {"name": "f", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]},
        {"content": "", "reasoning_content": None},
    ]


def test_usage_rides_on_the_last_chunk_only_and_include_usage_adds_nulls() -> None:
    c = completion(text="hello world")
    without = chat_chunks(c, include_usage=False)
    assert all("usage" not in ch for ch in without[:-1])
    assert without[-1]["usage"] == USAGE.deepseek_json()
    assert without[-1]["choices"][0]["finish_reason"] == "stop"
    with_usage = chat_chunks(c, include_usage=True)
    assert [ch["usage"] for ch in with_usage[:-1]] == [None] * (len(with_usage) - 1)
    # never an OpenAI-style extra chunk with empty choices
    assert all(len(ch["choices"]) == 1 for ch in with_usage)
    assert {ch["id"] for ch in with_usage} == {"0f0e"}


def test_non_thinking_stream_and_message_have_no_reasoning_keys() -> None:
    c = completion(thinking=False, text="hi")
    deltas = [ch["choices"][0]["delta"] for ch in chat_chunks(c, include_usage=False)]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "hi"}, {"content": ""}]
    assert chat_completion(c)["choices"][0]["message"] == {"role": "assistant", "content": "hi"}


def test_non_stream_message_carries_indexed_tool_calls_and_empty_content() -> None:
    c = completion(
        reasoning="r",
        tool_calls=(
            CompletionToolCall(id="call_00_a", name="f", arguments="{}", fragments=("{}",)),
        ),
        finish_reason="tool_calls",
    )
    body = chat_completion(c)
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "r",
        "tool_calls": [
            {
                "index": 0,
                "id": "call_00_a",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
            }
        ],
    }
    assert body["usage"] == USAGE.deepseek_json()


def test_anthropic_message_puts_thinking_first_and_parses_tool_input() -> None:
    c = completion(
        reasoning="r",
        text="t",
        tool_calls=(
            CompletionToolCall(id="toolu_1", name="f", arguments='{"a":1}', fragments=()),
            CompletionToolCall(id="toolu_2", name="g", arguments="not json", fragments=()),
        ),
        finish_reason="tool_calls",
    )
    message = anthropic_message(c)
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert message["content"][2]["input"] == {"a": 1}
    assert message["content"][3]["input"] == {}
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["cache_read_input_tokens"] == 256


def test_anthropic_events_follow_the_documented_order() -> None:
    c = completion(
        text="hey",
        tool_calls=(
            CompletionToolCall(id="toolu_1", name="f", arguments="{}", fragments=("{", "}")),
        ),
        finish_reason="length",
    )
    names = [name for name, _ in anthropic_events(c)]
    assert names == [
        "message_start",
        "content_block_start", "ping", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta",
        "message_stop",
    ]  # fmt: skip
    start = anthropic_events(c)[0][1]["message"]
    assert start["content"] == [] and start["usage"]["output_tokens"] == 1
    delta = anthropic_events(c)[-2][1]
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert delta["usage"]["output_tokens"] == 85
    partials = [
        p["delta"]["partial_json"]
        for n, p in anthropic_events(c)
        if p.get("index") == 1 and n == "content_block_delta"
    ]
    assert partials == ["", "{", "}"]


@given(st.text(max_size=60), st.integers(1, 10))
def test_split_text_pieces_rejoin_and_respect_the_size(text: str, size: int) -> None:
    pieces = split_text(text, size)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= size for p in pieces)


@given(st.text(max_size=60), st.integers(1, 10))
def test_split_evenly_rejoins_into_at_most_n_nearly_equal_pieces(text: str, parts: int) -> None:
    pieces = split_evenly(text, parts)
    assert "".join(pieces) == text
    assert len(pieces) == (min(parts, len(text)) if text else 0)
    if pieces:
        assert max(map(len, pieces)) - min(map(len, pieces)) <= 1


def test_tool_input_is_the_arguments_object_or_empty() -> None:
    assert tool_input('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    assert tool_input("not json") == {}
    assert tool_input("[1, 2]") == {}
    assert tool_input("") == {}
