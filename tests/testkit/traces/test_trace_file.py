"""The trace file: appended and never truncated, one writer at a time, read line by line.

What a restart, a second writer, a crash's torn last line (cut inside a character too) and a
full disk do to a ``dsh-trace`` file, at the writer, at :func:`read_trace_lines` and at
:func:`load_trace`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from dsh_testkit.capture import RequestCapture
from dsh_testkit.mock import MockDeepSeek, MockServer
from dsh_testkit.proxy import ProxyServer, Recorder
from dsh_testkit.traces import TraceError, load_trace, loads_trace
from dsh_testkit.traces._file import TRACE_FORMAT_VERSION, TraceWriter, read_trace_lines

HEADER = {"format": "dsh-trace", "version": TRACE_FORMAT_VERSION, "source": "proxy"}


def exchange(index: int, content: str = "hi") -> dict[str, object]:
    return {
        "index": index,
        "endpoint": "chat",
        "url": "http://upstream/chat/completions",
        "request": {"model": "m", "messages": [{"role": "user", "content": content}]},
        "outcome": "delivered",
    }


def trace_bytes(*records: dict[str, object], header: dict[str, object] = HEADER) -> bytes:
    lines = [json.dumps(header, separators=(",", ":"))]
    lines += [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    return ("\n".join(lines) + "\n").encode("utf-8")


def send(base_url: str, content: str) -> None:
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": content}]}
    response = httpx.post(
        base_url + "/chat/completions",
        json=body,
        headers={"authorization": "Bearer " + "sk-" + "FAKE-test-restart-00000"},
        timeout=10,
    )
    assert response.status_code == 200


# -- restart and one writer --------------------------------------------------------------------


def test_a_restarted_proxy_continues_the_trace_file(tmp_path: Path) -> None:
    out = tmp_path / "run.trace"
    with MockServer(MockDeepSeek()) as upstream:
        for session in range(3):
            with ProxyServer(upstream.base_url, out=str(out)) as proxy:
                send(proxy.base_url, f"session {session} first")
                send(proxy.base_url, f"session {session} second")
            assert proxy.recorder is not None
            assert proxy.recorder.continued == 2 * session
    lines = out.read_bytes().decode("utf-8").splitlines()
    assert json.loads(lines[0]) == HEADER
    records = [json.loads(line) for line in lines[1:]]
    assert [r["index"] for r in records] == list(range(6))
    assert [r["request"]["messages"][0]["content"] for r in records][-1] == "session 2 second"
    assert len(load_trace(out)) == 6


def test_a_second_writer_on_one_trace_file_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run.trace"
    first = Recorder(str(out))
    first.record(dict(exchange(0)))
    before = out.read_bytes()
    with pytest.raises(TraceError, match="already open for writing by another writer") as caught:
        Recorder(str(out))
    assert caught.value.path == str(out)
    with pytest.raises(TraceError, match="one writer at a time"):
        RequestCapture().save(out)  # a capture does not truncate it from under the proxy
    assert out.read_bytes() == before
    first.close()
    second = Recorder(str(out))  # free again once the first writer closed
    assert second.continued == 1
    second.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (trace_bytes(exchange(0), header={**HEADER, "version": 1}), "version 1 file"),
        (trace_bytes(exchange(0), header={**HEADER, "source": "capture"}), "'capture' trace"),
        (b'{"type":"session","version":0,"id":"s","createdAt":1}\n', "not a dsh-trace file"),
        (b"\xff\xfe garbage", "not a dsh-trace file"),
    ],
    ids=["older-version", "a-capture", "a-session-log", "garbage"],
)
def test_a_file_the_proxy_may_not_continue_is_refused_and_left_as_it_is(
    tmp_path: Path, content: bytes, message: str
) -> None:
    out = tmp_path / "other.trace"
    out.write_bytes(content)
    with pytest.raises(TraceError, match=message) as caught:
        Recorder(str(out))
    assert "left as it is" in str(caught.value)
    assert out.read_bytes() == content


@pytest.mark.parametrize(
    ("tail", "kept"),
    [
        (b'{"index":1,"endpoint":"ch', 1),
        (('{"index":1,"request":{"messages":[{"content":"' + "é").encode()[:-1], 1),
        (json.dumps(exchange(1)).encode(), 2),  # whole, only its newline missing
    ],
    ids=["torn", "torn-inside-a-character", "whole-without-newline"],
)
def test_a_restart_after_a_crash_settles_the_last_line(
    tmp_path: Path, tail: bytes, kept: int
) -> None:
    out = tmp_path / "crashed.trace"
    out.write_bytes(trace_bytes(exchange(0)) + tail)
    recorder = Recorder(str(out))
    assert recorder.continued == kept
    assert recorder.writer.dropped_tail == (0 if kept == 2 else len(tail))
    recorder.record(dict(exchange(9, "after the restart")))
    recorder.close()
    records = [json.loads(line) for line in out.read_bytes().decode("utf-8").splitlines()[1:]]
    assert [r["index"] for r in records] == [*range(kept), kept]
    assert records[-1]["request"]["messages"][0]["content"] == "after the restart"


def test_a_capture_save_still_starts_its_file_anew(tmp_path: Path) -> None:
    out = tmp_path / "capture.trace"
    for _ in range(2):
        capture = RequestCapture()
        with httpx.Client(
            transport=capture.transport(httpx.MockTransport(lambda r: httpx.Response(200)))
        ) as client:
            client.post("http://x/chat/completions", json={"model": "m", "messages": []})
        capture.save(out)
    assert len(RequestCapture.load(out)) == 1


def test_a_write_that_fails_half_way_leaves_the_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "full.trace"
    script = textwrap.dedent(
        f"""
        import json, resource, signal
        from dsh_testkit.proxy import Recorder
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
        said = []
        recorder = Recorder({str(out)!r}, warn=said.append)
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))
        offsets = []
        for i in range(20):
            record = {{"index": 0, "endpoint": "chat", "url": "http://u/chat/completions",
                       "request": {{"model": "m", "messages": [{{"role": "user",
                                    "content": "x" * 1000}}]}}, "outcome": "delivered"}}
            offsets.append(recorder.record(record))
        print(json.dumps({{"offsets": offsets, "failed": recorder.events["write-failed"],
                          "said": said}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(done.stdout)
    written = [o for o in result["offsets"] if o is not None]
    assert 0 < len(written) < 20 and result["failed"] == 20 - len(written)
    assert len(result["said"]) == 1 and "exchanges are not being recorded" in result["said"][0]
    data = out.read_bytes()
    assert data.endswith(b"\n")
    _header, records, notes = read_trace_lines(data)
    assert len(list(records)) == len(written) and not notes


# -- reading line by line ------------------------------------------------------------------


def test_a_last_line_cut_inside_a_character_is_dropped_with_a_note() -> None:
    data = trace_bytes(exchange(0, "naïve café")) + json.dumps(
        exchange(1, "über"), ensure_ascii=False
    ).encode("utf-8")
    cut = data[: data.rindex("ü".encode()) + 1]  # the first byte of ü's two
    header, records, notes = read_trace_lines(cut)
    assert header["version"] == TRACE_FORMAT_VERSION
    assert [number for number, _ in records] == [2]
    (note,) = notes
    assert "line 3" in note and "cut inside a multi-byte character" in note


def test_bytes_that_are_not_utf8_before_the_last_line_are_a_typed_error() -> None:
    data = trace_bytes(exchange(0), exchange(1))
    broken = data.replace(b'"index":0', b'"index":0,"x":"\xff"')
    with pytest.raises(TraceError, match="line 2 is not UTF-8"):
        read_trace_lines(broken)


def test_text_and_bytes_read_alike() -> None:
    data = trace_bytes(exchange(0, "é"), exchange(1)) + b'{"index":2,"endp'
    from_bytes = read_trace_lines(data)
    from_text = read_trace_lines(data.decode("utf-8"))
    assert list(from_bytes[1]) == list(from_text[1])
    assert len(from_bytes[2]) == len(from_text[2]) == 1


def test_load_trace_drops_a_tail_cut_inside_a_character(tmp_path: Path) -> None:
    path = tmp_path / "cut.trace"
    data = trace_bytes(exchange(0, "première"), exchange(1, "deuxième"))
    path.write_bytes(data[: data.rindex("è".encode()) + 1])
    trace = load_trace(path)
    assert len(trace) == 1
    assert trace.exchanges[0].messages[0]["content"] == "première"
    assert any("cut inside a multi-byte character" in note for note in trace.notes)


def test_version_1_files_are_still_read() -> None:
    old = {k: v for k, v in exchange(0).items() if k != "outcome"}
    trace = loads_trace(trace_bytes(old, header={**HEADER, "version": 1}).decode())
    assert len(trace) == 1
    with pytest.raises(TraceError, match="reads version\\(s\\) 1 and 2"):
        loads_trace(trace_bytes(old, header={**HEADER, "version": 3}).decode())


def test_a_writer_spooled_to_a_temporary_file_leaves_nothing_behind() -> None:
    writer = TraceWriter.spool(source="proxy")
    offset = writer.append(dict(exchange(0)))
    assert writer.path is None
    writer.close()
    data = writer.read_back()  # still readable once closed
    assert json.loads(data[offset:]) == exchange(0)
