"""The proxy's relay at the byte level: framings, reads, broken upstreams, and the recorder.

The upstream here is a raw asyncio server that writes scripted bytes (split where a test wants
the upstream's reads to fall), so every framing the upstream client must undo is exercised:
chunked (sizes and data cut across reads), sized, close-delimited, an answer to HEAD, a body
cut short, and a pooled connection the upstream closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_core.providers._sse import SseEvent
from dsh_testkit.proxy import Recorder
from dsh_testkit.proxy._server import serve_proxy
from dsh_testkit.traces import load_trace
from dsh_testkit.traces._file import read_trace_lines
from dsh_testkit.traces._wire import answer_of_events, answer_of_text

Write = tuple[float, bytes]
"""A pause (seconds), then bytes the upstream writes in one go."""

BODY = json.dumps(
    {"model": "deepseek-chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


def sse(*texts: str) -> list[bytes]:
    return [
        b"data: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": t}}]}).encode()
        + b"\n\n"
        for t in texts
    ]


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


_OPEN: list[asyncio.StreamWriter] = []
"""The client connections a test opened (closed when it ends)."""

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


async def _upstream(answers: list[Sequence[Write]], *, close_after: bool = False) -> Any:
    """A server answering its n-th request with ``answers[n]`` (a request is read whole first)."""
    served = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                await reader.readexactly(length)
                answer = answers[served]
                served += 1
                for pause, data in answer:
                    if pause:
                        await asyncio.sleep(pause)
                    writer.write(data)
                    await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def _request(
    port: int, method: str = "POST", body: bytes = BODY, *, reader_writer: Any = None
) -> tuple[bytes, list[bytes], bool, Any]:
    """Send one request through the proxy; the response head, its body's chunks as framed by
    the proxy, whether the terminating chunk came, and the open connection."""
    if reader_writer is None:
        reader_writer = await asyncio.open_connection("127.0.0.1", port)
        _OPEN.append(reader_writer[1])
    reader, writer = reader_writer
    writer.write(
        f"{method} /chat/completions HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer sk-test-"
        f"{'k' * 20}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    head = await reader.readuntil(b"\r\n\r\n")
    chunks: list[bytes] = []
    if method == "HEAD" or b"transfer-encoding: chunked" not in head.lower():
        return head, chunks, True, (reader, writer)
    try:
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return head, chunks, True, (reader, writer)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    except asyncio.IncompleteReadError:
        return head, chunks, False, (reader, writer)


def _run(
    answers: list[Sequence[Write]],
    client: Callable[[int], Awaitable[Any]],
    *,
    close_after: bool = False,
    out: str | None = None,
) -> tuple[Any, Recorder]:
    recorder = Recorder(out)

    async def main() -> Any:
        upstream = await _upstream(answers, close_after=close_after)
        port = upstream.sockets[0].getsockname()[1]
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve_proxy(
                f"http://127.0.0.1:{port}", stop=stop, ready=ready.set_result, recorder=recorder
            )
        )
        url = await asyncio.wait_for(ready, 10)
        try:
            return await asyncio.wait_for(client(int(url.rsplit(":", 1)[1])), 20)
        finally:
            for writer in _OPEN:
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()
            _OPEN.clear()
            stop.set()
            await task
            upstream.close()

    try:
        return asyncio.run(main()), recorder
    finally:
        recorder.close()


def test_events_arriving_together_go_on_together_and_paced_ones_one_by_one() -> None:
    events = sse("one ", "two ", "three")
    together = [(0.0, SSE_HEAD + chunked(*events))]
    paced: list[Write] = [(0.0, SSE_HEAD)]
    paced += [(0.05, b"%x\r\n%b\r\n" % (len(e), e)) for e in events]
    paced.append((0.05, b"0\r\n\r\n"))

    async def client(port: int) -> Any:
        first = await _request(port)
        second = await _request(port, reader_writer=first[3])
        return first, second

    (first, second), recorder = _run([together, paced], client)
    assert first[2] and second[2]
    assert first[1] == [b"".join(events)]  # one upstream read: one relayed piece
    assert second[1] == events  # one read per event: relayed one by one
    trace = recorder.trace()
    assert [e.response["content"] if e.response else None for e in trace] == [
        "one two three",
        "one two three",
    ]
    assert all(e.status == 200 for e in trace)


def test_chunk_sizes_and_data_cut_across_reads_are_reassembled() -> None:
    events = sse("alpha ", "beta ", "gamma")
    raw = SSE_HEAD + chunked(*events)
    cuts = [len(SSE_HEAD) + 1, len(SSE_HEAD) + 5, len(SSE_HEAD) + 40, len(raw) - 3, len(raw) - 1]
    writes: list[Write] = []
    last = 0
    for cut in [*cuts, len(raw)]:
        writes.append((0.02, raw[last:cut]))
        last = cut

    async def client(port: int) -> Any:
        return await _request(port)

    (head, chunks, ended, _), recorder = _run([writes], client)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert ended
    assert b"".join(chunks) == b"".join(events)
    assert len(chunks) > 1  # relayed as the reads came, not held to the end
    answer = recorder.trace().exchanges[0].response
    assert answer is not None and answer["content"] == "alpha beta gamma"


def test_sized_and_close_delimited_answers_are_relayed_whole() -> None:
    payload = json.dumps(
        {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "sized"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_cache_hit_tokens": 0},
        }
    ).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    sized: list[Write] = [
        (0.0, head + b"content-length: %d\r\n\r\n" % len(payload) + payload[:7]),
        (0.03, payload[7:]),
    ]
    delimited: list[Write] = [(0.0, head + b"connection: close\r\n\r\n" + payload[:9])]
    delimited.append((0.03, payload[9:]))

    async def client(port: int) -> Any:
        return [await _request(port), await _request(port)]

    results, recorder = _run([sized, delimited], client, close_after=True)
    for _, chunks, ended, _ in results:
        assert ended
        assert b"".join(chunks) == payload
    trace = recorder.trace()
    assert len(trace) == 2
    assert all(e.usage is not None and e.usage.prompt_tokens == 10 for e in trace)


def test_an_answer_to_head_has_no_body_and_the_connection_stays_usable() -> None:
    head_answer: list[Write] = [
        (0.0, b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 99\r\n\r\n")
    ]
    then = [(0.0, SSE_HEAD + chunked(*sse("after")))]

    async def client(port: int) -> Any:
        first = await _request(port, "HEAD", b"")
        second = await _request(port, reader_writer=first[3])
        return first, second

    (first, second), _ = _run([head_answer, then], client)
    assert first[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding" not in first[0].lower()
    assert second[2] and b"".join(second[1]) == b"".join(sse("after"))


def records(recorder: Recorder) -> list[dict[str, Any]]:
    """The exchange records of the recorder's trace file, as written."""
    _, lines, _ = read_trace_lines(recorder.writer.read_back())
    return [dict(record) for _, record in lines]


