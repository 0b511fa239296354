"""``dsh-testkit calibrate`` on wire traffic: any trace with live usage (a proxy trace, a HAR
file), as an agent built on another framework records it.

The traffic is real: the official ``openai`` and ``anthropic`` SDKs (and ``httpx`` for the HAR)
talk over loopback to the mock, through the recording proxy where a proxy trace is wanted. The
mock reports what its own simulator gave, so a calibration with the same rules must agree on
every request, and one with other rules must show where they part.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai

from dsh_testkit.calibration import CalibrationSettings, calibrate
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.prompt import PrefixCacheSimulator
from dsh_testkit.proxy import ProxyServer
from tests._support import run_cli
from tests.testkit.traces._agent import KEY, RULES, TOOLS, har_of, run_agent

HEURISTIC = CalibrationSettings(tokenizer="heuristic")


def _script(turns: int) -> list[Reply]:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    return [
        Reply(reasoning="Let me read it.", tool_calls=(call,)),
        Reply(text="It says hi. " * 40),
    ] * turns


def _proxy_trace(path: Path, mock: MockDeepSeek, prompts: list[str]) -> None:
    with MockServer(mock) as upstream, ProxyServer(upstream.base_url, out=str(path)) as proxy:
        run_agent(openai.OpenAI(base_url=proxy.base_url, api_key=KEY), prompts)


def test_a_proxy_trace_of_an_openai_agent_calibrates_exactly(tmp_path: Path) -> None:
    """Tool steps and new turns of an openai-SDK agent against the mock: the same rules give
    the same hits, the same units and the same prompt sizes, request by request."""
    trace = tmp_path / "agent.jsonl"
    _proxy_trace(trace, MockDeepSeek(_script(3)), ["read a.txt", "again", "once more"])
    report = calibrate([trace], settings=HEURISTIC)
    rows = report.requests
    assert len(rows) == 6 and report.skipped == ()
    assert [r.index for r in rows] == list(range(6))
    assert all(r.turn is None and r.header_known for r in rows)
    assert rows[0].first_in_scope and rows[0].live_hit_tokens == 0
    assert all(r.live_hit_tokens > 0 for r in rows[1:])
    assert [(r.simulated_hit_tokens, r.simulated_unit) for r in rows] == [
        (r.live_hit_tokens, r.live_unit) for r in rows
    ]
    assert {r.live_unit for r in rows[1:]} == {"input", "output"}
    assert all(r.simulated_prompt_tokens == r.live_prompt_tokens for r in rows)
    s = report.summary
    assert (s.exact_hit_match, s.unit_agreement, s.prompt_tokens_error) == (1.0, 1.0, 0.0)
    assert s.known_header_prompt_requests == s.prompt_requests == 6
    # the gaps are measured on the trace's clock: loopback, well under a second
    assert all(r.gap_seconds is not None and 0 <= r.gap_seconds < 5 for r in rows[1:])


def test_other_rules_than_the_traffics_show_where_they_part(tmp_path: Path) -> None:
    """Traffic from a mock whose cache stores 64-token units, calibrated with the model
    table's 128: hits differ by less than one unit and some are not exact."""
    trace = tmp_path / "agent.jsonl"
    mock = MockDeepSeek(_script(3), cache=PrefixCacheSimulator(granularity=64))
    _proxy_trace(trace, mock, ["read a.txt", "again", "once more"])
    report = calibrate([trace], settings=HEURISTIC)
    rows = report.requests
    assert all(r.live_hit_tokens % 64 == 0 for r in rows)
    assert any(r.live_hit_tokens % 128 for r in rows)  # a 64-token unit the 128 rule lacks
    assert report.summary.exact_hit_match is not None and report.summary.exact_hit_match < 1.0
    assert report.summary.within_one_unit == 1.0
    same = calibrate([trace], settings=CalibrationSettings(tokenizer="heuristic", granularity=64))
    assert same.summary.exact_hit_match == 1.0


