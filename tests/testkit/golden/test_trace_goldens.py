"""The wire-request golden of any traffic: a capture, a cassette, a trace file, the mock."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import openai
import pytest

from dsh_testkit.capture import RequestCapture
from dsh_testkit.golden import (
    SnapshotInputError,
    WireRequestsExtension,
    load_wire_requests,
    render_trace_requests,
)
from dsh_testkit.golden._wire import WIRE_FORMAT, WIRE_FORMAT_VERSION
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.traces import load_trace
from tests.testkit.traces._agent import KEY, run_agent

pytest_plugins = ["pytester"]
CASSETTES = Path(__file__).resolve().parents[3] / "cassettes"


def recorded(tmp_path: Path) -> tuple[MockDeepSeek, RequestCapture, Path]:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    mock = MockDeepSeek([Reply(reasoning="r", tool_calls=(call,)), Reply(text="done")])
    with MockServer(mock) as server:
        capture = RequestCapture()
        client = openai.OpenAI(
            base_url=server.base_url,
            api_key=KEY,
            http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())),
        )
        run_agent(client, ["read a.txt"])
    path = tmp_path / "capture.trace"
    capture.save(path)
    return mock, capture, path


def test_every_route_renders_the_same_golden(tmp_path: Path) -> None:
    mock, capture, path = recorded(tmp_path)
    extension = WireRequestsExtension()
    from_capture = extension.serialize(capture)
    assert from_capture == extension.serialize(path)
    assert from_capture == extension.serialize(load_trace(path))
    assert from_capture == extension.serialize(mock)
    assert from_capture == extension.serialize(list(capture))
    document = json.loads(str(from_capture))
    assert (document["format"], document["version"]) == (WIRE_FORMAT, WIRE_FORMAT_VERSION)
    assert [r["request"] for r in document["requests"]] == [1, 2]
    bodies = [r["body"] for r in load_wire_requests(str(from_capture))]
    calls = bodies[1]["messages"][2]["tool_calls"]
    assert calls[0]["id"] == "{{call-1}}"
    assert bodies[1]["messages"][3]["tool_call_id"] == "{{call-1}}"
    assert KEY not in str(from_capture)


def test_a_cassette_renders(tmp_path: Path) -> None:
    text = render_trace_requests(CASSETTES / "one-tool-call.yaml")
    document = json.loads(text)
    assert len(document["requests"]) == 2
    assert document["requests"][0]["conversation"] == "cassette-scenario"


def test_unreadable_traffic_is_a_snapshot_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(SnapshotInputError, match="cannot read the traffic"):
        render_trace_requests(bad)


def test_syrupy_writes_and_checks_a_capture_golden(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_golden="""
from dsh_testkit.capture import RequestCapture, CapturedRequest
from dsh_testkit.golden import WireRequestsExtension
import json

def test_agent(snapshot):
    capture = RequestCapture()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    capture.requests.append(CapturedRequest(method="POST", url="http://x/chat/completions", headers=(), content=json.dumps(body).encode()))
    assert capture == snapshot(extension_class=WireRequestsExtension)
"""
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1
    )
    written = list(pytester.path.glob("__snapshots__/**/*.requests.jsonc"))
    assert len(written) == 1
    assert '"content": "hi"' in written[0].read_text(encoding="utf-8")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
