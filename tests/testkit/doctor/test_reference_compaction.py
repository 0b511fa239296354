"""One session, two recordings: the reference harness's compaction-recovery session as its log
records it, and replayed against the loopback mock as the harness sent it, read back from the
mock's request log.

The log holds three requests (the first, an attempt the API refused for its context window,
the retry after a compaction) and only prices the compaction's own model call; the mock's log
holds that call too (marked ``x-deepseek-harness-compact``), between the refusal and the retry.
The doctor must give the same main line from both — the same figures, the same one cause
(the compaction's ``history-rewritten``, charged once on the retry) — report the side call
that only the mock's log holds apart, with its own figures, and name no cause on a request
that lost nothing.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx
import pytest

from dsh_core import reconstruct_requests, request_wire_body
from dsh_testkit.doctor import DoctorReport, RequestDiagnosis, diagnose
from dsh_testkit.mock import ErrorReply, MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.reports._loading import load_log
from dsh_testkit.traces._readers._session_log import session_log_trace
from tests._support import REFERENCE_LOGS

LOG = REFERENCE_LOGS / "compaction-recovery" / "session.jsonl"
INSTRUCTION = "Condense the conversation above into a structured checkpoint."


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> tuple[DoctorReport, DoctorReport]:
    if not LOG.is_file():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    loaded = load_log(LOG)
    events = loaded.events
    session = loaded.info.id
    summaries = [e for e in events if e.type == "compaction/summary"]
    rebuilt = list(reconstruct_requests(events))
    mock = MockDeepSeek(seed=0, passback="off")  # the requests as the harness sent them
    headers = {"x-deepseek-harness-session-id": session, "authorization": "Bearer sk-x"}
    sent: list[tuple[dict[str, Any], dict[str, str]]] = []
    previous: dict[str, Any] | None = None
    for item in rebuilt:
        body = json.loads(json.dumps(request_wire_body(item.request)))
        body["stream"] = False
        body.pop("stream_options", None)
        if summaries and item.attempt > 0 and previous is not None:
            # The compaction's own call, which the log only prices: the conversation's system
            # prompt and tools, the head it shadows, then the instruction.
            summary = summaries.pop(0).data
            shadowed = len(summary.get("shadowedSeqs") or ()) or 1
            system = [m for m in previous["messages"] if m["role"] == "system"]
            rest = [m for m in previous["messages"] if m["role"] != "system"]
            call = {
                "model": previous["model"],
                "stream": False,
                "tools": previous.get("tools"),
                "messages": [*system, *rest[:shadowed], {"role": "user", "content": INSTRUCTION}],
            }
            text = "".join(b.get("text", "") for b in summary["summary"])
            mock.push(Reply(text=text))
            sent.append((call, {**headers, "x-deepseek-harness-compact": "1"}))
        if item.reply is None:
            mock.push(ErrorReply(status=400, message="maximum context length exceeded"))
        else:
            blocks = [b.to_json() for b in item.reply.content]
            mock.push(
                Reply(
                    text="".join(b.get("text", "") for b in blocks if b["type"] == "text"),
                    tool_calls=tuple(
                        ToolCall(id=b["id"], name=b["name"], arguments=b["arguments"])
                        for b in blocks
                        if b["type"] == "tool-call"
                    ),
                    reasoning="".join(b.get("text", "") for b in blocks if b["type"] == "reasoning")
                    or None,
                )
            )
        sent.append((body, headers))
        previous = body
    with MockServer(mock) as server, httpx.Client(base_url=server.base_url) as http:
        for body, extra in sent:
            http.post("/chat/completions", json=body, headers=extra)
        log = http.get("/_dsh/requests").json()
    saved = tmp_path_factory.mktemp("reference") / "mock-requests.json"
    saved.write_text(json.dumps(log), encoding="utf-8")
    # Both read on one footing, the prefix-cache simulator's: the log's own usage figures are
    # those of the stand-in provider it was recorded against (24 prompt tokens), not the mock's.
    trace = session_log_trace(loaded, path=str(LOG))
    trace = replace(trace, exchanges=tuple(replace(e, usage=None) for e in trace.exchanges))
    return diagnose(trace, simulate=True), diagnose(saved, simulate=True)


def _main_line(report: DoctorReport) -> list[RequestDiagnosis]:
    return [r for r in report.requests if not r.side_call]


def _figures(r: RequestDiagnosis) -> tuple[Any, ...]:
    costly = tuple((f.code, f.severity, f.lost_tokens) for f in r.findings if f.severity != "note")
    if (r.status or 0) >= 400:
        return ("refused", r.status, costly)
    return (r.prompt_tokens, r.hit_tokens, r.reusable_tokens, r.lost_tokens, costly)


def test_the_main_line_is_the_same_from_the_session_log_and_the_mocks_request_log(
    readings: tuple[DoctorReport, DoctorReport],
) -> None:
    from_log, from_mock = readings
    assert [_figures(r) for r in _main_line(from_log)] == [
        _figures(r) for r in _main_line(from_mock)
    ]
    log_totals, mock_totals = from_log.totals, from_mock.totals
    for name in ("requests", "refused", "reusable_tokens", "counted_hit_tokens", "lost_tokens"):
        assert getattr(log_totals, name) == getattr(mock_totals, name), name
    assert log_totals.efficiency == mock_totals.efficiency
    # The attempt the API refused (its context window) is refused in both, never a parent:
    # the retry after the compaction departs from the first request, and carries the one cause.
    retry = _main_line(from_mock)[-1]
    assert retry.parent == 0 and _main_line(from_log)[-1].parent == 0
    assert [(f.code, f.severity) for f in retry.findings] == [("history-rewritten", "loss")]


def test_the_side_call_only_the_mocks_log_holds_is_reported_apart(
    readings: tuple[DoctorReport, DoctorReport],
) -> None:
    from_log, from_mock = readings
    [side] = [r for r in from_mock.requests if r.side_call]
    assert side.relation == "branch" and side.findings == ()
    assert from_mock.side_totals.requests == 1 and from_log.side_totals.requests == 0
    assert from_mock.side_totals.prompt_tokens == side.prompt_tokens
    assert from_mock.totals.prompt_tokens == from_log.totals.prompt_tokens  # never mixed in


def test_no_cause_is_named_on_a_request_that_lost_nothing(
    readings: tuple[DoctorReport, DoctorReport],
) -> None:
    for report in readings:
        for r in report.requests:
            if (r.status or 0) >= 400:
                assert [f.code for f in r.findings] == ["request-refused"]
            elif not r.lost_tokens:
                assert r.findings == (), (r.index, r.findings)
