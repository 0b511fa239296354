"""Who may talk to the servers (``dsh_testkit._loopback.guard``), on raw sockets: the Host table,
the Origin table and fetch metadata, on both servers and every kind of path; the content types
and methods of the mock; the proxy's own ``/_dsh/`` paths. A browser sends what these requests
send (tests/adversarial/test_browser_hostile.py drives a real one)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from dsh_testkit._loopback.guard import Guard, allowed_host_pattern, is_json_content_type
from dsh_testkit._loopback.http import parse_head
from dsh_testkit.explorer import live_pages
from dsh_testkit.mock import MockDeepSeek, MockHandler, MockServer, MockServerError, Reply
from dsh_testkit.proxy import ProxyError, ProxyServer

KEY = "sk-FAKE-guard-test-not-a-key"
CHAT = json.dumps(
    {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hello"}]}
).encode()


@dataclass
class Servers:
    mock: MockServer
    proxy: ProxyServer

    def port(self, which: str) -> int:
        server: Any = self.mock if which == "mock" else self.proxy
        return int(server.base_url.rsplit(":", 1)[1])

    def snapshot(self) -> tuple[Any, ...]:
        mock = self.mock.mock
        return (
            len(mock.requests),
            len(mock.pending),
            len(mock.routes),
            len(self.proxy.trace()),
        )


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with (
        MockServer(MockDeepSeek(), pages=live_pages) as mock,
        ProxyServer(mock.base_url, pages=live_pages) as proxy,
    ):
        yield Servers(mock, proxy)


def send(port: int, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One request (``head``'s lines joined with CRLF, ``content-length`` added for a body);
    the status, the headers (lower-cased names) and the body of the answer."""
    data = head.replace("\n", "\r\n").encode("latin-1")
    if body:
        data = data.replace(b"\r\n\r\n", b"\r\ncontent-length: %d\r\n\r\n" % len(body), 1)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    status_line, _, rest = raw.partition(b"\r\n")
    head_bytes, _, payload = rest.partition(b"\r\n\r\n")
    headers = {}
    for line in head_bytes.split(b"\r\n"):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, payload


# -- Host ------------------------------------------------------------------------------------

HOSTS = [
    # (request target, Host or None, HTTP version, expected status)
    ("{path}", "127.0.0.1:{port}", "1.1", 200),
    ("{path}", "localhost:{port}", "1.1", 200),
    ("{path}", "LOCALHOST:{port}", "1.1", 200),
    ("{path}", "localhost.:{port}", "1.1", 200),
    ("{path}", "app.localhost:{port}", "1.1", 200),
    ("{path}", "[::1]:{port}", "1.1", 200),
    ("{path}", "[::ffff:127.0.0.1]:{port}", "1.1", 200),
    ("{path}", "127.0.0.2:{port}", "1.1", 200),
    ("{path}", "localhost", "1.1", 200),
    ("{path}", "localhost:1", "1.1", 200),  # the port is not compared (a forwarded port)
    ("{path}", None, "1.0", 200),
    ("http://localhost:{port}{path}", "evil.test", "1.1", 200),  # absolute form: its authority
    ("{path}", "evil.test:{port}", "1.1", 421),
    ("{path}", "evil.test", "1.1", 421),
    ("{path}", "localhost.evil.test:{port}", "1.1", 421),
    ("{path}", "127.0.0.1.nip.io:{port}", "1.1", 421),
    ("{path}", "localtest.me:{port}", "1.1", 421),
    ("{path}", "localhost..:{port}", "1.1", 421),
    ("{path}", "0.0.0.0:{port}", "1.1", 421),
    ("{path}", "2130706433:{port}", "1.1", 421),
    ("{path}", "127.1:{port}", "1.1", 421),
    ("{path}", "0x7f.0.0.1:{port}", "1.1", 421),
    ("{path}", "127.000.0.1:{port}", "1.1", 421),
    ("{path}", "[::]:{port}", "1.1", 421),
    ("{path}", "[fe80::1%25eth0]:{port}", "1.1", 421),
    ("{path}", "xn--lcalhost-9za:{port}", "1.1", 421),
    ("http://evil.test:{port}{path}", "localhost:{port}", "1.1", 421),
    ("{path}", "user@localhost:{port}", "1.1", 400),
    ("{path}", "localhost:99999", "1.1", 400),
    ("{path}", "local host", "1.1", 400),
    ("{path}", "localhost/x", "1.1", 400),
    ("{path}", None, "1.1", 400),
    ("{path}", "localhost:{port}\nHost: evil.test", "1.1", 400),  # two Host lines
]
HOST_PATHS = {
    # path → the proxy's status for it when the mock's is 200 (the proxy relays /models)
    "/_dsh/requests": 404,  # the proxy's own /_dsh/: never relayed
    "/_dsh/report?format=json": 200,
    "/_dsh/explorer": 200,
    "/models": 200,
}


