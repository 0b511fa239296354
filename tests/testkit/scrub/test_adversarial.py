"""The secrets part of the adversarial suite: plant a secret in every place, record, scan.

Each case sends one real HTTP request over loopback (the server answers what the case plants
in the response), records it through a real cassette with a user's scrub rules on top of the
built-in ones, then scans every byte of the written file: raw, and decoded (YAML escapes,
base64, gzip, Latin-1/UTF-16 text, percent-encoding, and the concatenated text of each field of
a stream, as a client reassembles it). The cassette must then replay the same request.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus

import httpx
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.cassettes import use_cassette
from dsh_testkit.scrub import REDACTED, ScrubRuleError, ScrubRules, UnscrubbableBody

KEY = "sk-" + "Qw7Er8Ty9Ui0Op1As2Df3Gh4"
"""A key-shaped secret (found by its shape)."""
OPAQUE = "opaque9f8e7d6c5b4a3210"
"""A secret with no shape: only the name it is sent under gives it away."""
GLUED = "sk-FAKE" + "9a8b7c6d5e4f3a2b1c0d" + "9e8f7a6b5c4d"
"""A DeepSeek-shaped key (sk- and 32 letters and digits), sent glued to a word."""
NUMBER = 918273645546372819
"""A credential sent as a JSON number."""
TEAM = "TEAM-482913"
"""What the user's own regular expression finds."""

RULES = ScrubRules(
    headers=frozenset({"x-org-passphrase"}),
    query=frozenset({"tenant_sig"}),
    json_keys=frozenset({"org_pin"}),
    json_paths=("metadata.team",),
    patterns=(r"TEAM-\d{6}",),
)
"""The user's rules (what ``[tool.dsh_testkit.scrub]`` would hold)."""

SECRETS = (KEY, GLUED, OPAQUE, str(NUMBER), TEAM)


def _sse(*payloads: Any) -> bytes:
    out = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.append(f"data: {data}\n\n")
    return ("".join(out) + "data: [DONE]\n\n").encode()


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _delta(**delta: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta}],
    }


def _split_stream(make: Callable[[str], dict[str, Any] | str]) -> bytes:
    return _sse(*(make(piece) for piece in _pieces(f"the key is {KEY} ok")))


@dataclass(frozen=True, kw_only=True)
class Case:
    """One planting place: what the request carries and what the response answers."""

    name: str
    path: str = "/chat/completions"
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"model":"deepseek-v4-flash"}'
    status: int = 200
    response_headers: dict[str, str] = field(
        default_factory=lambda: {"content-type": "application/json"}
    )
    response_body: bytes = b'{"ok":true}'


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


