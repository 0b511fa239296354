"""The loopback server: HTTP/1.1 framing, malformed input, incremental streaming, concurrency,
faults on a real socket, the control API over HTTP, and the server's life cycle."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_testkit._loopback import http as loopback_http
from dsh_testkit._loopback.http import BadRequest, parse_head
from dsh_testkit.mock import ErrorReply, MockDeepSeek, MockServer, MockServerError, Reply, serve
from dsh_testkit.mock._plan import Emit, HttpRequest, ResponsePlan

from ._helpers import API_KEY, chat_body

AUTH = {"authorization": f"Bearer {API_KEY}"}


def raw_exchange(server: MockServer, data: bytes, *, timeout: float = 5.0) -> bytes:
    """Send raw bytes and end the sending side, read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        out = bytearray()
        while chunk := sock.recv(65536):
            out += chunk
        return bytes(out)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def body_of(response: bytes) -> Any:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


def post(path: str, body: dict[str, Any], *, extra: bytes = b"", version: bytes = b"1.1") -> bytes:
    data = json.dumps(body).encode()
    return (
        b"POST " + path.encode() + b" HTTP/" + version + b"\r\nhost: localhost\r\nconnection: close\r\n"
        b"content-type: application/json\r\n"
        b"authorization: Bearer " + API_KEY.encode() + b"\r\ncontent-length: " + str(len(data)).encode()
        + b"\r\n" + extra + b"\r\n" + data
    )  # fmt: skip


# HTTP/1.1 requires Host (h11 refuses a request without one: 400), so every HTTP/1.1 case but
# the ones about Host carries one, to reach the fault it is about.
@pytest.mark.parametrize(
    ("data", "status", "reason"),
    [
        (b"GARBAGE\r\n\r\n", 400, "malformed request line"),
        (b"GET / HTTP/2.0\r\n\r\n", 505, "only HTTP/1.0 and HTTP/1.1"),
        (b"GET nowhere HTTP/1.1\r\nhost: localhost\r\n\r\n", 400, "absolute path"),
        (b"GET * HTTP/1.1\r\nhost: localhost\r\n\r\n", 400, "absolute path"),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "malformed header line"),
        (b"GET / HTTP/1.1\r\nbad name: x\r\n\r\n", 400, "malformed header line"),
        (
            b"GET / HTTP/1.1\r\nhost: localhost\r\nx: a\r\n folded\r\n\r\n",
            400,
            "obsolete line folding",
        ),
        (b"GET / HTTP/1.1\r\nhost: localhost\r\nx: a\x01b\r\n\r\n", 400, "control character"),
        (b"GET / HTTP/1.1\r\n\r\n", 400, "needs a Host header"),
        (b"GET / HTTP/1.1\r\nhost: localhost\r\nhost: y\r\n\r\n", 400, "more than one Host"),
        (
            b"POST / HTTP/1.1\r\nhost: localhost\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n",
            400,
            "both Transfer-Encoding",
        ),
        (
            b"POST / HTTP/1.1\r\nhost: localhost\r\ncontent-length: -1\r\n\r\n",
            400,
            "invalid Content-Length",
        ),
        (
            b"POST / HTTP/1.1\r\nhost: localhost\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            400,
            "invalid Content-Length",
        ),
        (
            b"POST / HTTP/1.1\r\nhost: localhost\r\ncontent-length: 999999999999\r\n\r\n",
            413,
            "too large",
        ),
        (
            b"POST / HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: gzip\r\n\r\n",
            501,
            "only the chunked",
        ),
        (
            b"POST / HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            400,
            "malformed chunk size",
        ),
        (
            b"POST / HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcXY",
            400,
            "not followed by CRLF",
        ),
        (
            b"GET / HTTP/1.1\r\nhost: localhost\r\nx: " + b"a" * 70_000 + b"\r\n\r\n",
            431,
            "request head too large",
        ),
        (b"GET / HTTP/1.1\r\nx: " + b"a" * 70_000, 431, "request head too large"),
        (b"GET / HTTP/1.1\r\nhost: x", 400, "incomplete request head"),
    ],
)
def test_malformed_http_is_refused_and_the_server_survives(
    server: MockServer, data: bytes, status: int, reason: str
) -> None:
    response = raw_exchange(server, data)
    assert status_of(response) == status
    assert reason in body_of(response)["error"]["message"]
    assert b"connection: close" in response
    assert httpx.get(server.base_url + "/models", headers=AUTH).status_code == 200


