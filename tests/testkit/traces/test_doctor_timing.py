"""The doctor's figure-based causes (timing, provider, unit size) and its other inputs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_testkit.cli import main
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.reports import diagnose
from dsh_testkit.traces import Exchange, Trace, TraceUsage, load_trace
from tests.testkit.traces._agent import KEY, RULES, TOOLS, har_of

CASSETTES = Path(__file__).resolve().parents[3] / "cassettes"


def exchange(
    index: int,
    messages: list[Any],
    *,
    prompt: int,
    hit: int,
    started: float,
    finished: float,
    system: str = RULES,
    model: str = "deepseek-v4-flash",
) -> Exchange:
    return Exchange(
        index=index,
        endpoint="chat",
        body={"model": model, "messages": [{"role": "system", "content": system}, *messages]},
        usage=TraceUsage(prompt_tokens=prompt, hit_tokens=hit),
        started=started,
        finished=finished,
    )


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_a_miss_right_after_the_previous_request_is_not_yet_persisted() -> None:
    trace = Trace(
        source="memory",
        exchanges=(
            exchange(0, [user("a")], prompt=600, hit=0, started=0.0, finished=1.0),
            exchange(1, [user("a"), user("b")], prompt=640, hit=0, started=1.2, finished=2.0),
            exchange(
                2, [user("a"), user("b"), user("c")], prompt=700, hit=0, started=60.0, finished=61.0
            ),
        ),
    )
    report = diagnose(trace)
    assert report.figures == "reported"
    requests = report.conversations[0].requests
    assert [f.code for f in requests[1].findings] == ["not-yet-persisted"]
    assert "sent 0.200 s after request #1 finished" in requests[1].findings[0].detail
    assert [f.code for f in requests[2].findings] == ["provider-miss"]
    assert requests[2].lost_by_provider == requests[2].shared_tokens > 0


def test_a_shared_prefix_below_one_unit_and_a_model_switch() -> None:
    short = "Be brief."
    trace = Trace(
        source="memory",
        exchanges=(
            exchange(0, [user("a")], prompt=40, hit=0, started=0, finished=1, system=short),
            exchange(
                1, [user("a"), user("b")], prompt=50, hit=0, started=9, finished=10, system=short
            ),
            exchange(
                2,
                [user("a"), user("b"), user("c")],
                prompt=60,
                hit=0,
                started=20,
                finished=21,
                system=short,
                model="deepseek-v4-pro",
            ),
        ),
    )
    requests = diagnose(trace).conversations[0].requests
    assert [f.code for f in requests[1].findings] == ["below-cache-unit"]
    assert [f.code for f in requests[2].findings] == ["params-changed"]
    assert requests[2].findings[0].detail == 'model: "deepseek-v4-flash" → "deepseek-v4-pro"'
    assert requests[2].shared_tokens == 0


def test_a_har_of_an_agent_that_reserializes_arguments(tmp_path: Path) -> None:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    mock = MockDeepSeek([Reply(tool_calls=(call,)), Reply(text="done")])
    pairs: list[tuple[Any, Any, float, float]] = []
    with MockServer(mock) as server, httpx.Client(base_url=server.base_url) as http:
        messages: list[Any] = [{"role": "system", "content": RULES}, user("read a.txt")]
        body = {"model": "deepseek-chat", "messages": messages, "tools": TOOLS}
        started = time.time()
        first = http.post(
            "/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}
        )
        pairs.append((first.request, first, started, time.time()))
        produced = first.json()["choices"][0]["message"]
        resent = {
            "role": "assistant",
            "content": produced["content"] or "",
            "tool_calls": [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.dumps(
                            json.loads(c["function"]["arguments"]), separators=(",", ":")
                        ),
                    },
                }
                for c in produced["tool_calls"]
            ],
        }
        call_id = produced["tool_calls"][0]["id"]
        body = {
            **body,
            "messages": [
                *messages,
                resent,
                {"role": "tool", "tool_call_id": call_id, "content": "hi"},
            ],
        }
        started = time.time()
        second = http.post(
            "/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}
        )
        pairs.append((second.request, second, started, time.time()))
    path = tmp_path / "agent.har"
    path.write_text(json.dumps(har_of(pairs)), encoding="utf-8")
    report = diagnose(load_trace(path))
    assert report.figures == "reported"
    finding = report.conversations[0].requests[1].findings[0]
    assert finding.code == "tool-args-reserialized"
    assert finding.evidence == ('produced: {"path": "a.txt"}', 'sent:     {"path":"a.txt"}')


def test_cache_report_of_a_cassette_uses_its_recorded_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = CASSETTES / "one-tool-call.yaml"
    assert main(["cache-report", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["source"] == "cassette" and document["figures"] == "reported"
    assert [c["key"] for c in document["conversations"]] == ["cassette-scenario"]
    assert main(["cache-report", str(path), "--simulate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["figures"] == "simulated"
    assert main(["audit", str(path)]) == 0


def test_reserialized_arguments_say_what_they_cost() -> None:
    call: dict[str, Any] = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a"}'},
    }
    echoed = {**call, "function": {**call["function"], "arguments": '{"path":"a"}'}}
    first = Exchange(
        index=0,
        endpoint="chat",
        body={
            "model": "deepseek-chat",
            "messages": [{"role": "system", "content": RULES}, user("read a")],
        },
        response={"role": "assistant", "content": "", "tool_calls": [call]},
        usage=TraceUsage(prompt_tokens=640, hit_tokens=0, completion_tokens=90),
    )
    resent = [user("read a"), {"role": "assistant", "content": "", "tool_calls": [echoed]}]
    second = Exchange(
        index=1,
        endpoint="chat",
        body={
            "model": "deepseek-chat",
            "messages": [
                {"role": "system", "content": RULES},
                *resent,
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ],
        },
        usage=TraceUsage(prompt_tokens=760, hit_tokens=640),
    )
    found = diagnose(Trace(source="memory", exchanges=(first, second))).counts()
    assert found == {"tool-args-reserialized": 1}
    report = diagnose(Trace(source="memory", exchanges=(first, second)))
    detail = report.conversations[0].requests[1].findings[0].detail
    assert "the cache unit that ends after the model's answer (about 90 more tokens)" in detail
