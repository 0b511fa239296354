"""Cassettes: format, SSE replay, scrubbing, matching, mismatch diffs, modes."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dsh_core.providers._sse import split_events
from dsh_testkit._errors import TestkitError
from dsh_testkit.cassettes import (
    CassetteFormatError,
    CassetteMismatch,
    CassetteNotFound,
    CassetteNotFullyPlayed,
    use_cassette,
)
from dsh_testkit.cassettes import _scrub as _vcr_scrub
from dsh_testkit.cassettes._format import (
    CASSETTE_FORMAT_VERSION,
    CassetteSerializer,
    response_chunks,
)
from dsh_testkit.cassettes._matching import json_body_matcher
from dsh_testkit.scrub import REDACTED, ScrubRules, find_secrets, scrub_json, scrub_text, scrub_url
from dsh_testkit.scrub._scrubber import Scrubber

URL = "https://api.deepseek.com/chat/completions"

_SCRUBBER = Scrubber()


def scrub_vcr_request(request):
    return _vcr_scrub.vcr_request(_SCRUBBER, request)


def scrub_vcr_response(response):
    return _vcr_scrub.vcr_response(_SCRUBBER, response)


def request_is_clean(request):
    return _vcr_scrub.request_is_clean(_SCRUBBER, request)


def response_is_clean(response):
    return _vcr_scrub.response_is_clean(_SCRUBBER, response)


KEY = "sk-" + "A1b2C3d4E5" * 4
"""A key-shaped fake key; it must never reach a cassette."""

EVENTS = [
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n',
    b": keep-alive\n\n",
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n',
    b"data: [DONE]\n\n",
]


def chat_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "deepseek-v4-flash",
        "messages": [
            {"role": "system", "content": "You are terse.\nAnswer in English."},
            {"role": "user", "content": "hello"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": "read", "parameters": {"type": "object", "properties": {}}},
            }
        ],
        "stream": True,
    }
    body.update(changes)
    return body


def sse_handler(events: list[bytes] = EVENTS) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"".join(events)
        )

    return handler


def json_handler(payload: Any, status: int = 200) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=payload)

    return handler


def record(path: Path, handler: Any, *bodies: dict[str, Any], **options: Any) -> None:
    with (
        use_cassette(path, mode="rewrite", **options),
        httpx.Client(transport=httpx.MockTransport(handler)) as client,
    ):
        for body in bodies:
            client.post(URL, json=body, headers={"authorization": f"Bearer {KEY}"}).read()


# ------------------------------------------------------------------------------- format


def test_recording_writes_a_versioned_readable_cassette(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body(), metadata={"scenario": "plain-chat"})
    text = path.read_text(encoding="utf-8")
    assert text.startswith(f"format: dsh-cassette\nversion: {CASSETTE_FORMAT_VERSION}\n")
    assert "scenario: plain-chat" in text
    # JSON bodies pretty-printed in a literal block, one key a line; SSE as sent, one event a
    # line with the blank line between events
    assert '      json: |\n        {\n          "model": "deepseek-v4-flash",\n' in text
    assert (
        '          "messages": [\n'
        '            {"role": "system", "content": "You are terse.\\nAnswer in English."},\n'
        '            {"role": "user", "content": "hello"}\n'
        "          ],\n"
    ) in text
    assert "      sse: |+\n        data: {" in text
    assert "\n\n        : keep-alive\n\n" in text
    assert '        data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n' in text
    assert "        data: [DONE]\n" in text


def test_recording_is_byte_identical_across_runs(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    record(a, sse_handler(), chat_body(), chat_body(stream=False))
    record(b, sse_handler(), chat_body(), chat_body(stream=False))
    assert a.read_bytes() == b.read_bytes()


def test_trace_context_headers_are_not_stored(tmp_path: Path) -> None:
    """An OpenTelemetry-instrumented client sends new trace ids with every request: the
    cassette keeps none of them, so two recordings stay byte-identical."""
    paths = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    for n, path in enumerate(paths):
        with (
            use_cassette(path, mode="rewrite"),
            httpx.Client(transport=httpx.MockTransport(sse_handler())) as client,
        ):
            client.post(
                URL,
                json=chat_body(),
                headers={
                    "authorization": f"Bearer {KEY}",
                    "traceparent": f"00-{n:032x}-{n + 1:016x}-01",
                    "tracestate": f"vendor=value{n}",
                    "baggage": f"user.session={n}",
                },
            ).read()
    text = paths[0].read_text(encoding="utf-8")
    assert "traceparent" not in text and "tracestate" not in text and "baggage" not in text
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_volatile_headers_are_not_stored_and_compressed_bodies_are_decoded(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={
                "content-type": "application/json",
                "content-encoding": "gzip",
                "date": "Mon, 01 Jan 2026 00:00:00 GMT",
                "x-ds-trace-id": "abc",
            },
            content=gzip.compress(b'{"answer":42}'),
        )

    path = tmp_path / "c.yaml"
    record(path, handler, chat_body())
    text = path.read_text(encoding="utf-8")
    assert "user-agent" not in text and "date:" not in text and "content-encoding" not in text
    assert "x-ds-trace-id: abc" in text
    assert 'json: |\n        {\n          "answer": 42\n        }\n' in text
    with use_cassette(path), httpx.Client() as client:
        assert client.post(URL, json=chat_body()).json() == {"answer": 42}


def test_replay_of_a_non_json_non_text_body(tmp_path: Path) -> None:
    payloads = {"text": b"plain words", "binary": bytes(range(256))}

    def handler(request: httpx.Request) -> httpx.Response:
        kind = json.loads(request.content)["kind"]
        return httpx.Response(200, content=payloads[kind])

    path = tmp_path / "c.yaml"
    record(path, handler, {"kind": "text"}, {"kind": "binary"})
    text = path.read_text(encoding="utf-8")
    assert "text: plain words" in text and "base64: " in text
    with use_cassette(path), httpx.Client() as client:
        assert client.post(URL, json={"kind": "text"}).content == b"plain words"
        assert client.post(URL, json={"kind": "binary"}).content == bytes(range(256))


def test_metadata_is_stored_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body(), metadata={"recordedAgainst": "loopback mock"})
    with use_cassette(path) as cassette, httpx.Client() as client:
        client.post(URL, json=chat_body()).read()
    assert cassette.metadata == {"recordedAgainst": "loopback mock"}
    assert cassette.recorded == 1 and cassette.play_count == 1


def test_rewrite_origin_files_a_loopback_recording_under_the_real_url(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with (
        use_cassette(
            path,
            mode="rewrite",
            rewrite_origin=("http://127.0.0.1:8765", "https://api.deepseek.com"),
        ),
        httpx.Client(transport=httpx.MockTransport(sse_handler())) as client,
    ):
        client.post("http://127.0.0.1:8765/chat/completions", json=chat_body()).read()
    assert f"uri: {URL}\n" in path.read_text(encoding="utf-8")
    with use_cassette(path), httpx.Client() as client:
        assert client.post(URL, json=chat_body()).status_code == 200


# ------------------------------------------------------------------------------- SSE replay


def test_sse_replay_preserves_chunk_boundaries_sync(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body())
    with (
        use_cassette(path),
        httpx.Client() as client,
        client.stream("POST", URL, json=chat_body()) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        assert list(response.iter_raw()) == EVENTS


async def test_sse_replay_preserves_chunk_boundaries_async(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body())
    with use_cassette(path):
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", URL, json=chat_body()) as response,
        ):
            assert [chunk async for chunk in response.aiter_raw()] == EVENTS


def test_recording_hands_the_live_client_the_same_chunks_as_replay(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with (
        use_cassette(path, mode="rewrite"),
        httpx.Client(transport=httpx.MockTransport(sse_handler())) as client,
        client.stream("POST", URL, json=chat_body()) as response,
    ):
        assert list(response.iter_raw()) == EVENTS


async def test_async_recording_and_replay_of_an_sse_stream(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with use_cassette(path, mode="rewrite"):
        async with httpx.AsyncClient(transport=httpx.MockTransport(sse_handler())) as client:
            response = await client.post(URL, json=chat_body())
            assert response.content == b"".join(EVENTS)
    with use_cassette(path):
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", URL, json=chat_body()) as response,
        ):
            assert [chunk async for chunk in response.aiter_raw()] == EVENTS


@pytest.mark.parametrize(
    "events",
    [
        [EVENTS[0], b"data: [DONE]"],  # [DONE] without its blank line: truncation, kept as is
        [b'data: {"a":1}\r\n\r\n', b"event: ping\ndata: x\n\n"],  # CRLF, named event
        [b"data: not json\n\n", b'data: {"a": 1}\n\n', b"data: 3\n\n", b":no-space\n\n"],
        [EVENTS[0], EVENTS[2]],  # EOF without [DONE]
    ],
)
def test_sse_framing_survives_byte_for_byte(tmp_path: Path, events: list[bytes]) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(events), chat_body())
    with (
        use_cassette(path),
        httpx.Client() as client,
        client.stream("POST", URL, json=chat_body()) as response,
    ):
        chunks = list(response.iter_raw())
    assert chunks == events


_json_payloads = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
_sse_pieces = st.one_of(
    st.builds(
        lambda value, separators, ascii_only: (
            "data: " + json.dumps(value, separators=separators, ensure_ascii=ascii_only) + "\n\n"
        ),
        _json_payloads,
        st.sampled_from([(",", ":"), (", ", ": "), (",", ": ")]),
        st.booleans(),
    ),
    st.sampled_from(
        ["data: [DONE]\n\n", ": keep-alive\n\n", "data: [DONE]", "\r\n\r\n", "data:x\n\n"]
    ),
    st.text(alphabet=st.sampled_from(["d", "a", ":", " ", "\n", "\r", "{", "}", "é"]), max_size=12),
)


@given(st.lists(_sse_pieces, max_size=6).map("".join))
def test_an_sse_body_survives_the_cassette_byte_for_byte(text: str) -> None:
    """The law behind "SSE stored as events": decode(encode(body)) is the same bytes, chunked
    at event boundaries."""
    data = {
        "interactions": [
            {
                "request": {"method": "GET", "uri": URL, "body": None, "headers": {}},
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"content-type": ["text/event-stream"]},
                    "body": {"string": text},
                },
            }
        ]
    }
    back = CassetteSerializer.deserialize(CassetteSerializer.serialize(data))
    body = back["interactions"][0]["response"]["body"]
    if not text:
        assert body["string"] == b""
        return
    assert body["string"] == text
    response = back["interactions"][0]["response"]
    assert response_chunks(response) == [e.encode("utf-8") for e in split_events(text)]


def test_openai_sdk_streaming_replays_through_httpx2(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"".join(EVENTS)
        )

    def run(client: openai.OpenAI) -> list[str]:
        stream = client.chat.completions.create(
            model="deepseek-v4-flash", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        return [c.choices[0].delta.content or "" for c in stream if c.choices]

    with use_cassette(path, mode="rewrite"):
        live = openai.OpenAI(
            api_key=KEY,
            base_url="https://api.deepseek.com",
            http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        )
        assert run(live) == ["", "Hel", "lo"]
    assert KEY not in path.read_text(encoding="utf-8")
    with use_cassette(path):
        replayed = openai.OpenAI(
            api_key="other", base_url="https://api.deepseek.com", max_retries=0
        )
        assert run(replayed) == ["", "Hel", "lo"]


def test_429_then_retry_replays_in_recorded_order(tmp_path: Path) -> None:
    answers = iter(
        [
            httpx.Response(
                429, headers={"retry-after": "1"}, json={"error": {"message": "Rate Limit Reached"}}
            ),
            httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=b"".join(EVENTS)
            ),
        ]
    )
    path = tmp_path / "c.yaml"
    record(path, lambda request: next(answers), chat_body(), chat_body())
    with use_cassette(path), httpx.Client() as client:
        first = client.post(URL, json=chat_body())
        second = client.post(URL, json=chat_body())
    assert (first.status_code, first.headers["retry-after"]) == (429, "1")
    assert first.json()["error"]["message"] == "Rate Limit Reached"
    assert second.status_code == 200 and second.content == b"".join(EVENTS)


# ------------------------------------------------------------------------------- secrets


def test_secrets_are_scrubbed_everywhere_before_writing(tmp_path: Path) -> None:
    other_key = "sk-" + "Z9y8X7w6V5" * 3

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "application/json", "set-cookie": "session=abcdef"},
            json={"echo": f"your key is {KEY}", "api_key": "short"},
        )

    path = tmp_path / "c.yaml"
    with (
        use_cassette(path, mode="rewrite"),
        httpx.Client(transport=httpx.MockTransport(handler)) as client,
    ):
        client.post(
            f"{URL}?api_key=plain&x={other_key}",
            json=chat_body(messages=[{"role": "user", "content": f"my key: {other_key}"}]),
            headers={
                "authorization": f"Bearer {KEY}",
                "x-api-key": "anything",
                "api-key": "anything",
                "cookie": "session=abcdef",
                "x-custom": f"Bearer {'t' * 40}",
            },
        )
    text = path.read_text(encoding="utf-8")
    for secret in (KEY, other_key, "session=abcdef", "anything", "plain", "t" * 40):
        assert secret not in text
    assert find_secrets(text) == []
    assert text.count(REDACTED) >= 6
    assert "api_key=REDACTED" in text


def test_scrubbed_requests_still_match_on_replay(tmp_path: Path) -> None:
    body = chat_body(messages=[{"role": "user", "content": f"use {KEY}"}])
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), body)
    with use_cassette(path), httpx.Client() as client:
        assert client.post(URL, json=body).status_code == 200


def test_scrub_hooks_never_mutate_their_input() -> None:
    from vcr.request import Request

    request = Request(
        "POST", f"{URL}?key={KEY}", json.dumps({"k": KEY}).encode(), {"authorization": KEY}
    )
    scrub_vcr_request(request)
    assert KEY in request.uri and KEY in request.headers["authorization"]
    response: dict[str, Any] = {
        "status": {"code": 200, "message": "OK"},
        "headers": {},
        "body": {"string": KEY.encode()},
    }
    scrub_vcr_response(response)
    assert response["body"]["string"] == KEY.encode()


_keys = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["sk-", "sk-ant-api03-", "Bearer ", "bearer  ", "AKIA", "ghp_"]),
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz",
        min_size=36,
        max_size=60,
    ),
)
_noise = st.lists(st.sampled_from([*"ab -_.:/=\"'<>\n{}", "sk-", "Bearer "]), max_size=12).map(
    "".join
)
_texts = st.lists(st.one_of(_keys, _noise), max_size=6).map("".join)


@given(_texts)
def test_scrub_text_is_idempotent_and_leaves_nothing_key_shaped(text: str) -> None:
    once = scrub_text(text)
    assert scrub_text(once) == once
    assert find_secrets(once) == []


@given(
    st.recursive(
        _texts,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["api_key", "content", "password", "n"]), inner, max_size=3
            )
        ),
        max_leaves=8,
    )
)
def test_scrub_json_is_idempotent_and_leaves_nothing_key_shaped(value: Any) -> None:
    once = scrub_json(value)
    assert scrub_json(once) == once
    assert find_secrets(json.dumps(once)) == []


@given(_texts, st.sampled_from(["key", "api_key", "q", "token"]))
def test_scrub_url_is_idempotent_and_leaves_nothing_key_shaped(text: str, name: str) -> None:
    url = str(httpx.URL("https://user:pw@example.com/v1/x", params={name: text, "q": text}))
    once = scrub_url(url)
    assert scrub_url(once) == once
    assert find_secrets(once) == []
    assert "pw@" not in once


@given(_texts)
def test_scrub_hooks_are_idempotent_on_whole_interactions(text: str) -> None:
    from vcr.request import Request

    def request() -> Any:
        return Request(
            "POST",
            f"{URL}?key={text[:20]}",
            json.dumps({"messages": [{"content": text}], "api_key": text}).encode(),
            {"authorization": text, "x-note": text},
        )

    once = scrub_vcr_request(request())
    twice = scrub_vcr_request(once)
    assert (once.uri, dict(once.headers), once.body) == (twice.uri, dict(twice.headers), twice.body)
    response = {
        "status": {"code": 200, "message": "OK"},
        "headers": {"set-cookie": [text], "x-echo": [text]},
        "body": {"string": text.encode(), "chunks": [text.encode()]},
    }
    r1 = scrub_vcr_response(response)
    assert scrub_vcr_response(r1) == r1
    assert find_secrets(json.dumps(r1["headers"]) + r1["body"]["string"].decode()) == []


def test_scrub_keeps_ordinary_words_that_contain_sk() -> None:
    text = "task-0123456789abcdefghijklmnop and risk-assessment"  # fake: a word, not a key
    assert scrub_text(text) == text
    assert scrub_text(f"Authorization: Bearer {'x' * 30}") == f"Authorization: Bearer {REDACTED}"


def _reference_scrub(text: str) -> str:
    """scrub_text without its substring pre-check: the key pattern alone, to a fixpoint."""
    from dsh_testkit.scrub._rules import _KEY_PATTERN, _replace

    while True:
        scrubbed = _KEY_PATTERN.sub(_replace, text)
        if scrubbed == text:
            return text
        text = scrubbed


_cased_bearer = st.builds(
    lambda cases, token: (
        "".join(c.upper() if up else c for c, up in zip("bearer", cases, strict=True)) + " " + token
    ),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.text(alphabet="abcXYZ0123456789-._~+/", min_size=18, max_size=30),
)


@given(st.one_of(_texts, st.text(max_size=40), st.lists(_cased_bearer | _noise).map("".join)))
def test_the_pre_check_changes_nothing_the_key_pattern_finds(text: str) -> None:
    from dsh_testkit.scrub._rules import _KEY_PATTERN

    assert scrub_text(text) == _reference_scrub(text)
    assert find_secrets(text) == [m.group(0) for m in _KEY_PATTERN.finditer(text)]


def test_the_pre_check_sees_bearer_in_any_case() -> None:
    token = "t" * 30
    assert scrub_text(f"BeArEr {token}") == f"BeArEr {REDACTED}"
    assert find_secrets(f"x bEARER {token}") == [f"bEARER {token}"]


_bodies = st.builds(
    lambda name, text, ascii_only: json.dumps(
        {"messages": [{"content": text}], name: text}, ensure_ascii=ascii_only
    ),
    st.sampled_from(["api_key", "content", "Password", "n"]),
    _texts | st.text(max_size=12),
    st.booleans(),
) | _texts.map(lambda text: f"data: {text}\n\n")


@given(_bodies, st.sampled_from(["authorization", "x-note"]), _noise | st.just(REDACTED))
def test_a_request_called_clean_is_left_as_it_is_by_the_scrub(
    body: str, header: str, value: str
) -> None:
    from vcr.request import Request

    request = Request("POST", URL, body.encode(), {header: value})
    if request_is_clean(request):
        scrubbed = scrub_vcr_request(request)
        assert (scrubbed.uri, dict(scrubbed.headers), scrubbed.body) == (
            request.uri,
            dict(request.headers),
            request.body,
        )


@given(_bodies, st.sampled_from(["set-cookie", "x-echo"]), _noise | st.just(REDACTED))
def test_a_response_called_clean_is_left_as_it_is_by_the_scrub(
    body: str, header: str, value: str
) -> None:

    response = {
        "status": {"code": 200, "message": "OK"},
        "headers": {header: [value]},
        "body": {"string": body.encode(), "chunks": [body.encode()]},
    }
    if response_is_clean(response):
        assert scrub_vcr_response(response) == response


def test_what_makes_a_request_or_response_unclean() -> None:
    from vcr.request import Request

    def clean(uri: str = URL, body: bytes = b'{"a":1}', **headers: str) -> bool:
        return request_is_clean(Request("POST", uri, body, headers))

    assert clean()
    assert clean(authorization=REDACTED, accept="*/*")
    assert clean(body=b"data: plain event\n\n")  # not JSON: only the text pass applies
    assert clean(body=bytes(range(256)))  # binary: nothing to scrub
    assert not clean(f"{URL}?api_key=x")
    assert not clean("https://user:pw@api.deepseek.com/x")
    assert not clean(authorization="Bearer short")
    assert not request_is_clean(Request("POST", URL, b'{"a":1}', {"x-note": KEY}))
    assert not clean(body=json.dumps({"k": KEY}).encode())
    assert not clean(body=b'{"API_KEY":"short"}')
    assert not clean(body=b'{"a":"\\u0073k-not-visible-as-text"}')

    def response(headers: dict[str, list[str]], body: bytes, chunks: list[bytes] | None = None):
        out: dict[str, Any] = {
            "status": {"code": 200},
            "headers": headers,
            "body": {"string": body},
        }
        if chunks is not None:
            out["body"]["chunks"] = chunks
        return out

    assert response_is_clean(response({"set-cookie": [REDACTED]}, b"ok", [b"ok"]))
    assert not response_is_clean(response({"set-cookie": ["session=abc"]}, b"ok"))
    assert not response_is_clean(response({}, b"ok", [b"data: " + KEY.encode() + b"\n\n"]))
    assert not response_is_clean(response({}, json.dumps({"password": "x"}).encode()))


def _stored(tmp_path: Path, marker: str, replacement: str) -> Path:
    """A recorded cassette whose stored text is then edited by hand: ``marker`` → ``replacement``."""

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["stream"]:
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream"},
                content=f'data: {{"echo":"{marker}"}}\n\ndata: [DONE]\n\n'.encode(),
            )
        return httpx.Response(200, headers={"x-echo": marker}, json={"echo": marker})

    path = tmp_path / "c.yaml"
    record(path, handler, chat_body(stream=False), chat_body(stream=True))
    text = path.read_text(encoding="utf-8")
    assert text.count(marker) == 3
    path.write_text(text.replace(marker, replacement), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("stored", "redactions"),
    [
        (KEY, 3),
        # JSON escapes spell the key out only once parsed: no scan of the file text sees it;
        # in the header, where nothing parses it, the run of escapes is decoded and replaced
        ("\\u0073k-" + KEY[3:], 3),
    ],
    ids=["plain", "json-escaped"],
)
def test_a_key_in_a_stored_cassette_is_never_served(
    tmp_path: Path, stored: str, redactions: int
) -> None:
    path = _stored(tmp_path, "MARKER", stored)
    assert ("sk-" in path.read_text(encoding="utf-8")) == (stored == KEY)
    with use_cassette(path), httpx.Client() as client:
        plain = client.post(URL, json=chat_body(stream=False))
        with client.stream("POST", URL, json=chat_body(stream=True)) as streamed:
            events = list(streamed.iter_raw())
    served = plain.text + plain.headers["x-echo"] + b"".join(events).decode()
    assert KEY not in served and KEY not in json.dumps(plain.json())
    assert find_secrets(served) == []
    assert served.count(REDACTED) == redactions


def test_a_key_in_a_stored_request_is_scrubbed_on_load_and_still_matches(tmp_path: Path) -> None:
    body = chat_body(messages=[{"role": "user", "content": f"use {KEY}"}])
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), body)
    text = path.read_text(encoding="utf-8")
    assert f"use {REDACTED}" in text
    path.write_text(text.replace(f"use {REDACTED}", f"use {KEY}"), encoding="utf-8")
    with use_cassette(path) as cassette, httpx.Client() as client:
        assert client.post(URL, json=body).status_code == 200
        ((stored, _),) = cassette.vcr_cassette.data
        assert KEY not in stored.body.decode()


def test_loading_still_rewrites_the_origin_and_drops_volatile_headers(tmp_path: Path) -> None:
    loopback = "http://127.0.0.1:8765"
    path = tmp_path / "c.yaml"
    with (
        use_cassette(path, mode="rewrite"),
        httpx.Client(transport=httpx.MockTransport(json_handler({"ok": 1}))) as client,
    ):
        client.post(f"{loopback}/chat/completions", json=chat_body()).read()
    with (
        use_cassette(path, rewrite_origin=(loopback, "https://api.deepseek.com")) as cassette,
        httpx.Client() as client,
    ):
        ((request, _),) = cassette.vcr_cassette.data
        assert request.uri == URL
        assert client.post(f"{loopback}/chat/completions", json=chat_body()).json() == {"ok": 1}
    # hand-edited: volatile headers the hooks never write (user-agent on the request, date on
    # the response, which come in that order)
    head, request_part, response_part = path.read_text(encoding="utf-8").split("    headers:\n")
    path.write_text(
        f"{head}    headers:\n      user-agent: edited\n{request_part}"
        f"    headers:\n      date: Mon, 01 Jan 2026\n{response_part}",
        encoding="utf-8",
    )
    with use_cassette(path, assert_all_played=False) as cassette:
        ((request, response),) = cassette.vcr_cassette.data
        assert "user-agent" not in request.headers
        assert "date" not in response["headers"]


def test_hooks_skip_what_they_wrote_and_scrub_each_live_request_once(tmp_path: Path) -> None:
    from unittest import mock

    from dsh_testkit.cassettes import _hooks, _scrub

    bodies = [
        chat_body(messages=[{"role": "user", "content": f"{n}: my key {KEY}"}]) for n in range(3)
    ]
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), *bodies)
    calls = {"request": 0, "response": 0}

    def counted(kind: str, scrub: Any) -> Any:
        def wrapper(scrubber: Any, value: Any) -> Any:
            calls[kind] += 1
            return scrub(scrubber, value)

        return wrapper

    with (
        mock.patch.object(_hooks, "vcr_request", counted("request", _scrub.vcr_request)),
        mock.patch.object(_hooks, "vcr_response", counted("response", _scrub.vcr_response)),
    ):
        with use_cassette(path) as cassette:
            assert calls == {"request": 0, "response": 0}  # loading scrubbed nothing again
            assert cassette.recorded == 3
            with httpx.Client() as client:
                for body in bodies:
                    assert client.post(URL, json=body).status_code == 200
        assert calls == {"request": 3, "response": 0}


# ------------------------------------------------------------------------------- matching


def test_matching_ignores_json_key_order(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body())
    reordered = dict(reversed(list(chat_body().items())))
    with use_cassette(path), httpx.Client() as client:
        assert client.post(URL, json=reordered).status_code == 200


def test_json_body_matcher_compares_canonical_json_and_raw_bytes() -> None:
    from vcr.request import Request

    def req(body: Any) -> Any:
        return Request("POST", URL, body, {})

    json_body_matcher(req(b'{"a":1,"b":[1,2]}'), req(b'{"b": [1, 2], "a": 1}'))
    json_body_matcher(req(None), req(b""))
    json_body_matcher(req(b"raw"), req("raw"))
    with pytest.raises(AssertionError, match="body differs"):
        json_body_matcher(req(b'{"a":1}'), req(b'{"a":2}'))
    with pytest.raises(AssertionError) as caught:
        json_body_matcher(req(b"raw"), req(b"other"))
    assert str(caught.value) == "body differs: request: 'raw', recorded: 'other'"


def _mismatch(
    tmp_path: Path, recorded: list[dict[str, Any]], live: list[dict[str, Any]]
) -> CassetteMismatch:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), *recorded)
    with (
        pytest.raises(CassetteMismatch) as caught,
        use_cassette(path, assert_all_played=False),
        httpx.Client() as client,
    ):
        for body in live:
            client.post(URL, json=body)
    return caught.value


def test_mismatch_names_index_closest_recording_and_changed_header_parts(tmp_path: Path) -> None:
    changed = chat_body(temperature=0.2)
    changed["messages"][0]["content"] = "You are terse.\nAnswer in French."
    changed["tools"].append({"type": "function", "function": {"name": "grep"}})
    error = _mismatch(tmp_path, [chat_body()], [changed])
    assert (error.index, error.closest_index) == (0, 0)
    assert error.request == f"POST {URL}" and error.closest == f"POST {URL}"
    assert error.diff == (
        "temperature: only in request (0.2)",
        "system line 2 differs: recorded: 'Answer in English.', request: 'Answer in French.'",
        "tool 'grep' only in request",
    )
    text = str(error)
    assert "has no recording for request #1: POST" in text
    assert "Closest recording: interaction #1," in text
    assert "re-record the cassette from scratch (pytest --dsh-record-mode=rewrite)" in text
    assert error.path == str(tmp_path / "c.yaml")


def test_a_timestamp_appended_to_a_long_system_line_shows_in_the_mismatch(tmp_path: Path) -> None:
    """A real cassette replay: the differing end of a 200-character line is visible."""
    line = ("Answer briefly and cite the file you read. " * 5)[:200]
    stamp = " 2026-12-02T17:00:01Z"
    recorded, live = chat_body(), chat_body()
    recorded["messages"][0]["content"] = line
    live["messages"][0]["content"] = line + stamp
    error = _mismatch(tmp_path, [recorded], [live])
    assert error.diff == (
        "system line 1 differs at column 201: "
        f"recorded: …{line[-32:]!r} (the text ends here), request: …{line[-32:] + stamp!r}",
    )
    assert stamp in str(error)


def test_mismatch_names_the_message_index_and_field(tmp_path: Path) -> None:
    first = chat_body()
    second = chat_body()
    second["messages"] = [
        *first["messages"],
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "bye"},
    ]
    live_second = json.loads(json.dumps(second))
    live_second["messages"][2]["content"] = "Hello."
    error = _mismatch(tmp_path, [first, second], [first, live_second])
    assert error.index == 1
    assert error.closest_index == 1
    # The index is the YAML body's: its system message is messages[0], so the changed
    # assistant message is messages[2] there (not messages[1], counted after the system).
    assert error.diff == ("messages[2].content differs: recorded: 'Hi.', request: 'Hello.'",)
    stored = yaml.safe_load((tmp_path / "c.yaml").read_text(encoding="utf-8"))
    assert json.loads(stored["interactions"][1]["request"]["body"]["json"])["messages"][2] == {
        "role": "assistant",
        "content": "Hi.",
    }


def test_mismatch_message_indexes_without_a_system_message(tmp_path: Path) -> None:
    recorded = chat_body()
    recorded["messages"] = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "bye"},
    ]
    live = json.loads(json.dumps(recorded))
    live["messages"][1]["content"] = "Hello."
    error = _mismatch(tmp_path, [recorded], [live])
    assert error.diff == ("messages[1].content differs: recorded: 'Hi.', request: 'Hello.'",)


def test_mismatch_message_indexes_when_the_system_messages_differ_in_number(
    tmp_path: Path,
) -> None:
    recorded = chat_body()
    recorded["messages"] = [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi."},
    ]
    live = json.loads(json.dumps(recorded))
    live["messages"][0:2] = [{"role": "system", "content": "You are terse.\nAnswer in English."}]
    live["messages"][2]["content"] = "Hello."
    error = _mismatch(tmp_path, [recorded], [live])
    # The two system messages join to the same prompt; each side's own index is named.
    assert error.diff == (
        "messages[3].content differs: recorded: 'Hi.', request: 'Hello.' (in request: messages[2])",
    )
    assert (
        recorded["messages"][3]["content"] == "Hi." and live["messages"][2]["content"] == "Hello."
    )


def test_mismatch_counts_wire_messages_when_the_request_is_shorter_or_longer(
    tmp_path: Path,
) -> None:
    longer = chat_body()
    longer["messages"] = [*longer["messages"], {"role": "assistant", "content": "Hi."}]
    shorter_error = _mismatch(tmp_path, [longer], [chat_body()])
    assert shorter_error.diff == (
        "messages: recorded has 3, request has 2 "
        '(first missing: messages[2] {"role":"assistant","content":"Hi."})',
    )
    longer_error = _mismatch(tmp_path / "x", [chat_body()], [longer])
    assert longer_error.diff == (
        "messages: recorded has 2, request has 3 "
        '(first extra: messages[2] {"role":"assistant","content":"Hi."})',
    )


def test_mismatch_picks_the_closest_of_several_recordings(tmp_path: Path) -> None:
    a = chat_body(model="deepseek-v4-pro")
    b = chat_body()
    live = chat_body(temperature=1.0)
    error = _mismatch(tmp_path, [a, b], [live])
    assert error.closest_index == 1
    assert error.diff == ("temperature: only in request (1.0)",)


def test_mismatch_on_another_url_and_a_non_chat_body(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, json_handler({"ok": 1}), {"q": 1})
    with (
        pytest.raises(CassetteMismatch) as caught,
        use_cassette(path, assert_all_played=False),
        httpx.Client() as client,
    ):
        client.post(URL + "/x", json={"q": 2})
    assert caught.value.diff == (
        f"url differs: recorded: {URL}, request: {URL}/x",
        "body differs: recorded: '{\"q\":1}', request: '{\"q\":2}'",
    )


def test_mismatch_when_a_request_repeats_more_often_than_recorded(tmp_path: Path) -> None:
    error = _mismatch(tmp_path, [chat_body()], [chat_body(), chat_body()])
    assert error.index == 1 and error.closest_index == 0 and error.diff == ()
    assert "has no recording for request #2: POST" in str(error)
    assert "matches recorded interaction(s) #1, but each was already played" in str(error)


def test_mismatch_on_a_cassette_without_recordings(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("format: dsh-cassette\nversion: 1\ninteractions: []\n", encoding="utf-8")
    with (
        pytest.raises(CassetteMismatch, match="holds no recordings") as caught,
        use_cassette(path),
        httpx.Client() as client,
    ):
        client.get(URL)
    assert caught.value.closest is None and caught.value.closest_index is None


def test_a_mismatch_the_client_swallowed_is_raised_when_the_cassette_closes(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body())
    with (
        pytest.raises(CassetteMismatch, match="request #2") as caught,
        use_cassette(path),
        httpx.Client() as client,
    ):
        client.post(URL, json=chat_body()).read()
        with contextlib.suppress(Exception):
            client.post(URL, json=chat_body(model="other"))
    assert (caught.value.index, caught.value.closest_index) == (1, 0)
    assert caught.value.diff == ("model differs: recorded: 'deepseek-v4-flash', request: 'other'",)
    assert caught.value.path == str(path)


def test_a_mismatch_behind_another_exception_is_raised_from_it(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body())
    with (
        pytest.raises(CassetteMismatch) as caught,
        use_cassette(path),
        httpx.Client() as client,
    ):
        try:
            client.post(URL, json=chat_body(model="other"))
        except CassetteMismatch as exc:
            raise RuntimeError("wrapped by the SDK") from exc
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_errors_belong_to_the_testkit_tree_and_fail_as_assertions() -> None:
    assert issubclass(CassetteMismatch, TestkitError) and issubclass(
        CassetteMismatch, AssertionError
    )
    assert issubclass(CassetteNotFullyPlayed, AssertionError)
    assert issubclass(CassetteFormatError, TestkitError) and not issubclass(
        CassetteFormatError, AssertionError
    )


def test_each_request_body_is_made_canonical_once() -> None:
    from unittest import mock

    from vcr.request import Request

    from dsh_testkit.cassettes import _matching as cassettes

    real = cassettes._canonical_body
    seen: list[Any] = []

    def counted(body: Any) -> Any:
        seen.append(body)
        return real(body)

    stored = Request("POST", URL, b'{"b": [1, 2], "a": 1}', {})
    live = Request("POST", URL, b'{"a":1,"b":[1,2]}', {})
    with mock.patch.object(cassettes, "_canonical_body", counted):
        for _ in range(3):
            json_body_matcher(live, stored)
        assert len(seen) == 2
        live.body = b'{"a":2}'  # a new body is made canonical afresh
        with pytest.raises(AssertionError, match="body differs"):
            json_body_matcher(live, stored)
        assert len(seen) == 3


def test_a_body_mismatch_message_shows_where_the_bodies_part() -> None:
    from vcr.request import Request

    def body(stamp: str) -> bytes:
        return json.dumps(
            {"messages": [{"role": "user", "content": "x" * 100_000 + stamp}]}
        ).encode()

    with pytest.raises(AssertionError) as caught:
        json_body_matcher(Request("POST", URL, body("1"), {}), Request("POST", URL, b"{}", {}))
    assert str(caught.value) == (
        "body differs at line 1, column 2: "
        'request: \'{"messages":[{"content":"xxxxxxxx\'…, recorded: \'{}\''
    )
    # Two long bodies that differ only at their end: the differing characters show.
    with pytest.raises(AssertionError) as caught:
        json_body_matcher(Request("POST", URL, body("1"), {}), Request("POST", URL, body("2"), {}))
    assert str(caught.value).startswith("body differs at line 1, column ")
    assert "…'" + "x" * 32 + '1","role":"user"}]}\'' in str(caught.value)
    assert "x" * 32 + "2" in str(caught.value)


# ------------------------------------------------------------------------------- played


def test_a_partly_played_cassette_fails(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body(), chat_body(model="deepseek-v4-pro"))
    with (
        pytest.raises(CassetteNotFullyPlayed) as caught,
        use_cassette(path),
        httpx.Client() as client,
    ):
        client.post(URL, json=chat_body()).read()
    assert caught.value.unplayed == (1,)
    text = str(caught.value)
    assert "only partly played: 1 of 2 recordings never requested" in text
    assert f"interaction #2: POST {URL}" in text
    assert "made 1 request(s)" in text


def test_assert_all_played_can_be_left_to_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body(), chat_body(model="x"))
    with use_cassette(path, assert_all_played=False) as cassette:
        pass
    assert cassette.unplayed == (0, 1)
    with pytest.raises(CassetteNotFullyPlayed) as caught:
        cassette.assert_all_played()
    assert (caught.value.unplayed, caught.value.path) == ((0, 1), str(path))
    assert "2 of 2 recordings never requested" in str(caught.value)


def test_a_long_unplayed_list_is_shortened(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), *[chat_body(model=f"m{i}") for i in range(7)])
    with pytest.raises(CassetteNotFullyPlayed, match=r"… and 2 more"), use_cassette(path):
        pass


# ------------------------------------------------------------------------------- modes


def test_mode_none_refuses_a_missing_cassette_at_once(tmp_path: Path) -> None:
    with (
        pytest.raises(
            CassetteNotFound, match="does not exist and mode 'none' replays only"
        ) as caught,
        use_cassette(tmp_path / "absent.yaml"),
    ):
        pytest.fail("the block must not run")
    assert caught.value.path == str(tmp_path / "absent.yaml")


def test_mode_none_blocks_the_network_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, sse_handler(), chat_body())
    before = path.read_bytes()
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200)

    with (
        pytest.raises(CassetteMismatch),
        use_cassette(path),
        httpx.Client(transport=httpx.MockTransport(handler)) as client,
    ):
        client.post(URL, json=chat_body()).read()
        client.post(URL, json=chat_body(model="new"))
    assert calls == []
    assert path.read_bytes() == before


@pytest.mark.parametrize("mode", ["new_episodes", "missing"])
def test_mode_new_episodes_records_only_what_has_no_recording(tmp_path: Path, mode: Any) -> None:
    path = tmp_path / "c.yaml"
    record(path, json_handler({"n": "old"}), chat_body())
    with (
        use_cassette(path, mode=mode) as cassette,
        httpx.Client(transport=httpx.MockTransport(json_handler({"n": "new"}))) as client,
    ):
        assert cassette.mode == "new_episodes" and cassette.recording
        assert client.post(URL, json=chat_body()).json() == {"n": "old"}
        assert client.post(URL, json=chat_body(model="x")).json() == {"n": "new"}
    assert cassette.recorded == 2
    with use_cassette(path), httpx.Client() as client:
        assert client.post(URL, json=chat_body()).json() == {"n": "old"}
        assert client.post(URL, json=chat_body(model="x")).json() == {"n": "new"}


def test_mode_rewrite_rerecords_everything_and_drops_old_recordings(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, json_handler({"n": "old"}), chat_body(), chat_body(model="gone"))
    record(path, json_handler({"n": "new"}), chat_body())
    with use_cassette(path) as cassette, httpx.Client() as client:
        assert client.post(URL, json=chat_body()).json() == {"n": "new"}
    assert cassette.recorded == 1


def test_mode_all_never_replays_and_keeps_old_recordings_it_did_not_redo(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, json_handler({"n": "old"}), chat_body(), chat_body(model="kept"))
    with (
        use_cassette(path, mode="all") as cassette,
        httpx.Client(transport=httpx.MockTransport(json_handler({"n": "new"}))) as client,
    ):
        assert client.post(URL, json=chat_body()).json() == {"n": "new"}  # not replayed
    assert cassette.recorded == 3
    stored = yaml.safe_load(path.read_text("utf-8"))["interactions"]
    assert [
        (
            json.loads(i["request"]["body"]["json"])["model"],
            json.loads(i["response"]["body"]["json"])["n"],
        )
        for i in stored
    ] == [
        ("kept", "old"),
        ("deepseek-v4-flash", "new"),
    ]


def test_mode_once_records_a_new_cassette_and_then_only_replays(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with (
        use_cassette(path, mode="once") as cassette,
        httpx.Client(transport=httpx.MockTransport(json_handler({"n": 1}))) as client,
    ):
        assert cassette.recording
        assert client.post(URL, json=chat_body()).json() == {"n": 1}
    with (
        pytest.raises(CassetteMismatch, match="--dsh-record-mode=new_episodes"),
        use_cassette(path, mode="once") as cassette,
        httpx.Client(transport=httpx.MockTransport(json_handler({"n": 2}))) as client,
    ):
        assert not cassette.recording
        assert client.post(URL, json=chat_body()).json() == {"n": 1}
        client.post(URL, json=chat_body(model="other"))
    assert len(yaml.safe_load(path.read_text("utf-8"))["interactions"]) == 1


def test_recording_stops_on_an_exception(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with (
        pytest.raises(RuntimeError, match="boom"),
        use_cassette(path, mode="rewrite"),
        httpx.Client(transport=httpx.MockTransport(sse_handler())) as client,
    ):
        client.post(URL, json=chat_body()).read()
        raise RuntimeError("boom")
    assert not path.exists()


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    bad_mode: Any = "sometimes"
    with (
        pytest.raises(
            ValueError, match="record mode must be one of none, once, new_episodes, all, rewrite"
        ),
        use_cassette(tmp_path / "c.yaml", mode=bad_mode),
    ):
        pass


# ------------------------------------------------------------------------------- format errors


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("format: other\n", "not a dsh cassette"),
        ("- [unclosed\n", "not valid YAML"),
        (
            "format: dsh-cassette\nversion: 3\ninteractions: []\n",
            "format version 3; this dsh-testkit reads versions 1, 2",
        ),
        ("format: dsh-cassette\nversion: 1\ninteractions: {}\n", "'interactions' must be a list"),
        (
            "format: dsh-cassette\nversion: 1\ninteractions:\n- request: {}\n",
            r"interactions\[0\]: malformed interaction \(KeyError",
        ),
        (
            "format: dsh-cassette\nversion: 1\ninteractions:\n- request: {method: GET, uri: u, body: {xml: x}}\n  response: {status: {code: 200}}\n",
            r"interactions\[0\].request.body: a body must be one of",
        ),
        (
            "format: dsh-cassette\nversion: 1\ninteractions:\n- request: {method: GET, uri: u}\n  response: {status: {code: 200}, body: {sse: [{data: 1}]}}\n",
            r"interactions\[0\].response.body.sse\[0\]: an SSE event must be one of",
        ),
    ],
)
def test_unreadable_cassettes_fail_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CassetteFormatError, match=message) as caught, use_cassette(path):
        pass
    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)


def test_a_cassette_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(CassetteFormatError, match="is not UTF-8 text"), use_cassette(path):
        pass


def test_serializer_round_trips_every_body_kind() -> None:
    data = {
        "interactions": [
            {
                "request": {
                    "method": "POST",
                    "uri": URL,
                    "body": '{"a":[1,{"b":null}]}',
                    "headers": {"Accept": ["*/*"]},
                },
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"Content-Type": ["text/event-stream"], "X-Multi": ["1", "2"]},
                    "body": {"string": 'data: {"x":1}\n\n: c\n\ndata: [DONE]\n\n'},
                },
            },
            {
                "request": {"method": "GET", "uri": URL, "body": None, "headers": {}},
                "response": {
                    "status": {"code": 204, "message": ""},
                    "headers": {},
                    "body": {"string": b""},
                },
            },
        ]
    }
    text = CassetteSerializer.serialize(data)
    assert "x-multi:\n      - '1'\n      - '2'" in text
    back = CassetteSerializer.deserialize(text)
    first = back["interactions"][0]
    assert json.loads(first["request"]["body"]) == {"a": [1, {"b": None}]}
    assert response_chunks(first["response"]) == [
        b'data: {"x":1}\n\n',
        b": c\n\n",
        b"data: [DONE]\n\n",
    ]
    assert first["response"]["headers"]["x-multi"] == ["1", "2"]
    assert back["interactions"][1]["request"]["body"] is None
    assert re.search(r"status: \{code: 204, message: ''\}", text)


def test_response_chunks_of_interactions_recorded_in_this_session() -> None:
    from dsh_testkit.cassettes._format import response_chunks

    sse = {
        "headers": {"Content-Type": ["text/event-stream"]},
        "body": {"string": b"data: 1\n\ndata: 2\n\n"},
    }
    assert response_chunks(sse) == [b"data: 1\n\n", b"data: 2\n\n"]
    assert response_chunks({**sse, "body": {"string": "data: 1\n\n"}}) == [b"data: 1\n\n"]
    assert response_chunks({**sse, "body": {"string": b"\xff\xfe"}}) == [b"\xff\xfe"]
    assert response_chunks({**sse, "body": {"string": b""}}) == []
    assert response_chunks({"headers": {}, "body": {"string": b"{}", "chunks": ["a", b"b"]}}) == [
        b"a",
        b"b",
    ]


def test_mismatch_names_a_changed_method(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, json_handler({}), {"q": 1})
    with (
        pytest.raises(CassetteMismatch) as caught,
        use_cassette(path, assert_all_played=False),
        httpx.Client() as client,
    ):
        client.put(URL, json={"q": 1})
    assert caught.value.diff == ("method differs: recorded: POST, request: PUT",)


_any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_any_json)
def test_json_bodies_survive_the_cassette(value: Any) -> None:
    body = json.dumps(value, ensure_ascii=False)
    data = {
        "interactions": [
            {
                "request": {"method": "POST", "uri": URL, "body": body, "headers": {}},
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"content-type": ["application/json"]},
                    "body": {"string": body},
                },
            }
        ]
    }
    back = CassetteSerializer.deserialize(CassetteSerializer.serialize(data))["interactions"][0]
    assert json.loads(back["request"]["body"]) == value
    assert json.loads(back["response"]["body"]["string"]) == value


# ------------------------------------------------------------------ format 2, checksums

V1 = """format: dsh-cassette
version: 1
interactions:
- request:
    method: POST
    uri: https://api.deepseek.com/chat/completions
    headers:
      content-type: application/json
    body:
      json:
        model: m
        messages:
        - role: user
          content: hi
  response:
    status: {code: 200, message: OK}
    headers:
      content-type: text/event-stream
    body:
      sse:
      - data: {choices: [{delta: {content: Hel}}]}
      - comment: keep-alive
      - dataText: '[DONE]'
