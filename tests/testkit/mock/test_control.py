"""The control API and the mock's dependability for any client: reset, an exhausted script, the
Anthropic endpoint's errors, the script's JSON Schema, ``serve``'s options, strictness and the
tool round trip without scripting."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import jsonschema
import openai
import pytest

from dsh_testkit.mock import (
    MockDeepSeek,
    MockServer,
    Reply,
    Script,
    ScriptError,
    ToolCall,
    call_each_tool_once,
)
from dsh_testkit.mock._schema import script_schema
from dsh_testkit.mock._script import BEHAVIOURS

from ._helpers import ANTHROPIC, API_KEY, CHAT, anthropic_body, call, chat_body, payload, request

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "clock"}}


def control(mock: MockDeepSeek, path: str, body: Any = None, method: str = "POST") -> Any:
    return payload(mock.handle(request(path, body, method=method, key=None)))


# -- reset and exhaustion ---------------------------------------------------------------------


def test_reset_restores_the_initial_on_exhausted(mock: MockDeepSeek) -> None:
    control(mock, "/_dsh/script", {"version": 1, "onExhausted": "error", "entries": []})
    assert call(mock, CHAT, chat_body()).status == 410
    assert control(mock, "/_dsh/reset") == {"reset": True}
    assert mock.on_exhausted == "default"
    assert call(mock, CHAT, chat_body()).status == 200


def test_an_exhausted_script_is_not_retried_by_the_official_sdks() -> None:
    with MockServer(MockDeepSeek(on_exhausted="error")) as server:
        with (
            openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=2) as client,
            pytest.raises(openai.APIStatusError) as caught,
        ):
            client.chat.completions.create(
                model="deepseek-v4-flash", messages=[{"role": "user", "content": "hi"}]
            )
        assert caught.value.status_code == 410
        assert "nothing scripted answers request 1 (POST /chat/completions" in str(caught.value)
        with (
            anthropic.Anthropic(
                base_url=server.anthropic_base_url, api_key=API_KEY, max_retries=2
            ) as claude,
            pytest.raises(anthropic.APIStatusError) as refused,
        ):
            claude.messages.create(
                model="deepseek-v4-flash",
                max_tokens=64,
                messages=[{"role": "user", "content": "hi"}],
            )
        assert refused.value.status_code == 410
        assert len(server.mock.requests) == 2  # one each: neither SDK retried


# -- the Anthropic endpoint's errors ----------------------------------------------------------


def test_anthropic_errors_carry_a_request_id_header_the_sdk_reads() -> None:
    with MockServer(MockDeepSeek(api_keys=["right"])) as server:
        with (
            anthropic.Anthropic(
                base_url=server.anthropic_base_url, api_key="wrong", max_retries=0
            ) as claude,
            pytest.raises(anthropic.AuthenticationError) as caught,
        ):
            claude.messages.create(
                model="deepseek-v4-flash",
                max_tokens=64,
                messages=[{"role": "user", "content": "hi"}],
            )
        assert caught.value.request_id is not None
        assert caught.value.request_id == caught.value.body["request_id"]  # type: ignore[index]


def test_unknown_anthropic_paths_answer_in_anthropics_shape(mock: MockDeepSeek) -> None:
    plan = call(mock, "/anthropic/v1/messages/count_tokens", anthropic_body())
    body = payload(plan)
    assert plan.status == 404
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert plan.header("request-id") == body["request_id"]
    assert "x-ds-trace-id" not in dict(plan.headers)


def test_chat_errors_carry_a_trace_id_and_never_a_request_id(mock: MockDeepSeek) -> None:
    for plan in (call(mock, CHAT, b"{"), call(mock, "/nowhere"), call(mock, CHAT, key=None)):
        assert plan.header("x-ds-trace-id") is not None
        assert plan.header("x-request-id") is None


# -- the control API's index, schema and request log ------------------------------------------


def test_the_index_lists_every_control_endpoint(mock: MockDeepSeek) -> None:
    index = control(mock, "/_dsh/", method="GET")
    paths = {e["path"]: e["methods"] for e in index["endpoints"]}
    assert paths == {
        "/_dsh": "GET",
        "/_dsh/script": "GET, POST",
        "/_dsh/routes": "GET, POST",
        "/_dsh/requests": "GET",
        "/_dsh/reset": "POST",
        "/_dsh/schema": "GET",
        "/_dsh/report": "GET",
        "/_dsh/explorer": "GET",
    }
    refused = mock.handle(request("/_dsh/schema", method="DELETE", key=None))
    assert (refused.status, refused.header("allow")) == (405, "GET")


def test_the_schema_validates_scripts_and_agrees_with_the_parser(mock: MockDeepSeek) -> None:
    schema = control(mock, "/_dsh/schema", method="GET")
    assert schema == script_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    documents = [
        Script(entries=tuple(BEHAVIOURS.values()), on_exhausted="call-tools").to_json(),
        {
            "version": 1,
            "entries": [
                {"text": "hi", "chunkSize": 4},
                {"kind": "reply", "toolCalls": [{"name": "s", "arguments": {"q": "x"}}]},
                {"kind": "http-error", "status": 429, "retryAfter": 2, "headers": {"a": "b"}},
                {"behaviour": "partial_eof"},
            ],
        },
    ]
    for document in documents:
        validator.validate(document)
        Script.from_json(document)  # the parser accepts what the schema accepts
    bad_documents = [
        {"version": 2, "entries": []},
        {"version": 1, "entries": [{"kind": "reply", "fault": "meltdown"}]},
        {"version": 1, "entries": [{"kind": "http-error", "status": 200}]},
        {"version": 1, "entries": [{"behaviour": "nope"}]},
        {"version": 1, "onExhausted": "explode"},
        {"version": 1, "entries": [{"kind": "reply", "tool_calls": []}]},
    ]
    for document in bad_documents:
        assert not validator.is_valid(document), document
        with pytest.raises(ScriptError):
            Script.from_json(document)  # and refuses what the schema refuses


def test_the_request_log_reports_its_cap_and_what_was_left(mock: MockDeepSeek) -> None:
    mock.push(Reply(text="one"), Reply(text="two"))
    call(mock, CHAT, chat_body())
    log = control(mock, "/_dsh/requests", method="GET")
    assert (log["dropped"], log["limit"], log["pending"], log["unscripted"]) == (0, 1000, 1, [])
    record = log["requests"][0]
    assert {"seq", "method", "path", "endpoint", "headers", "body", "status", "scripted"} <= set(
        record
    )


# -- strictness: what the pytest plugin asks -------------------------------------------------


def test_unused_entries_and_unscripted_requests_are_queryable(mock: MockDeepSeek) -> None:
    mock.push(Reply(text="scripted"))
    call(mock, CHAT, chat_body())
    call(mock, CHAT, chat_body({"role": "user", "content": "nobody scripted this"}))
    assert [r.seq for r in mock.unscripted_requests] == [2]
    with pytest.raises(AssertionError, match="nobody scripted this"):
        mock.assert_all_scripted()
    mock.push(Reply(text="left over"))
    assert mock.pending == (Reply(text="left over"),)
    with pytest.raises(AssertionError, match="1 scripted entry was never used"):
        mock.assert_consumed()
    mock.reset()
    mock.assert_all_scripted()
    mock.assert_consumed()


def test_a_scripted_call_of_a_tool_not_offered_fails_naming_the_offered_tools(
    mock: MockDeepSeek,
) -> None:
    mock.push(Reply(tool_calls=(ToolCall(name="wether"),)), Reply(tool_calls=(ToolCall(name="x"),)))
    plan = call(mock, CHAT, chat_body(tools=[WEATHER, CLOCK]))
    error = payload(plan)["error"]
    assert (plan.status, error["code"]) == (410, "MOCK_TOOL_NOT_OFFERED")
    assert (
        "'wether'" in error["message"] and "offered tools: 'weather', 'clock'" in error["message"]
    )
    assert "offered tools: none" in payload(call(mock, CHAT, chat_body()))["error"]["message"]
    lenient = MockDeepSeek([Reply(tool_calls=(ToolCall(name="x"),))], strict_tools=False)
    assert call(lenient, CHAT, chat_body()).status == 200


def test_tool_call_arguments_take_a_dict_or_a_json_string() -> None:
    as_dict = ToolCall(name="s", arguments={"q": "x", "n": [1, 2]})
    assert as_dict.arguments == '{"q":"x","n":[1,2]}' == as_dict.arguments_json
    assert as_dict == ToolCall(name="s", arguments='{"q":"x","n":[1,2]}')
    assert ToolCall.from_json({"name": "s", "arguments": {"q": "x", "n": [1, 2]}}) == as_dict
    with pytest.raises(ScriptError, match="arguments"):
        ToolCall(name="s", arguments={"bad": float("nan")})


# -- the TestModel-like policy ----------------------------------------------------------------


def test_call_each_tool_once_then_answer_with_their_results() -> None:
    mock = MockDeepSeek(on_exhausted="call-tools")
    first = payload(call(mock, CHAT, chat_body(tools=[WEATHER, CLOCK], model="deepseek-chat")))
    message = first["choices"][0]["message"]
    calls = {
        c["function"]["name"]: json.loads(c["function"]["arguments"]) for c in message["tool_calls"]
    }
    assert calls == {"weather": {"city": "mock", "days": 1}, "clock": {}}
    history = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "", "tool_calls": message["tool_calls"]},
        *(
            {"role": "tool", "tool_call_id": c["id"], "content": f"{c['function']['name']} ok"}
            for c in message["tool_calls"]
        ),
    ]
    second = payload(
        call(mock, CHAT, chat_body(*history, tools=[WEATHER, CLOCK], model="deepseek-chat"))
    )
    answer = second["choices"][0]["message"]
    assert "tool_calls" not in answer
    assert json.loads(answer["content"]) == {"weather": "weather ok", "clock": "clock ok"}


def test_call_each_tool_once_over_the_anthropic_format_in_thinking_mode() -> None:
    mock = MockDeepSeek(call_each_tool_once)
    tool = {"name": "weather", "input_schema": WEATHER["function"]["parameters"]}  # type: ignore[index]
    first = payload(call(mock, ANTHROPIC, anthropic_body(tools=[tool])))
    kinds = [b["type"] for b in first["content"]]
    assert kinds == ["thinking", "tool_use"]
    use = first["content"][1]
    history = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": first["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "sunny"}],
        },
    ]
    second = payload(call(mock, ANTHROPIC, anthropic_body(*history, tools=[tool])))
    text = next(b["text"] for b in second["content"] if b["type"] == "text")
    assert json.loads(text) == {"weather": "sunny"}


def test_call_each_tool_once_without_tools_is_the_default_reply(mock: MockDeepSeek) -> None:
    mock.respond_with(call_each_tool_once)
    answer = payload(call(mock, CHAT, chat_body(tools=[WEATHER], tool_choice="none")))
    assert answer["choices"][0]["message"]["content"].startswith("Mock DeepSeek reply to:")


# -- serve, as a user runs it -----------------------------------------------------------------


def test_serve_prints_the_schema() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", "serve", "--print-schema"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(done.stdout) == script_schema()


def test_serve_applies_its_options_and_reset_rereads_the_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(Script(entries=(Reply(text="first file"),)).dumps(), encoding="utf-8")
    options = [
        ["--script", str(script), "--on-exhausted", "error", "--api-key", "k1"],
        ["--request-log-limit", "2", "--passback", "tool-calls", "--cache-granularity", "128"],
        ["--cache-interval", "0", "--max-connections", "8", "--head-timeout", "5"],
        ["--cache-visibility", "live", "--cache-delay-output", "0", "--cache-ttl", "60"],
    ]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh_testkit.cli",
            "serve",
            *(o for group in options for o in group),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip()
        auth = {"authorization": "Bearer k1"}
        with httpx.Client(base_url=base, timeout=10) as client:
            assert (
                client.post(
                    CHAT, json=chat_body(), headers={"authorization": "Bearer k2"}
                ).status_code
                == 401
            )
            first = client.post(CHAT, json=chat_body(), headers=auth).json()
            assert first["choices"][0]["message"]["content"] == "first file"
            assert client.post(CHAT, json=chat_body(), headers=auth).status_code == 410
            log = client.get("/_dsh/requests").json()
            assert (len(log["requests"]), log["dropped"], log["limit"]) == (2, 1, 2)
            script.write_text(
                Script(entries=(Reply(text="second file"),)).dumps(), encoding="utf-8"
            )
            assert client.post("/_dsh/reset", json={}).json() == {"reset": True}
            again = client.post(CHAT, json=chat_body(), headers=auth).json()
            assert again["choices"][0]["message"]["content"] == "second file"
            script.write_text("{not json", encoding="utf-8")
            broken = client.post("/_dsh/reset", json={})
            assert (
                broken.status_code == 400
                and "no longer parses" in broken.json()["error"]["message"]
            )
    finally:
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=30)  # waits, and closes the pipes
    assert process.returncode == 0, errors


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cache-granularity", "0"], "granularity"),
        (["--cache-delay-input", "-1"], "UnitVisibility.input"),
        (["--request-log-limit", "0"], "request_log_limit"),
    ],
)
def test_serve_refuses_bad_options_in_one_line(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