CASES = [
    # ---------------------------------------------------------------- request headers
    Case(name="authorization-bearer", headers={"authorization": f"Bearer {KEY}"}),
    Case(name="authorization-token-scheme", headers={"authorization": f"Token {OPAQUE}"}),
    Case(
        name="authorization-basic",
        headers={"authorization": "Basic " + base64.b64encode(f"u:{OPAQUE}".encode()).decode()},
    ),
    Case(name="authorization-no-scheme", headers={"authorization": OPAQUE}),
    Case(name="x-api-key", headers={"x-api-key": OPAQUE}),
    Case(name="api-key", headers={"api-key": OPAQUE}),
    Case(name="proxy-authorization", headers={"proxy-authorization": f"Basic {OPAQUE}"}),
    Case(name="cookie", headers={"cookie": f"session={OPAQUE}"}),
    Case(name="x-team-token", headers={"x-team-token": OPAQUE}),
    Case(name="x-goog-api-key", headers={"x-goog-api-key": OPAQUE}),
    Case(name="key-shaped-in-any-header", headers={"x-note": f"forwarded {KEY}"}),
    Case(name="key-glued-to-a-word-in-a-header", headers={"x-trace": f"a{GLUED}b"}),
    Case(name="user-rule-header", headers={"x-org-passphrase": OPAQUE}),
    # ------------------------------------------------------------------------- URLs
    Case(name="query-api_key", query=f"api_key={OPAQUE}"),
    Case(name="query-key", query=f"key={OPAQUE}"),
    Case(name="query-access_token", query=f"access_token={OPAQUE}"),
    Case(name="query-x-auth-token", query=f"x-auth-token={OPAQUE}"),
    Case(name="user-rule-query", query=f"tenant_sig={OPAQUE}"),
    Case(name="key-shaped-in-any-query", query=f"q={KEY}"),
    Case(name="key-in-path", path=f"/v1/{KEY}/chat/completions"),
    # ------------------------------------------------------------------- JSON bodies
    Case(name="json-string", body=_json({"api_key": OPAQUE})),
    Case(name="json-number", body=_json({"api_key": NUMBER})),
    Case(name="json-list", body=_json({"api_key": [OPAQUE, NUMBER]})),
    Case(name="json-object", body=_json({"credentials": 1, "api_key": {"value": OPAQUE}})),
    Case(name="json-bool-and-nested", body=_json({"a": [{"b": {"Password": OPAQUE}}]})),
    Case(name="json-key-shaped-value", body=_json({"messages": [{"content": f"use {KEY}"}]})),
    Case(
        name="json-unicode-escaped",
        body=json.dumps({"content": KEY}).replace("sk-", "\\u0073\\u006b-").encode(),
    ),
    Case(name="json-key-shaped-name", body=_json({KEY: 1})),
    Case(
        name="json-key-glued-to-a-word", body=_json({"messages": [{"content": f"token:x{GLUED}"}]})
    ),
    Case(name="json-user-rule-key", body=_json({"x": {"org_pin": NUMBER}})),
    Case(name="json-user-rule-path", body=_json({"metadata": {"team": OPAQUE}})),
    Case(name="json-user-regex", body=_json({"messages": [{"content": f"ticket {TEAM}"}]})),
    # -------------------------------------------------------------- encoded bodies
    Case(
        name="form-body",
        headers={"content-type": "application/x-www-form-urlencoded"},
        body=f"api_key={OPAQUE}&password={OPAQUE}&q=1".encode(),
    ),
    Case(name="text-body", headers={"content-type": "text/plain"}, body=f"key {KEY}".encode()),
    Case(
        name="latin-1-body",
        headers={"content-type": "text/plain"},
        body=f"café {KEY}".encode("latin-1"),
    ),
    Case(
        name="latin-1-json-body-with-credential-name",
        headers={"content-type": "application/json; charset=latin-1"},
        body=json.dumps({"note": "café", "api_key": OPAQUE}, ensure_ascii=False).encode("latin-1"),
    ),
    Case(
        name="utf-16-body",
        headers={"content-type": "text/plain; charset=utf-16"},
        body=f"key {KEY}".encode("utf-16"),
    ),
    Case(
        name="gzip-request-body",
        headers={"content-type": "application/json", "content-encoding": "gzip"},
        body=gzip.compress(_json({"api_key": OPAQUE, "content": KEY}), mtime=0),
    ),
    Case(
        name="deflate-request-body",
        headers={"content-type": "application/json", "content-encoding": "deflate"},
        body=zlib.compress(_json({"password": OPAQUE, "content": KEY})),
    ),
    # ------------------------------------------------------------------- responses
    Case(name="set-cookie", response_headers={"set-cookie": f"session={OPAQUE}; HttpOnly"}),
    Case(name="response-session-token", response_headers={"x-session-token": OPAQUE}),
    Case(name="response-key-shaped-header", response_headers={"x-echo": KEY}),
    Case(name="response-location", response_headers={"location": f"/next?token={OPAQUE}"}),
    Case(name="response-json", response_body=_json({"echo": f"your key {KEY}"})),
    Case(name="response-json-key-glued", response_body=_json({"echo": f"id9{GLUED}"})),
    Case(name="response-json-number", response_body=_json({"data": {"api_key": NUMBER}})),
    Case(
        name="response-401-echo",
        status=401,
        response_body=_json({"error": {"message": f"bad header Bearer {KEY}"}}),
    ),
    Case(
        name="response-latin-1-text",
        response_headers={"content-type": "text/plain; charset=latin-1"},
        response_body=f"clé {KEY}".encode("latin-1"),
    ),
    Case(
        name="response-gzip",
        response_headers={"content-type": "application/json", "content-encoding": "gzip"},
        response_body=gzip.compress(_json({"api_key": OPAQUE, "echo": KEY}), mtime=0),
    ),
    Case(
        name="response-binary-with-key",
        response_headers={"content-type": "application/octet-stream"},
        response_body=b"\x00\xff\xfe" + KEY.encode() + b"\x80",
    ),
    # --------------------------------------------------------------------- streams
    Case(
        name="sse-whole-key",
        response_headers={"content-type": "text/event-stream"},
        response_body=_sse(_delta(content=f"key {KEY}")),
    ),
    Case(
        name="sse-content-5-chars-per-delta",
        response_headers={"content-type": "text/event-stream"},
        response_body=_split_stream(lambda piece: _delta(content=piece)),
    ),
    Case(
        name="sse-reasoning-5-chars-per-delta",
        response_headers={"content-type": "text/event-stream"},
        response_body=_split_stream(lambda piece: _delta(reasoning_content=piece)),
    ),
    Case(
        name="sse-tool-arguments-5-chars-per-delta",
        response_headers={"content-type": "text/event-stream"},
        response_body=_split_stream(
            lambda piece: _delta(
                tool_calls=[{"index": 0, "function": {"arguments": piece}}],
            )
        ),
    ),
    Case(
        name="sse-text-data-5-chars-per-event",
        response_headers={"content-type": "text/event-stream"},
        response_body=_split_stream(lambda piece: piece),
    ),
    Case(
        name="sse-user-regex-split",
        response_headers={"content-type": "text/event-stream"},
        response_body=_sse(*(_delta(content=p) for p in _pieces(f"ticket {TEAM}!", 3))),
    ),
    Case(
        name="sse-unicode-escaped",
        response_headers={"content-type": "text/event-stream"},
        response_body=_sse(
            json.dumps(_delta(content=KEY)).replace("sk-", "\\u0073\\u006b-"),
        ),
    ),
    Case(
        name="sse-credential-name",
        response_headers={"content-type": "text/event-stream"},
        response_body=_sse({"api_key": NUMBER, "choices": []}),
    ),
]


