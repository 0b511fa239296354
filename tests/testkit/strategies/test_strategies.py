"""The public hypothesis strategies: wire bodies the codec parses and the mock accepts,
re-serialization stability, the documented edge cases, and the package's exports."""

from __future__ import annotations

import re
import types
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsh_testkit.strategies
from dsh_core import GenerateOptions
from dsh_core.providers import anthropic as anthropic_codec
from dsh_core.providers import deepseek as deepseek_codec
from dsh_core.providers import resolve_model, thinking_enabled
from dsh_core.providers._wire import TOOL_NAME_PATTERN
from dsh_testkit.mock import MockDeepSeek, MockServer, mock_transport
from dsh_testkit.strategies import (
    anthropic_requests,
    chat_messages,
    chat_requests,
    chat_tool_names,
    chat_tools,
    generate_options,
    system_prompts,
)

_NAME = re.compile(TOOL_NAME_PATTERN)


def _at_most(examples: int) -> settings:
    """The active profile, with at most ``examples`` examples (these draws are large)."""
    return settings(
        max_examples=min(settings().max_examples, examples),
        suppress_health_check=[HealthCheck.too_slow],
    )


@_at_most(100)
@given(chat_requests())
def test_every_chat_request_parses_and_reserializes_stably(body: dict[str, Any]) -> None:
    parsed = deepseek_codec.parse_request(body)
    assert parsed.to_json() == body  # nothing lost, nothing added (bodies carry no nulls)
    encoded = parsed.encode()
    again = deepseek_codec.parse_request(encoded)
    assert again == parsed
    assert again.encode() == encoded
    assert parsed.thinking_on is thinking_enabled(
        resolve_model(body["model"]),
        thinking_type=body.get("thinking", {}).get("type"),
        effort=body.get("reasoning_effort"),
    )


@_at_most(50)
@given(chat_requests())
def test_every_chat_request_is_answered_by_the_mock(body: dict[str, Any]) -> None:
    # As the package docstring shows: the in-process mock built inside the test body.
    mock = MockDeepSeek()
    with httpx.Client(transport=mock_transport(mock)) as client:
        answer = client.post(
            "https://api.deepseek.com/chat/completions",
            json=body,
            headers={"authorization": "Bearer sk-test"},
        )
    assert answer.status_code == 200, answer.text
    if body.get("stream"):
        assert answer.text.endswith("data: [DONE]\n\n")
    else:
        assert answer.json()["object"] == "chat.completion"


@pytest.mark.dsh_lenient  # the mock's default reply answers every generated request
@_at_most(10)
@given(chat_requests(stream=False, models=["deepseek-chat", "deepseek-v4-pro"]))
def test_the_session_mock_server_inside_given(
    dsh_mock_server: MockServer, body: dict[str, Any]
) -> None:
    # The package docstring's loopback recipe: a session-scoped server, reset per example.
    dsh_mock_server.mock.reset()
    answer = httpx.post(
        dsh_mock_server.base_url + "/chat/completions",
        json=body,
        headers={"authorization": "Bearer sk-test"},
    )
    assert answer.status_code == 200, answer.text
    assert len(dsh_mock_server.mock.requests) == 1


