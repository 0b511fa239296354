"""Each validation rule answers with the API's own status and error body — and never consumes a
scripted entry."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_testkit.mock import MockDeepSeek, Reply

from ._helpers import ANTHROPIC, CHAT, anthropic_body, call, chat_body, payload, user

TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
CALL = {
    "id": "call_00_a",
    "type": "function",
    "function": {"name": "get_weather", "arguments": "{}"},
}
ORDER_MISSING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. (insufficient tool messages following tool_calls message)"
)
ORPHAN = "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
PASSBACK = "The `reasoning_content` in the thinking mode must be passed back to the API."
OFF = {"thinking": {"type": "disabled"}}


def deepseek_error(message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": "invalid_request_error",
        }
    }


CASES: list[tuple[str, dict[str, Any], int, dict[str, Any]]] = [
    (
        "unknown model",
        chat_body(model="gpt-4o"),
        400,
        deepseek_error("Model Not Exist"),
    ),
    (
        "a tool message without a preceding call",
        chat_body(user(), {"role": "tool", "tool_call_id": "x", "content": "r"}, **OFF),
        400,
        deepseek_error(ORPHAN),
    ),
    (
        "a tool message answering an unknown id",
        chat_body(
            user(),
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_99", "content": "r"},
            tools=[TOOL],
            **OFF,
        ),
        400,
        deepseek_error(
            "Invalid parameter: 'tool_call_id' of 'call_99' not found in 'tool_calls' of previous message."
        ),
    ),
    (
        "a call left unanswered before the next user message",
        chat_body(
            user(),
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            user(),
            tools=[TOOL],
            **OFF,
        ),
        400,
        deepseek_error(ORDER_MISSING),
    ),
    (
        "a call left unanswered at the end",
        chat_body(
            user(), {"role": "assistant", "content": "", "tool_calls": [CALL]}, tools=[TOOL], **OFF
        ),
        400,
        deepseek_error(ORDER_MISSING),
    ),
    (
        "a tool name outside the allowed pattern",
        chat_body(tools=[{"type": "function", "function": {"name": "web.search"}}]),
        400,
        deepseek_error(
            "Invalid 'tools[0].function.name': string does not match pattern. Expected a string "
            "that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            "tools[0].function.name",
        ),
    ),
    (
        "a tool name too long",
        chat_body(tools=[{"type": "function", "function": {"name": "f" * 129}}]),
        400,
        deepseek_error(
            "Invalid 'tools[0].function.name': string too long. Expected a string with maximum "
            "length 128, but got a string with length 129 instead.",
            "tools[0].function.name",
        ),
    ),
    (
        "two tools with one name",
        chat_body(tools=[TOOL, TOOL]),
        400,
        deepseek_error("Invalid 'tools': duplicate function name 'get_weather'.", "tools"),
    ),
    (
        "more than 128 tools",
        chat_body(tools=[{"type": "function", "function": {"name": f"t{i}"}} for i in range(129)]),
        400,
        deepseek_error(
            "Invalid 'tools': array too long. Expected an array with maximum length 128, but got "
            "an array with length 129 instead.",
            "tools",
        ),
    ),
    (
        "a schema that is not an object schema",
        chat_body(
            tools=[
                {"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}
            ]
        ),
        400,
        deepseek_error(
            "Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', "
            "got 'type: \"string\"'."
        ),
    ),
    (
        "schema properties that are not an object",
        chat_body(
            tools=[
                {
                    "type": "function",
                    "function": {"name": "f", "parameters": {"type": "object", "properties": []}},
                }
            ]
        ),
        400,
        deepseek_error("Invalid schema for function 'f': 'properties' must be an object"),
    ),
    (
        "schema required that is not a list of names",
        chat_body(
            tools=[
                {
                    "type": "function",
                    "function": {"name": "f", "parameters": {"type": "object", "required": "a"}},
                }
            ]
        ),
        400,
        deepseek_error("Invalid schema for function 'f': 'required' must be an array of strings"),
    ),
    (
        "tool_choice without tools",
        chat_body(tool_choice="auto"),
        400,
        deepseek_error(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            "tool_choice",
        ),
    ),
    (
        "required tool_choice in thinking mode",
        chat_body(tools=[TOOL], tool_choice="required"),
        400,
        deepseek_error("Thinking mode does not support this tool_choice", "tool_choice"),
    ),
    (
        "a named tool_choice for a tool that is not there",
        chat_body(
            tools=[TOOL], tool_choice={"type": "function", "function": {"name": "nope"}}, **OFF
        ),
        400,
        deepseek_error("Invalid 'tool_choice': function 'nope' is not in 'tools'.", "tool_choice"),
    ),
    (
        "a json_schema response format",
        chat_body(response_format={"type": "json_schema", "json_schema": {}}),
        400,
        deepseek_error("This response_format type is unavailable now"),
    ),
    (
        "stream_options without stream",
        chat_body(stream_options={"include_usage": True}),
        400,
        deepseek_error(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        ),
    ),
    (
        "max_tokens above the model's limit",
        chat_body(max_tokens=393_217),
        400,
        deepseek_error("Invalid max_tokens value, the valid range of max_tokens is [1, 393216]"),
    ),
    (
        "thinking with tools and an assistant turn without reasoning_content",
        chat_body(user(), {"role": "assistant", "content": "hi"}, user("again"), tools=[TOOL]),
        400,
        deepseek_error(PASSBACK),
    ),
    (
        "thinking and a tool-call turn without reasoning_content",
        chat_body(
            user(),
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_00_a", "content": "sunny"},
        ),
        400,
        deepseek_error(PASSBACK),
    ),
    (
        "a role the API does not know",
        chat_body({"role": "developer", "content": "x"}),
        400,
        deepseek_error(
            "Failed to deserialize the JSON body into the target type: messages[0].role: unknown "
            "variant `developer`, expected one of `system`, `user`, `assistant`, `tool`, `latest_reminder`",
            "messages[0].role",
        ),
    ),
    (
        "a missing model",
        {"messages": [user()]},
        400,
        deepseek_error(
            "Failed to deserialize the JSON body into the target type: model: missing field `model`",
            "model",
        ),
    ),
    (
        "a body that is not an object",
        [1, 2],  # type: ignore[list-item]
        400,
        deepseek_error(
            "Failed to deserialize the JSON body into the target type: invalid type: an array, expected an object"
        ),
    ),
]


@pytest.mark.parametrize(("name", "body", "status", "error"), CASES, ids=[c[0] for c in CASES])
def test_chat_validation_answers_with_the_api_error(
    name: str, body: dict[str, Any], status: int, error: dict[str, Any]
) -> None:
    mock = MockDeepSeek([Reply(text="scripted")])
    plan = call(mock, CHAT, body)
    assert (plan.status, payload(plan)) == (status, error)
    assert plan.header("content-type") == "application/json"
    assert mock.pending == (Reply(text="scripted"),)  # not consumed
    assert mock.requests[-1].status == status and mock.requests[-1].entry is None
    assert mock.requests[-1].error["message"] == error["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            chat_body(
                user(),
                {"role": "assistant", "content": "hi", "reasoning_content": ""},
                user(),
                tools=[TOOL],
            ),
            id="an empty reasoning_content is accepted",
        ),
        pytest.param(
            chat_body(user(), {"role": "assistant", "content": "hi"}, user()),
            id="no tools: reasoning may be dropped",
        ),
        pytest.param(
            chat_body(user(), {"role": "assistant", "content": "hi"}, user(), tools=[TOOL], **OFF),
            id="thinking off: no pass-back rule",
        ),
        pytest.param(
            chat_body(
                user(),
                {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "r",
                    "tool_calls": [CALL],
                },
                {"role": "tool", "tool_call_id": "call_00_a", "content": "sunny"},
                tools=[TOOL],
            ),
            id="a full tool round trip",
        ),
        pytest.param(chat_body(tools=[TOOL], tool_choice="none"), id="tool_choice none with tools"),
        pytest.param(
            chat_body(tools=[{"type": "function", "function": {"name": "f"}}]),
            id="a tool without parameters",
        ),
        pytest.param(
            chat_body(model="deepseek-chat", tools=[TOOL], tool_choice="required"),
            id="required without thinking",
        ),
        pytest.param(
            chat_body(reasoning_effort="none", tools=[TOOL], tool_choice="required"),
            id="effort none turns thinking off",
        ),
        pytest.param(
            chat_body(response_format={"type": "json_object"}), id="json_object response format"
        ),
        pytest.param(
            chat_body(stream=True, stream_options={"include_usage": True}),
            id="stream_options with stream",
        ),
    ],
)
def test_valid_chat_requests_are_answered(body: dict[str, Any]) -> None:
    mock = MockDeepSeek()
    assert call(mock, CHAT, body).status == 200


def test_the_passback_rule_can_be_relaxed() -> None:
    body = chat_body(user(), {"role": "assistant", "content": "hi"}, user(), tools=[TOOL])
    assert call(MockDeepSeek(passback="tool-calls"), CHAT, body).status == 200
    calls_only = chat_body(
        user(),
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_00_a", "content": "sunny"},
        tools=[TOOL],
    )
    assert call(MockDeepSeek(passback="tool-calls"), CHAT, calls_only).status == 400
    assert call(MockDeepSeek(passback="off"), CHAT, calls_only).status == 200


def anthropic_error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
A_TOOL = {"name": "get_weather", "input_schema": {"type": "object"}}
A_OFF = {"thinking": {"type": "disabled"}}

ANTHROPIC_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown model", anthropic_body(model="gpt-4o"), "Model Not Exist"),
    (
        "a tool_use without its result",
        anthropic_body(
            user(), {"role": "assistant", "content": [USE]}, user(), tools=[A_TOOL], **A_OFF
        ),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    ),
    (
        "a tool_use at the end",
        anthropic_body(user(), {"role": "assistant", "content": [USE]}, tools=[A_TOOL], **A_OFF),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    ),
    (
        "a tool_use followed by another assistant message",
        anthropic_body(
            user(),
            {"role": "assistant", "content": [USE]},
            {"role": "assistant", "content": "x"},
            tools=[A_TOOL],
            **A_OFF,
        ),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    ),
    (
        "a result for an unknown tool_use",
        anthropic_body({"role": "user", "content": [RESULT]}, **A_OFF),
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
    ),
    (
        "thinking and a tool turn without its thinking block",
        anthropic_body(
            user(),
            {"role": "assistant", "content": [USE]},
            {"role": "user", "content": [RESULT]},
            tools=[A_TOOL],
        ),
        "The `content[].thinking` in the thinking mode must be passed back to the API.",
    ),
    (
        "tool_choice any without tools",
        anthropic_body(tool_choice={"type": "any"}),
        "tool_choice: requires `tools` to be specified",
    ),
    (
        "tool_choice any in thinking mode",
        anthropic_body(tools=[A_TOOL], tool_choice={"type": "any"}),
        "Thinking mode does not support this tool_choice",
    ),
    (
        "tool_choice for a tool that is not there",
        anthropic_body(tools=[A_TOOL], tool_choice={"type": "tool", "name": "nope"}, **A_OFF),
        "tool_choice: tool 'nope' is not in `tools`",
    ),
    (
        "a bad input schema",
        anthropic_body(tools=[{"name": "f", "input_schema": {"type": "array"}}]),
        "Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"array\"'.",
    ),
    (
        "max_tokens above the limit",
        anthropic_body(max_tokens=400_000),
        "Invalid max_tokens value, the valid range of max_tokens is [1, 393216]",
    ),
    (
        "a missing max_tokens",
        {"model": "deepseek-flash", "messages": [user()]},
        "Failed to deserialize the JSON body into the target type: max_tokens: missing field `max_tokens`",
    ),
]


@pytest.mark.parametrize(
    ("name", "body", "message"), ANTHROPIC_CASES, ids=[c[0] for c in ANTHROPIC_CASES]
)
def test_anthropic_validation_answers_in_anthropic_shape(
    name: str, body: dict[str, Any], message: str
) -> None:
    mock = MockDeepSeek([Reply(text="scripted")])
    plan = call(mock, ANTHROPIC, body)
    assert plan.status == 400
    answer = payload(plan)
    assert answer.pop("request_id").startswith("req_")
    assert answer == anthropic_error(message)
    assert len(mock.pending) == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            anthropic_body(
                user(),
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, USE],
                },
                {"role": "user", "content": [RESULT]},
                tools=[A_TOOL],
            ),
            id="thinking passed back",
        ),
        pytest.param(anthropic_body(model="claude-sonnet-4-6"), id="claude names map to flash"),
        pytest.param(anthropic_body(model="claude-opus-4-1"), id="claude opus maps to pro"),
        pytest.param(
            anthropic_body(
                reasoning={"effort": "none"}, tools=[A_TOOL], tool_choice={"type": "any"}
            ),
            id="effort none turns thinking off",
        ),
        pytest.param(
            anthropic_body(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
            id="server tools have no schema",
        ),
    ],
)
def test_valid_anthropic_requests_are_answered(body: dict[str, Any]) -> None:
    assert call(MockDeepSeek(), ANTHROPIC, body).status == 200


def _turns(draw_kinds: list[list[str]]) -> list[dict[str, Any]]:
    """An Anthropic-format conversation whose assistant turns hold these block kinds."""
    blocks: dict[str, dict[str, Any]] = {
        "text": {"type": "text", "text": "t"},
        "thinking": {"type": "thinking", "thinking": "t", "signature": "s"},
        "redacted_thinking": {"type": "redacted_thinking", "data": "zz"},
    }
    messages: list[dict[str, Any]] = [user()]
    for index, kinds in enumerate(draw_kinds):
        content = [blocks[k] for k in kinds if k != "tool_use"]
        if "tool_use" in kinds:
            content.append({**USE, "id": f"toolu_{index}"})
        messages.append({"role": "assistant", "content": content or [blocks["text"]]})
        if "tool_use" in kinds:
            messages.append(
                {"role": "user", "content": [{**RESULT, "tool_use_id": f"toolu_{index}"}]}
            )
        else:
            messages.append(user())
    return messages


@pytest.mark.parametrize(
    "turns",
    [
        [["thinking", "tool_use"]],
        [["tool_use"]],
        [["redacted_thinking", "tool_use"]],
        [["text"], ["thinking", "tool_use"], ["text", "tool_use"]],
        [["redacted_thinking", "thinking", "tool_use"], ["text"]],
    ],
    ids=str,
)
def test_the_mock_refuses_exactly_what_the_shared_pass_back_rule_refuses(
    turns: list[list[str]],
) -> None:
    """One rule for the mock and the cache doctor: a thinking-mode tool turn without a
    ``thinking`` block is refused (an unsupported ``redacted_thinking`` does not stand in)."""
    from dsh_core.providers._passback import missing_reasoning

    messages = _turns(turns)
    expected = missing_reasoning(messages, thinking=True, has_tools=True, anthropic=True)
    plan = call(MockDeepSeek(), ANTHROPIC, anthropic_body(*messages, tools=[A_TOOL]))
    assert plan.status == (200 if expected is None else 400)
    if expected is not None:
        assert payload(plan)["error"]["message"] == (
            "The `content[].thinking` in the thinking mode must be passed back to the API."
        )
        assert (expected > 0) and messages[expected]["role"] == "assistant"
