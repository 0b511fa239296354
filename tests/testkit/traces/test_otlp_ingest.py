"""OTLP/HTTP exports received live (the transport-independent part: bytes in, reply out).

The exports are the committed samples' own messages, as an SDK's batch processor posted them.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path

from dsh_testkit.traces import load_trace
from dsh_testkit.traces._readers._otlp._ingest import OtlpIngest
from dsh_testkit.traces._readers._otlp._protobuf import decode_export

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "otel" / "agents"
NAME = "otel-openai-v2-events-clean"  # spans and log records: both paths


def messages() -> list[bytes]:
    data = (AGENTS / f"{NAME}.binpb").read_bytes()
    out, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def path_of(payload: bytes) -> str:
    document = decode_export(payload)
    return "/v1/traces" if document.get("resourceSpans") else "/v1/logs"


def test_protobuf_exports_posted_gzipped_give_the_files_trace() -> None:
    ingest = OtlpIngest(path="otlp")
    for payload in messages():
        reply = ingest.receive(
            path_of(payload),
            gzip.compress(payload),
            content_type="application/x-protobuf",
            content_encoding="gzip",
        )
        assert (reply.status, reply.content_type, reply.body) == (
            200,
            "application/x-protobuf",
            b"",
        )
        assert reply.accepted > 0
    expected = load_trace(AGENTS / f"{NAME}.otlp.jsonl")
    trace = ingest.trace()
    assert len(trace) == 7
    assert [e.body for e in trace] == [e.body for e in expected]


def test_json_exports_and_the_calls_so_far() -> None:
    ingest = OtlpIngest()
    lines = (AGENTS / f"{NAME}.otlp.jsonl").read_bytes().splitlines()
    for number, line in enumerate(lines):
        path = "/v1/traces" if line.startswith(b'{"resourceSpans"') else "/v1/logs"
        reply = ingest.receive(
            path,
            zlib.compress(line),
            content_type="application/json; charset=utf-8",
            content_encoding="deflate",
        )
        assert (reply.status, reply.body) == (200, b"{}")
        if number == 1:  # the first turn's spans and records: its calls already read
            assert len(ingest.trace()) == 2
    assert len(ingest.trace()) == 7


def test_what_does_not_decode_is_refused_as_otlp_says() -> None:
    ingest = OtlpIngest()
    bad = ingest.receive("/v1/traces", b"\x0a\xff", content_type="application/x-protobuf")
    assert bad.status == 400 and bad.content_type == "application/x-protobuf"
    assert bad.body.startswith(b"\x08\x03\x12")  # google.rpc.Status code 3, then the message
    bad = ingest.receive("/v1/traces", b"[1]", content_type="application/json")
    assert bad.status == 400 and json.loads(bad.body)["code"] == 3
    assert ingest.receive("/v1/traces", b"{}", content_type="text/plain").status == 415
    assert ingest.receive("/v1/metrics", b"{}", content_type="application/json").status == 404
    torn = ingest.receive(
        "/v1/traces",
        gzip.compress(b"{}")[:-4],
        content_type="application/json",
        content_encoding="gzip",
    )
    assert torn.status == 400
    assert len(ingest.trace()) == 0
