"""One credential rule, every spelling, every output (issue 35): a property over real traffic.

For any credential a request presents (``Authorization: Bearer T``, ``x-api-key: T``,
``api-key: T``, a Basic credential whose password is T), written back into the request in any
spelling (``_readback.SPELLINGS``: raw, JSON ``\\u`` escapes in whole or in part, escapes one
JSON level down, ``\\x``, ``\\/``, percent-encoding once or twice, base64 in either alphabet at
each alignment inside a longer base64 text, padded or not, a Basic credential, hex in either
case and at an odd offset, HTML references) at any place (system prompt, user message, tool-call
arguments, tool result, URL query), with a streamed or a whole answer (the mock's answer repeats
the last user message, so the answer carries it too), **no output lets T be read back**:

  mock      GET /_dsh/requests, /_dsh/report, /_dsh/report?format=json, /_dsh/explorer
  proxy     the trace file, GET /_dsh/report (text, JSON), /_dsh/explorer
  cassette  the file recorded of the same requests
  capture   the file RequestCapture.save writes, and its report
  readers   load_trace of the cassette, of the capture file and of a HAR file holding the raw
            request (its Authorization header included), as JSON
  commands  dsh-testkit cache-report of the trace: text, --json and --html (stdout through the
            CLI's output guard)

judged by ``_readback.reads_back``, which shares no code with the scrubber. Each example sends a
pair of requests (the second edits the system prompt after the token and resends the answer) so
the cache doctor quotes the changed prompt in its reports. Real HTTP on loopback throughout.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import string
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from dsh_testkit.capture import RequestCapture
from dsh_testkit.cassettes import use_cassette
from dsh_testkit.cli import main as cli_main
from dsh_testkit.explorer import live_pages
from dsh_testkit.mock import MockServer
from dsh_testkit.proxy import ProxyServer
from dsh_testkit.traces import load_trace
from tests.testkit.scrub._readback import SPELLINGS, Spelling, reads_back

TLS = httpx.create_ssl_context()
"""The clients' TLS context, built once: httpx builds one per client and transport otherwise
(loading the CA bundle, a fifth of an example's time), though every URL here is plain-HTTP
loopback."""

pytestmark = pytest.mark.slow

PLACES = ("system", "user", "tool-arguments", "tool-result", "query")
HEADERS = ("bearer", "x-api-key", "api-key", "basic")
OTHER_BEARER = "Bearer other-credential-00"
"""What the requests that carry T in another header authenticate with (the mock needs a
bearer): a credential too, so it is scrubbed as well, which is not what is judged."""

tokens = st.text(
    alphabet=string.ascii_letters + string.digits + "-_./+=", min_size=12, max_size=40
).filter(
    # Shaped like a credential: mixed case and digits. Hypothesis also draws the code's own
    # string constants, and a word the outputs hold by design ("authorization", a header's
    # name; "deepseek-v4-flash", the model) reads back without any credential in it.
    lambda t: (
        len(set(t)) >= 6
        and sum(c.isdigit() for c in t) >= 2
        and any(c.isupper() for c in t)
        and any(c.islower() for c in t)
    )
)


@pytest.fixture(scope="module")
def mock_server() -> Iterator[MockServer]:
    with MockServer(pages=live_pages) as server:
        yield server


def _credential_headers(token: str, how: str) -> dict[str, str]:
    if how == "bearer":
        return {"authorization": f"Bearer {token}"}
    if how == "basic":
        return {"authorization": "Basic " + base64.b64encode(f"me:{token}".encode()).decode()}
    return {how: token, "authorization": OTHER_BEARER}


def _body(spelled: str, kind: str, place: str, day: str, answer: str | None, stream: bool) -> bytes:
    """A chat body holding ``spelled`` at ``place``: written as is inside the JSON string for a
    ``json`` spelling (the parser undoes it), else as JSON writes the string (one JSON level
    further down inside tool-call arguments)."""
    slot = "\x00SLOT\x00"
    rules = "rule " * 200
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"You are careful. Today is {day}. {rules}"}
    ]
    if place == "system":
        messages[0]["content"] = f"keep: {slot} Today is {day}. {rules}"
    if place == "user":
        messages.append({"role": "user", "content": f"keep: {slot}"})
    elif place in ("tool-arguments", "tool-result"):
        arguments = json.dumps({"text": f"keep: {slot}"}) if place == "tool-arguments" else "{}"
        messages += [
            {"role": "user", "content": "call the tool"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "note", "arguments": arguments},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_0",
                "content": f"keep: {slot}" if place == "tool-result" else "ok",
            },
        ]
    else:
        messages.append({"role": "user", "content": "hi"})
    if answer is not None:
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "more"}]
    tools = [{"type": "function", "function": {"name": "note", "parameters": {"type": "object"}}}]
    text = json.dumps(
        {"model": "deepseek-chat", "stream": stream, "messages": messages, "tools": tools}
    )
    if place == "query":
        return text.encode()
    as_written = json.dumps(slot)[1:-1]
    if place == "tool-arguments":
        as_written = json.dumps(as_written)[1:-1]
        value = spelled if kind == "json" else json.dumps(spelled)[1:-1]
        return text.replace(as_written, json.dumps(value)[1:-1]).encode()
    return text.replace(
        as_written, spelled if kind == "json" else json.dumps(spelled)[1:-1]
    ).encode()


def _answer_of(response: httpx.Response, stream: bool) -> str | None:
    if response.status_code != 200:
        return None
    if not stream:
        return str(response.json()["choices"][0]["message"]["content"])
    parts = []
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            delta = json.loads(line[6:])["choices"][0]["delta"]
            parts.append(delta.get("content") or "")
    return "".join(parts)


def _exchange(
    client: httpx.Client, headers: dict[str, str], spelled: str, kind: str, place: str, stream: bool
) -> list[tuple[str, str, dict[str, str], bytes]]:
    """The pair of requests; returns what was sent (for the HAR file)."""
    sent = []
    answer = None
    query = f"?note={spelled}" if place == "query" else ""
    for day in ("Monday", "Tuesday"):
        content = _body(spelled, kind, place, day, answer, stream)
        all_headers = {**headers, "content-type": "application/json", "x-dsh-conversation": "p"}
        response = client.post("/chat/completions" + query, content=content, headers=all_headers)
        sent.append(("POST", str(response.request.url), all_headers, content))
        answer = _answer_of(response, stream)
        if answer is None:
            break
    return sent


def _har(sent: list[tuple[str, str, dict[str, str], bytes]], path: Path) -> None:
    entries = [
        {
            "startedDateTime": f"2026-12-01T10:00:0{i}Z",
            "time": 1,
            "request": {
                "method": method,
                "url": url,
                "httpVersion": "HTTP/1.1",
                "headers": [{"name": k, "value": v} for k, v in headers.items()],
                "postData": {"mimeType": "application/json", "text": body.decode()},
            },
            "response": {
                "status": 200,
                "headers": [],
                "content": {"mimeType": "application/json", "text": "{}"},
            },
        }
        for i, (method, url, headers, body) in enumerate(sent)
    ]
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}), encoding="utf-8")


def _command(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli_main(list(argv))
    return out.getvalue()


def _text(data: str | bytes) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _trace_json(path: Path) -> str:
    return json.dumps([e.to_json() for e in load_trace(path).exchanges])


def outputs_of(
    mock: MockServer, token: str, how: str, spelling: Spelling, place: str, stream: bool
) -> dict[str, str | bytes]:
    """Every output the kit makes of the example's traffic."""
    _, kind, build = spelling
    spelled = build(token)
    headers = _credential_headers(token, how)
    out: dict[str, str | bytes] = {}
    httpx.post(mock.base_url + "/_dsh/reset", json={}, verify=TLS)
    with tempfile.TemporaryDirectory(prefix="dsh-credential-") as scratch:
        folder = Path(scratch)
        trace, cassette = folder / "trace.jsonl", folder / "c.yaml"
        captured, har = folder / "capture.jsonl", folder / "raw.har"
        with ProxyServer(mock.base_url, out=str(trace), pages=live_pages) as proxy:
            with httpx.Client(base_url=proxy.base_url, timeout=60, verify=TLS) as client:
                sent = _exchange(client, headers, spelled, kind, place, stream)
            with httpx.Client(timeout=60, verify=TLS) as client:
                for name, base in (("mock", mock.base_url), ("proxy", proxy.base_url)):
                    for page in ("/_dsh/report", "/_dsh/report?format=json", "/_dsh/explorer"):
                        out[f"{name} GET {page}"] = client.get(base + page).text
                out["mock GET /_dsh/requests"] = client.get(mock.base_url + "/_dsh/requests").text
        out["proxy trace file"] = trace.read_bytes()
        with (
            use_cassette(cassette, mode="all"),
            httpx.Client(base_url=mock.base_url, timeout=60, verify=TLS) as client,
        ):
            _exchange(client, headers, spelled, kind, place, stream)
        out["cassette file"] = cassette.read_bytes()
        out["cassette read as a trace"] = _trace_json(cassette)
        capture = RequestCapture()
        with httpx.Client(
            base_url=mock.base_url,
            timeout=60,
            transport=capture.transport(httpx.HTTPTransport(verify=TLS)),
        ) as client:
            _exchange(client, headers, spelled, kind, place, stream)
        capture.save(captured)
        out["capture file"] = captured.read_bytes()
        out["capture read as a trace"] = _trace_json(captured)
        out["capture's report"] = json.dumps([e.to_json() for e in capture.to_trace().exchanges])
        _har(sent, har)
        out["HAR read as a trace"] = _trace_json(har)
        out["cache-report"] = _command("cache-report", str(trace))
        out["cache-report --json"] = _command("cache-report", str(trace), "--json")
        explorer = folder / "explorer.html"
        out["cache-report --html (stdout)"] = _command(
            "cache-report", str(trace), "--html", str(explorer)
        )
        if explorer.exists():  # (not written when no request was answered: a refused Basic)
            out["cache-report --html (page)"] = explorer.read_text(encoding="utf-8")
    return out


def check(
    mock: MockServer, token: str, how: str, spelling: Spelling, place: str, stream: bool
) -> None:
    outputs = outputs_of(mock, token, how, spelling, place, stream)
    if place != "query":  # what is around the token is there: scrubbed, not lost
        kept = [label for label, data in outputs.items() if "keep:" in _text(data)]
        assert {"mock GET /_dsh/requests", "proxy trace file", "cassette file"} <= set(kept)
    found = {
        label: how_read
        for label, data in outputs.items()
        if (how_read := reads_back(token, data)) is not None
    }
    assert not found, f"{spelling[0]} at {place} ({how}): the token reads back from " + "; ".join(
        f"{label} ({how_read})" for label, how_read in found.items()
    )


@settings(
    max_examples=20,
    deadline=None,
    # shrinking across servers takes minutes; the spelling, place and header say enough
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    token=tokens,
    how=st.sampled_from(HEADERS),
    spelling=st.sampled_from(SPELLINGS),
    place=st.sampled_from(PLACES),
    stream=st.booleans(),
)
def test_no_output_lets_the_credential_be_read_back(
    mock_server: MockServer, token: str, how: str, spelling: Spelling, place: str, stream: bool
) -> None:
    note(f"{spelling[0]} at {place}, {how}, stream={stream}: {spelling[2](token)[:80]}")
    check(mock_server, token, how, spelling, place, stream)


@pytest.mark.parametrize("spelling", SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_every_spelling_in_a_user_message(mock_server: MockServer, spelling: Spelling) -> None:
    """The table over every spelling, one fixed token with ``/`` and ``=`` in it, at the place
    whose answer repeats it (a streamed answer): a readable ``-rf`` list should one leak."""
    check(mock_server, "dshTok/9f3Kq2=Lm8Rz4Wx7Vb1", "bearer", spelling, "user", True)


_EXCERPTS = [
    "mock GET /_dsh/report",
    "proxy GET /_dsh/report",
    "cache-report",
    "cache-report --html (stdout)",
]
"""The text reports: they quote a short excerpt around what changed, which need not reach the
token (the JSON report, the Explorer and the HTML page quote the whole changed text)."""


def test_the_judge_reads_back_a_secret_no_rule_names(mock_server: MockServer) -> None:
    """The control: a token the requests do not present as a credential (and not key-shaped) is
    kept, so the judge must read it back from every output that shows the prompt (all but the
    text reports' excerpts), in the plain and the encoded spellings alike: else the property
    above would pass for want of seeing."""
    token = "dshTok/9f3Kq2=Lm8Rz4Wx7Vb1"
    for name in ("raw", "base64-standard-1", "text-u-all", "hex-upper"):
        spelling = next(s for s in SPELLINGS if s[0] == name)
        outputs = outputs_of(mock_server, token, "x-note", spelling, "system", True)
        unread = [label for label, data in outputs.items() if reads_back(token, data) is None]
        assert unread == _EXCERPTS, f"{name}: the judge did not read the token back from {unread}"
