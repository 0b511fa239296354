"""``serve --request-log FILE``: the mock's request records appended as each answer ends.

Real HTTP on loopback (the official openai client), a real file; the doctor reads the file
while it grows and after the mock stopped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from dsh_testkit.mock import MockServer
from dsh_testkit.traces import TraceError, load_trace
from tests._support import run_cli

KEY = "sk-" + "request-log-" + "FAKE"


def _ask(base_url: str, *, stream: bool = False) -> None:
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    create: Any = client.chat.completions.create  # plain dicts, not the SDK's TypedDicts
    messages = [{"role": "user", "content": "hi"}]
    if stream:
        for _ in create(model="deepseek-chat", messages=messages, stream=True):
            pass
    else:
        create(model="deepseek-chat", messages=messages)
    client.close()


def test_records_are_appended_with_their_times_and_read_by_the_doctor(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    with MockServer() as server:
        server.mock.log_requests_to(path)
        _ask(server.base_url)
        _ask(server.base_url, stream=True)
        lines = path.read_text(encoding="utf-8").splitlines()
        live = server.mock.requests
        # the same records GET /_dsh/requests gives, one per line after the header
        assert json.loads(lines[0]) == {
            "format": "dsh-mock-requests",
            "version": 1,
            "source": "mock",
        }
        assert [json.loads(line) for line in lines[1:]] == [r.to_json() for r in live]
        server.mock.close_request_log()
    records = [json.loads(line) for line in lines[1:]]
    assert len(records) == 2
    for record in records:
        assert record["started"] <= record["finished"]
    assert KEY not in path.read_text(encoding="utf-8")
    trace = load_trace(path)
    assert trace.source == "mock-requests" and len(trace) == 2
    assert trace.time_resolution is not None  # the report no longer says "no times"
    assert all(e.started is not None and e.finished is not None for e in trace)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_record_is_written_before_its_answer_can_be_read_to_the_end(
    tmp_path: Path, stream: bool
) -> None:
    """The record is appended before the answer's last bytes go out: a client that stops
    reading at the JSON's end or at ``data: [DONE]`` (as the SDKs do, without waiting for the
    terminating chunk) finds it in the file, with its end time."""
    path = tmp_path / "requests.jsonl"
    body = json.dumps(
        {
            "model": "deepseek-chat",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
        }
    ).encode()
    with MockServer() as server:
        server.mock.log_requests_to(path)
        host, port = server.base_url.split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            conn.sendall(
                b"POST /chat/completions HTTP/1.1\r\nhost: %s:%s\r\n"
                b"authorization: Bearer %s\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s"
                % (host.encode(), port.encode(), KEY.encode(), len(body), body)
            )
            received = b""
            end = b"data: [DONE]" if stream else b'"usage"'
            while end not in received or (not stream and not received.rstrip().endswith(b"}")):
                chunk = conn.recv(65536)
                assert chunk, received
                received += chunk
            # read no further: the terminating chunk may still be on its way
            lines = path.read_text(encoding="utf-8").splitlines()
        server.mock.close_request_log()
    assert len(lines) == 2, lines
    record = json.loads(lines[1])
    assert record["finished"] is not None and record["started"] <= record["finished"]


def test_the_file_reads_while_it_grows_and_a_restart_continues_it(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    with MockServer() as server:
        server.mock.log_requests_to(path)
        _ask(server.base_url)
        server.mock.close_request_log()
    # a writer that stopped mid-line: the doctor drops the torn line, the restart cuts it off
    with path.open("ab") as file:
        file.write(b'{"seq": 2, "method": "PO')
    trace = load_trace(path)
    assert len(trace) == 1
    assert any("unfinished last line" in note for note in trace.notes)
    with MockServer() as server:
        server.mock.log_requests_to(path)
        _ask(server.base_url)
        server.mock.close_request_log()
    assert len(load_trace(path)) == 2
    assert len(path.read_text(encoding="utf-8").splitlines()) == 3


def test_one_writer_at_a_time_and_another_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    with MockServer() as first, MockServer() as second:
        first.mock.log_requests_to(path)
        with pytest.raises(TraceError, match="already open for writing"):
            second.mock.log_requests_to(path)
        first.mock.close_request_log()
    other = tmp_path / "notes.jsonl"
    other.write_text('{"some": "thing"}\n', encoding="utf-8")
    with MockServer() as server, pytest.raises(TraceError, match="not a dsh-mock-requests file"):
        server.mock.log_requests_to(other)
    assert other.read_text(encoding="utf-8") == '{"some": "thing"}\n'


@pytest.mark.slow
def test_serve_request_log_option(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_testkit.cli", "serve", "--request-log", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        _ask(base_url)
        _ask(base_url, stream=True)
        done = run_cli("cache-report", "--json", str(path))  # while the mock runs
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["source"] == "mock-requests" and report["totals"]["requests"] == 2
        assert report["timeResolution"] is not None
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
        assert process.stdout is not None
        process.stdout.close()
    assert process.returncode == 0
    taken = run_cli("serve", "--request-log", str(tmp_path))
    assert taken.returncode == 2 and "--request-log" in taken.stderr
