"""``WireFormatError.code``: a stable machine code for every structural refusal, and the tool-name
rules (pattern, length, count, duplicates) applied by both codecs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dsh_core.providers import WireFormatError
from dsh_core.providers import anthropic as anthropic_codec
from dsh_core.providers import deepseek as deepseek_codec
from dsh_core.providers._sse import SseEvent
from dsh_core.providers._wire import TOOL_NAME_PATTERN


def _chat(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "deepseek-flash",
        "messages": [{"role": "user", "content": "hi"}],
    }
    body.update(fields)
    return body


def _chat_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def _anthropic(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "deepseek-flash",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    body.update(fields)
    return body


def _anthropic_tool(name: str) -> dict[str, Any]:
    return {"name": name, "input_schema": {"type": "object"}}


def _refusal(parse: Callable[[Any], object], body: Any) -> WireFormatError:
    with pytest.raises(WireFormatError) as caught:
        parse(body)
    return caught.value


@pytest.mark.parametrize(
    ("body", "code", "param", "value", "limit"),
    [
        (b"{not json", "invalid_json", "", None, None),
        ({"messages": []}, "missing_field", "model", "model", None),
        (_chat(model=7), "invalid_type", "model", "an integer", None),
        (_chat(messages=[]), "empty", "messages", None, None),
        (
            _chat(messages=[{"role": "developer", "content": "x"}]),
            "unknown_variant",
            "messages[0].role",
            "developer",
            None,
        ),
        (_chat(temperature=2.5), "out_of_range", "temperature", 2.5, 2),
        (_chat(temperature=-1), "out_of_range", "temperature", -1, 0),
        (_chat(max_tokens=0), "out_of_range", "max_tokens", 0, 1),
        (_chat(top_logprobs=21), "out_of_range", "top_logprobs", 21, 20),
        (_chat(stop=["s"] * 17), "too_many", "stop", 17, 16),
        (_chat(user_id="a b"), "pattern_mismatch", "user_id", "a b", None),
        (
            _chat(tools=[_chat_tool(f"t{i}") for i in range(129)]),
            "too_many",
            "tools",
            129,
            128,
        ),
        (
            _chat(tools=[_chat_tool("has space")]),
            "pattern_mismatch",
            "tools[0].function.name",
            "has space",
            None,
        ),
        (_chat(tools=[_chat_tool("")]), "pattern_mismatch", "tools[0].function.name", "", None),
        (
            _chat(tools=[_chat_tool("a" * 129)]),
            "too_long",
            "tools[0].function.name",
            "a" * 129,
            128,
        ),
        (
            _chat(tools=[_chat_tool("dup"), _chat_tool("ok"), _chat_tool("dup")]),
            "duplicate_name",
            "tools[2].function.name",
            "dup",
            None,
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None,
)
def test_chat_codec_codes(body: Any, code: str, param: str, value: object, limit: object) -> None:
    error = _refusal(deepseek_codec.parse_request, body)
    assert (error.code, error.param, error.value, error.limit) == (code, param, value, limit)
    assert param in str(error)


def test_exactly_128_tools_with_128_character_names_are_accepted() -> None:
    names = [f"{i:03d}" + "x" * 125 for i in range(128)]
    request = deepseek_codec.parse_request(_chat(tools=[_chat_tool(n) for n in names]))
    assert request.tools is not None and [t.name for t in request.tools] == names
    anthropic = anthropic_codec.parse_request(_anthropic(tools=[_anthropic_tool(n) for n in names]))
    assert anthropic.tools is not None and len(anthropic.tools) == 128


def test_tool_count_is_checked_before_the_tools_themselves() -> None:
    tools: list[Any] = [{"type": "bogus"}] * 129
    assert _refusal(deepseek_codec.parse_request, _chat(tools=tools)).code == "too_many"


@pytest.mark.parametrize(
    ("tools", "code", "param", "value"),
    [
        ([_anthropic_tool("bad/name")], "pattern_mismatch", "tools[0].name", "bad/name"),
        ([_anthropic_tool("n" * 200)], "too_long", "tools[0].name", "n" * 200),
        ([_anthropic_tool(f"t{i}") for i in range(129)], "too_many", "tools", 129),
        (
            [_anthropic_tool("a"), _anthropic_tool("a")],
            "duplicate_name",
            "tools[1].name",
            "a",
        ),
        (
            # a server tool's name is DeepSeek's own, but it still may not repeat a custom one
            [_anthropic_tool("web_search"), {"type": "web_search_20250305", "name": "web_search"}],
            "duplicate_name",
            "tools[1].name",
            "web_search",
        ),
    ],
)
def test_anthropic_codec_applies_the_same_tool_rules(
    tools: list[Any], code: str, param: str, value: object
) -> None:
    error = _refusal(anthropic_codec.parse_request, _anthropic(tools=tools))
    assert (error.code, error.param, error.value) == (code, param, value)


def test_a_server_tool_name_is_not_held_to_the_custom_pattern() -> None:
    request = anthropic_codec.parse_request(
        _anthropic(tools=[{"type": "web_search_20250305", "name": "web search"}])
    )
    assert request.tools is not None and request.tools[0]["name"] == "web search"


def test_the_pattern_is_the_one_the_api_quotes() -> None:
    assert TOOL_NAME_PATTERN == "^[a-zA-Z0-9_-]+$"


@pytest.mark.parametrize(
    ("events", "code"),
    [
        ([SseEvent(data="{oops")], "invalid_json"),
        (
            [
                SseEvent(
                    event="content_block_delta",
                    data='{"index": 3, "delta": {"type": "text_delta", "text": "x"}}',
                )
            ],
            "invalid_stream",
        ),
        (
            [
                SseEvent(
                    event="content_block_start",
                    data='{"index": 0, "content_block": {"type": "text", "text": ""}}',
                ),
                SseEvent(
                    event="content_block_start",
                    data='{"index": 0, "content_block": {"type": "text", "text": ""}}',
                ),
            ],
            "invalid_stream",
        ),
        (
            [
                SseEvent(
                    event="content_block_start",
                    data='{"index": 0, "content_block": {"type": "text", "text": ""}}',
                ),
                SseEvent(
                    event="content_block_delta",
                    data='{"index": 0, "delta": {"type": "thinking_delta", "thinking": "x"}}',
                ),
            ],
            "invalid_stream",
        ),
    ],
)
def test_anthropic_stream_faults_have_codes(events: list[SseEvent], code: str) -> None:
    translator = anthropic_codec.EventTranslator()
    with pytest.raises(WireFormatError) as caught:
        for event in events:
            translator.handle_event(event)
    assert caught.value.code == code


def test_chat_stream_data_that_is_not_json_has_a_code() -> None:
    with pytest.raises(WireFormatError) as caught:
        deepseek_codec.ChunkTranslator().handle_event(SseEvent(data="{oops"))
    assert caught.value.code == "invalid_json"


_USER = '"messages":[{"role":"user","content":"x"}]'


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        # NaN and Infinity literals are not JSON (Python's json module would accept them)
        (f'{{"model":"m",{_USER},"temperature":NaN}}'.encode(), "invalid_json", ""),
        (f'{{"model":"m",{_USER},"temperature":-Infinity}}', "invalid_json", ""),
        # a number too large for a float becomes an infinity: refused where it lands
        (f'{{"model":"m",{_USER},"temperature":1e400}}', "out_of_range", "temperature"),
        (f'{{"model":"m",{_USER},"seed":1e400}}', "invalid_json", "seed"),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "a", "parameters": {"x": float("nan")}},
                    }
                ],
            },
            "invalid_json",
            "tools[0].function.parameters.x",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": float("nan")},
            "out_of_range",
            "top_p",
        ),
        (
            b'{"model":"m",' + b'"deep":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
            "invalid_json",
            None,
        ),
        (b'{"model": "m", \xff}', "invalid_json", ""),
    ],
)
def test_values_json_cannot_carry_are_typed_refusals(
    body: Any, code: str, param: str | None
) -> None:
    error = _refusal(deepseek_codec.parse_request, body)
    assert error.code == code
    if param is not None:
        assert error.param == param


def test_the_anthropic_codec_refuses_non_json_numbers_too() -> None:
    body = '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"x"}],"top_p":NaN}'
    assert _refusal(anthropic_codec.parse_request, body).code == "invalid_json"
    extra = '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"x"}],"x":1e999}'
    error = _refusal(anthropic_codec.parse_request, extra)
    assert (error.code, error.param) == ("invalid_json", "x")


DEEP = "[" * 40_000 + "]" * 40_000


@pytest.mark.parametrize("data", ['{"choices":[],"x":NaN}', '{"x":' + DEEP + "}"])
def test_chat_stream_payloads_that_are_not_json_end_the_stream_typed(data: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        deepseek_codec.ChunkTranslator().handle_event(SseEvent(data=data))
    assert caught.value.code == "invalid_json"
    chunks = deepseek_codec.translate_events([SseEvent(data=data)])
    finish = chunks[-1]
    assert finish.reason.kind == "error"  # type: ignore[union-attr]
    assert finish.reason.failure.code == "MALFORMED_RESPONSE"  # type: ignore[union-attr]


def test_anthropic_stream_payload_with_nan_is_malformed() -> None:
    event = SseEvent(event="message_start", data='{"message":{"id":"m","usage":{"x":NaN}}}')
    chunks = anthropic_codec.translate_events([event])
    assert chunks[-1].reason.failure.code == "MALFORMED_RESPONSE"  # type: ignore[union-attr]


@pytest.mark.parametrize("codec", [deepseek_codec, anthropic_codec])
def test_a_deeply_nested_error_body_is_still_classified(codec: Any) -> None:
    failure = codec.classify_http_error(500, '{"error":' + DEEP + "}", {})
    assert failure.code == "SERVER" and failure.retryable
