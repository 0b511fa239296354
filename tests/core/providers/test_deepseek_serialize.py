"""DeepSeek request serialization: exact bytes, per-message rules, option mapping, refusals."""

from __future__ import annotations

import pytest

from dsh_core import (
    GenerateOptions,
    OpaqueBlock,
    ProviderError,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
    assistant_message,
    freeze_json,
    tool_result_message,
    user_message,
)
from dsh_core.providers.deepseek import (
    encode_request,
    parse_request,
    serialize_message,
    serialize_request,
)

from ._helpers import options


def tool_turn() -> GenerateOptions:
    """A thinking + tool round trip, the case the live API is strictest about."""
    return GenerateOptions(
        provider="deepseek",
        model="deepseek-v4-flash",
        system="You are terse.",
        reasoning_effort="high",
        max_tokens=1024,
        tools=(
            ToolSchema(
                name="get_date",
                description="Today's date",
                parameters=freeze_json({"type": "object", "properties": {}}),
            ),
        ),
        messages=(
            user_message("What day is it?", id="u1"),
            assistant_message(
                [
                    ReasoningBlock(text="Need the tool."),
                    ToolCallBlock(id="call_00_a", name="get_date", arguments="{}"),
                ],
                provider="deepseek",
                model="deepseek-v4-flash",
                id="a1",
            ),
            tool_result_message("call_00_a", "2026-11-25", id="t1"),
        ),
    )


GOLDEN = (
    b'{"model":"deepseek-v4-flash","messages":['
    b'{"role":"system","content":"You are terse."},'
    b'{"role":"user","content":"What day is it?"},'
    b'{"role":"assistant","content":"","reasoning_content":"Need the tool.",'
    b'"tool_calls":[{"id":"call_00_a","type":"function","function":{"name":"get_date","arguments":"{}"}}]},'
    b'{"role":"tool","tool_call_id":"call_00_a","content":"2026-11-25"}],'
    b'"stream":true,"stream_options":{"include_usage":true},'
    b'"thinking":{"type":"enabled"},"reasoning_effort":"high",'
    b'"tools":[{"type":"function","function":{"name":"get_date","description":"Today\'s date",'
    b'"parameters":{"type":"object","properties":{}}}}],'
    b'"max_tokens":1024}'
)


def test_exact_bytes_of_a_tool_turn() -> None:
    assert encode_request(tool_turn()) == GOLDEN


def test_same_options_same_bytes_and_parse_reads_them_back() -> None:
    assert encode_request(tool_turn()) == encode_request(tool_turn())
    assert parse_request(GOLDEN).encode() == GOLDEN


def test_non_streaming_body_has_no_stream_options() -> None:
    body = serialize_request(options(), stream=False)
    assert body["stream"] is False
    assert "stream_options" not in body


def test_minimal_body_key_order_and_no_nulls() -> None:
    assert encode_request(options()) == (
        b'{"model":"deepseek-v4-flash","messages":[{"role":"user","content":"hi"}],'
        b'"stream":true,"stream_options":{"include_usage":true}}'
    )


def test_unicode_is_sent_as_utf8_not_escaped() -> None:
    body = encode_request(options(messages=(user_message("你好", id="u"),)))
    assert "你好".encode() in body


def test_scalars_in_order() -> None:
    body = serialize_request(options(temperature=0.5, max_tokens=10, stop=("END", "STOP")))
    assert list(body)[-3:] == ["temperature", "max_tokens", "stop"]
    assert body["stop"] == ["END", "STOP"]
    assert serialize_request(options(stop=()))["stop"] == []


@pytest.mark.parametrize(
    ("effort", "purpose", "thinking", "sent_effort"),
    [
        (None, None, None, None),
        ("off", None, {"type": "disabled"}, None),
        ("low", None, {"type": "enabled"}, "low"),
        ("max", None, {"type": "enabled"}, "max"),
        ("high", "session-title", {"type": "disabled"}, None),
    ],
)
def test_reasoning_effort_mapping(
    effort: str | None, purpose: str | None, thinking: object, sent_effort: str | None
) -> None:
    body = serialize_request(options(reasoning_effort=effort, purpose=purpose))
    assert body.get("thinking") == thinking
    assert body.get("reasoning_effort") == sent_effort


def test_unknown_effort_is_refused_before_io() -> None:
    with pytest.raises(ProviderError) as caught:
        serialize_request(options(reasoning_effort="medium"))
    assert caught.value.failure.code == "UNSUPPORTED_REASONING_EFFORT"
    assert "'medium'" in caught.value.failure.message


def test_tools_placeholder_is_refused() -> None:
    with pytest.raises(ProviderError) as caught:
        serialize_request(options(tools="{{tools}}"))
    assert caught.value.failure.code == "INVALID_REQUEST"