def test_an_upstream_cut_mid_body_cuts_the_client_and_is_recorded_as_an_upstream_error() -> None:
    events = sse("partial")
    cut: list[Write] = [(0.0, SSE_HEAD + b"%x\r\n%b\r\n" % (len(events[0]), events[0]) + b"40\r\n")]

    async def client(port: int) -> Any:
        return await _request(port)

    (_, chunks, ended, _), recorder = _run([cut], client, close_after=True)
    assert chunks == events
    assert not ended  # no terminating chunk: the client can tell the answer is incomplete
    (record,) = records(recorder)
    assert record["outcome"] == "upstream-error"
    assert "closed the connection" in record["detail"]
    assert record["response"]["content"] == "partial"  # what was relayed
    assert record["status"] == 200


def test_a_pooled_connection_the_upstream_closed_is_replaced() -> None:
    answer = [(0.0, SSE_HEAD + chunked(*sse("again")))]

    async def client(port: int) -> Any:
        first = await _request(port)
        await asyncio.sleep(0.1)  # the upstream closes its side after each answer
        return first, await _request(port, reader_writer=first[3])

    (first, second), recorder = _run([answer, answer], client, close_after=True)
    assert first[2] and second[2]
    assert b"".join(second[1]) == b"".join(sse("again"))
    assert len(recorder.trace()) == 2


def test_recorded_exchanges_are_scrubbed_and_clean_ones_kept_as_sent(tmp_path: Path) -> None:
    other = "sk-" + "Q7w8E9r0T1" * 4
    bodies = [
        {"model": "m", "messages": [{"role": "user", "content": "nothing secret \u00e9"}]},
        {"model": "m", "messages": [{"role": "user", "content": f"my key {other}"}]},
        {"model": "m", "api_key": "plain-value", "messages": [{"role": "user", "content": "x"}]},
        {"model": "m", "API_KEY": "plain-value", "messages": [{"role": "user", "content": "y"}]},
        {"model": "m", "messages": [{"role": "user", "content": "a control \x01 char"}]},
    ]
    answer = [(0.0, SSE_HEAD + chunked(*sse("ok")))]
    out = tmp_path / "relay.trace"

    async def client(port: int) -> Any:
        connection = None
        for body in bodies:
            result = await _request(port, body=json.dumps(body).encode(), reader_writer=connection)
            connection = result[3]

    _, recorder = _run([answer] * len(bodies), client, out=str(out))
    text = out.read_text(encoding="utf-8")
    assert other not in text and "plain-value" not in text
    assert "sk-test-" not in text  # the client's own credential never reaches the file
    in_memory = json.dumps([e.to_json() for e in recorder.trace()])
    assert other not in in_memory and "plain-value" not in in_memory
    trace = load_trace(out)
    assert trace.exchanges[0].body == bodies[0]
    assert trace.exchanges[4].body == bodies[4]
    assert trace.exchanges[2].body["api_key"] != "plain-value"
    assert trace.exchanges[3].body["API_KEY"] != "plain-value"