"""


def test_a_format_1_cassette_still_replays_one_event_per_chunk(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(V1, encoding="utf-8")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with use_cassette(path) as cassette, httpx.Client() as client:
        with client.stream("POST", URL, json=body) as response:
            chunks = list(response.iter_raw())
        assert cassette.play_count == 1
    assert chunks == [
        b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n',
        b": keep-alive\n\n",
        b"data: [DONE]\n\n",
    ]


def test_a_file_as_written_is_trusted_and_an_edited_one_is_scrubbed_again(tmp_path: Path) -> None:
    from dsh_testkit.cassettes._format import CassettePersister

    path = tmp_path / "c.yaml"
    record(path, json_handler({"ok": 1}), chat_body())
    text = path.read_text(encoding="utf-8")
    assert re.search(r"^  scrubChecksum: crc32:[0-9a-f]{8}$", text, re.MULTILINE)

    def verified(content: str, fingerprint: str) -> bool:
        path.write_text(content, encoding="utf-8")
        persister = CassettePersister(fingerprint=fingerprint)
        persister.load_cassette(path, CassetteSerializer)
        return persister.verified

    from dsh_testkit.scrub._scrubber import Scrubber

    fingerprint = Scrubber().fingerprint
    assert verified(text, fingerprint)
    assert not verified(text.replace('"ok": 1', '"ok": 2'), fingerprint)  # edited by hand
    other_rules = Scrubber(ScrubRules(headers=frozenset({"x-new"}))).fingerprint
    assert not verified(text, other_rules)  # written under other rules: scrub it again
    # a rule added after recording applies to what was recorded before it
    path.write_text(text.replace("content-type: application/json", "x-new: s3cret"), "utf-8")
    with use_cassette(path, scrub=ScrubRules(headers=frozenset({"x-new"}))) as cassette:
        ((request, _),) = cassette.vcr_cassette.data
        assert request.headers["x-new"] == REDACTED
        with httpx.Client() as client:
            client.post(URL, json=chat_body())


def test_a_request_sent_with_other_json_spacing_or_key_order_still_matches(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.yaml"
    record(path, json_handler({"n": 1}), chat_body(), chat_body(model="two"))
    with use_cassette(path) as cassette, httpx.Client() as client:
        spaced = json.dumps(chat_body(model="two"), indent=1).encode()
        reordered = json.dumps(dict(reversed(list(chat_body().items())))).encode()
        assert client.post(URL, content=spaced).json() == {"n": 1}
        assert client.post(URL, content=reordered).json() == {"n": 1}
        assert cassette.play_count == 2


def test_a_request_with_a_key_matches_its_scrubbed_recording(tmp_path: Path) -> None:
    body = chat_body(messages=[{"role": "user", "content": f"use {KEY}"}])
    path = tmp_path / "c.yaml"
    record(path, json_handler({"n": 1}), body)
    assert KEY not in path.read_text(encoding="utf-8")
    with use_cassette(path) as cassette, httpx.Client() as client:
        assert client.post(URL, json=body).json() == {"n": 1}  # scrubbed, then matched
        assert cassette.play_count == 1
