"""Strictness where the user wants it: ``None`` is leaving a field out (in Python and in JSON),
optional routes and entries, and respx's ``assert_all_called`` on the mock itself."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.mock import ErrorReply, MockDeepSeek, Reply, Script, ScriptError, ToolCall
from dsh_testkit.mock._script import entry_from_json

from ._helpers import CHAT, call, chat_body, payload, user


def test_none_is_leaving_a_field_out() -> None:
    assert Reply(text=None) == Reply()
    assert Reply(text=None, tool_calls=None, chunk_size=None, keep_alives=None) == Reply()
    assert Reply(pace_ms=None, fault_after=None, optional=None, finish_reason=None) == Reply()
    assert ToolCall(name="f", arguments=None, fragments=None) == ToolCall(name="f")
    assert ErrorReply(status=429, headers=None) == ErrorReply(status=429)
    assert Script(entries=None, on_exhausted=None) == Script()
    assert Script.from_json({"version": 1, "entries": None, "onExhausted": None}) == Script()
    assert ErrorReply(status=429, headers={"x-a": "1"}).headers == (("x-a", "1"),)
    # (mypy types replace() by the field, a str once built; the constructor takes None)
    assert dataclasses.replace(Reply(text="a"), text=None) == Reply()  # type: ignore[arg-type]


def test_a_tool_call_turn_scripted_as_the_openai_sdk_shows_it() -> None:
    mock = MockDeepSeek([Reply(text=None, tool_calls=[ToolCall(name="f", arguments={"a": 1})])])
    body = chat_body(user(), tools=[{"type": "function", "function": {"name": "f"}}])
    message = payload(call(mock, CHAT, body))["choices"][0]["message"]
    assert message["content"] == ""  # the live API sends "" beside tool calls (wire §1.5)
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a":1}'}


def test_json_null_is_leaving_a_key_out() -> None:
    given_nulls = {
        "kind": "reply",
        "text": None,
        "reasoning": None,
        "toolCalls": None,
        "finishReason": None,
        "chunkSize": None,
        "keepAlives": None,
        "paceMs": None,
        "fault": None,
        "faultAfter": None,
        "optional": None,
    }
    assert entry_from_json(given_nulls) == Reply()
    assert entry_from_json({"kind": "http-error", "status": 500, "headers": None}) == ErrorReply(
        status=500
    )
    assert entry_from_json({"toolCalls": [{"name": "f", "arguments": None}]}) == Reply(
        tool_calls=[ToolCall(name="f")]
    )


def test_wrong_types_are_still_refused_with_their_path() -> None:
    with pytest.raises(ScriptError, match=r"entry\.text: must be a string, got 3"):
        entry_from_json({"text": 3})
    with pytest.raises(ScriptError, match=r"entry\.optional: must be true or false, got 'yes'"):
        entry_from_json({"optional": "yes"})
    with pytest.raises(ScriptError, match=r"kind: must be 'reply', got 'x'"):
        Reply(kind="x")  # type: ignore[arg-type]


@given(
    text=st.one_of(st.none(), st.text(max_size=5)),
    optional=st.booleans(),
    status=st.integers(400, 599),
)
def test_entries_round_trip_through_json(text: str | None, optional: bool, status: int) -> None:
    reply = Reply(text=text, optional=optional)
    assert entry_from_json(json.loads(json.dumps(reply.to_json()))) == reply
    error = ErrorReply(status=status, optional=optional)
    assert entry_from_json(json.loads(json.dumps(error.to_json()))) == error


def test_assert_all_called_names_what_was_left() -> None:
    mock = MockDeepSeek(on_exhausted="error")
    mock.route(last_user="title", optional=True).reply(text="A title")
    weather = mock.route(last_user="weather")
    mock.route(last_user="hello").respond(Reply(text="one"), Reply(text="two", optional=True))
    mock.push(Reply(text="q"), Reply(text="maybe", optional=True))
    assert (
        payload(call(mock, CHAT, chat_body(user("hello"))))["choices"][0]["message"]["content"]
        == "one"
    )
    assert (
        payload(call(mock, CHAT, chat_body(user("other"))))["choices"][0]["message"]["content"]
        == "q"
    )
    with pytest.raises(AssertionError) as caught:
        mock.assert_all_called()
    text = str(caught.value)
    assert "route 2 (last user message contains 'weather') was never matched" in text
    assert "title" not in text and "two" not in text and "maybe" not in text
    mock.assert_consumed()  # the optional entry left is not asked for
    call(mock, CHAT, chat_body(user("weather")))
    assert weather.called
    mock.assert_all_called()


def test_a_route_whose_answers_are_all_optional_may_go_uncalled() -> None:
    mock = MockDeepSeek()
    mock.route(last_user="x").respond(Reply(text="a", optional=True), Reply(optional=True))
    mock.assert_all_called()


def test_optional_routes_over_json() -> None:
    mock = MockDeepSeek()
    route = mock.add_route_json({"match": {"lastUser": "x"}, "reply": "default", "optional": True})
    assert route.optional and route.to_json()["optional"] is True
    assert "(optional)" in repr(route)
    mock.assert_all_called()
    with pytest.raises(ScriptError, match=r"route\.optional: must be true or false"):
        mock.add_route_json({"optional": 1})