def test_a_silent_client_or_an_empty_connection_is_harmless(server: MockServer) -> None:
    assert raw_exchange(server, b"") == b""
    assert raw_exchange(server, b"\r\n\r\n") == b""  # empty lines before a request are skipped


def test_json_answers_carry_content_length_and_keep_alive(server: MockServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=AUTH) as client:
        first = client.post("/v1/chat/completions", json=chat_body())
        second = client.post("/chat/completions", json=chat_body())
    assert first.status_code == second.status_code == 200
    assert first.headers["content-length"] == str(len(first.content))
    assert (
        first.headers["connection"] == "keep-alive"
        and first.headers["server"] == "dsh-testkit-mock"
    )
    assert first.json()["choices"][0]["message"]["content"].startswith("Mock DeepSeek reply")
    assert server.mock.requests[1].seq == 2


def test_streams_use_chunked_transfer_encoding(server: MockServer) -> None:
    with (
        httpx.Client(base_url=server.base_url, headers=AUTH) as client,
        client.stream("POST", "/chat/completions", json=chat_body(stream=True)) as response,
    ):
        lines = [line for line in response.iter_lines() if line]
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert lines[-1] == "data: [DONE]"
    assert json.loads(lines[-2][6:])["usage"]["prompt_tokens"] > 0


def test_a_client_sees_the_first_chunks_while_the_stream_is_still_open(server: MockServer) -> None:
    # The answer stalls after two chunks and never ends: a server that buffered the stream would
    # deliver nothing; this one has flushed every chunk as it was produced.
    server.mock.push(Reply(text="abcdefghijklmnop", chunk_size=2, fault="stall", fault_after=2))
    timeout = httpx.Timeout(5.0, read=0.5)
    received: list[str] = []
    with (
        httpx.Client(base_url=server.base_url, headers=AUTH, timeout=timeout) as client,
        client.stream(
            "POST", "/chat/completions", json=chat_body(stream=True, thinking={"type": "disabled"})
        ) as response,
        pytest.raises(httpx.ReadTimeout),
    ):
        for line in response.iter_lines():
            if line:
                received.append(line)
    # thinking off: the first chunk opens the content with "", the second carries "ab"
    assert [json.loads(line[6:])["choices"][0]["delta"].get("content") for line in received] == [
        "",
        "ab",
    ]


def test_a_chunked_request_body_and_expect_continue(server: MockServer) -> None:
    body = json.dumps(chat_body()).encode()
    chunked = b"%x\r\n%b\r\n0\r\nx-trailer: 1\r\n\r\n" % (len(body), body)
    head = (
        b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\nexpect: 100-continue\r\n"
        b"content-type: application/json\r\n"
        b"transfer-encoding: chunked\r\nauthorization: Bearer " + API_KEY.encode() + b"\r\n\r\n"
    )
    response = raw_exchange(server, head + chunked)
    assert response.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert server.mock.requests[0].body == chat_body()


def test_http_1_0_clients_get_a_close_delimited_stream(server: MockServer) -> None:
    response = raw_exchange(
        server, post("/chat/completions", chat_body(stream=True), version=b"1.0")
    )
    head, _, body = response.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head and b"connection: close" in head
    assert body.endswith(b"data: [DONE]\n\n")


def test_absolute_form_targets_and_query_strings_are_accepted(server: MockServer) -> None:
    data = post("/x", chat_body()).replace(
        b"POST /x", b"POST http://127.0.0.1/v1/chat/completions?a=1"
    )
    assert status_of(raw_exchange(server, data)) == 200
    assert server.mock.requests[0].path == "/v1/chat/completions"


def test_head_requests_get_headers_only(server: MockServer) -> None:
    response = raw_exchange(
        server,
        b"HEAD /models HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\nauthorization: Bearer k\r\n\r\n",
    )
    assert status_of(response) == 405
    assert response.endswith(b"\r\n\r\n")  # headers only


def test_a_reset_fault_resets_the_connection(server: MockServer) -> None:
    server.mock.push(Reply(text="x", fault="reset"))
    with pytest.raises(httpx.TransportError):
        httpx.post(server.base_url + "/chat/completions", json=chat_body(stream=True), headers=AUTH)
    assert (
        httpx.post(
            server.base_url + "/chat/completions", json=chat_body(), headers=AUTH
        ).status_code
        == 200
    )