@pytest.mark.parametrize("path", HOST_PATHS)
@pytest.mark.parametrize("case", HOSTS, ids=lambda c: f"{c[1]}-{c[2]}-{c[0][:4]}")
@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_only_a_loopback_host_is_answered(
    servers: Servers, which: str, case: tuple[str, str | None, str, int], path: str
) -> None:
    target, host, version, expected = case
    port = servers.port(which)
    lines = [f"GET {target.format(path=path, port=port)} HTTP/{version}"]
    if host is not None:
        lines.append(f"Host: {host.format(port=port)}")
    lines += [f"authorization: Bearer {KEY}", "connection: close", "", ""]
    before = servers.snapshot()
    status, headers, body = send(port, "\n".join(lines))
    if expected == 200 and which == "proxy":
        expected = HOST_PATHS[path]
    assert status == expected, body[:300]
    assert not any(name.startswith("access-control-") for name in headers)
    if expected in (400, 421):
        assert headers["connection"] == "close"
        assert json.loads(body)["error"]["code"] in ("host_not_allowed", "invalid_host")
        assert servers.snapshot() == before  # nothing logged, relayed or recorded


def test_the_421_says_which_flag_accepts_the_name(servers: Servers) -> None:
    port = servers.port("mock")
    status, _, body = send(port, f"GET /models HTTP/1.1\nHost: mock.internal:{port}\n\n")
    assert status == 421
    assert "pass --allow-host mock.internal" in json.loads(body)["error"]["message"]


@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_allowed_hosts_are_answered_and_only_they(which: str) -> None:
    allow = ["mock.internal", ".example.test", "192.0.2.7"]
    with (
        MockServer(allow_hosts=allow) as mock,
        ProxyServer(mock.base_url, allow_hosts=allow) as proxy,
    ):
        port = int((mock if which == "mock" else proxy).base_url.rsplit(":", 1)[1])
        for host, expected in (
            ("mock.internal", 200),
            ("MOCK.INTERNAL.", 200),
            ("example.test", 200),
            ("a.b.example.test", 200),
            ("192.0.2.7", 200),
            ("notexample.test", 421),
            ("mock.internal.evil", 421),
            ("evil.test", 421),
        ):
            status, _, _ = send(
                port,
                f"GET /models HTTP/1.1\nHost: {host}:{port}\nauthorization: Bearer {KEY}\n"
                "connection: close\n\n",
            )
            assert status == expected, host


def test_any_host_with_a_star() -> None:
    with MockServer(allow_hosts=["*"]) as mock:
        port = mock.port
        status, _, _ = send(
            port,
            f"GET /models HTTP/1.1\nHost: evil.test\nauthorization: Bearer {KEY}\n"
            "connection: close\n\n",
        )
    assert status == 200


def test_bad_allow_hosts_entries_are_refused_at_start() -> None:
    with pytest.raises(MockServerError, match="not a host name"):
        MockServer(allow_hosts=["mock.internal:8080"]).start()
    with pytest.raises(ProxyError, match="not a host name"):
        ProxyServer("http://127.0.0.1:9", allow_hosts=["http://x"]).start()
    assert allowed_host_pattern("::1") == "[::1]"
    assert allowed_host_pattern(" .Example.TEST ") == ".example.test"