def test_empty_tools_and_empty_system_are_omitted() -> None:
    body = serialize_request(options(tools=(), system=""))
    assert "tools" not in body
    assert body["messages"][0]["role"] == "user"


def _assistant(*blocks: object) -> object:
    return assistant_message(list(blocks), provider="deepseek", model="m", id="a")  # type: ignore[arg-type]


def test_assistant_content_is_never_null() -> None:
    (wire,) = serialize_message(_assistant(ReasoningBlock(text="hmm")), thinking=False)  # type: ignore[arg-type]
    assert wire == {"role": "assistant", "content": "", "reasoning_content": "hmm"}


def test_reasoning_is_passed_back_byte_exact_even_with_thinking_off() -> None:
    message = _assistant(
        ReasoningBlock(text=" a "), ReasoningBlock(text="b\n"), TextBlock(text="x")
    )
    (wire,) = serialize_message(message, thinking=False)  # type: ignore[arg-type]
    assert wire["reasoning_content"] == " a b\n"


def test_empty_reasoning_key_only_in_thinking_mode() -> None:
    message = _assistant(TextBlock(text="plain"))
    assert serialize_message(message, thinking=True) == [  # type: ignore[arg-type]
        {"role": "assistant", "content": "plain", "reasoning_content": ""}
    ]
    assert serialize_message(message, thinking=False) == [  # type: ignore[arg-type]
        {"role": "assistant", "content": "plain"}
    ]
    body = serialize_request(options(messages=(message,), reasoning_effort="off"))
    assert "reasoning_content" not in body["messages"][0]


def test_parallel_tool_calls_in_order() -> None:
    message = _assistant(
        ToolCallBlock(id="c1", name="a", arguments='{"x":1}'),
        TextBlock(text="t"),
        ToolCallBlock(id="c2", name="b", arguments=""),
    )
    (wire,) = serialize_message(message)  # type: ignore[arg-type]
    assert [c["id"] for c in wire["tool_calls"]] == ["c1", "c2"]
    assert wire["tool_calls"][1]["function"] == {"name": "b", "arguments": ""}
    assert wire["content"] == "t"


def test_tool_results_become_tool_messages_before_user_text() -> None:
    message = user_message(
        [
            TextBlock(text="also this"),
            ToolResultBlock(tool_call_id="c1", content=(TextBlock(text="ok"),)),
            ToolResultBlock(tool_call_id="c2", content=()),
        ],
        id="u",
    )
    assert serialize_message(message) == [
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "tool", "tool_call_id": "c2", "content": "(no output)"},
        {"role": "user", "content": "also this"},
    ]


def test_tool_result_only_message_has_no_user_message() -> None:
    assert serialize_message(tool_result_message("c", "", id="t")) == [
        {"role": "tool", "tool_call_id": "c", "content": "(no output)"}
    ]


def test_empty_user_message_is_kept() -> None:
    assert serialize_message(user_message([], id="u")) == [{"role": "user", "content": ""}]


def test_system_history_message_joins_text() -> None:
    message = user_message([TextBlock(text="a"), TextBlock(text="b")], id="s")
    system = type(message)(id="s", role="system", content=message.content, source=message.source)
    assert serialize_message(system) == [{"role": "system", "content": "ab"}]


def test_plugin_blocks_are_skipped() -> None:
    block = OpaqueBlock(type="plugin/note", data=freeze_json({"type": "plugin/note", "x": 1}))
    assert serialize_message(user_message([block, TextBlock(text="t")], id="u")) == [
        {"role": "user", "content": "t"}
    ]


@pytest.mark.parametrize("where", ["user", "tool-result"])
def test_images_are_refused(where: str) -> None:
    image = OpaqueBlock(type="image", data=freeze_json({"type": "image", "attachment": {}}))
    if where == "user":
        message = user_message([image], id="u")
    else:
        message = user_message([ToolResultBlock(tool_call_id="c", content=(image,))], id="u")
    with pytest.raises(ProviderError) as caught:
        serialize_message(message)
    assert caught.value.failure.code == "UNSUPPORTED_CONTENT"
    assert "message u" in caught.value.failure.message


def test_a_grown_log_extends_the_previous_messages_bytes() -> None:
    """Prefix stability: appending messages never changes earlier wire messages."""
    first = tool_turn()
    grown = GenerateOptions(
        provider=first.provider,
        model=first.model,
        system=first.system,
        reasoning_effort=first.reasoning_effort,
        max_tokens=first.max_tokens,
        tools=first.tools,
        messages=(*first.messages, user_message("thanks", id="u2")),
    )
    before = serialize_request(first)["messages"]
    after = serialize_request(grown)["messages"]
    assert after[: len(before)] == before