# ------------------------------------------------------------------------ the loopback


_BY_NAME = {c.name: c for c in CASES}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        case = _BY_NAME[self.headers["x-case"]]
        self.send_response(case.status)
        for name, value in case.response_headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(case.response_body)))
        self.end_headers()
        self.wfile.write(case.response_body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _send(client: httpx.Client, origin: str, case: Case) -> httpx.Response:
    url = f"{origin}{case.path}" + (f"?{case.query}" if case.query else "")
    response = client.post(
        url,
        content=case.body,
        headers={"content-type": "application/json", **case.headers, "x-case": case.name},
    )
    response.read()
    return response


# ---------------------------------------------------------------------------- the scan


_WIDE = ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
"""Charsets whose ASCII has zero bytes: a body in one of them, stored as bytes or text."""


def _one_level(value: str) -> list[str]:
    """What ``value`` decodes to in one step: percent-encoding, escapes, base64 (and gzip in
    it), wide charsets, and the strings of a JSON document."""
    forms = [unquote(value), unquote_plus(value)]
    if "\\" in value:  # JSON or YAML escapes kept verbatim (a raw SSE event, nested JSON)
        forms.append(value.encode("latin-1", "replace").decode("unicode_escape", "replace"))
    if "\x00" in value:
        raw = value.encode("latin-1", "replace")
        forms += [raw.decode(codec, "replace") for codec in _WIDE]
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        raw = b""
    if raw:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        forms += [raw.decode("latin-1"), raw.decode("utf-8", "replace")]
        if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
            forms.append(raw.decode("utf-16", "replace"))
        if b"\x00" in raw:
            forms += [raw.decode(codec, "replace") for codec in (*_WIDE, "utf-32")]
    if value.lstrip()[:1] in ("{", "[", '"'):
        with contextlib.suppress(ValueError):
            forms += list(_strings(json.loads(value)))
    return forms


def _decoded_forms(value: str) -> list[str]:
    """``value`` and what it decodes to, up to three steps deep (a key escaped inside a JSON
    string inside a JSON body, percent-encoded twice, base64 of gzip, …)."""
    forms = [value]
    seen = {value}
    frontier = [value]
    for _ in range(3):
        found = [f for v in frontier for f in _one_level(v) if f not in seen]
        seen.update(found)
        forms += found
        frontier = found
    return forms


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)


def _by_path(value: Any, path: tuple[Any, ...], out: dict[tuple[Any, ...], list[str]]) -> None:
    if isinstance(value, str):
        out.setdefault(path, []).append(value)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _by_path(item, (*path, i), out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _by_path(item, (*path, key), out)


def _reassembled(document: Any) -> list[str]:
    """Each stream's text per field, concatenated across events (what a client shows)."""
    texts: list[str] = []
    for interaction in document["interactions"]:
        body = interaction["response"].get("body") or {}
        events = body.get("sse")
        if not events:
            continue
        fields: dict[tuple[Any, ...], list[str]] = {}
        if isinstance(events, str):  # format 2: the stream as sent
            for block in events.split("\n\n"):
                for line in block.splitlines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].lstrip(" ")
                    try:
                        _by_path(json.loads(payload), (), fields)
                    except ValueError:
                        fields.setdefault(("dataText",), []).append(payload)
        else:  # format 1: a list of events
            for event in events:
                if "data" in event:
                    _by_path(event["data"], (), fields)
                for kind in ("dataText", "raw"):
                    if kind in event:
                        fields.setdefault((kind,), []).append(event[kind])
        texts += ["".join(parts) for parts in fields.values()]
    return texts