def non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (``None`` when it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_a_server_listening_beyond_loopback_answers_the_address_it_was_reached_on() -> None:
    """With allow_remote, a client may name the address it reached (an IP literal cannot be
    rebound); any other name stays refused."""
    guard = Guard(server="test")
    head = parse_head(b"GET / HTTP/1.1\r\nHost: 192.0.2.7:80\r\n\r\n")
    assert guard.check(head) is not None
    assert guard.check(head, local_address="192.0.2.7") is None
    assert guard.check(head, local_address="192.0.2.8") is not None
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback to reach the server on")
    with MockServer(host="0.0.0.0", allow_remote=True) as mock:
        port = mock.port
        statuses = []
        for host in (address, "evil.test"):
            with socket.create_connection((address, port), timeout=30) as sock:
                sock.sendall(
                    f"GET /models HTTP/1.1\r\nHost: {host}:{port}\r\nauthorization: Bearer "
                    f"{KEY}\r\nconnection: close\r\n\r\n".encode()
                )
                statuses.append(int(sock.recv(100).split(b" ", 2)[1]))
    assert statuses == [200, 421]


def test_serve_beyond_loopback_needs_allow_remote() -> None:
    with pytest.raises(MockServerError, match="--allow-remote"):
        MockServer(host="0.0.0.0").start()


# -- Origin and fetch metadata ---------------------------------------------------------------

ORIGINS = [
    (None, 200),
    ("http://127.0.0.1:{port}", 200),
    ("HTTP://127.0.0.1:{port}", 403),  # a browser serializes the scheme in lower case
    ("http://localhost:{port}", 403),  # another name: maybe another program on [::1]
    ("http://127.0.0.1:{other}", 403),  # another server on loopback
    ("http://localhost:{other}", 403),
    ("http://evil.test:{port}", 403),
    ("https://127.0.0.1:{port}", 403),
    ("null", 403),
    ("http://127.0.0.1:{port}/", 403),  # not an origin
    ("", 403),
]


@pytest.mark.parametrize("case", ORIGINS, ids=lambda c: str(c[0]))
@pytest.mark.parametrize("kind", ["control-post", "live-get", "model-post"])
@pytest.mark.parametrize("which", ["mock", "proxy"])
def test_another_origin_is_refused_on_every_path(
    servers: Servers, which: str, kind: str, case: tuple[str | None, int]
) -> None:
    origin, expected = case
    port = servers.port(which)
    other = servers.port("proxy" if which == "mock" else "mock")
    if kind == "control-post":
        method, path, body = "POST", "/_dsh/script", b'{"text": "x"}'
        if which == "proxy" and expected == 200:
            expected = 404  # the proxy's /_dsh/ is its own
    elif kind == "live-get":
        method, path, body = "GET", "/_dsh/report?format=json", b""
    else:
        method, path, body = "POST", "/chat/completions", CHAT
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"authorization: Bearer {KEY}",
        "content-type: application/json",
        "connection: close",
    ]
    if origin is not None:
        lines.append("Origin: " + origin.format(port=port, other=other))
    before = servers.snapshot()
    status, headers, answer = send(port, "\n".join(lines) + "\n\n", body)
    after = servers.snapshot()
    servers.mock.mock.reset()
    assert status == expected, answer[:300]
    assert not any(name.startswith("access-control-") for name in headers)
    if expected == 403:
        assert json.loads(answer)["error"]["code"] == "origin_not_allowed"
        assert after == before  # nothing queued, logged, relayed or recorded


@pytest.mark.parametrize("which", ["mock", "proxy"])
@pytest.mark.parametrize(
    ("fetch", "expected"),
    [
        ("Sec-Fetch-Site: same-site\nSec-Fetch-Mode: no-cors\nSec-Fetch-Dest: image", 403),
        ("Sec-Fetch-Site: cross-site\nSec-Fetch-Mode: no-cors\nSec-Fetch-Dest: image", 403),
        ("Sec-Fetch-Site: cross-site\nSec-Fetch-Mode: navigate\nSec-Fetch-Dest: iframe", 403),
        ("Sec-Fetch-Site: cross-site\nSec-Fetch-Mode: navigate\nSec-Fetch-Dest: document", 200),
        ("Sec-Fetch-Site: same-origin\nSec-Fetch-Mode: cors\nSec-Fetch-Dest: empty", 200),
        ("Sec-Fetch-Site: none\nSec-Fetch-Mode: navigate\nSec-Fetch-Dest: document", 200),
    ],
)
def test_fetch_metadata_of_another_site_is_refused_but_a_link_opens_the_page(
    servers: Servers, which: str, fetch: str, expected: int
) -> None:
    port = servers.port(which)
    head = f"GET /_dsh/explorer HTTP/1.1\nHost: 127.0.0.1:{port}\nconnection: close\n{fetch}\n\n"
    assert send(port, head)[0] == expected


def test_the_servers_own_answers_cannot_be_embedded_by_another_origin(servers: Servers) -> None:
    for which, path in (
        ("mock", "/_dsh/requests"),
        ("mock", "/_dsh/explorer"),
        ("proxy", "/_dsh/report"),
    ):
        port = servers.port(which)
        _, headers, _ = send(
            port, f"GET {path} HTTP/1.1\nHost: localhost:{port}\nconnection: close\n\n"
        )
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cross-origin-resource-policy"] == "same-origin"


