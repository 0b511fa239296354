"""Every route into a trace: capture save/load, cassettes, the mock's request log, HAR, session logs."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest

from dsh_testkit.capture import RequestCapture
from dsh_testkit.doctor import conversations, diagnose
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.traces import Trace, TraceError, load_trace, loads_trace, trace_of
from tests.testkit.traces._agent import KEY, RULES, TOOLS, har_of, run_agent

CASSETTES = Path(__file__).resolve().parents[3] / "cassettes"


def tool_then_answer() -> list[Reply]:
    return [
        Reply(
            reasoning="I should read it.",
            tool_calls=(ToolCall(name="read_file", arguments='{"path": "a.txt"}'),),
        ),
        Reply(text="It says hello."),
        Reply(text="Done."),
    ]


def test_capture_save_and_load_round_trip(tmp_path: Path) -> None:
    mock = MockDeepSeek(tool_then_answer())
    with MockServer(mock) as server:
        capture = RequestCapture()
        client = openai.OpenAI(
            base_url=server.base_url,
            api_key=KEY,
            http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())),
        )
        run_agent(client, ["read a.txt", "thanks"])
    path = tmp_path / "capture.trace"
    capture.save(path)
    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    loaded = RequestCapture.load(path)
    assert [(r.method, r.url, r.body) for r in loaded] == [
        (r.method, r.url, r.body) for r in capture
    ]
    trace = load_trace(path)
    assert trace.source == "capture"
    assert len(trace) == 3
    assert trace.exchanges[0].endpoint == "chat"
    assert trace.exchanges[0].body["messages"][0]["content"] == RULES
    assert trace.exchanges[2].messages[-1] == {"role": "user", "content": "thanks"}
    assert [len(c) for c in conversations(trace)] == [3]
    assert trace_of(capture).exchanges[1].body == trace.exchanges[1].body


def test_load_refuses_a_trace_that_is_not_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "x.trace"
    path.write_text('{"format":"dsh-trace","version":1,"source":"proxy"}\n', encoding="utf-8")
    with pytest.raises(TraceError, match="not a saved capture") as info:
        RequestCapture.load(path)
    assert info.value.path == str(path)


def test_cassette_gives_answers_and_real_usage() -> None:
    trace = load_trace(CASSETTES / "one-tool-call.yaml")
    assert trace.source == "cassette"
    first, second = trace.exchanges
    assert first.response is not None
    call = first.response["tool_calls"][0]
    assert call["function"] == {"name": "read_file", "arguments": '{"path":"notes.txt"}'}
    assert first.response["reasoning_content"] == "I should read the file."
    recorded = (CASSETTES / "one-tool-call.yaml").read_text(encoding="utf-8")
    assert first.usage is not None
    assert re.search(rf'prompt_tokens"?: ?{first.usage.prompt_tokens}\b', recorded)
    assert first.usage.hit_tokens == 0
    assert second.usage is not None and second.usage.hit_tokens is not None
    assert first.conversation == "cassette-scenario"
    assert trace.has_usage


def test_mock_request_log_saved_as_json(tmp_path: Path) -> None:
    mock = MockDeepSeek(tool_then_answer())
    with MockServer(mock) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key=KEY)
        run_agent(client, ["read a.txt", "thanks"])
        log = httpx.get(server.base_url + "/_dsh/requests").json()
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    trace = load_trace(path)
    assert trace.source == "mock-requests"
    assert len(trace) == 3
    assert all(e.usage is not None and e.usage.hit_tokens is not None for e in trace)
    assert trace.exchanges[2].usage is not None and trace.exchanges[2].usage.hit_tokens
    in_process = trace_of(mock)
    assert [e.body for e in in_process] == [e.body for e in trace]
    assert KEY not in path.read_text(encoding="utf-8")


def test_har_from_real_http_exchanges(tmp_path: Path) -> None:
    mock = MockDeepSeek(tool_then_answer())
    pairs: list[tuple[Any, Any, float, float]] = []
    with MockServer(mock) as server, httpx.Client(base_url=server.base_url) as http:
        body: dict[str, Any] = {
            "model": "deepseek-v4-flash",
            "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "hi"}],
            "tools": TOOLS,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for _ in range(2):
            started = time.time()
            response = http.post(
                "/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}
            )
            pairs.append((response.request, response, started, time.time()))
            body = {**body, "messages": [*body["messages"], {"role": "user", "content": "more"}]}
    path = tmp_path / "session.har"
    path.write_text(json.dumps(har_of(pairs)), encoding="utf-8")
    trace = load_trace(path)
    assert trace.source == "har"
    first = trace.exchanges[0]
    assert (
        first.response is not None
        and first.response["tool_calls"][0]["function"]["name"] == "read_file"
    )
    assert first.usage is not None and first.usage.prompt_tokens > 0
    assert first.started is not None and first.finished is not None
    assert first.finished >= first.started
    assert KEY not in json.dumps([e.to_json() for e in trace])


def test_conversations_split_by_shared_prefix() -> None:
    other = "\n".join(f"Guideline {i}: you are a different sub-agent." for i in range(30))
    a1 = {
        "model": "m",
        "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "a"}],
    }
    b1 = {
        "model": "m",
        "messages": [{"role": "system", "content": other}, {"role": "user", "content": "b"}],
    }
    a2 = {
        "model": "m",
        "messages": [
            *a1["messages"],
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "c"},
        ],
    }
    b2 = {"model": "m", "messages": [*b1["messages"], {"role": "assistant", "content": "y"}]}
    trace = trace_of([a1, b1, a2, b2])
    found = conversations(trace)
    assert [c.key for c in found] == ["#1", "#2"]
    assert [[e.index for e in c] for c in found] == [[0, 2], [1, 3]]
    assert [[(link.parent, link.relation) for link in c.links] for c in found] == [
        [(None, "first"), (0, "extends")],
        [(None, "first"), (1, "extends")],
    ]
    assert [r.conversation for r in diagnose(trace, conversation="#2").requests] == ["#2", "#2"]
    with pytest.raises(KeyError, match="#1, #2"):
        diagnose(trace, conversation="nope")


def test_unknown_content_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not a recognized trace"):
        loads_trace("hello")
    with pytest.raises(TraceError, match="version 9"):
        loads_trace('{"format":"dsh-trace","version":9}\n')
    with pytest.raises(TraceError, match="got int"):
        trace_of(3)


def test_unfinished_last_line_is_dropped_with_a_note() -> None:
    text = (
        '{"format":"dsh-trace","version":1,"source":"proxy"}\n'
        + json.dumps({"index": 0, "endpoint": "chat", "request": {"model": "m", "messages": []}})
        + '\n{"index": 1, "endp'
    )
    trace = loads_trace(text)
    assert isinstance(trace, Trace) and len(trace) == 1
    assert any("unfinished last line" in n for n in trace.notes)


def test_session_log_is_rebuilt_to_wire_bodies(tmp_path: Path) -> None:
    from tests.testkit._report_builders import reference_logs

    traces = [load_trace(path) for path in reference_logs()]
    assert all(t.source == "session-log" for t in traces)
    assert all(len(t) >= 1 for t in traces)
    assert all(e.endpoint in ("chat", "anthropic") for t in traces for e in t)
    assert any(e.usage is not None and e.usage.hit_tokens is not None for t in traces for e in t)


def test_a_hand_made_trace_file_is_scrubbed_on_reading() -> None:
    text = (
        '{"format":"dsh-trace","version":1,"source":"proxy"}\n'
        + json.dumps(
            {
                "index": 0,
                "endpoint": "chat",
                "request": {"model": "m", "messages": [{"role": "user", "content": f"key {KEY}"}]},
            }
        )
        + "\n"
    )
    trace = loads_trace(text)
    assert KEY not in json.dumps(trace.exchanges[0].body)
