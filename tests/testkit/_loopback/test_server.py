"""One HTTP implementation for both servers: the mock server and the recording proxy read
requests with the same h11 reader and refuse malformed ones the same way (a JSON error in the
chat shape, the connection closed), and the proxy relays none of them."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from dsh_testkit.mock import MockDeepSeek, MockServer
from dsh_testkit.proxy import ProxyLimits, ProxyServer

KEY = "sk-loopback-test"
AUTH = b"authorization: Bearer " + KEY.encode() + b"\r\n"


@dataclass
class Servers:
    mock: MockServer
    proxy: ProxyServer

    def port(self, which: str) -> int:
        url = self.mock.base_url if which == "mock" else self.proxy.base_url
        return int(url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with MockServer(MockDeepSeek()) as mock, ProxyServer(mock.base_url) as proxy:
        yield Servers(mock, proxy)


def exchange(port: int, data: bytes, *, half_close: bool = True) -> bytes:
    """Send ``data``, end the sending side (the proxy counts a client that does as gone),
    read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        out = bytearray()
        while chunk := sock.recv(65536):
            out += chunk
        return bytes(out)


def chat(content: str = "hi") -> bytes:
    body = json.dumps(
        {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": content}]}
    ).encode()
    return (
        b"POST /chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        + AUTH
        + b"content-length: %d\r\n\r\n%b" % (len(body), body)
    )


MALFORMED = [
    (b"GARBAGE\r\n\r\n", 400, "malformed request line"),
    (b"GET / HTTP/2.0\r\nhost: localhost\r\n\r\n", 505, "only HTTP/1.0 and HTTP/1.1"),
    (b"POST /chat/completions HTTP/1.1\r\ncontent-length: 0\r\n\r\n", 400, "needs a Host header"),
    (b"GET / HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n", 400, "more than one Host"),
    (b"GET / HTTP/1.1\r\nhost: localhost\r\nx: a\r\n folded\r\n\r\n", 400, "obsolete line folding"),
    (b"GET / HTTP/1.1\r\nhost: localhost\r\nx: a\x07b\r\n\r\n", 400, "control character"),
    (
        b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-length: 5\r\n"
        b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400,
        "both Transfer-Encoding and Content-Length",
    ),
    (
        b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
        501,
        "only the chunked transfer coding",
    ),
    (
        b"GET / HTTP/1.1\r\nhost: localhost\r\nx: " + b"a" * 70_000 + b"\r\n\r\n",
        431,
        "head too large",
    ),
    (
        b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-length: 999999999999\r\n\r\n",
        413,
        "request body too large",
    ),
    (
        b"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-length: 9\r\n\r\n{",
        400,
        "ended early",
    ),
]


@pytest.mark.parametrize("which", ["mock", "proxy"])
@pytest.mark.parametrize(("data", "status", "words"), MALFORMED, ids=[m[2] for m in MALFORMED])
def test_both_servers_refuse_malformed_http_alike(
    servers: Servers, which: str, data: bytes, status: int, words: str
) -> None:
    before = len(servers.mock.mock.requests)
    answer = exchange(servers.port(which), data)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer[:200]
    assert b"content-type: application/json" in head and b"connection: close" in head
    error = json.loads(body)["error"]
    assert words in error["message"] and error["type"] == "invalid_request_error"
    assert len(servers.mock.mock.requests) == before  # refused before anything saw it
    assert servers.proxy.trace().exchanges == ()


@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_pipelined_requests_are_answered_in_order_on_one_connection(
    servers: Servers, which: str
) -> None:
    keep = chat("one").replace(
        b"host: 127.0.0.1\r\n", b"host: 127.0.0.1\r\nconnection: keep-alive\r\n"
    )
    last = chat("two").replace(b"host: 127.0.0.1\r\n", b"host: 127.0.0.1\r\nconnection: close\r\n")
    # empty lines between requests are ignored, as HTTP/1.1 allows
    answer = exchange(servers.port(which), keep + b"\r\n" + last, half_close=False)
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 2
    first, second = answer.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert b"Mock DeepSeek reply to: one" in first and b"Mock DeepSeek reply to: two" in second


def test_an_absolute_form_target_is_routed_by_its_path(servers: Servers) -> None:
    data = chat("absolute").replace(
        b"POST /chat/completions", b"POST http://127.0.0.1:1/v1/chat/completions?x=1"
    )
    answer = exchange(
        servers.port("mock"), data.replace(b"\r\nhost:", b"\r\nconnection: close\r\nhost:")
    )
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert servers.mock.mock.requests[-1].path == "/v1/chat/completions"


@pytest.mark.parametrize("server", ["mock", "proxy"])
def test_connections_over_the_cap_get_the_same_503(server: str) -> None:
    with (
        MockServer(MockDeepSeek(), max_connections=1 if server == "mock" else None) as mock,
        ProxyServer(mock.base_url, limits=ProxyLimits(max_connections=1)) as proxy,
    ):
        base = mock.base_url if server == "mock" else proxy.base_url
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as held:
            held.sendall(b"GET /models HTTP/1.1\r\nhost: localhost\r\n" + AUTH + b"\r\n")
            assert held.recv(65536).startswith(b"HTTP/1.1 200 ")  # kept alive: the one slot
            refused = exchange(port, b"GET /models HTTP/1.1\r\nhost: localhost\r\n\r\n")
        head, _, body = refused.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in head
        name = "dsh-testkit serve" if server == "mock" else "dsh-testkit proxy"
        assert (
            f"{name}: too many connections (the limit is 1)" in json.loads(body)["error"]["message"]
        )
        assert httpx.get(base + "/models", headers={"authorization": f"Bearer {KEY}"}).is_success