# -- the proxy's own paths and what it relays ------------------------------------------------


def test_the_proxy_relays_no_dsh_path_and_no_browser_header(servers: Servers) -> None:
    mock = servers.mock.mock
    proxy = servers.proxy.base_url
    for method, path in (
        ("POST", "/_dsh/script"),
        ("GET", "/_dsh/requests"),
        ("GET", "/_dsh"),
    ):
        answer = httpx.request(method, proxy + path, json={"text": "through the proxy"})
        assert answer.status_code == 404, (path, answer.text)
        assert "relays no /_dsh/ path" in answer.json()["error"]["message"]
    assert mock.pending == ()
    # But a reset between two runs is relayed (and recorded as one), as JSON only: the mock
    # refuses another body type, which is what a page could send without a preflight.
    before = mock.resets[0]
    plain = httpx.post(proxy + "/_dsh/reset", content=b"{}", headers={"content-type": "text/plain"})
    assert plain.status_code == 415 and mock.resets[0] == before
    assert httpx.post(proxy + "/_dsh/reset", json={}).status_code == 200
    assert mock.resets[0] == before + 1
    # An SDK's request (no Origin) is relayed; the proxy's own Origin and fetch metadata are
    # judged by the proxy and not passed on (the mock behind it would refuse them otherwise).
    port = servers.port("proxy")
    status, _, _ = send(
        port,
        f"POST /chat/completions HTTP/1.1\nHost: 127.0.0.1:{port}\nOrigin: http://127.0.0.1:{port}\n"
        f"Sec-Fetch-Site: same-origin\nauthorization: Bearer {KEY}\n"
        "content-type: application/json\nconnection: close\n\n",
        CHAT,
    )
    assert status == 200
    logged = mock.requests[-1].headers
    assert not {name.lower() for name, _ in logged} & {"origin", "sec-fetch-site"}
    mock.reset()


def test_the_proxy_relays_any_content_type(servers: Servers) -> None:
    """The proxy judges who asks, not what is relayed: the upstream answers (here the mock's 415,
    as the live API answers), and the exchange is recorded."""
    before = len(servers.proxy.trace())
    answer = httpx.post(
        servers.proxy.base_url + "/chat/completions",
        content=CHAT,
        headers={"authorization": f"Bearer {KEY}", "content-type": "text/plain"},
    )
    assert answer.status_code == 415
    assert answer.text == "Expected request with `Content-Type: application/json`"
    assert len(servers.proxy.trace()) == before + 1
    servers.mock.mock.reset()


# -- the mock: content types, methods, the log -----------------------------------------------

CONTENT_TYPES = [
    ("application/json", 200),
    ("application/json; charset=utf-8", 200),
    ("Application/JSON; charset=UTF-8", 200),
    ('application/json ; charset="utf-8"', 200),
    (None, 415),
    ("text/plain", 415),
    ("text/plain; charset=utf-8", 415),
    ("application/x-www-form-urlencoded", 415),
    ("multipart/form-data; boundary=x", 415),
    ("application/jsonx", 415),
    ("application/json, text/plain", 415),
    ("application/vnd.api+json", 415),
]
CONTROL_BODIES = {
    "/_dsh/script": b'{"text": "x"}',
    "/_dsh/routes": b'{"match": {}, "reply": {"text": "x"}}',
    "/_dsh/reset": b"{}",
}


def control_post(
    transport: str, path: str, content_type: str | None, mock: MockDeepSeek
) -> httpx.Response:
    headers = {"authorization": f"Bearer {KEY}"}
    if content_type is not None:
        headers["content-type"] = content_type
    body = CONTROL_BODIES.get(path, CHAT)
    if transport == "in-process":
        with httpx.Client(
            transport=httpx.MockTransport(MockHandler(mock)), base_url="http://t"
        ) as client:
            return client.post(path, content=body, headers=headers)
    with MockServer(mock) as server:
        return httpx.post(server.base_url + path, content=body, headers=headers)


