"""One agent session, five recordings of it, one report.

The demo's session (three turns with tools, a tool added mid-list, a compaction) runs once
against the loopback mock, through the recording proxy, with every request captured. Its
dsh_core session log, the mock's request log, the proxy's trace, the saved capture and a HAR
export of the capture all go through the doctor and must give the same per-request figures
and the same cause codes.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dsh_testkit.capture import RequestCapture, capture_requests
from dsh_testkit.cli._demo import _script, _session
from dsh_testkit.doctor import DoctorReport, diagnose
from dsh_testkit.mock import MockDeepSeek, MockServer
from dsh_testkit.proxy import ProxyServer
from dsh_testkit.traces import load_trace

pytestmark = pytest.mark.slow


def _har(capture: RequestCapture) -> dict[str, Any]:
    """A HAR 1.2 export of the capture, as a browser's devtools would write it."""
    entries = []
    for request in capture.requests:
        started = datetime.fromtimestamp(request.started or 0, UTC).isoformat()
        total = ((request.finished or 0) - (request.started or 0)) * 1000
        mime = next(
            (v for k, v in request.response_headers if k.lower() == "content-type"), "text/plain"
        )
        entries.append(
            {
                "startedDateTime": started,
                "time": total,
                "request": {
                    "method": request.method,
                    "url": request.url,
                    "headers": [{"name": k, "value": v} for k, v in request.headers],
                    "postData": {
                        "mimeType": "application/json",
                        "text": base64.b64encode(request.content).decode(),
                        "encoding": "base64",
                    },
                },
                "response": {
                    "status": request.status,
                    "content": {"mimeType": mime, "text": request.response_text or ""},
                },
                "timings": {"send": 0, "wait": total / 2, "receive": total / 2},
            }
        )
    return {"log": {"version": "1.2", "creator": {"name": "test"}, "entries": entries}}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("five")
    mock = MockDeepSeek(_script())
    paths = {
        name: out / f"{name}.{ext}"
        for name, ext in (
            ("log", "jsonl"),
            ("mock", "json"),
            ("proxy", "jsonl"),
            ("capture", "jsonl"),
            ("har", "har"),
        )
    }
    with (
        MockServer(mock) as server,
        ProxyServer(server.base_url, out=str(paths["proxy"])) as proxy,
        capture_requests() as capture,
    ):
        asyncio.run(
            _session(
                proxy.base_url,
                "sk-five-recordings-not-a-key",
                "deepseek-v4-flash",
                paths["log"],
                Console(file=io.StringIO()),
            )
        )
    paths["mock"].write_text(
        json.dumps({"requests": [r.to_json() for r in mock.requests]}), encoding="utf-8"
    )
    model_calls = RequestCapture()
    model_calls.requests = [r for r in capture.requests if r.is_chat]
    model_calls.save(paths["capture"])
    paths["har"].write_text(json.dumps(_har(model_calls)), encoding="utf-8")
    return paths


def _rows(report: DoctorReport) -> list[tuple[Any, ...]]:
    return [
        (r.prompt_tokens, r.hit_tokens, r.reusable_tokens, r.lost_tokens, r.relation, r.codes)
        for r in sorted(report.requests, key=lambda r: r.index)
    ]


def test_every_wire_recording_gives_the_same_figures_and_causes(recordings) -> None:
    reports = {name: diagnose(recordings[name]) for name in ("mock", "proxy", "capture", "har")}
    assert {r.source for r in reports.values()} == {"mock-requests", "proxy", "capture", "har"}
    rows = {name: _rows(report) for name, report in reports.items()}
    assert len(rows["mock"]) == 6  # five conversation requests and the compaction's call
    for name in ("proxy", "capture", "har"):
        assert rows[name] == rows["mock"], name
    efficiencies = {name: report.totals.efficiency for name, report in reports.items()}
    assert len(set(efficiencies.values())) == 1, efficiencies


def test_the_session_log_agrees_request_for_request(recordings) -> None:
    log = diagnose(recordings["log"])
    wire = diagnose(recordings["mock"])
    assert log.source == "session-log"
    log_trace, wire_trace = load_trace(recordings["log"]), load_trace(recordings["mock"])
    by_body = {json.dumps(e.body, sort_keys=True): e.index for e in wire_trace}
    wire_rows = {r.index: r for r in wire.requests}
    matched = 0
    for request in log.requests:
        body = json.dumps(log_trace[request.index].body, sort_keys=True)
        twin = wire_rows[by_body[body]]
        assert (request.prompt_tokens, request.hit_tokens, request.reusable_tokens) == (
            twin.prompt_tokens,
            twin.hit_tokens,
            twin.reusable_tokens,
        )
        assert request.codes == twin.codes
        matched += 1
    assert matched == 5  # the log rebuilds the five conversation requests
    twins = [
        wire_rows[by_body[json.dumps(log_trace[r.index].body, sort_keys=True)]]
        for r in log.requests
    ]
    main_line = sum(t.counted_hit_tokens for t in twins) / sum(t.reusable_tokens for t in twins)
    assert log.totals.efficiency == pytest.approx(main_line)


def test_the_log_adds_its_own_facts_as_evidence(recordings) -> None:
    log = diagnose(recordings["log"])
    evidence = [line for r in log.requests for f in r.findings for line in f.evidence]
    evidence += [line for r in log.requests for line in r.log_events]
    assert any("request/header" in line for line in evidence), evidence
    assert any("compaction" in line for line in evidence), evidence