def leaks(path: Path) -> list[str]:
    """Every secret found in the file, raw or decoded, with where it was seen."""
    raw = path.read_bytes()
    found = [f"raw bytes: {s}" for s in SECRETS if s.encode() in raw]
    document = yaml.safe_load(raw.decode("utf-8"))
    for text in [*_strings(document), *_reassembled(document)]:
        for form in _decoded_forms(text):
            found += [f"decoded {text[:40]!r}: {s}" for s in SECRETS if s in form]
    return found


def test_the_scan_finds_every_secret_it_is_for(tmp_path: Path) -> None:
    planted = {
        "interactions": [
            {
                "request": {
                    "body": {"base64": base64.b64encode(gzip.compress(KEY.encode())).decode()}
                },
                "response": {
                    "body": {
                        "sse": [
                            {"data": {"c": OPAQUE[:5]}},
                            {"data": {"c": OPAQUE[5:]}},
                            {"dataText": f"{TEAM}"},
                        ]
                    },
                    "headers": {"x": f"a%20{NUMBER}", "y": f"a{GLUED}"},
                },
            }
        ]
    }
    path = tmp_path / "planted.yaml"
    path.write_text(yaml.safe_dump(planted), encoding="utf-8")
    found = " ".join(leaks(path))
    assert all(secret in found for secret in SECRETS)
    # format 2 keeps a stream as sent: pieces of a key in consecutive events are found too
    stream = _split_stream(lambda piece: _delta(content=piece)).decode()
    planted = {"interactions": [{"request": {}, "response": {"body": {"sse": stream}}}]}
    path.write_text(yaml.safe_dump(planted), encoding="utf-8")
    assert KEY not in path.read_text(encoding="utf-8")
    assert any(KEY in leak for leak in leaks(path))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_no_planted_secret_survives_in_any_cassette_byte(
    case: Case, origin: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{case.name}.yaml"
    with use_cassette(path, mode="rewrite", scrub=RULES), httpx.Client() as client:
        recorded = _send(client, origin, case)
    assert recorded.status_code == case.status
    assert leaks(path) == []
    with use_cassette(path, scrub=RULES) as cassette, httpx.Client() as client:
        replayed = _send(client, origin, case)
    assert cassette.play_count == 1
    assert replayed.status_code == case.status
    for secret in SECRETS:
        assert secret not in replayed.text
        assert all(secret not in value for value in replayed.headers.values())


def test_the_cases_cover_every_place_of_the_adversarial_run() -> None:
    # the run that found the leaks planted a key in 38 places; every one has a case here
    assert len(CASES) >= 38
    assert len({c.name for c in CASES}) == len(CASES)


# ----------------------------------------------------------------------- refused bodies


def test_a_body_in_an_encoding_that_cannot_be_decoded_is_refused(
    origin: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    case = Case(
        name="authorization-bearer",
        headers={"content-encoding": "br"},
        body=b"\x8b\x02\x80" + KEY.encode(),
    )
    with (
        pytest.raises(UnscrubbableBody, match="'br'") as caught,
        use_cassette(path, mode="rewrite"),
        httpx.Client() as client,
    ):
        _send(client, origin, case)
    assert caught.value.part == "request body"
    assert caught.value.reason == "content-encoding br"
    assert not path.exists()


def test_a_gzip_stream_without_its_header_is_refused_when_it_holds_a_secret(
    origin: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    leaked = Case(name="authorization-bearer", body=gzip.compress(f"k={KEY}".encode()))
    with (
        pytest.raises(UnscrubbableBody, match="gzip stream"),
        use_cassette(path, mode="rewrite"),
        httpx.Client() as client,
    ):
        _send(client, origin, leaked)
    assert not path.exists()
    clean = Case(name="authorization-bearer", body=gzip.compress(b"nothing secret", mtime=0))
    with use_cassette(path, mode="rewrite"), httpx.Client() as client:
        _send(client, origin, clean)
    assert path.exists() and leaks(path) == []


def test_a_refusal_a_client_swallows_is_raised_when_the_cassette_closes(
    origin: str, tmp_path: Path
) -> None:
    case = Case(name="authorization-bearer", headers={"content-encoding": "zstd"}, body=b"x")
    with (
        pytest.raises(UnscrubbableBody),
        use_cassette(tmp_path / "c.yaml", mode="rewrite"),
        httpx.Client() as client,
        contextlib.suppress(UnscrubbableBody),  # as an SDK's retry loop would swallow it
    ):
        _send(client, origin, case)


# -------------------------------------------------------------------------- user rules


def test_scrub_rules_from_a_configuration_table() -> None:
    rules = ScrubRules.from_mapping(
        {"headers": ["X-Team-Token"], "json_paths": ["a[*].b", "$.c[0]"], "patterns": ["T-\\d+"]}
    )
    assert rules.headers == {"x-team-token"}
    assert rules.json_paths == ("a[*].b", "$.c[0]")
    merged = rules.merged(ScrubRules(query=frozenset({"sig2"})))
    assert merged.query == {"sig2"} and merged.headers == {"x-team-token"}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"header": ["x"]}, "unknown key"),
        ({"headers": "x-team-token"}, "must be a list"),
        ({"patterns": ["("]}, "not a regular expression"),
        ({"patterns": ["x*"]}, "matches the empty string"),
        ({"patterns": ["RED"]}, "matches the empty string or '<REDACTED>'"),
        ({"json_paths": ["a..b"]}, "cannot read it"),
        ({"json_keys": [1]}, "non-empty names"),
    ],
)
def test_invalid_scrub_rules_are_refused_naming_the_rule(
    table: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScrubRuleError, match=message) as caught:
        ScrubRules.from_mapping(table, where="pyproject.toml [tool.dsh_testkit.scrub]")
    assert "pyproject.toml [tool.dsh_testkit.scrub]" in str(caught.value)
    assert caught.value.rule


