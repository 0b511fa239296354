"""Script entries: JSON round trips, the errors for bad entries, the behaviour vocabulary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.mock import ErrorReply, Reply, Script, ScriptError, ToolCall, behaviour
from dsh_testkit.mock._script import (
    BEHAVIOURS,
    SCRIPT_FORMAT_VERSION,
    entry_from_json,
    random_script,
)

texts = st.text(max_size=30)
tool_calls = st.builds(
    ToolCall,
    name=st.text(alphabet="abcxyz_-09", min_size=1, max_size=10),
    arguments=texts,
    id=st.none() | st.text(min_size=1, max_size=10),
    fragments=st.integers(1, 5),
)
replies = st.builds(
    Reply,
    text=texts,
    reasoning=st.none() | texts,
    tool_calls=st.lists(tool_calls, max_size=3).map(tuple),
    finish_reason=st.none() | st.sampled_from(["stop", "length", "tool_calls", "content_filter"]),
    chunk_size=st.integers(1, 20),
    keep_alives=st.integers(0, 3),
    pace_ms=st.integers(0, 5),
    fault=st.none()
    | st.sampled_from(
        ["reset", "hang", "disconnect", "eof", "stall", "malformed-json", "empty-body"]
    ),
    fault_after=st.integers(0, 5),
)
json_bodies = (
    st.none() | texts | st.dictionaries(st.text(max_size=5), st.integers() | texts, max_size=3)
)
http_errors = st.builds(
    ErrorReply,
    status=st.integers(400, 599),
    message=st.none() | texts,
    type=st.none() | texts,
    code=st.none() | texts,
    body=json_bodies,
    retry_after=st.none() | st.sampled_from(["1", "30", "Wed, 21 Oct 2026 07:28:00 GMT"]),
    request_id=st.none() | texts,
    headers=st.lists(st.tuples(st.sampled_from(["x-a", "x-b"]), texts), max_size=2).map(tuple),
)


@given(replies | http_errors)
def test_entries_round_trip_through_json(entry: Reply | ErrorReply) -> None:
    text = json.dumps(entry.to_json())
    assert entry_from_json(json.loads(text)) == entry


@given(
    st.lists(replies | http_errors, max_size=4),
    st.sampled_from(["default", "error", "repeat-last"]),
)
def test_scripts_round_trip_through_their_file_text(entries: list[Any], on_exhausted: str) -> None:
    script = Script(entries=tuple(entries), on_exhausted=on_exhausted)  # type: ignore[arg-type]
    assert Script.from_json(json.loads(script.dumps())) == script


def test_script_files_load_and_are_stable(tmp_path: Path) -> None:
    script = Script(entries=(Reply(text="hi"), ErrorReply(status=429, retry_after="2")))
    path = tmp_path / "script.json"
    path.write_text(script.dumps(), encoding="utf-8")
    assert Script.load(path) == script
    assert script.dumps() == Script.load(path).dumps()
    assert json.loads(script.dumps())["version"] == SCRIPT_FORMAT_VERSION


def test_a_bare_list_is_a_script_and_behaviours_are_named_entries() -> None:
    script = Script.from_json([{"behaviour": "rate_limit"}, {"text": "hi"}])
    assert script.entries == (BEHAVIOURS["rate_limit"], Reply(text="hi"))


def test_tool_call_arguments_may_be_written_as_an_object() -> None:
    entry = entry_from_json({"toolCalls": [{"name": "f", "arguments": {"a": 1}}]})
    assert isinstance(entry, Reply)
    assert entry.tool_calls[0].arguments == '{"a":1}'


def test_retry_after_seconds_become_the_header_text() -> None:
    assert ErrorReply(status=429, retry_after=2).retry_after == "2"
    assert ErrorReply(status=429, retry_after=1.5).retry_after == "1.5"


def test_finish_reason_defaults_to_tool_calls_or_stop() -> None:
    assert Reply(text="x").effective_finish_reason == "stop"
    assert Reply(tool_calls=(ToolCall(name="f"),)).effective_finish_reason == "tool_calls"
    assert Reply(text="x", finish_reason="length").effective_finish_reason == "length"


@pytest.mark.parametrize(
    ("obj", "path", "words"),
    [
        ({"kind": "nope"}, "entry.kind", "unknown entry kind 'nope'"),
        ({"text": 3}, "entry.text", "must be a string"),
        ({"txt": "hi"}, "entry", "unknown keys ['txt']"),
        ({"chunkSize": 0}, "entry.chunkSize", "must be an integer ≥ 1"),
        ({"fault": "explode"}, "entry.fault", "unknown fault 'explode'"),
        ({"finishReason": "done"}, "entry.finishReason", "unknown finish reason 'done'"),
        ({"toolCalls": {}}, "entry.toolCalls", "must be an array of tool calls"),
        ({"toolCalls": [{"name": ""}]}, "entry.toolCalls[0].name", "non-empty name"),
        ({"toolCalls": [{"name": "f", "fragments": 0}]}, "entry.toolCalls[0].fragments", "≥ 1"),
        ({"kind": "http-error", "status": 200}, "entry.status", "must be 400–599"),
        ({"kind": "http-error", "status": "429"}, "entry.status", "must be an integer"),
        ({"kind": "http-error", "status": 500, "headers": 3}, "entry.headers", "object or a list"),
        ({"kind": "http-error", "status": 500, "headers": [["a"]]}, "entry.headers[0]", "pair"),
        ({"behaviour": "explode"}, "behaviour", "unknown behaviour 'explode'"),
        ({"behaviour": "stall", "text": "x"}, "entry", "unknown keys ['text']"),
        ([], "entry", "must be a JSON object"),
    ],
)
def test_invalid_entries_name_the_path_and_the_problem(obj: object, path: str, words: str) -> None:
    with pytest.raises(ScriptError) as caught:
        entry_from_json(obj)
    assert caught.value.path == path
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    ("obj", "path", "words"),
    [
        ({"entries": []}, "script.version", 'write "version": 1'),
        ({"version": 2, "entries": []}, "script.version", "version 2 is not supported"),
        ({"version": 1, "entries": {}}, "script.entries", "must be an array"),
        ({"version": 1, "onExhausted": "panic"}, "script.onExhausted", "must be one of"),
        ({"version": 1, "entries": [{"text": 1}]}, "script.entries[0].text", "must be a string"),
        ({"version": 1, "extra": 1}, "script", "unknown keys ['extra']"),
    ],
)
def test_invalid_scripts_name_the_path(obj: object, path: str, words: str) -> None:
    with pytest.raises(ScriptError) as caught:
        Script.from_json(obj)
    assert caught.value.path == path
    assert words in str(caught.value)


def test_unreadable_or_invalid_script_files_are_script_errors(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read the script file"):
        Script.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope", encoding="utf-8")
    with pytest.raises(ScriptError, match="not valid JSON") as caught:
        Script.load(bad)
    assert caught.value.path == str(bad)


def test_entries_refuse_bad_values_when_built_in_python() -> None:
    with pytest.raises(ScriptError, match="must be a ToolCall"):
        Reply(tool_calls=({"name": "f"},))  # type: ignore[arg-type]
    with pytest.raises(ScriptError, match="not representable"):
        ErrorReply(status=500, body={"x": float("nan")})
    # one call not in a list: a ScriptError, not a TypeError from iterating it (None is
    # leaving the field out: no calls)
    with pytest.raises(ScriptError, match="must be a list of ToolCall") as caught:
        Reply(tool_calls=ToolCall(name="f"))  # type: ignore[arg-type]
    assert caught.value.path == "toolCalls"
    assert Reply(tool_calls=None) == Reply()
    # a lone surrogate cannot go on the wire: said at the entry, not as a 500 per request
    with pytest.raises(ScriptError, match="at character 4, which UTF-8 cannot encode") as caught:
        Reply(text="bad \ud800 text")
    assert caught.value.path == "text"
    with pytest.raises(ScriptError, match="UTF-8 cannot encode"):
        ToolCall(name="f", arguments='{"a": "\udfff"}')
    # headers as a mapping are its items, not its keys taken as pairs
    assert ErrorReply(status=500, headers={"ab": "x"}).headers == (("ab", "x"),)
    for seconds in (float("nan"), float("inf"), -1):
        with pytest.raises(ScriptError, match="must be a finite number of seconds") as caught:
            ErrorReply(status=429, retry_after=seconds)
        assert caught.value.path == "retryAfter"


def test_every_reference_behaviour_has_an_entry() -> None:
    reference = {
        "connection_reset", "stream_disconnect", "partial_disconnect", "stall", "empty",
        "empty_body", "stream_eof", "partial_eof", "malformed_json", "malformed_event",
        "wrong_content_type", "rate_limit", "server_error", "service_unavailable", "auth_error",
        "invalid_request", "context_overflow", "quota_exceeded", "success", "slow_success",
        "reasoning_success", "tool_call_success", "max_tokens",
    }  # fmt: skip
    assert set(BEHAVIOURS) == reference
    assert behaviour("rate_limit", retry_after="9") == ErrorReply(status=429, retry_after="9")


def test_random_scripts_are_reproducible_from_their_seed() -> None:
    first = random_script(40, seed=7)
    assert first == random_script(40, seed=7)
    assert first != random_script(40, seed=8)
    assert len(first) == 40
    assert set(first) <= set(BEHAVIOURS.values())
    only = random_script(5, seed=1, weights={"rate_limit": 1.0, "success": 0.0})
    assert only == (BEHAVIOURS["rate_limit"],) * 5


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"weights": {"explode": 1.0}}, "unknown behaviours ['explode']"),
        ({"weights": {"success": 0.0}}, "needs a positive weight"),
    ],
)
def test_random_script_refuses_bad_weights(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ScriptError, match=words.replace("[", r"\[").replace("]", r"\]")):
        random_script(3, seed=0, **kwargs)


def test_sequences_given_in_python_become_tuples() -> None:
    reply = Reply(tool_calls=[ToolCall(name="f")])
    assert reply.tool_calls == (ToolCall(name="f"),)
    assert Script(entries=[reply]).entries == (reply,)
    error = ErrorReply(status=500, headers=[["x-a", "1"]])  # type: ignore[list-item]
    assert error.headers == (("x-a", "1"),)


def test_http_error_headers_may_be_an_object() -> None:
    entry = entry_from_json({"kind": "http-error", "status": 500, "headers": {"x-a": "1"}})
    assert isinstance(entry, ErrorReply) and entry.headers == (("x-a", "1"),)


def test_a_header_that_is_not_a_pair_is_a_script_error() -> None:
    with pytest.raises(ScriptError) as caught:
        entry_from_json({"kind": "http-error", "status": 500, "headers": [5]})
    assert caught.value.path == "entry"
