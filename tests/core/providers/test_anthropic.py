"""The Anthropic-format adapter: serialization, parsing, event translation, the provider."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given

from dsh_core import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmFailure,
    Message,
    OpaqueBlock,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSchema,
    UsageChunk,
    assistant_message,
    freeze_json,
    tool_result_message,
    user_message,
)
from dsh_core.providers import AnthropicProvider, WireFormatError
from dsh_core.providers._sse import SseEvent, SseParser
from dsh_core.providers.anthropic import (
    DEFAULT_MAX_TOKENS,
    EventTranslator,
    classify_http_error,
    encode_request,
    map_usage,
    parse_request,
    serialize_message,
    serialize_request,
    translate_events,
    translate_stream,
)
from dsh_testkit.strategies import generate_options

from ._helpers import API_KEY, collect, kinds, named, options, streaming


def tool_turn() -> GenerateOptions:
    return GenerateOptions(
        provider="deepseek-anthropic",
        model="deepseek-v4-pro",
        system="Be brief.",
        reasoning_effort="max",
        max_tokens=2048,
        tools=(
            ToolSchema(
                name="read",
                description="Read a file",
                parameters=freeze_json(
                    {"type": "object", "properties": {"path": {"type": "string"}}}
                ),
            ),
        ),
        stop=("END",),
        temperature=0.2,
        messages=(
            user_message("Open a.txt", id="u1"),
            assistant_message(
                [
                    ReasoningBlock(text="Use read."),
                    TextBlock(text="Reading."),
                    ToolCallBlock(id="toolu_1", name="read", arguments='{"path":"a.txt"}'),
                ],
                provider="deepseek-anthropic",
                model="deepseek-v4-pro",
                id="a1",
            ),
            tool_result_message("toolu_1", "hello", is_error=True, id="t1"),
        ),
    )


GOLDEN = (
    b'{"model":"deepseek-v4-pro","max_tokens":2048,"system":"Be brief.","messages":['
    b'{"role":"user","content":[{"type":"text","text":"Open a.txt"}]},'
    b'{"role":"assistant","content":[{"type":"thinking","thinking":"Use read."},'
    b'{"type":"text","text":"Reading."},'
    b'{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a.txt"}}]},'
    b'{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"hello","is_error":true}]}],'
    b'"tools":[{"name":"read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],'
    b'"thinking":{"type":"enabled"},"output_config":{"effort":"max"},'
    b'"temperature":0.2,"stop_sequences":["END"],"stream":true}'
)


def test_exact_bytes_of_a_tool_turn() -> None:
    assert encode_request(tool_turn()) == GOLDEN
    assert parse_request(GOLDEN).encode() == GOLDEN


@given(generate_options())
def test_parse_inverts_serialize(options: GenerateOptions) -> None:
    for stream in (True, False):
        body = serialize_request(options, stream=stream)
        parsed = parse_request(body)
        assert parsed.to_json() == body
        assert parse_request(encode_request(options, stream=stream)) == parsed


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        ("deepseek-v4-flash", None, 65_536),
        ("deepseek-v4-flash", "off", 8_192),
        ("deepseek-v4-flash", "max", 131_072),
        ("deepseek-chat", None, 8_192),
        ("claude-sonnet-4-6", None, DEFAULT_MAX_TOKENS),
    ],
)
def test_max_tokens_defaults_to_the_servers_own_default(
    model: str, effort: str | None, expected: int
) -> None:
    assert (
        serialize_request(options(model=model, reasoning_effort=effort))["max_tokens"] == expected
    )


def test_effort_and_purpose_mapping() -> None:
    assert serialize_request(options(reasoning_effort="off"))["thinking"] == {"type": "disabled"}
    body = serialize_request(options(reasoning_effort="low"))
    assert (body["thinking"], body["output_config"]) == ({"type": "enabled"}, {"effort": "low"})
    title = serialize_request(options(reasoning_effort="high", purpose="session-title"))
    assert title["thinking"] == {"type": "disabled"} and "output_config" not in title
    with pytest.raises(ProviderError) as caught:
        serialize_request(options(reasoning_effort="ultra"))
    assert caught.value.failure.code == "UNSUPPORTED_REASONING_EFFORT"
    with pytest.raises(ProviderError) as caught:
        serialize_request(options(tools="{{tools}}"))
    assert caught.value.failure.code == "INVALID_REQUEST"


def test_message_mapping_rules() -> None:
    system = Message(
        id="s",
        role="system",
        content=(TextBlock(text="rule"),),
        source=freeze_json({"kind": "user"}),
    )
    assert serialize_message(system) == {
        "role": "user",
        "content": [{"type": "text", "text": "rule"}],
    }
    mixed = user_message(
        [TextBlock(text="and"), TextBlock(text=""), ToolResultBlock(tool_call_id="c", content=())],
        id="u",
    )
    assert serialize_message(mixed) == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c", "content": "(no output)"},
            {"type": "text", "text": "and"},
        ],
    }
    assert serialize_message(user_message([], id="e")) == {
        "role": "user",
        "content": [{"type": "text", "text": ""}],
    }
    for raw, expected in (
        ("", {}),
        ("not json", {}),
        ("[1]", {}),
        ('{"b":1,"a":2}', {"b": 1, "a": 2}),
    ):
        message = assistant_message(
            [ToolCallBlock(id="c", name="f", arguments=raw)], provider="p", model="m", id="a"
        )
        assert serialize_message(message, thinking=False)["content"][0]["input"] == expected
    plugin = OpaqueBlock(type="plugin/x", data=freeze_json({"type": "plugin/x"}))
    assert serialize_message(user_message([plugin], id="p"))["content"] == [
        {"type": "text", "text": ""}
    ]
    image = OpaqueBlock(type="image", data=freeze_json({"type": "image"}))
    for message in (
        user_message([image], id="i"),
        assistant_message([image], provider="p", model="m", id="i"),
        user_message([ToolResultBlock(tool_call_id="c", content=(image,))], id="i"),
    ):
        with pytest.raises(ProviderError) as caught:
            serialize_message(message)
        assert caught.value.failure.code == "UNSUPPORTED_CONTENT"


def test_a_tool_turn_without_reasoning_sends_an_empty_thinking_block_in_thinking_mode() -> None:
    """Mirrors the chat serializer's ``reasoning_content: ""``: the endpoint refuses a later
    tool turn without a thinking block in thinking mode."""
    call = ToolCallBlock(id="toolu_1", name="read", arguments='{"path":"a.txt"}')
    bare = assistant_message([TextBlock(text="Reading."), call], provider="p", model="m", id="a")
    use = {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}}
    text = {"type": "text", "text": "Reading."}
    assert serialize_message(bare)["content"] == [{"type": "thinking", "thinking": ""}, text, use]
    assert serialize_message(bare, thinking=False)["content"] == [text, use]
    reasoned = assistant_message([ReasoningBlock(text="r"), call], provider="p", model="m", id="b")
    assert serialize_message(reasoned)["content"] == [{"type": "thinking", "thinking": "r"}, use]
    chatty = assistant_message([TextBlock(text="Reading.")], provider="p", model="m", id="c")
    assert serialize_message(chatty)["content"] == [text]  # no tool use: nothing to pass back
    history = (
        user_message("Open a.txt", id="u1"),
        bare,
        tool_result_message("toolu_1", "hi", id="t"),
    )
    for effort, sent in ((None, True), ("high", True), ("off", False)):
        body = serialize_request(options(messages=history, reasoning_effort=effort))
        first = body["messages"][1]["content"][0]
        assert (first == {"type": "thinking", "thinking": ""}) is sent, effort
    title = serialize_request(options(messages=history, purpose="session-title"))
    assert title["messages"][1]["content"][0] == text
    assert (
        encode_request(options(messages=history, reasoning_effort="high")).count(
            b'{"role":"assistant","content":[{"type":"thinking","thinking":""},{"type":"text"'
        )
        == 1
    )


def test_wide_body_round_trips() -> None:
    body = {
        "model": "claude-opus-4-1",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "data": "AA"}},
                    {"type": "document", "source": {"type": "text", "data": "d"}},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "text", "text": "x"}],
                        "is_error": False,
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "zz"},
                    {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
                    {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []},
                ],
            },
            {"role": "user", "content": "plain"},
        ],
        "tools": [
            {
                "name": "f",
                "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "web_search_20250305", "name": "web_search"},
            {"type": "custom", "name": "g", "description": "d", "input_schema": {}},
        ],
        "tool_choice": {"type": "tool", "name": "f"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "output_config": {"effort": "high"},
        "reasoning": {"effort": "none"},
        "temperature": 1.5,
        "top_p": 0.95,
        "top_k": 5,
        "stop_sequences": ["x"],
        "metadata": {"user_id": "u-1"},
        "stream": False,
        "service_tier": "auto",
    }
    req = parse_request(body)
    assert req.to_json() == body
    assert req.extra == {"service_tier": "auto"}
    assert req.thinking_type == "enabled"
    assert req.messages[2].blocks == ({"type": "text", "text": "plain"},)
    assert len(req.messages[1].blocks) == 4


def base() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(GOLDEN)
    return body


def at(path: str, value: Any = ..., delete: bool = False) -> Callable[[dict[str, Any]], None]:
    def mutate(body: dict[str, Any]) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = body
        for key in keys[:-1]:
            target = target[key]
        if delete:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return mutate


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("no model", at("model", delete=True), "model", "missing field `model`"),
    ("no max_tokens", at("max_tokens", delete=True), "max_tokens", "missing field"),
    ("max_tokens 0", at("max_tokens", 0), "max_tokens", "at least 1"),
    ("messages empty", at("messages", []), "messages", "at least one message"),
    (
        "role",
        at("messages.0.role", "system"),
        "messages[0].role",
        "unknown variant `system`, expected one of `user`, `assistant`",
    ),
    ("no content", at("messages.0.content", delete=True), "messages[0].content", "missing field"),
    ("content type", at("messages.0.content", 1), "messages[0].content", "expected an array"),
    (
        "block type",
        at("messages.0.content.0.type", "video"),
        "messages[0].content[0].type",
        "unknown variant `video`",
    ),
    (
        "thinking in user",
        at("messages.0.content.0", {"type": "thinking", "thinking": "x"}),
        "messages[0].content[0].type",
        "unknown variant `thinking`",
    ),
    (
        "tool_result in assistant",
        at("messages.1.content.0", {"type": "tool_result", "tool_use_id": "x"}),
        "messages[1].content[0].type",
        "unknown variant",
    ),
    (
        "text",
        at("messages.0.content.0.text", None),
        "messages[0].content[0].text",
        "expected a string",
    ),
    (
        "thinking text",
        at("messages.1.content.0.thinking", 1),
        "messages[1].content[0].thinking",
        "expected a string",
    ),
    (
        "signature",
        at("messages.1.content.0.signature", 1),
        "messages[1].content[0].signature",
        "expected a string",
    ),
    (
        "tool_use input",
        at("messages.1.content.2.input", "{}"),
        "messages[1].content[2].input",
        "expected an object",
    ),
    (
        "tool_use id",
        at("messages.1.content.2.id", delete=True),
        "messages[1].content[2].id",
        "missing field `id`",
    ),
    (
        "tool_result id",
        at("messages.2.content.0.tool_use_id", delete=True),
        "messages[2].content[0].tool_use_id",
        "missing field",
    ),
    (
        "tool_result content",
        at("messages.2.content.0.content", [{"type": "tool_use"}]),
        "messages[2].content[0].content[0].type",
        "unknown variant",
    ),
    (
        "tool_result is_error",
        at("messages.2.content.0.is_error", "no"),
        "messages[2].content[0].is_error",
        "expected a boolean",
    ),
    (
        "image source",
        at("messages.0.content.0", {"type": "image"}),
        "messages[0].content[0].source",
        "missing field `source`",
    ),
    (
        "redacted",
        at("messages.1.content.0", {"type": "redacted_thinking"}),
        "messages[1].content[0].data",
        "missing field",
    ),
    (
        "search result",
        at("messages.1.content.0", {"type": "web_search_tool_result"}),
        "messages[1].content[0].tool_use_id",
        "missing field",
    ),
    ("system type", at("system", 1), "system", "expected an array"),
    (
        "system block",
        at("system", [{"type": "image", "source": {}}]),
        "system[0].type",
        "unknown variant `image`",
    ),
    ("tools type", at("tools", {}), "tools", "expected an array"),
    ("tool name", at("tools.0.name", "a b"), "tools[0].name", "[a-zA-Z0-9_-]"),
    ("tool no name", at("tools.0.name", delete=True), "tools[0].name", "missing field"),
    (
        "tool schema",
        at("tools.0.input_schema", delete=True),
        "tools[0].input_schema",
        "missing field",
    ),
    ("tool description", at("tools.0.description", 1), "tools[0].description", "expected a string"),
    ("server tool type", at("tools.0.type", 1), "tools[0].type", "expected a string"),
    (
        "duplicate tool",
        lambda b: b["tools"].append(copy.deepcopy(b["tools"][0])),
        "tools[1].name",
        "duplicate tool name",
    ),
    (
        "tool_choice",
        at("tool_choice", {"type": "required"}),
        "tool_choice.type",
        "unknown variant `required`",
    ),
    (
        "tool_choice name",
        at("tool_choice", {"type": "tool"}),
        "tool_choice.name",
        "missing field `name`",
    ),
    ("thinking type", at("thinking.type", "on"), "thinking.type", "unknown variant"),
    (
        "budget",
        at("thinking", {"type": "enabled", "budget_tokens": "lots"}),
        "thinking.budget_tokens",
        "expected an integer",
    ),
    ("effort", at("output_config.effort", 3), "output_config.effort", "expected a string"),
    ("output_config", at("output_config", "max"), "output_config", "expected an object"),
    ("temperature", at("temperature", 2.5), "temperature", "between 0 and 2"),
    ("top_p", at("top_p", -0.1), "top_p", "between 0 and 1"),
    ("top_k", at("top_k", -1), "top_k", "at least 0"),
    ("stop", at("stop_sequences", "END"), "stop_sequences", "expected an array"),
    ("stop item", at("stop_sequences", [1]), "stop_sequences[0]", "expected a string"),
    ("metadata", at("metadata", {"user_id": 5}), "metadata.user_id", "expected a string"),
    ("stream", at("stream", "yes"), "stream", "expected a boolean"),
]


@pytest.mark.parametrize(
    ("mutate", "param", "fragment"), [pytest.param(m, p, f, id=n) for n, m, p, f in CASES]
)
def test_each_structural_refusal_names_its_path(
    mutate: Callable[[dict[str, Any]], None], param: str, fragment: str
) -> None:
    body = base()
    mutate(body)
    with pytest.raises(WireFormatError) as caught:
        parse_request(body)
    assert caught.value.param == param
    assert fragment in caught.value.reason


# --- translation -------------------------------------------------------------------------

START = (
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "5d2c6c3e",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "deepseek-v4-pro",
            "usage": {
                "input_tokens": 40,
                "cache_read_input_tokens": 128,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            },
        },
    },
)


def block_start(index: int, block: dict[str, Any]) -> tuple[str, Any]:
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def block_delta(index: int, delta: dict[str, Any]) -> tuple[str, Any]:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> tuple[str, Any]:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def message_delta(reason: str | None, usage: dict[str, Any] | None = None) -> tuple[str, Any]:
    payload: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
    }
    if usage is not None:
        payload["usage"] = usage
    return ("message_delta", payload)


STOP = ("message_stop", {"type": "message_stop"})
PING = ("ping", {"type": "ping"})


def parse_events(*events: tuple[str, Any]) -> list[SseEvent]:
    return SseParser().feed(named(*events))


TOOL_STREAM = (
    START,
    block_start(0, {"type": "thinking", "thinking": ""}),
    PING,
    block_delta(0, {"type": "thinking_delta", "thinking": "Use "}),
    block_delta(0, {"type": "thinking_delta", "thinking": "read."}),
    block_delta(0, {"type": "signature_delta", "signature": "abc"}),
    block_stop(0),
    block_start(1, {"type": "text", "text": ""}),
    block_delta(1, {"type": "text_delta", "text": "Reading."}),
    block_stop(1),
    block_start(2, {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
    block_delta(2, {"type": "input_json_delta", "partial_json": ""}),
    block_delta(2, {"type": "input_json_delta", "partial_json": '{"pa'}),
    block_delta(2, {"type": "input_json_delta", "partial_json": 'th":"a.txt"}'}),
    block_stop(2),
    message_delta("tool_use", {"output_tokens": 30}),
    STOP,
)


def test_thinking_text_and_tool_use() -> None:
    chunks = translate_events(parse_events(*TOOL_STREAM))
    assert chunks == [
        BlockStart(index=0, block_type="reasoning"),
        ReasoningDelta(index=0, text="Use "),
        ReasoningDelta(index=0, text="read."),
        BlockEnd(index=0, block=ReasoningBlock(text="Use read.")),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="Reading."),
        BlockEnd(index=1, block=TextBlock(text="Reading.")),
        BlockStart(index=2, block_type="tool-call"),
        ToolCallDelta(index=2, id="toolu_1", name="read", arguments_delta=""),
        ToolCallDelta(index=2, id="toolu_1", name="read", arguments_delta=""),
        ToolCallDelta(index=2, id="toolu_1", name="read", arguments_delta='{"pa'),
        ToolCallDelta(index=2, id="toolu_1", name="read", arguments_delta='th":"a.txt"}'),
        BlockEnd(
            index=2, block=ToolCallBlock(id="toolu_1", name="read", arguments='{"path":"a.txt"}')
        ),
        UsageChunk(
            usage=TokenUsage(
                input_tokens=40, output_tokens=30, cache_read_tokens=128, cache_write_tokens=0
            )
        ),
        Finish(reason=FinishReason(kind="tool-calls")),
    ]


def test_empty_thinking_block_opens_nothing_and_tool_without_deltas_gets_its_input() -> None:
    chunks = translate_events(
        parse_events(
            START,
            block_start(0, {"type": "thinking", "thinking": ""}),
            block_stop(0),
            block_start(1, {"type": "tool_use", "id": "t", "name": "now", "input": {}}),
            block_stop(1),
            block_start(2, {"type": "text", "text": "inline"}),
            message_delta("end_turn"),
            STOP,
        )
    )
    assert chunks[0] == BlockStart(index=0, block_type="tool-call")
    assert BlockEnd(index=0, block=ToolCallBlock(id="t", name="now", arguments="{}")) in chunks
    assert ToolCallDelta(index=0, id="t", name="now", arguments_delta="{}") in chunks
    # A block never stopped is closed at message_stop.
    assert BlockEnd(index=1, block=TextBlock(text="inline")) in chunks
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.kind == "stop"


@pytest.mark.parametrize(
    ("reason", "kind", "code"),
    [
        ("end_turn", "stop", None),
        ("stop_sequence", "stop", None),
        ("max_tokens", "max-tokens", None),
        ("model_context_window_exceeded", "max-tokens", None),
        ("refusal", "error", "REFUSAL"),
    ],
)
def test_stop_reasons(reason: str, kind: str, code: str | None) -> None:
    chunks = translate_events(
        parse_events(
            START,
            block_start(0, {"type": "text", "text": "x"}),
            block_stop(0),
            message_delta(reason),
            STOP,
        )
    )
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.kind == kind
    assert (finish.reason.failure.code if finish.reason.failure else None) == code


def test_usage_merges_field_by_field_last_wins() -> None:
    chunks = translate_events(
        parse_events(
            START,
            block_start(0, {"type": "text", "text": "x"}),
            message_delta(None, {"output_tokens": 5}),
            message_delta(
                "end_turn",
                {"output_tokens": 9, "input_tokens": 41, "cache_read_input_tokens": None},
            ),
            STOP,
        )
    )
    (usage,) = [c for c in chunks if isinstance(c, UsageChunk)]
    assert usage.usage == TokenUsage(
        input_tokens=41, output_tokens=9, cache_read_tokens=128, cache_write_tokens=0
    )


def test_empty_response_is_an_error() -> None:
    chunks = translate_events(parse_events(START, message_delta("end_turn"), STOP))
    assert kinds(chunks) == ["usage", "finish"]
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.failure is not None
    assert finish.reason.failure.code == "EMPTY_RESPONSE"


@pytest.mark.parametrize(
    ("error", "code", "retryable"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, "SERVER", True),
        ({"type": "rate_limit_error", "message": "slow down"}, "RATE_LIMIT", True),
        (
            {"type": "invalid_request_error", "message": "prompt is too long: 2000000 tokens"},
            "CONTEXT_WINDOW_EXCEEDED",
            False,
        ),
        ({"type": "invalid_request_error", "message": "bad"}, "INVALID_REQUEST", False),
        ({"type": "mystery_error"}, "MYSTERY_ERROR", False),
        ({}, "UNKNOWN_ERROR", False),
    ],
)
def test_error_event_ends_the_stream(error: dict[str, Any], code: str, retryable: bool) -> None:
    chunks = translate_events(
        parse_events(
            START,
            block_start(0, {"type": "text", "text": "par"}),
            ("error", {"type": "error", "error": error, "request_id": "req_9"}),
            STOP,
        )
    )
    assert kinds(chunks) == ["block-start", "text-delta", "finish"]
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert (finish.reason.failure.code, finish.reason.failure.retryable) == (code, retryable)
    assert finish.reason.failure.request_id == "req_9"


def test_missing_message_stop_is_stream_closed() -> None:
    chunks = translate_events(parse_events(START, block_start(0, {"type": "text", "text": "x"})))
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.failure is not None
    assert finish.reason.failure.code == "STREAM_CLOSED"


def test_unnamed_events_are_routed_by_payload_type_and_unknown_ones_ignored() -> None:
    events = [
        SseEvent(data=json.dumps(p))
        for _, p in (START, block_start(0, {"type": "text", "text": "hi"}))
    ]
    events += [SseEvent(event="fallback", data="{}"), SseEvent(data=json.dumps(STOP[1]))]
    chunks = translate_events(events)
    assert kinds(chunks) == ["block-start", "text-delta", "block-end", "usage", "finish"]


@pytest.mark.parametrize(
    ("events", "fragment"),
    [
        ([SseEvent(event="ping", data="nope")], "not JSON"),
        ([SseEvent(event="ping", data="[]")], "expected an object"),
        (
            [
                SseEvent(
                    event="content_block_delta",
                    data='{"index":0,"delta":{"type":"text_delta","text":"x"}}',
                )
            ],
            "never started",
        ),
        (
            parse_events(block_start(0, {"type": "text"}), block_start(0, {"type": "text"})),
            "started twice",
        ),
        (
            parse_events(
                block_start(0, {"type": "text"}),
                block_delta(0, {"type": "thinking_delta", "thinking": "x"}),
            ),
            "thinking_delta for content block 0, a text block",
        ),
        (
            parse_events(block_start(0, {"type": "tool_use", "name": "f", "input": {}})),
            "content_block.id",
        ),
        (
            parse_events(block_start(0, {"type": "text"}), block_delta(0, {"type": "text_delta"})),
            "delta.text",
        ),
        (parse_events(("message_delta", {"delta": {"stop_reason": 1}})), "delta.stop_reason"),
        (
            parse_events(("message_start", {"message": {"usage": {"input_tokens": -1}}})),
            "usage.input_tokens",
        ),
    ],
)
def test_malformed_events(events: list[SseEvent], fragment: str) -> None:
    chunks = translate_events(events)
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.failure is not None
    assert finish.reason.failure.code == "MALFORMED_RESPONSE"
    assert fragment in finish.reason.failure.message


def test_translator_after_finish_and_other_deltas() -> None:
    translator = EventTranslator()
    translator.feed(*START)
    assert translator.message_id == "5d2c6c3e"
    translator.feed(*block_start(0, {"type": "redacted_thinking", "data": "x"}))
    assert translator.feed(*block_delta(0, {"type": "thinking_delta", "thinking": "x"})) == []
    translator.feed(*block_start(1, {"type": "text", "text": ""}))
    assert translator.feed(*block_delta(1, {"type": "citations_delta", "citation": {}})) == []
    translator.finish()
    assert translator.feed(*STOP) == [] and translator.finish() == []
    assert translator.handle_event(SseEvent(data="{}")) == ([], True)


async def test_translate_stream_matches_translate_events() -> None:
    events = parse_events(*TOOL_STREAM)
    assert await collect(translate_stream(events)) == translate_events(events)


def test_map_usage() -> None:
    assert map_usage({"input_tokens": 5, "output_tokens": 2}) == TokenUsage(
        input_tokens=5, output_tokens=2
    )
    with pytest.raises(WireFormatError):
        map_usage({"output_tokens": "2"})


def test_classify_http_error_anthropic_shape() -> None:
    failure = classify_http_error(
        529,
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
            "request_id": "req_1",
        },
        {},
    )
    assert (failure.code, failure.retryable, failure.request_id, failure.message) == (
        "SERVER",
        True,
        "req_1",
        "Overloaded",
    )
    assert classify_http_error(500, b"", {"request-id": "req_2"}).request_id == "req_2"
    assert classify_http_error(404, b"", {}).message == "DeepSeek Anthropic API error (HTTP 404)"


# --- provider ----------------------------------------------------------------------------


async def test_provider_end_to_end() -> None:
    seen: list[httpx.Request] = []
    opts = tool_turn()
    async with AnthropicProvider(
        api_key=API_KEY, transport=streaming(named(*TOOL_STREAM), seen=seen), env={}
    ) as p:
        chunks = await collect(p.stream(opts))
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.kind == "tool-calls"
    (request,) = seen
    assert str(request.url) == "https://api.deepseek.com/anthropic/v1/messages"
    assert request.content == GOLDEN
    assert request.headers["x-api-key"] == API_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert API_KEY not in repr(p)


async def test_provider_base_url_from_env_and_http_error() -> None:
    seen: list[httpx.Request] = []
    body = json.dumps(
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": f"bad key {API_KEY}"},
        }
    ).encode()
    p = AnthropicProvider(
        api_key=API_KEY,
        transport=streaming(body, status=401, seen=seen),
        env={"DEEPSEEK_ANTHROPIC_BASE_URL": "http://127.0.0.1:1/anthropic/"},
    )
    async with p:
        chunks = await collect(p.stream(options()))
    assert str(seen[0].url) == "http://127.0.0.1:1/anthropic/v1/messages"
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.failure is not None
    assert finish.reason.failure.code == "AUTH"
    assert API_KEY not in finish.reason.failure.message


async def test_provider_stream_closed_without_message_stop() -> None:
    async with AnthropicProvider(api_key=API_KEY, transport=streaming(named(START)), env={}) as p:
        chunks = await collect(p.stream(options()))
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.reason.failure is not None
    assert finish.reason.failure.code == "STREAM_CLOSED"


def test_parse_edge_shapes() -> None:
    body = {
        "model": "m",
        "max_tokens": 1,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "search_result", "source": "s", "title": "t", "content": []}],
            }
        ],
        "system": "plain system",
        "tool_choice": {"type": "auto"},
        "metadata": {},
    }
    req = parse_request(body)
    assert req.to_json() == body
    assert req.system == "plain system"


def test_tool_result_skips_plugin_blocks() -> None:
    plugin = OpaqueBlock(type="plugin/x", data=freeze_json({"type": "plugin/x"}))
    message = user_message(
        [ToolResultBlock(tool_call_id="c", content=(plugin, TextBlock(text="ok")))], id="u"
    )
    assert serialize_message(message)["content"][0]["content"] == "ok"


def test_stream_without_usage_or_delta_objects() -> None:
    chunks = translate_events(
        parse_events(
            ("message_start", {"type": "message_start", "message": {"id": 7}}),
            block_start(0, {"type": "text", "text": "x"}),
            ("message_delta", {"type": "message_delta"}),
            STOP,
        )
    )
    assert kinds(chunks) == ["block-start", "text-delta", "block-end", "finish"]
    translator = EventTranslator()
    translator.feed(*START)
    assert translator.message_id == "5d2c6c3e"
    translator.feed(*STOP)
    assert translator.fail(LlmFailure(message="late", code="X")) == []
