"""OTLP/HTTP exports into both servers over real loopback HTTP: ``dsh-testkit serve`` and
``proxy`` take ``/v1/traces`` and ``/v1/logs`` (protobuf or JSON, compressed or not) behind the
same Host and Origin rules as everything else, keep them (never relayed upstream), and give
them back at ``GET /_dsh/otlp`` as OTLP JSON lines the doctor reads.

The exports are the committed samples' own messages (tests/fixtures/otel/agents: recorded from
the real instrumentation packages), posted as an SDK's OTLP/HTTP exporter posts them: one
message per request, ``application/x-protobuf``, gzip.
"""

from __future__ import annotations

import gzip
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_testkit.doctor import diagnose
from dsh_testkit.mock import MockServer
from dsh_testkit.proxy import ProxyServer
from dsh_testkit.traces import load_trace
from dsh_testkit.traces._readers._otlp._protobuf import decode_export

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "otel" / "agents"
EVENTS = "otel-openai-v2-events-clean"  # spans and log records: both paths
CLOCK = "openinference-openai-clock"


def messages(name: str) -> list[bytes]:
    """The protobuf export messages of a sample (length-prefixed in its ``.binpb``)."""
    data = (AGENTS / f"{name}.binpb").read_bytes()
    out, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def path_of(payload: bytes) -> str:
    return "/v1/traces" if decode_export(payload).get("resourceSpans") else "/v1/logs"


def export_protobuf(base_url: str, name: str, **headers: str) -> list[httpx.Response]:
    answers = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for payload in messages(name):
            answers.append(
                client.post(
                    path_of(payload),
                    content=gzip.compress(payload),
                    headers={
                        "content-type": "application/x-protobuf",
                        "content-encoding": "gzip",
                        **headers,
                    },
                )
            )
    return answers


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A mock and a proxy in front of it, nothing received yet."""
    trace = str(tmp_path / "proxy.trace")
    with MockServer() as mock, ProxyServer(mock.base_url, out=trace) as proxy:
        yield {"mock": mock, "proxy": proxy}


@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_protobuf_exports_give_the_doctor_the_samples_calls(
    fresh: dict[str, Any], which: str, tmp_path: Path
) -> None:
    server = fresh[which]
    answers = export_protobuf(server.base_url, EVENTS)
    assert {path_of(payload) for payload in messages(EVENTS)} == {"/v1/traces", "/v1/logs"}
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/x-protobuf"
        assert answer.content == b""
    # what the server kept is what the sample file holds
    expected = [e.body for e in load_trace(AGENTS / f"{EVENTS}.otlp.jsonl")]
    assert len(expected) == 7
    assert [e.body for e in server.otlp.trace()] == expected
    # and GET /_dsh/otlp gives it back as OTLP JSON lines the doctor reads like a file
    got = httpx.get(server.base_url + "/_dsh/otlp", timeout=30)
    assert got.status_code == 200
    assert got.headers["content-type"] == "application/x-ndjson"
    saved = tmp_path / "received.otlp.jsonl"
    saved.write_bytes(got.content)
    assert len(got.content.splitlines()) == len(answers)
    assert [e.body for e in load_trace(saved)] == expected
    # nothing reached the mock's model: the proxy keeps exports, never relays them
    assert fresh["mock"].mock.requests == ()
    assert fresh["mock"].mock.unlogged_requests == 0


def test_the_doctor_finds_the_clock_in_what_serve_received(fresh: dict[str, Any]) -> None:
    server = fresh["mock"]
    assert {a.status_code for a in export_protobuf(server.base_url, CLOCK)} == {200}
    report = diagnose(server.otlp.trace())
    losses = {
        (f.code, r.index) for r in report.requests for f in r.findings if f.severity != "note"
    }
    assert {code for code, _ in losses} == {"volatile-system-text"}
    assert sorted(index for _, index in losses) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_json_exports_with_a_charset_are_answered_in_json(
    fresh: dict[str, Any], which: str
) -> None:
    server = fresh[which]
    lines = (AGENTS / f"{EVENTS}.otlp.jsonl").read_bytes().splitlines()
    for line in lines:
        path = "/v1/traces" if b'"resourceSpans"' in line[:20] else "/v1/logs"
        answer = httpx.post(
            server.base_url + path,
            content=line,
            headers={"content-type": "application/json; charset=utf-8"},
            timeout=30,
        )
        assert (answer.status_code, answer.json()) == (200, {})
    expected = [e.body for e in load_trace(AGENTS / f"{EVENTS}.otlp.jsonl")]
    assert [e.body for e in server.otlp.trace()] == expected


@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_the_same_rules_hold_on_the_otlp_paths(fresh: dict[str, Any], which: str) -> None:
    server = fresh[which]
    port = server.base_url.rsplit(":", 1)[1]
    payload = messages(EVENTS)[0]
    body = gzip.compress(payload)
    protobuf = {"content-type": "application/x-protobuf", "content-encoding": "gzip"}
    cases = [
        # a rebinding name: refused before the body is read
        ({**protobuf, "host": f"evil.test:{port}"}, 421),
        # a page on another origin (another port of loopback)
        ({**protobuf, "origin": "http://127.0.0.1:1"}, 403),
        # what a page can send without a preflight
        ({"content-type": "text/plain"}, 415),
        ({"content-type": "application/x-www-form-urlencoded"}, 415),
        ({}, 415),
    ]
    for headers, status in cases:
        answer = httpx.post(
            server.base_url + path_of(payload), content=body, headers=headers, timeout=30
        )
        assert answer.status_code == status, (headers, answer.text)
        assert "access-control-allow-origin" not in answer.headers
    got = httpx.get(server.base_url + "/v1/traces", timeout=30)
    assert (got.status_code, got.headers["allow"]) == (405, "POST")
    posted = httpx.post(server.base_url + "/_dsh/otlp", json={}, timeout=30)
    assert (posted.status_code, posted.headers["allow"]) == (405, "GET")
    rebound = httpx.get(
        server.base_url + "/_dsh/otlp", headers={"host": f"evil.test:{port}"}, timeout=30
    )
    assert rebound.status_code == 421
    assert len(server.otlp.trace()) == 0
    assert httpx.get(server.base_url + "/_dsh/otlp", timeout=30).content == b""
    assert fresh["mock"].mock.requests == ()


@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_no_credential_comes_back_from_the_exports(fresh: dict[str, Any], which: str) -> None:
    server = fresh[which]
    exporter_token = "otlpToken-8f2Kq9Lm3Rz7Wx1V"  # the exporter's own header (not key-shaped)
    key = "sk-" + "a1b2c3d4" * 4  # a key pasted into a prompt the span recorded
    line = (AGENTS / f"{CLOCK}.otlp.jsonl").read_text(encoding="utf-8").splitlines()[0]
    document = json.loads(line)
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].append({"key": "note", "value": {"stringValue": f"my key is {key}"}})
    span["attributes"].append(
        {"key": "echo", "value": {"stringValue": f"header was {exporter_token}"}}
    )
    answer = httpx.post(
        server.base_url + "/v1/traces",
        json=document,
        headers={"authorization": f"Bearer {exporter_token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    back = httpx.get(server.base_url + "/_dsh/otlp", timeout=30).text
    assert back.count("\n") == 1 and "weather-agent" in back
    assert key not in back and exporter_token not in back
