"""The proxy under faults: clients that leave, upstreams that hang or stall, caps, the stop.

Each test runs the proxy, a scripted loopback upstream and raw clients in one event loop
(``_proxy_rig.py``) and checks what the client got, what the upstream saw and what the trace
file says: every exchange recorded once, with how it ended.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.doctor import diagnose, report_text
from dsh_testkit.explorer import live_pages
from dsh_testkit.proxy import ProxyError, ProxyLimits, Recorder
from dsh_testkit.proxy._server import serve_proxy
from dsh_testkit.traces import Trace
from tests.testkit.proxy._proxy_rig import (
    SSE_HEAD,
    chat_body,
    chunk,
    event,
    hang,
    read_answer,
    run,
    start,
    stream,
)

SLOW = [f"piece {i} " for i in range(400)]
"""An answer that takes 20 s at 50 ms an event: long enough that only a cancel ends it early."""


def test_a_client_that_leaves_mid_stream_is_cancelled_upstream_and_recorded_abandoned() -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await stream(writer, SLOW, pause=0.05)

    async def main() -> tuple[list[dict[str, Any]], int]:
        rig = await start(handler)
        reader, writer = await rig.send()
        await reader.readuntil(b"\r\n\r\n")
        got = b""
        while b"piece 1 " not in got:
            got += await reader.read(4096)
        rig.upstream.ended.clear()
        writer.close()  # the client gives up mid-answer
        await asyncio.wait_for(rig.upstream.ended.wait(), 10)  # the upstream is told at once
        left_open = rig.upstream.connections
        await rig.stopped()
        return rig.records(), left_open

    recorded, left_open = run(main)
    assert left_open == 0  # no pooled leftover: an abandoned answer's connection is dropped
    (record,) = recorded
    assert record["outcome"] == "abandoned"
    assert "the client went away" in record["detail"] and "cancelled" in record["detail"]
    assert record["response"]["content"].startswith("piece 0 piece 1 ")  # what was relayed
    assert record["status"] == 200 and record["usage"] is None


def test_a_client_that_leaves_before_the_answer_head_is_cancelled_upstream() -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await hang(writer)

    async def main() -> list[dict[str, Any]]:
        rig = await start(handler)
        _, writer = await rig.send()
        while not rig.upstream.opened:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the request is with the upstream, which says nothing
        rig.upstream.ended.clear()
        writer.close()
        await asyncio.wait_for(rig.upstream.ended.wait(), 10)
        await rig.stopped()
        return rig.records()

    (record,) = run(main)
    assert record["outcome"] == "abandoned"
    assert record["status"] is None and record["response"] is None
    assert "no answer head had come" in record["detail"]


def test_clients_leaving_mid_stream_are_counted_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await stream(writer, SLOW, pause=0.02)

    async def one(rig: Any) -> None:
        reader, writer = await rig.send()
        await reader.readuntil(b"\r\n\r\n")
        await reader.read(100)
        writer.transport.abort()  # a reset, as a killed client leaves

    async def main() -> tuple[list[dict[str, Any]], Recorder]:
        rig = await start(handler)
        await asyncio.gather(*(one(rig) for _ in range(20)))
        while rig.upstream.connections:
            await asyncio.sleep(0.02)
        recorder = await rig.stopped()
        return rig.records(), recorder

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        recorded, recorder = run(main)
    assert [r["outcome"] for r in recorded] == ["abandoned"] * 20
    assert recorder.counts == {"abandoned": 20}
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def test_an_upstream_that_sends_no_head_in_time_gets_a_504_and_is_recorded() -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await hang(writer)

    async def main() -> tuple[tuple[int, bytes, bool], list[dict[str, Any]], int]:
        rig = await start(handler, limits=ProxyLimits(first_byte_timeout=0.3))
        answer = await rig.exchange()
        await asyncio.wait_for(rig.upstream.ended.wait(), 10)
        left_open = rig.upstream.connections
        await rig.stopped()
        return answer, rig.records(), left_open

    (status, body, _), recorded, left_open = run(main)
    assert status == 504
    assert (
        "sent no answer within 0.3 s (first-byte timeout)" in json.loads(body)["error"]["message"]
    )
    assert left_open == 0
    (record,) = recorded
    assert record["outcome"] == "upstream-timeout" and record["status"] is None
    assert record["request"] == json.loads(chat_body())


def test_an_upstream_that_stalls_mid_answer_is_cut_and_recorded() -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + chunk(event("so far")))
        await writer.drain()
        await hang(writer)

    async def main() -> tuple[tuple[int, bytes, bool], list[dict[str, Any]]]:
        rig = await start(handler, limits=ProxyLimits(idle_timeout=0.3))
        answer = await rig.exchange()
        await rig.stopped()
        return answer, rig.records()

    (status, body, ended), recorded = run(main)
    assert status == 200 and body == event("so far")
    assert not ended  # cut: no terminating chunk
    (record,) = recorded
    assert record["outcome"] == "upstream-timeout"
    assert "sent nothing more of its answer within 0.3 s" in record["detail"]
    assert record["response"]["content"] == "so far"


def test_an_unreachable_upstream_gets_a_502_and_is_counted_not_recorded() -> None:
    async def main() -> tuple[int, Recorder]:
        free = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = free.sockets[0].getsockname()[1]
        free.close()
        await free.wait_closed()  # nothing listens there now
        recorder = Recorder(None)
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve_proxy(
                f"http://127.0.0.1:{port}", stop=stop, ready=ready.set_result, recorder=recorder
            )
        )
        base = await ready
        reader, writer = await asyncio.open_connection("127.0.0.1", int(base.rsplit(":", 1)[1]))
        body = chat_body()
        writer.write(
            b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-length: %d\r\n\r\n%b"
            % (len(body), body)
        )
        status, _, _ = await read_answer(reader)
        writer.close()
        stop.set()
        await task
        return status, recorder

    status, recorder = run(main)
    assert status == 502
    assert recorder.events["upstream-unreachable"] == 1
    assert recorder.recorded == 0


def test_the_idle_upstream_pool_is_capped() -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await stream(writer, ["a", "b"], pause=0.05)

    async def main() -> tuple[list[int], int, int]:
        rig = await start(handler, limits=ProxyLimits(pool_size=2))
        answers = await asyncio.gather(*(rig.exchange() for _ in range(12)))
        await asyncio.sleep(0.2)
        kept = rig.upstream.connections
        opened = rig.upstream.opened
        await rig.stopped()
        return [a[0] for a in answers], kept, opened

    statuses, kept, opened = run(main)
    assert statuses == [200] * 12
    assert opened == 12  # all at once: one upstream connection each
    assert kept == 2  # the rest were closed, not pooled


def test_connections_over_the_cap_get_a_503_with_retry_after() -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await stream(writer, ["ok"])

    async def main() -> tuple[bytes, int, Recorder]:
        rig = await start(handler, limits=ProxyLimits(max_connections=3))
        held = [await rig.connect() for _ in range(3)]
        await asyncio.sleep(0.1)
        reader, _ = await rig.send()
        head = await reader.readuntil(b"\r\n\r\n")
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.2)
        status, _, _ = await rig.exchange()  # room again
        return head, status, await rig.stopped()

    head, status, recorder = run(main)
    assert head.startswith(b"HTTP/1.1 503 ")
    assert b"retry-after: 1" in head.lower()
    assert status == 200
    assert recorder.events["refused"] == 1


def test_exchanges_in_flight_after_the_grace_are_recorded_as_interrupted() -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await stream(writer, SLOW, pause=0.05)

    async def main() -> tuple[bool, list[dict[str, Any]], Recorder]:
        rig = await start(handler, limits=ProxyLimits(grace=0.2))
        reader, _ = await rig.send()
        await reader.readuntil(b"\r\n\r\n")
        got = b""
        while b"piece 0" not in got:
            got += await reader.read(4096)
        rig.stop.set()  # the client still reads: its answer is cut when the grace ends
        _, _, ended = await read_answer_rest(reader)
        await rig.stopped()
        return ended, rig.records(), rig.recorder

    ended, recorded, recorder = run(main)
    assert not ended
    (record,) = recorded
    assert record["outcome"] == "interrupted"
    assert "the proxy stopped while the answer was still coming, 0.2 s after" in record["detail"]
    assert record["response"]["content"].startswith("piece 0")
    assert record["request"] == json.loads(chat_body())
    assert recorder.counts == {"interrupted": 1}


async def read_answer_rest(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    data = await asyncio.wait_for(reader.read(), 10)
    return 200, data, data.endswith(b"0\r\n\r\n")


def test_a_listener_gets_each_record_and_the_offset_of_its_line() -> None:
    seen: list[tuple[dict[str, Any], int]] = []

    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await stream(writer, ["one"])

    async def main() -> Recorder:
        recorder = Recorder(None)
        recorder.subscribe(lambda record, offset: seen.append((dict(record), offset)))
        failing = recorder.subscribe(lambda record, offset: 1 / 0)
        rig = await start(handler, recorder=recorder)
        await rig.exchange()
        failing()
        await rig.exchange(chat_body("second"))
        return await rig.stopped()

    recorder = run(main)
    data = recorder.writer.read_back()
    assert [record["index"] for record, _ in seen] == [0, 1]
    for record, offset in seen:
        line = data[offset : data.index(b"\n", offset)]
        assert json.loads(line) == record
    assert recorder.events["listener-failed"] == 1  # counted; the proxy went on


def test_the_recorder_keeps_no_request_or_answer_in_memory() -> None:
    big = "x" * (2 << 20)

    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await stream(writer, ["y" * (1 << 20)])

    async def main() -> tuple[int, int, Recorder]:
        rig = await start(handler)
        for _ in range(2):  # warm up
            await rig.exchange(chat_body(big))
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(12):  # 36 MB of requests and answers
            await rig.exchange(chat_body(big))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        return before, after, await rig.stopped()

    tracemalloc.start()
    try:
        before, after, recorder = run(main, timeout=120)
    finally:
        tracemalloc.stop()
    assert recorder.recorded == 14
    assert after - before < (2 << 20), f"the heap grew by {(after - before) >> 10} KiB"
    trace = recorder.trace()  # read back from the (temporary) file
    assert len(trace) == 14 and trace.exchanges[13].messages[0]["content"] == big


def test_the_report_of_an_empty_trace_says_it_is_empty() -> None:
    text = report_text(diagnose(Trace(exchanges=(), source="proxy", notes=("a note",))))
    assert "Cache doctor (proxy trace)\nthe trace is empty: it holds no model requests" in text
    assert "conversation(s)" not in text and "simulated" not in text
    assert "note: a note" in text


def test_the_live_report_of_an_empty_trace_says_it_is_empty() -> None:
    recorder = Recorder(None)
    text = live_pages(recorder).text()
    assert "the trace is empty: no model request was recorded" in text
    assert "conversation(s)" not in text and "simulated" not in text
    recorder.close()


def test_the_live_report_diagnoses_each_exchange_once_without_reading_the_trace_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(str(tmp_path / "big.trace"))

    def no_read_back() -> bytes:
        raise AssertionError("the live report read the whole trace back")

    monkeypatch.setattr(recorder.writer, "read_back", no_read_back)
    pages = live_pages(recorder)
    body = json.loads(chat_body("x" * 5000))
    for index in range(3):
        body = {**body, "messages": [*body["messages"], {"role": "user", "content": f"q{index}"}]}
        recorder.record(
            {
                "index": index,
                "endpoint": "chat",
                "url": "http://u/chat/completions",
                "request": body,
                "outcome": "delivered",
            }
        )
        document = json.loads(pages("/_dsh/report", "format=json", None).body)
        assert document["formatVersion"] == 4
        assert document["totals"]["requests"] == index + 1
    assert pages.live.current().etag.endswith('-3"')  # one report per exchange, none twice
    assert "1 conversation(s) · 3 request(s)" in pages.text()
    recorder.close()


def test_a_non_loopback_address_is_refused_without_allow_remote() -> None:
    async def main(allow: bool, said: list[str]) -> str:
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve_proxy(
                "http://127.0.0.1:9",
                host="0.0.0.0",
                stop=stop,
                ready=ready.set_result,
                allow_remote=allow,
                warn=said.append,
            )
        )
        waiters: set[asyncio.Future[Any]] = {task, ready}
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
        stop.set()
        recorder = await task
        recorder.close()
        return ready.result()

    with pytest.raises(ProxyError, match="not a loopback address") as caught:
        run(lambda: main(False, []))
    assert "--allow-remote" in str(caught.value) and "/_dsh/report" in str(caught.value)
    said: list[str] = []
    base = run(lambda: main(True, said))
    assert base.startswith("http://0.0.0.0:")
    (warning,) = said
    assert warning.startswith("WARNING: listening on 0.0.0.0")
    assert "/_dsh/report" in warning and "no authentication" in warning