# ------------------------------------------------------------------- stream properties

_stream_texts = st.lists(
    st.sampled_from([KEY, "Bearer " + "t0k" * 8, TEAM, "plain words ", "sk-", " ", "é"]),
    max_size=6,
).map(" ".join)


@given(_stream_texts, st.integers(min_value=1, max_value=9), st.booleans())
def test_a_stream_split_anywhere_loses_every_secret_and_scrubs_idempotently(
    text: str, size: int, as_text: bool
) -> None:
    from dsh_testkit.scrub._scrubber import Scrubber

    scrubber = Scrubber(RULES)
    pieces = _pieces(text, size)
    events = [f"data: {p if as_text else json.dumps(_delta(content=p))}\n\n" for p in pieces]
    once = scrubber.stream(events)
    assert scrubber.stream(once) == once
    if as_text:
        joined = "".join(event[len("data: ") : -2] for event in once)
    else:
        joined = "".join(
            json.loads(event[len("data: ") :])["choices"][0]["delta"]["content"] for event in once
        )
    assert scrubber.find(joined) == []
    assert all(secret not in joined for secret in SECRETS)
    if not scrubber.find(text):
        assert once == events  # a clean stream is left exactly as it was


def test_header_words_pick_credentials_and_keep_counters() -> None:
    from dsh_testkit.scrub._scrubber import Scrubber

    scrubber = Scrubber()
    assert scrubber.is_secret_header("X-Team-Token")
    assert scrubber.is_secret_header("x_session_token")
    assert not scrubber.is_secret_header("x-session-id")  # the cache-isolation header
    assert not scrubber.is_secret_header("x-ratelimit-remaining-tokens")
    assert not scrubber.is_secret_header("content-type")
    assert Scrubber(ScrubRules(headers=frozenset({"X-Org"}))).is_secret_header("x-org")


def test_a_split_key_in_a_hand_edited_cassette_is_never_served(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    events = [f"data: {json.dumps(_delta(content=p))}\n\n".encode() for p in _pieces(KEY)]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"".join(events)
        )

    with (
        use_cassette(path, mode="rewrite"),
        httpx.Client(transport=httpx.MockTransport(handler)) as client,
    ):
        client.post("https://api.deepseek.com/chat/completions", json={"a": 1}).read()
    assert leaks(path) == []
    # put the pieces back by hand, as an edited file would hold them
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["interactions"][0]["response"]["body"]["sse"] = b"".join(events).decode()
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    assert leaks(path) != []
    with use_cassette(path) as cassette, httpx.Client() as client:
        with client.stream(
            "POST", "https://api.deepseek.com/chat/completions", json={"a": 1}
        ) as response:
            served = b"".join(response.iter_raw()).decode()
        assert cassette.play_count == 1
    contents = "".join(
        json.loads(line[len("data: ") :])["choices"][0]["delta"]["content"]
        for line in served.split("\n\n")
        if line.startswith("data: {")
    )
    assert KEY not in contents and REDACTED in contents