def test_a_har_file_calibrates_and_folders_are_searched_for_it(tmp_path: Path) -> None:
    """A HAR 1.2 file of plain httpx requests (non-streamed), found in a folder by the command
    line, alongside a session log of no cache figures (skipped, not counted)."""
    mock = MockDeepSeek([Reply(text="First answer. " * 30), Reply(text="Second answer. " * 30)])
    pairs: list[tuple[Any, Any, float, float]] = []
    messages: list[dict[str, Any]] = [{"role": "system", "content": RULES}]
    with MockServer(mock) as server, httpx.Client(base_url=server.base_url) as http:
        for prompt in ("hello", "and again"):
            messages.append({"role": "user", "content": prompt})
            body = {"model": "deepseek-v4-flash", "messages": messages, "tools": TOOLS}
            started = time.time()
            answer = http.post(
                "/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}
            )
            pairs.append((answer.request, answer, started, time.time()))
            messages.append(answer.json()["choices"][0]["message"])  # reasoning passed back
    folder = tmp_path / "traffic"
    folder.mkdir()
    (folder / "agent.har").write_text(json.dumps(har_of(pairs)), encoding="utf-8")
    (folder / "notes.jsonl").write_text('{"not": "a log"}\n', encoding="utf-8")
    result = run_cli("calibrate", str(folder), "--json", "--tokenizer", "heuristic")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(r["log"], r["index"]) for r in doc["perRequest"]] == [
        ("agent.har", 0),
        ("agent.har", 1),
    ]
    second = doc["perRequest"][1]
    assert second["liveHitTokens"] > 0
    assert second["simulatedHitTokens"] == second["liveHitTokens"]
    assert doc["exact_hit_match"] == 1.0 and doc["prompt_tokens_error"] == 0.0
    (skipped,) = doc["skipped"]
    assert skipped["log"] == "notes.jsonl"
    assert skipped["reason"].startswith("neither a session log nor a trace this build reads: ")
    assert KEY not in result.stdout and KEY not in result.stderr


def test_anthropic_traffic_calibrates_on_the_messages_shape(tmp_path: Path) -> None:
    """The official ``anthropic`` SDK on DeepSeek's Anthropic endpoint, through the proxy: the
    calibration renders the Messages shape and its replies as the mock does."""
    trace = tmp_path / "claude.jsonl"
    mock = MockDeepSeek([Reply(text="An answer of some length. " * 30)] * 3)
    with MockServer(mock) as upstream, ProxyServer(upstream.base_url, out=str(trace)) as proxy:
        client = anthropic.Anthropic(base_url=proxy.base_url + "/anthropic", api_key=KEY)
        messages: list[Any] = []
        for prompt in ("one", "two", "three"):
            messages.append({"role": "user", "content": prompt})
            answer = client.messages.create(
                model="deepseek-v4-flash", max_tokens=512, system=RULES, messages=messages
            )
            # thinking mode: the answer's thinking block comes first, then its text
            text = next(b.text for b in answer.content if b.type == "text")
            messages.append({"role": "assistant", "content": text})
    report = calibrate([trace], settings=HEURISTIC)
    rows = report.requests
    assert len(rows) == 3
    assert all(r.live_hit_tokens > 0 for r in rows[1:])
    assert [r.simulated_hit_tokens for r in rows] == [r.live_hit_tokens for r in rows]
    assert [r.simulated_prompt_tokens for r in rows] == [r.live_prompt_tokens for r in rows]


def test_a_trace_without_cache_figures_is_skipped_with_the_reason(tmp_path: Path) -> None:
    """A HAR whose answers carry no usage (an error answer here) is listed as skipped."""
    mock = MockDeepSeek([Reply(text="x")], api_keys={"sk-the-right-one"})
    with MockServer(mock) as server, httpx.Client(base_url=server.base_url) as http:
        started = time.time()
        body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}
        refused = http.post("/chat/completions", json=body, headers={"authorization": "Bearer no"})
        assert refused.status_code == 401
        pairs = [(refused.request, refused, started, time.time())]
    path = tmp_path / "refused.har"
    path.write_text(json.dumps(har_of(pairs)), encoding="utf-8")
    report = calibrate([path], settings=HEURISTIC)
    assert report.requests == ()
    (skipped,) = report.skipped
    assert skipped.reason == "a har trace with no exchange carrying live cache figures"
    assert report.summary.requests == 0 and report.summary.exact_hit_match is None
