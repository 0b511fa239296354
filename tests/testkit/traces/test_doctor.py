"""The cache doctor on a real openai-SDK agent: each cause named, with its evidence visible."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from dsh_testkit.capture import RequestCapture
from dsh_testkit.cli import main
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.reports import CAUSE_CODES, LEGEND, DoctorReport, diagnose
from dsh_testkit.traces import load_trace, trace_of
from tests.testkit.traces._agent import KEY, RULES, TOOLS, run_agent, tool


def script() -> list[Reply]:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    return [Reply(reasoning="Let me read it.", tool_calls=(call,)), Reply(text="It says hi.")] * 3


def run(**knobs: Any) -> tuple[MockDeepSeek, RequestCapture]:
    mock = MockDeepSeek(script(), passback="off")
    with MockServer(mock) as server:
        capture = RequestCapture()
        client = openai.OpenAI(
            base_url=server.base_url,
            api_key=KEY,
            http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())),
        )
        run_agent(client, ["read a.txt", "again", "once more"], **knobs)
    return mock, capture


def findings(report: DoctorReport) -> list[tuple[int, Any]]:
    assert len(report.conversations) == 1
    return [(r.index, f) for r, f in report.conversations[0].findings()]


def test_a_clean_agent_has_no_findings_and_full_efficiency() -> None:
    mock, capture = run()
    for source in (mock, capture):
        report = diagnose(source)
        assert findings(report) == []
        assert all(r.extends_previous for r in report.conversations[0].requests[1:])
    reported = diagnose(mock)
    assert reported.figures == "reported"
    efficiency = reported.conversations[0].efficiency
    assert efficiency is not None and efficiency > 0.9  # the provider may keep a unit back


def test_timestamp_in_the_system_prompt_is_named_with_the_span() -> None:
    mock, capture = run(system=lambda i: RULES + f"\nCurrent time: 2026-12-02T17:0{i}:00Z")
    for source in (mock, capture):
        found = findings(diagnose(source))
        assert {f.code for _, f in found} == {"volatile-system-text"}
        index, first = found[0]
        assert index == 1
        assert "'2026-12-02T17:00:00Z' → '2026-12-02T17:01:00Z'" in first.detail
        assert first.where == "system line 31 column 30"
        assert first.evidence == (
            "request #1: 'Current time: 2026-12-02T17:00:00Z'",
            "request #2: 'Current time: 2026-12-02T17:01:00Z'",
        )
    report = diagnose(mock)
    second = report.conversations[0].requests[1]
    assert second.extends_previous is False
    assert second.lost_to_changes > 0
    assert second.shared_tokens < second.reusable_tokens


def test_a_tool_inserted_mid_list_is_named() -> None:
    mock, _ = run(tools=lambda i: TOOLS if i == 0 else [TOOLS[0], tool("grep"), TOOLS[1]])
    found = findings(diagnose(mock))
    assert [(i, f.code) for i, f in found] == [(1, "tools-changed")]
    assert "tool 'grep' inserted at position 2 of 3 (mid-list" in found[0][1].detail
    assert found[0][1].where == "tools[1]"


def test_reserialized_tool_arguments_are_named_with_both_spellings() -> None:
    mock, _ = run(reserialize_args=True)
    found = findings(diagnose(mock))
    assert {f.code for _, f in found} == {"tool-args-reserialized"}
    first = found[0][1]
    assert first.evidence == ('produced: {"path": "a.txt"}', 'sent:     {"path":"a.txt"}')
    assert first.where == "messages[2].tool_calls[0].function.arguments"


def test_reasoning_not_sent_back_is_named_and_the_rejection_said() -> None:
    mock, capture = run(drop_reasoning=True)
    for source in (mock, capture):  # the capture has no answers: the wire shape still tells
        found = findings(diagnose(source))
        assert {f.code for _, f in found} == {"reasoning-dropped"}
        assert all(f.rejected for _, f in found)
        assert "rejects this request (400" in found[0][1].detail


def test_history_truncation_is_named() -> None:
    mock, _ = run(truncate_after=2)
    found = findings(diagnose(mock))
    assert found[0][0] == 2
    assert found[0][1].code == "history-rewritten"
    assert "removed (truncation)" in found[0][1].detail


def test_params_change_and_provider_miss() -> None:
    mock, _ = run()
    trace = trace_of(mock)
    bodies = [dict(e.body) for e in trace]
    bodies[1]["model"] = "deepseek-v4-pro"
    found = findings(diagnose(bodies))
    assert ("params-changed", "model") in {(f.code, f.where) for _, f in found}


def test_real_usage_versus_simulated_figures() -> None:
    mock, capture = run(system=lambda i: RULES + f"\nrun {i}")
    reported = diagnose(mock)
    simulated = diagnose(mock, simulate=True)
    from_capture = diagnose(capture)
    assert reported.figures == "reported"
    assert simulated.figures == from_capture.figures == "simulated"
    assert "figures are simulated" in " ".join(from_capture.notes)
    for report in (reported, simulated):
        for r in report.conversations[0].requests[1:]:
            assert r.counted_hit_tokens is not None
            assert r.reusable_tokens == r.counted_hit_tokens + r.lost_to_changes + (
                r.lost_by_provider or 0
            )
            assert r.hit_tokens == r.counted_hit_tokens + (r.extra_tokens or 0)
            assert r.shared_tokens <= r.reusable_tokens


def test_cache_report_command_on_a_saved_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, capture = run(system=lambda i: RULES + f"\nCurrent time: 2026-12-02T17:0{i}:00Z")
    path = tmp_path / "agent.trace"
    capture.save(path)
    assert main(["cache-report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "volatile-system-text" in out
    assert "request #1: 'Current time: 2026-12-02T17:00:00Z'" in out
    assert "figures simulated" in out
    for name, _ in LEGEND:
        assert f"  {name}: " in out
    html_path = tmp_path / "report.html"
    assert main(["cache-report", str(path), "--json", "--html", str(html_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "dsh-testkit/trace-cache-report"
    assert document["figures"] == "simulated"
    assert document["causeCounts"] == {"volatile-system-text": 5}
    page = html_path.read_text(encoding="utf-8")
    assert "volatile-system-text" in page and "legend" in page
    assert main(["cache-report", str(path), "--conversation", "#9"]) == 2
    assert "no conversation '#9'" in capsys.readouterr().err
    assert main(["audit", str(path)]) == 1
    assert "prefix stability: FAIL" in capsys.readouterr().out


def test_audit_of_a_clean_trace_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, capture = run()
    path = tmp_path / "clean.trace"
    capture.save(path)
    assert main(["audit", str(path)]) == 0
    out = capsys.readouterr().out
    assert "prefix stability: ok" in out and "argument echo: ok" in out
    assert load_trace(path).source == "capture"


def test_every_cause_code_has_a_sentence() -> None:
    assert all(sentence.endswith(".") for sentence in CAUSE_CODES.values())
    assert len(CAUSE_CODES) == 11