def test_a_streamed_answer_reads_the_same_with_every_line_ending() -> None:
    chunks = [
        {"choices": [{"delta": {"content": "Hel"}}]},
        {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]},
    ]
    answers = []
    for end in ("\n", "\r\n", "\r"):
        text = "".join(f"data: {json.dumps(c)}{end}{end}" for c in chunks)
        answers.append(answer_of_text(f"{text}data: [DONE]{end}{end}", "chat")[0])
    assert answers[0] is not None and answers[0]["content"] == "Hello"
    assert answers[1:] == answers[:-1]


def test_streamed_texts_are_assembled_from_many_pieces() -> None:
    pieces = 2000
    chunks: list[dict[str, Any]] = [
        {"choices": [{"delta": {"reasoning_content": "r", "content": "c"}}]} for _ in range(pieces)
    ]
    chunks += [
        {
            "choices": [
                {"delta": {"tool_calls": [{"index": 0, "id": "call-1", "function": {"name": "f"}}]}}
            ]
        },
        *(
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "a"}}]}}]}
            for _ in range(pieces)
        ),
    ]
    text = "".join(f"data:   {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    answer, _ = answer_of_text(text, "chat")
    assert answer is not None
    assert answer["content"] == "c" * pieces
    assert answer["reasoning_content"] == "r" * pieces
    assert answer["tool_calls"] == [
        {"id": "call-1", "type": "function", "function": {"name": "f", "arguments": "a" * pieces}}
    ]


def test_an_anthropic_block_restarted_mid_stream_starts_over() -> None:
    events = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"text": "lost"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "A"}},
        *({"type": "content_block_delta", "index": 0, "delta": {"text": "b"}} for _ in range(3)),
        {"type": "content_block_delta", "index": 1, "delta": {"thinking": "t"}},
    ]
    answer, _ = answer_of_events(
        [SseEvent(event="x", data=json.dumps(e)) for e in events], "anthropic"
    )
    assert answer is not None
    assert answer["content"] == [
        {"type": "text", "text": "Abbb"},
        {"type": "text", "text": "", "thinking": "t"},
    ]


@pytest.mark.parametrize("status", [204, 304])
def test_answers_without_a_body_carry_no_chunked_framing(status: int) -> None:
    answer = [(0.0, b"HTTP/1.1 %d Nothing\r\nx-a: 1\r\n\r\n" % status)]

    async def client(port: int) -> Any:
        first = await _request(port)
        second = await _request(port, reader_writer=first[3])
        return first, second

    (first, second), _ = _run([answer, answer], client)
    assert first[0].startswith(b"HTTP/1.1 %d" % status)
    assert b"transfer-encoding" not in first[0].lower()
    assert second[0].startswith(b"HTTP/1.1 %d" % status)


def test_a_stopping_proxy_lets_an_answer_in_flight_end_and_records_it() -> None:
    events = sse("last words")
    slow_end: list[Write] = [
        (0.0, SSE_HEAD + b"%x\r\n%b\r\n" % (len(events[0]), events[0])),
        (0.3, b"0\r\n\r\n"),  # the upstream's end comes after the proxy was asked to stop
    ]
    recorder = Recorder(None)

    async def main() -> tuple[bytes, bool]:
        upstream = await _upstream([slow_end])
        port = upstream.sockets[0].getsockname()[1]
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve_proxy(
                f"http://127.0.0.1:{port}", stop=stop, ready=ready.set_result, recorder=recorder
            )
        )
        url = await asyncio.wait_for(ready, 10)
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
        writer.write(
            b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-length: %d\r\n\r\n%b"
            % (len(BODY), BODY)
        )
        await reader.readuntil(b"\r\n\r\n")
        await reader.readuntil(b"\r\n")
        data = await reader.readexactly(len(events[0]))
        stop.set()  # the client still reads: the answer's end comes within the grace period
        rest = await asyncio.wait_for(reader.read(), 10)
        await task
        writer.close()
        upstream.close()
        return data, rest.endswith(b"0\r\n\r\n")

    try:
        data, ended = asyncio.run(main())
    finally:
        recorder.close()
    assert data == events[0]
    assert ended
    trace = recorder.trace()
    assert len(trace) == 1
    assert trace.exchanges[0].response is not None
    assert trace.exchanges[0].response["content"] == "last words"
    assert [r["outcome"] for r in records(recorder)] == ["delivered"]


def test_a_trace_read_from_another_thread_waits_for_an_answer_being_recorded() -> None:
    recorder = Recorder(None)
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(len(recorder.trace())))
    with recorder.ending():  # the client has the answer's end; the exchange is not in yet
        reader.start()
        time.sleep(0.2)
        assert not seen
        recorder.record(
            {
                "index": 0,
                "endpoint": "chat",
                "url": "http://upstream/chat/completions",
                "conversation": None,
                "started": 1.0,
                "firstByte": 1.1,
                "finished": 1.2,
                "status": 200,
                "request": json.loads(BODY),
                "response": {"role": "assistant", "content": "hi"},
                "usage": None,
            }
        )
    reader.join(5)
    assert seen == [1]