def test_a_disconnect_cuts_the_chunked_body_after_the_sent_chunks(server: MockServer) -> None:
    server.mock.push(Reply(text="abcdefgh", chunk_size=2, fault="disconnect", fault_after=3))
    received: list[str] = []
    with (
        httpx.Client(base_url=server.base_url, headers=AUTH) as client,
        client.stream("POST", "/chat/completions", json=chat_body(stream=True)) as response,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        for line in response.iter_lines():
            if line:
                received.append(line)
    assert len(received) == 3


def test_a_truncated_json_body_is_detected_by_its_content_length(server: MockServer) -> None:
    server.mock.push(Reply(text="some answer", fault="disconnect"))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(server.base_url + "/chat/completions", json=chat_body(), headers=AUTH)


def test_keep_alive_lines_before_a_json_body(server: MockServer) -> None:
    server.mock.push(Reply(text="late", keep_alives=2, pace_ms=1))
    response = httpx.post(server.base_url + "/chat/completions", json=chat_body(), headers=AUTH)
    assert response.content.startswith(b"\n\n{")
    assert json.loads(response.content)["choices"][0]["message"]["content"] == "late"


def test_the_control_api_over_http(server: MockServer) -> None:
    with httpx.Client(base_url=server.base_url) as client:
        pushed = client.post("/_dsh/script", json=[{"behaviour": "rate_limit"}, {"text": "after"}])
        assert pushed.json() == {"queued": 2, "added": 2}
        limited = client.post("/chat/completions", json=chat_body(), headers=AUTH)
        assert limited.status_code == 429 and limited.headers["retry-after"] == "1"
        answered = client.post("/chat/completions", json=chat_body(), headers=AUTH)
        assert answered.json()["choices"][0]["message"]["content"] == "after"
        log = client.get("/_dsh/requests").json()["requests"]
        assert [r["status"] for r in log] == [429, 200]
        assert API_KEY not in json.dumps(log)
        assert client.post("/_dsh/reset", json={}).json() == {"reset": True}
        after = client.get("/_dsh/requests").json()
        assert (after["requests"], after["dropped"], after["pending"]) == ([], 0, 0)


async def test_fifty_concurrent_streaming_clients_finish_without_errors(server: MockServer) -> None:
    server.mock.push(*[Reply(text=f"answer number {i} " * 5, chunk_size=4) for i in range(50)])
    limits = httpx.Limits(max_connections=60)

    async def one(client: httpx.AsyncClient) -> str:
        async with client.stream(
            "POST", "/chat/completions", json=chat_body(stream=True)
        ) as response:
            assert response.status_code == 200
            lines = [line async for line in response.aiter_lines() if line]
        # Every stream is whole: it ends with [DONE], after a last chunk carrying the
        # finish_reason and the usage (a stream cut short by the load would lack them).
        assert lines[-1] == "data: [DONE]", lines[-3:]
        chunks = [json.loads(line[6:]) for line in lines[:-1]]
        assert all(line.startswith("data: {") for line in lines[:-1])
        assert chunks[-1]["choices"][-1]["finish_reason"] == "stop"
        assert all(c["choices"][-1].get("finish_reason") is None for c in chunks[:-1])
        usage = chunks[-1]["usage"]
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)

    async with httpx.AsyncClient(
        base_url=server.base_url, headers=AUTH, limits=limits, timeout=10
    ) as client:
        results = await asyncio.wait_for(
            asyncio.gather(*(one(client) for _ in range(50))), timeout=30
        )
    assert sorted(results) == sorted(f"answer number {i} " * 5 for i in range(50))
    assert len(server.mock.requests) == 50 and all(r.status == 200 for r in server.mock.requests)


def test_stop_closes_stalled_connections(mock: MockDeepSeek) -> None:
    server = MockServer(mock).start()
    mock.push(Reply(text="x", fault="hang"))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        sock.sendall(post("/chat/completions", chat_body()))
        deadline = time.monotonic() + 5
        while not mock.requests and time.monotonic() < deadline:
            time.sleep(0.005)  # until the request reached the model; the server now hangs
        server.stop()
        assert sock.recv(100) == b""
    finally:
        sock.close()
    server.stop()  # stopping twice is harmless