@_at_most(15)
@given(chat_requests(stream=True, models=["deepseek-flash", "deepseek-chat"]))
def test_streaming_requests_are_answered_with_an_event_stream(body: dict[str, Any]) -> None:
    assert body["stream"] is True and body["model"] in ("deepseek-flash", "deepseek-chat")
    mock = MockDeepSeek()
    with httpx.Client(transport=mock_transport(mock)) as client:
        answer = client.post(
            "https://api.deepseek.com/chat/completions",
            json=body,
            headers={"authorization": "Bearer sk-test"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.text.endswith("data: [DONE]\n\n")


@_at_most(100)
@given(anthropic_requests())
def test_every_anthropic_request_parses_and_reserializes_stably(body: dict[str, Any]) -> None:
    parsed = anthropic_codec.parse_request(body)
    assert parsed.to_json() == body
    encoded = parsed.encode()
    assert anthropic_codec.parse_request(encoded) == parsed
    assert anthropic_codec.parse_request(encoded).encode() == encoded
    if parsed.thinking_on:
        for message in body["messages"]:
            blocks = message["content"] if isinstance(message["content"], list) else []
            if any(b["type"] == "tool_use" for b in blocks):
                assert blocks[0]["type"] == "thinking"  # passed back, first


@_at_most(40)
@given(anthropic_requests())
def test_every_anthropic_request_is_answered_by_the_mock(body: dict[str, Any]) -> None:
    mock = MockDeepSeek()
    with httpx.Client(transport=mock_transport(mock)) as client:
        answer = client.post(
            "https://api.deepseek.com/anthropic/v1/messages",
            json=body,
            headers={"x-api-key": "sk-test", "anthropic-version": "2023-06-01"},
        )
    assert answer.status_code == 200, answer.text
    if body.get("stream"):
        assert "event: message_stop" in answer.text
    else:
        assert answer.json()["type"] == "message"


@_at_most(60)
@given(chat_tools(min_size=1))
def test_chat_tools_have_unique_valid_names(tools: list[dict[str, Any]]) -> None:
    names = [t["function"]["name"] for t in tools]
    assert len(set(names)) == len(names)
    assert all(_NAME.match(n) and len(n) <= 128 for n in names)


def test_chat_tool_names_reach_the_length_limit() -> None:
    lengths: set[int] = set()

    @settings(max_examples=200, database=None)
    @given(chat_tool_names())
    def collect(name: str) -> None:
        lengths.add(len(name))

    collect()
    assert 128 in lengths and 1 in lengths


@_at_most(60)
@given(st.data())
def test_chat_messages_obey_the_api_rules(data: st.DataObject) -> None:
    thinking = data.draw(st.booleans())
    messages = data.draw(chat_messages(tools=("read", "write"), thinking=thinking))
    pending: set[str] = set()
    for message in messages:
        role = message["role"]
        if role == "tool":
            assert message["tool_call_id"] in pending
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, "every tool call is answered before the conversation moves on"
        if role == "assistant":
            if thinking:
                assert isinstance(message["reasoning_content"], str)
            for call in message.get("tool_calls", []):
                assert call["function"]["name"] in ("read", "write")
                pending.add(call["id"])
    assert not pending
    assert messages[-1]["role"] in ("user", "tool", "assistant")


@pytest.mark.slow
def test_chat_requests_draw_forced_tool_choices_only_without_thinking() -> None:
    seen: list[tuple[bool, Any]] = []

    @settings(max_examples=60, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(chat_requests())
    def collect(body: dict[str, Any]) -> None:
        if "tool_choice" in body:
            seen.append((deepseek_codec.parse_request(body).thinking_on, body["tool_choice"]))

    collect()
    assert seen
    for thinking, choice in seen:
        if thinking:
            assert choice in ("none", "auto")


@given(system_prompts(empty=False))
def test_system_prompts_without_empty_ones(prompt: str | None) -> None:
    assert isinstance(prompt, str) and prompt


def test_system_prompts_yield_none_and_empty_by_default() -> None:
    drawn: set[object] = set()

    @settings(max_examples=300, database=None)
    @given(system_prompts())
    def collect(prompt: str | None) -> None:
        if not prompt:
            drawn.add(prompt)

    collect()
    assert drawn == {None, ""}


@_at_most(60)
@given(generate_options())
def test_generate_options_serialize_with_both_codecs(options: GenerateOptions) -> None:
    chat = deepseek_codec.serialize_request(options)
    assert deepseek_codec.parse_request(chat).to_json() == chat
    messages_api = anthropic_codec.serialize_request(options)
    assert anthropic_codec.parse_request(messages_api).to_json() == messages_api


@pytest.mark.slow
def test_generate_options_takes_the_models() -> None:
    models: set[str] = set()

    @settings(max_examples=40, database=None)
    @given(generate_options(models=["deepseek-chat"]))
    def collect(options: GenerateOptions) -> None:
        models.add(options.model)

    collect()
    assert models == {"deepseek-chat"}


def test_all_is_sorted_and_exact() -> None:
    package = dsh_testkit.strategies
    exported = package.__all__
    assert exported == sorted(exported, key=lambda n: (not n[0].isupper(), n))
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(exported) == public


@pytest.mark.parametrize(
    "name",
    ["anthropic_requests", "chat_requests", "chat_messages", "chat_tools", "generate_options"],
)
def test_wire_strategies_are_documented(name: str) -> None:
    doc = getattr(dsh_testkit.strategies, name).__doc__
    assert doc and len(doc.split()) > 10