@pytest.mark.parametrize("transport", ["server", "in-process"])
@pytest.mark.parametrize("path", [*CONTROL_BODIES, "/chat/completions"])
@pytest.mark.parametrize("case", CONTENT_TYPES, ids=lambda c: str(c[0]))
def test_state_changes_need_a_json_content_type(
    transport: str, path: str, case: tuple[str | None, int]
) -> None:
    content_type, expected = case
    mock = MockDeepSeek()
    answer = control_post(transport, path, content_type, mock)
    assert answer.status_code == expected, answer.text
    if expected == 415 and path == "/chat/completions":
        # the live API's own words and type (docs/wire.md §1.1); a POST to a model path is logged
        assert answer.text == "Expected request with `Content-Type: application/json`"
        assert answer.headers["content-type"] == "text/plain; charset=utf-8"
        assert [r.status for r in mock.requests] == [415]
    elif expected == 415:
        assert answer.json()["error"]["code"] == "unsupported_media_type"
        assert (mock.pending, mock.routes, mock.requests) == ((), (), ())


def test_the_credential_check_comes_before_the_content_type() -> None:
    mock = MockDeepSeek()
    with httpx.Client(
        transport=httpx.MockTransport(MockHandler(mock)), base_url="http://t"
    ) as client:
        answer = client.post(
            "/chat/completions", content=CHAT, headers={"content-type": "text/plain"}
        )
    assert answer.status_code == 401


METHODS = [
    ("GET", "/chat/completions", 405, "POST"),
    ("GET", "/v1/chat/completions", 405, "POST"),
    ("GET", "/beta/chat/completions", 405, "POST"),
    ("GET", "/anthropic/v1/messages", 405, "POST"),
    ("HEAD", "/chat/completions", 405, "POST"),
    ("OPTIONS", "/chat/completions", 405, "POST"),
    ("OPTIONS", "/_dsh/script", 405, "GET, POST"),
    ("PUT", "/chat/completions", 405, "POST"),
    ("DELETE", "/v1/chat/completions", 405, "POST"),
    ("POST", "/models", 405, "GET"),
    ("GET", "/models", 200, None),
    ("GET", "/v1/models", 200, None),
    ("GET", "/favicon.ico", 404, None),
    ("GET", "/anthropic/v1/models", 404, None),
    ("GET", "/_dsh/reset", 405, "POST"),
    ("GET", "/_dsh/script", 200, None),
    ("GET", "/_dsh/routes", 200, None),
    ("GET", "/_dsh/requests", 200, None),
]


@pytest.mark.parametrize("transport", ["server", "in-process"])
@pytest.mark.parametrize("case", METHODS, ids=lambda c: f"{c[0]} {c[1]}")
def test_only_a_post_to_a_model_path_is_logged_and_no_get_changes_anything(
    transport: str, case: tuple[str, str, int, str | None]
) -> None:
    method, path, expected, allow = case
    mock = MockDeepSeek()
    mock.push(Reply(text="queued"))
    mock.route(last_user="x").reply(text="routed")
    headers = {"authorization": f"Bearer {KEY}"}
    if transport == "in-process":
        with httpx.Client(
            transport=httpx.MockTransport(MockHandler(mock)), base_url="http://t"
        ) as client:
            answer = client.request(method, path, headers=headers)
    else:
        with MockServer(mock) as server:
            answer = httpx.request(method, server.base_url + path, headers=headers)
    assert answer.status_code == expected
    assert answer.headers.get("allow") == allow
    assert not any(name.startswith("access-control-") for name in answer.headers)
    assert mock.requests == ()
    assert (len(mock.pending), len(mock.routes)) == (1, 1)
    assert mock.unlogged_requests == (0 if path.startswith("/_dsh") else 1)


def test_the_request_log_counts_what_it_did_not_log(servers: Servers) -> None:
    mock = servers.mock
    mock.mock.reset()
    for path in ("/favicon.ico", "/models", "/chat/completions"):
        httpx.get(mock.base_url + path, headers={"authorization": f"Bearer {KEY}"})
    log = httpx.get(mock.base_url + "/_dsh/requests").json()
    assert (log["requests"], log["notLogged"]) == ([], 3)


# -- the rules as functions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "utf8_only", "expected"),
    [
        (["application/json"], True, True),
        (['application/json; charset="UTF-8"; x=y'], True, True),
        (["application/json; charset=latin-1"], True, False),
        (["application/json; charset=latin-1"], False, True),
        (["application/json", "application/json"], False, False),
        ([], False, False),
        ([" application/json "], True, True),
    ],
)
def test_is_json_content_type(values: list[str], utf8_only: bool, expected: bool) -> None:
    assert is_json_content_type(values, utf8_only=utf8_only) is expected