def test_server_life_cycle_errors(mock: MockDeepSeek) -> None:
    server = MockServer(mock)
    with pytest.raises(MockServerError, match="not started"):
        _ = server.base_url
    with server:
        with pytest.raises(MockServerError, match="already started"):
            server.start()
        taken = MockServer(port=server.port)
        with pytest.raises(MockServerError, match="cannot listen") as caught:
            taken.start()
        assert caught.value.port == server.port
        assert server.anthropic_base_url == server.base_url + "/anthropic"
        assert repr(server) == f"MockServer(base_url={server.base_url!r})"


def test_error_entries_over_http_keep_their_headers(server: MockServer) -> None:
    server.mock.push(ErrorReply(status=503, retry_after="7", request_id="r-1"))
    response = httpx.post(server.base_url + "/chat/completions", json=chat_body(), headers=AUTH)
    assert (
        response.status_code,
        response.headers["retry-after"],
        response.headers["x-ds-trace-id"],
    ) == (503, "7", "r-1")


@given(st.binary(max_size=300))
def test_any_request_head_either_parses_or_is_refused_with_a_status(data: bytes) -> None:
    try:
        head = parse_head(data + b"\r\n\r\n")
    except BadRequest as bad:
        assert 400 <= bad.status < 600 and bad.reason
    else:
        assert head.method and head.target.startswith("/")


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


@pytest.mark.slow
@settings(max_examples=40)
@given(
    st.one_of(
        st.binary(min_size=1, max_size=400),
        st.builds(
            lambda method, target, junk: method + b" " + target + b" HTTP/1.1\r\n" + junk,
            st.sampled_from([b"GET", b"POST", b"PUT", b"G\x00T"]),
            st.sampled_from([b"/chat/completions", b"/_dsh/script", b"*", b"/\xff"]),
            st.binary(max_size=200),
        ),
    )
)
def test_random_bytes_never_break_the_server(fuzz_server: MockServer, data: bytes) -> None:
    response = raw_exchange(fuzz_server, data)
    assert response == b"" or response.startswith(b"HTTP/1.1 ")
    assert httpx.get(fuzz_server.base_url + "/models", headers=AUTH).status_code == 200


@pytest.mark.parametrize(
    ("chunk", "status", "reason"),
    [
        # A chunk may declare any size; what arrives is counted against the cap (here lowered
        # to 1,000 bytes), and the request is refused once it passes it.
        (b"FFFFFFFF\r\n" + b"x" * 2000, 413, "request body too large"),
        (b"400\r\n" + b"x" * 1024 + b"\r\n1\r\nx\r\n", 413, "request body too large"),
        (b"1" * 70_000 + b"\r\n", 400, "malformed chunked body"),
    ],
)
def test_chunked_bodies_too_large_or_unreadable(
    server: MockServer,
    chunk: bytes,
    status: int,
    reason: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loopback_http, "MAX_BODY_BYTES", 1000)
    head = (
        b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    response = raw_exchange(server, head + chunk)
    assert status_of(response) == status and reason in body_of(response)["error"]["message"]
    assert not server.mock.requests  # refused before the mock saw it


def test_a_hanging_answer_ends_when_the_client_leaves(server: MockServer) -> None:
    server.mock.push(Reply(text="x", fault="hang"))
    assert raw_exchange(server, post("/chat/completions", chat_body())) == b""
    assert httpx.get(server.base_url + "/models", headers=AUTH).status_code == 200


def test_empty_writes_never_end_a_chunked_body_early() -> None:
    class Padded(MockDeepSeek):
        def handle(self, request: HttpRequest) -> ResponsePlan:
            plan = super().handle(request)
            return dataclasses.replace(plan, body=(Emit(data=b""), *plan.body))

    with (
        MockServer(Padded()) as server,
        httpx.Client(base_url=server.base_url, headers=AUTH) as client,
    ):
        lines = [
            line
            for line in client.post("/chat/completions", json=chat_body(stream=True)).iter_lines()
            if line
        ]
    assert lines[-1] == "data: [DONE]"


async def test_serve_runs_in_the_callers_loop_until_stopped() -> None:
    stop = asyncio.Event()
    stop.set()
    await serve(MockDeepSeek(), stop=stop)  # returns at once: no ready callback needed
    urls: list[str] = []
    stop = asyncio.Event()
    task = asyncio.create_task(serve(MockDeepSeek(), stop=stop, ready=urls.append))
    while not urls:
        await asyncio.sleep(0.001)
    async with httpx.AsyncClient(base_url=urls[0], headers=AUTH) as client:
        assert (await client.get("/models")).status_code == 200
    stop.set()
    await asyncio.wait_for(task, 5)
