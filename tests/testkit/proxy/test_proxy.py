"""The recording proxy end to end: the official openai SDK → proxy → the mock over loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from dsh_testkit.doctor import diagnose
from dsh_testkit.explorer import live_pages
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.proxy import ProxyServer
from dsh_testkit.traces import load_trace
from tests.testkit.traces._agent import KEY, RULES, TOOLS, run_agent


def script() -> list[Reply]:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    return [Reply(reasoning="Let me read it.", tool_calls=(call,)), Reply(text="It says hi.")] * 2


def test_openai_agent_through_the_proxy_is_recorded_and_diagnosed(tmp_path: Path) -> None:
    out = tmp_path / "run.trace"
    with (
        MockServer(MockDeepSeek(script(), passback="off")) as upstream,
        ProxyServer(upstream.base_url, out=str(out), pages=live_pages) as proxy,
    ):
        client = openai.OpenAI(base_url=proxy.base_url, api_key=KEY)
        run_agent(client, ["read a.txt", "again"], reserialize_args=True)
        report = httpx.get(proxy.base_url + "/_dsh/report").text
        as_json = httpx.get(proxy.base_url + "/_dsh/report?format=json").json()
        models = client.models.list()  # not a model request: forwarded, not recorded
        assert models.data
    text = out.read_text(encoding="utf-8")
    assert KEY not in text and KEY not in report
    trace = load_trace(out)
    assert trace.source == "proxy"
    assert len(trace) == 4
    first = trace.exchanges[0]
    assert first.response is not None
    assert first.response["tool_calls"][0]["function"]["arguments"] == '{"path": "a.txt"}'
    assert first.usage is not None and first.usage.hit_tokens is not None
    assert first.started is not None and first.first_byte is not None and first.finished is not None
    assert first.started <= first.first_byte <= first.finished
    assert "tool-args-reserialized" in report
    assert as_json["figures"] == "reported"
    assert as_json["causeCounts"] == {"tool-args-reserialized": 2}
    doctor = diagnose(trace)
    assert doctor.counts() == {"tool-args-reserialized": 2}
    finding = doctor.conversations[0].findings()[0][1]
    # The mock's V4 template renders tool arguments by value: the resent bytes cost no tokens.
    assert (finding.severity, finding.rendered) == ("note", False)
    assert finding.detail.endswith(
        "(the template does not render this difference, so it cost nothing)"
    )


def test_sse_is_relayed_event_by_event_before_the_upstream_finishes(tmp_path: Path) -> None:
    slow = Reply(text="one two three four five six seven eight", chunk_size=6, pace_ms=60)
    with MockServer(MockDeepSeek([slow])) as upstream, ProxyServer(upstream.base_url) as proxy:
        body = {
            "model": "deepseek-v4-flash",
            "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "hi"}],
            "stream": True,
        }
        arrivals: list[float] = []
        with httpx.stream(
            "POST",
            proxy.base_url + "/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {KEY}"},
        ) as response:
            for chunk in response.iter_raw():
                if chunk:
                    arrivals.append(time.time())
        trace = proxy.trace()
        for _ in range(500):  # the proxy's thread records right after relaying the end
            if len(trace):
                break
            time.sleep(0.01)
            trace = proxy.trace()
    exchange = trace.exchanges[0]
    assert exchange.finished is not None
    # The client held the first bytes while the upstream was still producing the rest.
    assert arrivals[0] < exchange.finished
    assert len(arrivals) > 3
    assert exchange.response is not None
    assert exchange.response["content"] == "one two three four five six seven eight"


def test_proxy_command_prints_where_it_listens_and_the_report_on_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "cli.trace"
    with MockServer(MockDeepSeek(script(), passback="off")) as upstream:
        upstream_url = upstream.base_url
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dsh_testkit.cli",
                "proxy",
                "--upstream",
                upstream.base_url,
                "--out",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            # As `serve`: the first line is the base URL alone, for scripts to read.
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+\n", first), first
            client = openai.OpenAI(base_url=first.strip(), api_key=KEY)
            run_agent(client, ["read a.txt"], system=lambda i: RULES + f"\nnow: 17:0{i}:00")
        finally:
            process.send_signal(signal.SIGINT)
            rest, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert f"listening on {first.strip()} → {upstream_url}" in err
    assert "Cache doctor" in rest and "volatile-system-text" in rest
    assert KEY not in first + rest + err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "dsh-trace"
    assert len(lines) == 3
    assert KEY not in "".join(lines)


def test_keys_in_bodies_and_query_strings_are_never_recorded_or_reported(tmp_path: Path) -> None:
    out = tmp_path / "leak.trace"
    other = "sk-" + "L3akyK3y99" * 4
    with (
        MockServer(MockDeepSeek()) as upstream,
        ProxyServer(upstream.base_url, out=str(out), pages=live_pages) as proxy,
    ):
        body = {
            "model": "deepseek-chat",
            "messages": [
                {"role": "system", "content": RULES},
                {"role": "user", "content": f"my key is {other}"},
            ],
        }
        httpx.post(
            proxy.base_url + f"/chat/completions?api_key={other}",
            json=body,
            headers={"authorization": f"Bearer {KEY}"},
        )
        report = httpx.get(proxy.base_url + "/_dsh/report?format=json").text
        in_memory = json.dumps([e.to_json() for e in proxy.trace()])
    text = out.read_text(encoding="utf-8")
    for secret in (KEY, other):
        assert secret not in text and secret not in report and secret not in in_memory
    assert len(load_trace(out)) == 1


def test_tools_reach_the_upstream_unchanged() -> None:
    mock = MockDeepSeek(script())
    with MockServer(mock) as upstream, ProxyServer(upstream.base_url) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key=KEY)
        run_agent(client, ["read a.txt"])
    assert mock.requests[0].body["tools"] == TOOLS
    assert len(proxy.trace()) == 2


def test_a_refused_request_keeps_the_apis_own_words(tmp_path: Path) -> None:
    """The 400 for reasoning not passed back: the trace keeps the API's message, so the
    report quotes it instead of "(no error body)"."""
    out = tmp_path / "run.trace"
    with (
        MockServer(MockDeepSeek(script())) as upstream,
        ProxyServer(upstream.base_url, out=str(out), pages=live_pages) as proxy,
    ):
        client = openai.OpenAI(base_url=proxy.base_url, api_key=KEY, max_retries=0)
        with pytest.raises(openai.BadRequestError) as refused:
            run_agent(client, ["read a.txt"], drop_reasoning=True)
        report = httpx.get(proxy.base_url + "/_dsh/report").text
    said = refused.value.body["message"] if isinstance(refused.value.body, dict) else None
    assert said and "reasoning_content" in said
    trace = load_trace(out)
    assert [exchange.status for exchange in trace.exchanges] == [200, 400]
    assert trace.exchanges[0].error is None
    assert trace.exchanges[1].error == said
    assert trace.exchanges[1].response is None and trace.exchanges[1].usage is None
    assert f"error: {said}" in report
    assert "(no error body)" not in report
    assert KEY not in out.read_text(encoding="utf-8")


def test_side_call_marks_and_a_mock_reset_reach_the_trace_and_no_other_header(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run.trace"
    request = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi."}]}
    with (
        MockServer(MockDeepSeek([Reply(text="Hello.")] * 3)) as upstream,
        ProxyServer(upstream.base_url, out=str(out)) as proxy,
        httpx.Client(base_url=proxy.base_url) as http,
    ):
        secret = {"authorization": "Bearer sk-FAKE-proxy-mark-not-a-key"}
        http.post("/chat/completions", json=request, headers=secret).raise_for_status()
        marked = {**secret, "x-dsh-side-call": "1", "x-other": "kept-out"}
        http.post("/chat/completions", json=request, headers=marked).raise_for_status()
        # forwarded to the mock: its cache emptied
        http.post("/_dsh/reset", json={}).raise_for_status()
        http.post("/chat/completions", json=request, headers=secret).raise_for_status()
    text = out.read_text(encoding="utf-8")
    assert "sk-proxy-mark" not in text and "x-other" not in text
    first, side, after = load_trace(out).exchanges
    assert (first.headers, first.log_events) == ((), ())
    assert side.headers == (("x-dsh-side-call", "1"),) and side.log_events == ()
    [reset] = after.log_events
    assert reset.kind == "reset" and "POST /_dsh/reset" in reset.detail
    report = diagnose(out)
    # the marked call is a side call; after the reset the cache is cold: a new start
    assert [r.relation for r in report.requests] == ["first", "branch", "first"]
