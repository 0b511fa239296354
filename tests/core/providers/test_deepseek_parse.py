"""parse_request: the inverse of serialize_request, and every structural refusal."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given

from dsh_core import DshError, GenerateOptions, ToolsPlaceholder
from dsh_core.providers import WireFormatError
from dsh_core.providers.deepseek import (
    ChatRequest,
    encode_request,
    parse_request,
    serialize_request,
)
from dsh_testkit.strategies import generate_options

from .test_deepseek_serialize import GOLDEN


@given(generate_options())
def test_parse_inverts_serialize(options: GenerateOptions) -> None:
    body = serialize_request(options)
    parsed = parse_request(body)
    assert parsed.to_json() == body
    assert parsed.encode() == encode_request(options)
    assert parse_request(encode_request(options)) == parsed
    assert parsed.model == options.model
    assert parsed.include_usage is True
    assert not isinstance(options.tools, ToolsPlaceholder)  # the serializer refuses those
    assert len(parsed.tools or ()) == len(options.tools or ())


@given(generate_options())
def test_non_streaming_round_trip(options: GenerateOptions) -> None:
    body = serialize_request(options, stream=False)
    parsed = parse_request(body)
    assert parsed.stream is False
    assert parsed.include_usage is False
    assert parsed.to_json() == body


def test_parsed_view_of_the_golden_request() -> None:
    req = parse_request(GOLDEN)
    assert isinstance(req, ChatRequest)
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool"]
    assistant = req.messages[2]
    assert assistant.reasoning_content == "Need the tool."
    assert assistant.tool_calls is not None
    assert assistant.tool_calls[0].name == "get_date"
    assert req.messages[3].tool_call_id == "call_00_a"
    assert req.thinking_type == "enabled"
    assert req.reasoning_effort == "high"
    assert req.tools is not None and req.tools[0].parameters == {
        "type": "object",
        "properties": {},
    }


def base() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(GOLDEN)
    return body


def test_wide_body_round_trips_and_keeps_unknown_fields() -> None:
    body = {
        "model": "deepseek-chat",
        "messages": [
            {"role": "system", "name": "sys", "content": [{"type": "text", "text": "s"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    {"type": "file", "file": {"file_id": "f1"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
                "prefix": False,
                "cache": "x",
            },
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r"}]},
            {"role": "latest_reminder", "content": "remember"},
        ],
        "stream": False,
        "thinking": {"type": "disabled"},
        "reasoning_effort": "xhigh",
        "tools": [{"type": "function", "function": {"name": "f", "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "temperature": 1,
        "top_p": 0.95,
        "max_tokens": 5,
        "stop": "END",
        "frequency_penalty": 0,
        "presence_penalty": -1.5,
        "response_format": {"type": "json_object"},
        "logprobs": True,
        "top_logprobs": 3,
        "user_id": "end-user_1",
        "user": "someone",
        "n": 2,
        "seed": 7,
    }
    req = parse_request(body)
    assert req.to_json() == body
    assert req.extra == {"n": 2, "seed": 7}
    assert req.messages[2].extra == {"cache": "x"}
    assert req.messages[2].content is None and req.messages[2].text == ""
    assert req.messages[1].text == "see"
    assert req.messages[0].text == "s"
    assert req.tools is not None and req.tools[0].parameters is None
    assert req.stop == "END"
    assert req.thinking_type == "disabled"
    with pytest.raises(TypeError):
        req.extra["n"] = 3


def test_absent_optional_fields_are_none() -> None:
    req = parse_request({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert req.stream is None and req.thinking_type is None and req.tools is None
    assert req.to_json() == {"model": "m", "messages": [{"role": "user", "content": "x"}]}


def test_wire_format_error_is_in_the_error_tree() -> None:
    with pytest.raises(WireFormatError) as caught:
        parse_request({"messages": []})
    assert isinstance(caught.value, DshError)
    assert isinstance(caught.value, ValueError)
    assert caught.value.param == "model"
    assert caught.value.reason == "missing field `model`"
    assert str(caught.value) == "model: missing field `model`"


Mutation = Callable[[dict[str, Any]], Any]


def setter(path: str, value: Any) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = body
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return mutate


def deleter(path: str) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = body
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return mutate


ROLE_MESSAGE = (
    "unknown variant `developer`, expected one of `system`, `user`, `assistant`, `tool`, "
    "`latest_reminder`"
)

CASES: list[tuple[str, Mutation, str, str]] = [
    ("no model", deleter("model"), "model", "missing field `model`"),
    ("model type", setter("model", 3), "model", "invalid type: an integer, expected a string"),
    ("no messages", deleter("messages"), "messages", "missing field `messages`"),
    ("messages type", setter("messages", {}), "messages", "expected an array"),
    ("messages empty", setter("messages", []), "messages", "at least one message"),
    ("message type", setter("messages.0", "hi"), "messages[0]", "expected an object"),
    ("role", setter("messages.1.role", "developer"), "messages[1].role", ROLE_MESSAGE),
    ("no role", deleter("messages.1.role"), "messages[1].role", "missing field `role`"),
    ("no content", deleter("messages.1.content"), "messages[1].content", "missing field"),
    (
        "content type",
        setter("messages.1.content", 5),
        "messages[1].content",
        "expected a string or an array of parts",
    ),
    (
        "part type",
        setter("messages.1.content", [{"type": "audio"}]),
        "messages[1].content[0].type",
        "unknown variant `audio`",
    ),
    (
        "text part",
        setter("messages.1.content", [{"type": "text"}]),
        "messages[1].content[0].text",
        "missing field `text`",
    ),
    (
        "image url",
        setter("messages.1.content", [{"type": "image_url", "image_url": {}}]),
        "messages[1].content[0].image_url.url",
        "missing field `url`",
    ),
    (
        "file part",
        setter("messages.1.content", [{"type": "file", "file": "x"}]),
        "messages[1].content[0].file",
        "expected an object",
    ),
    (
        "system image",
        setter("messages.0.content", [{"type": "image_url", "image_url": {"url": "u"}}]),
        "messages[0].content[0].type",
        "unknown variant `image_url`",
    ),
    (
        "reminder array",
        setter("messages.1", {"role": "latest_reminder", "content": []}),
        "messages[1].content",
        "expected a string",
    ),
    (
        "reasoning type",
        setter("messages.2.reasoning_content", 1),
        "messages[2].reasoning_content",
        "expected a string",
    ),
    (
        "assistant content type",
        setter("messages.2.content", {}),
        "messages[2].content",
        "expected a string or an array",
    ),
    ("tool_calls type", setter("messages.2.tool_calls", {}), "messages[2].tool_calls", "array"),
    (
        "call id",
        deleter("messages.2.tool_calls.0.id"),
        "messages[2].tool_calls[0].id",
        "missing field `id`",
    ),
    (
        "call type",
        setter("messages.2.tool_calls.0.type", "fn"),
        "messages[2].tool_calls[0].type",
        "unknown variant `fn`, expected one of `function`",
    ),
    (
        "call arguments",
        deleter("messages.2.tool_calls.0.function.arguments"),
        "messages[2].tool_calls[0].function.arguments",
        "missing field `arguments`",
    ),
    (
        "call arguments object",
        setter("messages.2.tool_calls.0.function.arguments", {}),
        "messages[2].tool_calls[0].function.arguments",
        "invalid type: an object, expected a string",
    ),
    (
        "call function",
        setter("messages.2.tool_calls.0.function", None),
        "messages[2].tool_calls[0].function",
        "expected an object",
    ),
    (
        "call index",
        setter("messages.2.tool_calls.0.index", -1),
        "messages[2].tool_calls[0].index",
        "at least 0",
    ),
    ("prefix", setter("messages.2.prefix", "yes"), "messages[2].prefix", "expected a boolean"),
    (
        "tool_call_id",
        deleter("messages.3.tool_call_id"),
        "messages[3].tool_call_id",
        "missing field `tool_call_id`",
    ),
    ("name", setter("messages.1.name", 1), "messages[1].name", "expected a string"),
    ("stream", setter("stream", "yes"), "stream", "expected a boolean"),
    ("stream_options", setter("stream_options", True), "stream_options", "expected an object"),
    (
        "include_usage",
        setter("stream_options.include_usage", 1),
        "stream_options.include_usage",
        "expected a boolean",
    ),
    ("thinking type", setter("thinking.type", "on"), "thinking.type", "unknown variant `on`"),
    ("thinking", setter("thinking", {}), "thinking.type", "missing field `type`"),
    ("effort", setter("reasoning_effort", "extreme"), "reasoning_effort", "unknown variant"),
    ("tools type", setter("tools", {}), "tools", "expected an array"),
    ("too many tools", setter("tools", [{}] * 129), "tools", "at most 128 tools"),
    ("tool type", setter("tools.0.type", "retrieval"), "tools[0].type", "unknown variant"),
    ("tool function", deleter("tools.0.function"), "tools[0].function", "missing field"),
    (
        "tool name",
        setter("tools.0.function.name", "get date"),
        "tools[0].function.name",
        "[a-zA-Z0-9_-]",
    ),
    (
        "duplicate tool",
        lambda b: b["tools"].append(copy.deepcopy(b["tools"][0])),
        "tools[1].function.name",
        "duplicate tool name 'get_date'",
    ),
    (
        "tool description",
        setter("tools.0.function.description", 1),
        "tools[0].function.description",
        "expected a string",
    ),
    (
        "tool parameters",
        setter("tools.0.function.parameters", []),
        "tools[0].function.parameters",
        "expected an object",
    ),
    (
        "tool strict",
        setter("tools.0.function.strict", "yes"),
        "tools[0].function.strict",
        "expected a boolean",
    ),
    ("tool_choice", setter("tool_choice", "maybe"), "tool_choice", "unknown variant `maybe`"),
    (
        "tool_choice function",
        setter("tool_choice", {"type": "function", "function": {}}),
        "tool_choice.function.name",
        "missing field `name`",
    ),
    ("temperature", setter("temperature", 3), "temperature", "between 0 and 2"),
    ("temperature type", setter("temperature", "hot"), "temperature", "expected a number"),
    ("temperature bool", setter("temperature", True), "temperature", "expected a number"),
    ("top_p", setter("top_p", 1.5), "top_p", "between 0 and 1"),
    ("max_tokens", setter("max_tokens", 0), "max_tokens", "at least 1"),
    ("max_tokens type", setter("max_tokens", 1.5), "max_tokens", "expected an integer"),
    ("max_tokens bool", setter("max_tokens", True), "max_tokens", "expected an integer"),
    ("stop count", setter("stop", ["x"] * 17), "stop", "at most 16"),
    ("stop item", setter("stop", ["x", 1]), "stop[1]", "expected a string"),
    ("stop type", setter("stop", 5), "stop", "expected an array"),
    ("penalty", setter("frequency_penalty", -3), "frequency_penalty", "between -2 and 2"),
    (
        "response_format",
        setter("response_format", {"type": "xml"}),
        "response_format.type",
        "unknown variant `xml`",
    ),
    ("logprobs", setter("logprobs", "yes"), "logprobs", "expected a boolean"),
    ("top_logprobs", setter("top_logprobs", 21), "top_logprobs", "between 0 and 20"),
    ("top_logprobs neg", setter("top_logprobs", -1), "top_logprobs", "at least 0"),
    ("user_id", setter("user_id", "a b"), "user_id", "[a-zA-Z0-9_-]"),
    ("user", setter("user", 1), "user", "expected a string"),
]


@pytest.mark.parametrize(
    ("mutate", "param", "fragment"),
    [pytest.param(m, p, f, id=name) for name, m, p, f in CASES],
)
def test_each_structural_refusal_names_its_path(
    mutate: Mutation, param: str, fragment: str
) -> None:
    body = base()
    mutate(body)
    with pytest.raises(WireFormatError) as caught:
        parse_request(body)
    assert caught.value.param == param
    assert fragment in caught.value.reason
    assert str(caught.value).startswith(f"{param}: ")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [(b"{", "not valid JSON"), (b"[1]", "expected an object"), (b"\xff", "not valid JSON")],
)
def test_bodies_that_are_not_json_objects(body: bytes, fragment: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        parse_request(body)
    assert caught.value.param == ""
    assert fragment in str(caught.value)


def test_text_body_is_accepted() -> None:
    assert parse_request(GOLDEN.decode()).model == "deepseek-v4-flash"


def test_small_shapes() -> None:
    req = parse_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "plain"}],
            "stream": True,
            "stream_options": {},
        }
    )
    assert req.messages[0].text == "plain"
    assert req.include_usage is False


def test_non_json_python_values_are_named_by_type() -> None:
    with pytest.raises(WireFormatError) as caught:
        parse_request({"model": object(), "messages": []})
    assert caught.value.reason == "invalid type: object, expected a string"
