"""Hostile input against the mock DeepSeek: odd numbers, deep nesting, bad bytes, bad HTTP, slow
and greedy clients, credentials in any header. The promise under test: only API-shaped 4xx,
never a 5xx, never a dropped connection, and the server healthy after.

The hypothesis part is bounded to a few seconds in ``make test``; ``DSH_FUZZ_EXAMPLES=N`` (and
``HYPOTHESIS_PROFILE``) run it longer.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_testkit.mock import MockDeepSeek, MockServer, Reply
from dsh_testkit.mock._admission import MAX_JSON_DEPTH

from ._helpers import (
    ANTHROPIC,
    API_KEY,
    CHAT,
    anthropic_body,
    call,
    chat_body,
    payload,
    request,
    user,
)

EXAMPLES = int(os.environ.get("DSH_FUZZ_EXAMPLES", "150"))
"""Examples per fuzzing property (raise it for a longer run)."""

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def nested_objects(depth: int) -> Any:
    value: Any = {"type": "string"}
    for _ in range(depth):
        value = {"type": "object", "properties": {"p": value}}
    return value


def nested_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def assert_api_shaped_4xx(status: int, data: bytes, path: str) -> None:
    assert 400 <= status < 500, (status, data[:300])
    body = json.loads(data)
    if path.startswith("/anthropic"):
        assert body["type"] == "error" and isinstance(body["error"]["message"], str)
        assert isinstance(body["request_id"], str)
    else:
        assert set(body) == {"error"} and isinstance(body["error"]["message"], str)


def assert_not_a_server_error(status: int, data: bytes, path: str) -> None:
    if status != 200:
        assert_api_shaped_4xx(status, data, path)


# -- the classes of defect, one by one ----------------------------------------------------------


def test_negative_zero_is_a_number_like_any_other(mock: MockDeepSeek) -> None:
    plan = call(mock, CHAT, b'{"model":"deepseek-v4-flash","messages":[{"role":"user",'
                b'"content":"hi"}],"temperature":-0.0,"top_p":-0.0}')  # fmt: skip
    assert plan.status == 200
    plan = call(mock, ANTHROPIC, anthropic_body(temperature=-0.0))
    assert plan.status == 200


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
@pytest.mark.parametrize("path", [CHAT, ANTHROPIC])
def test_non_finite_numbers_are_an_invalid_body(
    mock: MockDeepSeek, constant: str, path: str
) -> None:
    body = json.dumps(chat_body() if path == CHAT else anthropic_body())
    raw = body[:-1] + f',"temperature":{constant}}}'
    plan = call(mock, path, raw.encode())
    assert plan.status == 400
    assert_api_shaped_4xx(plan.status, plan.body_bytes, path)
    assert mock.requests[-1].status == 400


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 485, 493, 5_000, 100_000])
@pytest.mark.parametrize("path", [CHAT, ANTHROPIC, "/_dsh/script"])
def test_deep_nesting_is_refused_with_a_400_never_a_crash(
    mock: MockDeepSeek, depth: int, path: str
) -> None:
    body = json.dumps(chat_body() if path == CHAT else anthropic_body())
    raw = (body[:-1] + ',"metadata":' + nested_text(depth) + "}").encode()
    plan = mock.handle(request(path, raw))
    assert plan.status == 400
    if path == "/_dsh/script":
        assert payload(plan)["error"]["code"] == "invalid_script"
        return
    assert_api_shaped_4xx(plan.status, plan.body_bytes, path)
    message = payload(plan)["error"]["message"]
    assert f"nesting deeper than {MAX_JSON_DEPTH} levels" in message
    record = mock.requests[-1]
    assert record.status == 400 and isinstance(record.body, str)  # kept as text, safely


def test_nesting_within_the_limit_is_accepted(mock: MockDeepSeek) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"p": nested_objects(50)}},
        },
    }
    assert call(mock, CHAT, chat_body(tools=[tool])).status == 200


def test_a_huge_body_is_answered(mock: MockDeepSeek) -> None:
    plan = call(mock, CHAT, chat_body(user("x" * 1_000_000)))
    assert plan.status == 200
    bad = call(mock, CHAT, b'{"model": "deepseek-v4-flash", "messages": [' + b"1," * 500_000)
    assert_api_shaped_4xx(bad.status, bad.body_bytes, CHAT)


@pytest.mark.parametrize(
    "raw",
    [b"\xff\xfe{}", b'{"model": "\xc3\x28"}', b"\x00" * 10, b'{"a": "\\ud800"}', b""],
)
def test_bad_bytes_are_a_400(mock: MockDeepSeek, raw: bytes) -> None:
    for path in (CHAT, ANTHROPIC):
        plan = call(mock, path, raw)
        assert_api_shaped_4xx(plan.status, plan.body_bytes, path)


# -- the request log: capped, freed, never a credential ----------------------------------------


def test_the_request_log_is_capped_and_counts_what_it_dropped() -> None:
    mock = MockDeepSeek(request_log_limit=3)
    for i in range(5):
        call(mock, CHAT, chat_body(user(f"q{i}")))
    assert [r.seq for r in mock.requests] == [3, 4, 5]
    assert mock.dropped_requests == 2
    log = payload(mock.handle(request("/_dsh/requests", method="GET")))
    assert (log["dropped"], log["limit"], [r["seq"] for r in log["requests"]]) == (2, 3, [3, 4, 5])
    assert payload(mock.handle(request("/_dsh/reset"))) == {"reset": True}
    assert (mock.requests, mock.dropped_requests) == ((), 0)
    with pytest.raises(ValueError, match="request_log_limit"):
        MockDeepSeek(request_log_limit=0)


def test_the_request_log_is_capped_in_body_bytes_too() -> None:
    mock = MockDeepSeek(request_log_limit=100, request_log_bytes=25_000)
    for i in range(6):
        call(mock, CHAT, chat_body(user(f"{i}" * 10_000)))
    held, limit = mock.request_log_bytes
    assert limit == 25_000 and held <= 25_000
    assert [r.seq for r in mock.requests] == [5, 6] and mock.dropped_requests == 4
    huge = MockDeepSeek(request_log_bytes=10)
    call(huge, CHAT, chat_body())
    assert len(huge.requests) == 1  # the newest record is always kept
    log = payload(mock.handle(request("/_dsh/requests", method="GET")))
    assert (log["bodyBytes"], log["bodyBytesLimit"], log["dropped"]) == (held, 25_000, 4)
    mock.reset()
    assert mock.request_log_bytes == (0, 25_000)


SECRET = "sk-live-0123456789abcdefSECRET"


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": f"Token {SECRET}"},
        {"authorization": SECRET},
        {"Authorization": f"Basic {SECRET}"},
        {"api-key": SECRET},
        {"x-api-key": SECRET},
        {"X-Goog-Api-Key": SECRET},
        {"proxy-authorization": f"Bearer {SECRET}"},
        {"cookie": f"session={SECRET}"},
        {"x-custom-token": SECRET},
    ],
)
@pytest.mark.parametrize("path", [CHAT, ANTHROPIC, "/models", "/nowhere"])
def test_the_request_log_never_holds_a_credential(
    mock: MockDeepSeek, headers: dict[str, str], path: str
) -> None:
    body = {"messages": [{"role": "user", "content": f"my key is {SECRET}"}], "model": SECRET}
    mock.handle(request(path, body, headers=headers))
    mock.handle(request(path, body, key=None, headers=headers))
    logged = json.dumps([r.to_json() for r in mock.requests])
    assert SECRET not in logged
    assert SECRET not in payload(mock.handle(request("/_dsh/requests", method="GET"))).__repr__()


# -- fuzzing the in-process model -------------------------------------------------------------

ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(-0.0),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.integers(min_value=1, max_value=300).map(nested),
)

CHAT_FIELDS = [
    "model", "messages", "stream", "stream_options", "thinking", "reasoning_effort", "tools",
    "tool_choice", "temperature", "top_p", "max_tokens", "stop", "frequency_penalty",
    "presence_penalty", "response_format", "logprobs", "top_logprobs", "user_id", "user", "n",
]  # fmt: skip
ANTHROPIC_FIELDS = [
    "model", "max_tokens", "messages", "system", "tools", "tool_choice", "thinking",
    "output_config", "reasoning", "temperature", "top_p", "top_k", "stop_sequences", "metadata",
    "stream",
]  # fmt: skip
MESSAGE_FIELDS = ["role", "content", "tool_calls", "tool_call_id", "reasoning_content", "name"]


@st.composite
def hostile_bodies(draw: st.DrawFn) -> tuple[str, bytes]:
    """A valid body with a few fields replaced by odd values, or raw bytes."""
    path = draw(st.sampled_from([CHAT, ANTHROPIC]))
    kind = draw(st.sampled_from(["fields", "message", "raw", "truncated"]))
    body: dict[str, Any] = chat_body() if path == CHAT else anthropic_body()
    if kind == "raw":
        return path, draw(st.binary(max_size=200))
    if kind == "truncated":
        text = json.dumps(body, allow_nan=True)
        return path, text[: draw(st.integers(0, len(text) - 1))].encode()
    if kind == "message":
        message: dict[str, Any] = {"role": "user", "content": "hi"}
        for field in draw(st.lists(st.sampled_from(MESSAGE_FIELDS), min_size=1, max_size=3)):
            message[field] = draw(ODD_VALUES)
        body["messages"] = [message]
    else:
        fields = CHAT_FIELDS if path == CHAT else ANTHROPIC_FIELDS
        for field in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=4)):
            body[field] = draw(ODD_VALUES)
    return path, json.dumps(body, allow_nan=True).encode()


@FUZZ
@given(hostile_bodies(), st.sampled_from(["Bearer", "Token", "", "bearer"]))
def test_fuzzed_requests_get_an_api_shaped_answer(case: tuple[str, bytes], scheme: str) -> None:
    path, raw = case
    mock = MockDeepSeek()
    auth = f"{scheme} {API_KEY}".strip()
    plan = mock.handle(
        request(path, raw, key=None, headers={"authorization": auth, "x-api-key": API_KEY})
    )
    assert plan.abort is None
    assert_not_a_server_error(plan.status, plan.body_bytes if plan.status != 200 else b"", path)
    assert API_KEY not in json.dumps([r.to_json() for r in mock.requests])


# -- over loopback ----------------------------------------------------------------------------


def raw_exchange(server: MockServer, data: bytes, *, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


# Each HTTP/1.1 case carries a Host (without one, any of them is a 400 for that alone).
BAD_HTTP = [
    b"GARBAGE\r\n\r\n",
    b"POST /chat/completions HTTP/9.9\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nX: a\x01b\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\n folded: x\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\n"
    + b"X-Long: "
    + b"a" * 70_000
    + b"\r\n\r\n",
    b"POST ftp://x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"POST /chat/completions HTTP/1.1\r\n\r\n",
]


@pytest.mark.parametrize("data", BAD_HTTP, ids=range(len(BAD_HTTP)))
def test_bad_http_gets_a_4xx_or_5xx_status_line_never_silence(
    server: MockServer, data: bytes
) -> None:
    answer = raw_exchange(server, data)
    status = int(answer.split(b" ", 2)[1])
    # 505 (version) and 501 (coding) are HTTP's own answers for these two; all others are 4xx.
    assert 400 <= status < 500 or status in (501, 505), answer[:200]
    assert httpx.get(server.base_url + "/models", headers={"authorization": "Bearer k"}).is_success


def test_a_few_hundred_fuzzed_requests_over_loopback(server: MockServer) -> None:
    cases: list[tuple[str, bytes]] = []

    @settings(max_examples=max(EXAMPLES, 200), deadline=None, database=None)
    @given(hostile_bodies())
    def collect(case: tuple[str, bytes]) -> None:
        cases.append(case)

    collect()
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        for path, raw in cases:
            headers = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}
            response = client.post(path, content=raw, headers=headers)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code != 200:
                assert_api_shaped_4xx(response.status_code, response.content, path)
        assert client.post(CHAT, json=chat_body(), headers={"authorization": "Bearer k"}).is_success
    assert all(code < 500 for code in statuses), statuses


def test_a_half_sent_body_gets_408() -> None:
    with MockServer(body_timeout=0.3) as server:
        head = b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{"
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(head)
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"request body was not received in time" in answer


def test_a_body_cut_short_by_the_client_gets_400(server: MockServer) -> None:
    answer = raw_exchange(
        server,
        b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{",
    )
    assert answer.startswith(b"HTTP/1.1 400 ") and b"the request body ended early" in answer
    chunked = b"POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"
    assert raw_exchange(server, chunked).startswith(b"HTTP/1.1 400 ")


def test_a_slow_request_head_gets_408() -> None:
    with MockServer(head_timeout=0.3) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"POST /chat/completions HTTP/1.1\r\nHost:")
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408 ")


def test_connections_over_the_cap_are_refused_cleanly() -> None:
    with MockServer(max_connections=2) as server:
        held = []
        for _ in range(2):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(
                b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n\r\n"
            )
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")  # kept alive, counted
            held.append(sock)
        refused = raw_exchange(server, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in refused
        assert b"too many connections (the limit is 2)" in refused
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the server notices the closes
            answer = raw_exchange(
                server,
                b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n\r\n",
            )
            if answer.startswith(b"HTTP/1.1 200 "):
                break
            time.sleep(0.05)
        assert answer.startswith(b"HTTP/1.1 200 ")


def test_server_options_are_checked() -> None:
    from dsh_testkit.mock import MockServerError

    with pytest.raises(MockServerError, match="head_timeout must be positive"):
        MockServer(head_timeout=0).start()
    with pytest.raises(MockServerError, match="max_connections must be"):
        MockServer(max_connections=0).start()


def test_the_server_is_healthy_after_hostile_traffic(server: MockServer) -> None:
    for data in BAD_HTTP:
        raw_exchange(server, data)
    server.mock.push(Reply(text="still here"))
    response = httpx.post(
        server.base_url + CHAT, json=chat_body(), headers={"authorization": f"Bearer {API_KEY}"}
    )
    assert response.json()["choices"][0]["message"]["content"] == "still here"


HTTP_PIECES = st.sampled_from(
    [
        b"POST /chat/completions HTTP/1.1\r\n",
        b"GET /_dsh/requests HTTP/1.0\r\n",
        b"Content-Length: 5\r\n",
        b"Content-Length: -1\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Authorization: Bearer k\r\n",
        b"Expect: 100-continue\r\n",
        b"\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
        b'{"model": "deepseek-v4-flash"}',
        b"\x00\xff\xfe",
        b" \t",
    ]
)


def test_fuzzed_bytes_on_the_wire_always_get_an_answer(server: MockServer) -> None:
    @settings(max_examples=max(EXAMPLES // 3, 50), deadline=None, database=None)
    @given(st.lists(HTTP_PIECES | st.binary(max_size=40), min_size=1, max_size=8))
    def exchange(pieces: list[bytes]) -> None:
        data = b"".join(pieces)
        answer = raw_exchange(server, data)
        if data.strip():  # something beyond blank space was sent: a status line comes back
            assert answer.startswith(b"HTTP/1.1 "), (data, answer[:100])
            status = int(answer.split(b" ", 2)[1])
            assert status < 500 or status in (501, 505), (data, answer[:300])

    exchange()
    health = httpx.get(server.base_url + "/v1/models", headers={"authorization": "Bearer k"})
    assert health.is_success


@FUZZ
@given(
    method=st.sampled_from(["POST", "GET", "PUT", "DELETE", "HEAD", "PATCH"]) | st.text(max_size=8),
    path=st.sampled_from([CHAT, ANTHROPIC, "/models", "/_dsh/", "/_dsh/script", "/_dsh/reset"])
    | st.text(max_size=30),
    headers=st.lists(st.tuples(st.text(max_size=20), st.text(max_size=40)), max_size=5),
    body=st.binary(max_size=120),
)
def test_handle_never_raises_nor_answers_5xx_for_any_request(
    method: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> None:
    from dsh_testkit.mock._plan import HttpRequest

    mock = MockDeepSeek()
    plan = mock.handle(HttpRequest(method=method, path=path, headers=tuple(headers), body=body))
    assert plan.status < 500, plan.body_bytes[:300]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX resource limits")
def test_out_of_descriptors_the_server_refuses_cleanly_and_logs_little() -> None:
    """A flood of clients against a server whose process may hold 64 descriptors: the cap keeps
    it serving, extras get a 503, asyncio's accept errors are throttled, and it serves after."""
    import subprocess

    from tests._support import with_open_file_limit

    process = subprocess.Popen(
        with_open_file_limit(64, "-m", "dsh_testkit.cli", "serve"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip()
        port = int(base.rsplit(":", 1)[1])
        held: list[socket.socket] = []
        for _ in range(120):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(
                b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n\r\n"
            )
            held.append(sock)
        statuses: dict[bytes, int] = {}
        for sock in held:
            line = sock.recv(64).split(b"\r\n", 1)[0]
            statuses[line[9:12]] = statuses.get(line[9:12], 0) + 1
        for sock in held:
            sock.close()
        assert set(statuses) <= {b"200", b"503"} and statuses.get(b"200", 0) >= 8, statuses
        time.sleep(0.5)
        health = httpx.get(base + "/v1/models", headers={"authorization": "Bearer k"})
        assert health.status_code == 200
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert len(errors.splitlines()) < 40, errors[-2000:]
