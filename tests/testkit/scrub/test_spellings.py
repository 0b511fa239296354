"""Secrets in other spellings, in cassettes and at the scrubber: escapes, percent-encoding,
byte order marks and charsets without one, and a request's own credentials repeated in it.

The cassette cases reuse the adversarial secrets suite's loopback server and scan
(``test_secrets_adversarial.py``): one real request recorded through a real cassette, every
written byte scanned raw and decoded.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.cassettes import use_cassette
from dsh_testkit.scrub._scrubber import (
    Scrubber,
    credentials_of,
    find_secrets,
    redact_known,
    scrub_text,
    scrub_url,
)
from dsh_testkit.scrub._spellings import KnownSecrets, decodings, encoded_runs
from tests.testkit.scrub.test_adversarial import (
    _BY_NAME,
    KEY,
    OPAQUE,
    RULES,
    Case,
    _send,
    leaks,
    origin,  # noqa: F401 - the loopback server fixture
)

PERCENT_KEY = KEY.replace("O", "%4F")
"""The key with one letter percent-encoded: its raw head is too short to look like a key."""


def _json(value: object, encoding: str = "utf-8") -> bytes:
    return json.dumps(value).encode(encoding)


CASES = [
    Case(
        name="utf-16-be-with-a-mark",
        headers={"content-type": "application/json"},
        body=b"\xfe\xff" + _json({"api_key": OPAQUE, "content": KEY}, "utf-16-be"),
    ),
    Case(
        name="utf-32-with-a-mark",
        headers={"content-type": "application/json"},
        body=_json({"content": f"use {KEY}"}, "utf-32"),
    ),
    Case(
        name="utf-16-le-without-a-mark",
        headers={"content-type": "application/json"},
        body=_json({"password": OPAQUE}, "utf-16-le"),
    ),
    Case(name="percent-encoded-key-in-the-query", query=f"q={PERCENT_KEY}"),
    Case(name="percent-encoded-key-in-the-path", path=f"/v1/{PERCENT_KEY}/chat/completions"),
    Case(name="percent-encoded-key-in-a-body", body=_json({"url": f"https://x/?q={PERCENT_KEY}"})),
    Case(
        name="escaped-key-inside-a-json-string",
        body=_json({"content": json.dumps({"k": KEY}).replace("sk-", "\\u0073k-")}),
    ),
    Case(
        name="credential-header-repeated-in-the-body",
        headers={"x-api-key": OPAQUE},
        body=_json({"messages": [{"role": "user", "content": f"my key is {OPAQUE}"}]}),
    ),
    Case(
        name="credential-header-escaped-in-the-body",
        headers={"x-api-key": OPAQUE},
        body=json.dumps({"content": "KEY"})
        .replace("KEY", "".join(f"\\u{ord(c):04x}" for c in OPAQUE))
        .encode(),
    ),
    Case(
        name="credential-header-in-the-query",
        headers={"x-api-key": OPAQUE},
        query="note=" + "".join(f"%{b:02x}" for b in OPAQUE.encode()),
    ),
    Case(
        name="basic-password-repeated-in-the-body",
        headers={"authorization": "Basic " + base64.b64encode(f"u:{OPAQUE}".encode()).decode()},
        body=_json({"content": f"the password is {OPAQUE}"}),
    ),
]


_BY_NAME.update({c.name: c for c in CASES})  # the server answers a case by its name


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_no_spelling_survives_in_a_cassette(case: Case, origin: str, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / f"{case.name}.yaml"
    with use_cassette(path, mode="rewrite", scrub=RULES), httpx.Client() as client:
        recorded = _send(client, origin, case)
    assert recorded.status_code == case.status
    assert leaks(path) == []
    with use_cassette(path, scrub=RULES) as cassette, httpx.Client() as client:
        _send(client, origin, case)
    assert cassette.play_count == 1


# -- the scrubber --------------------------------------------------------------------------


def test_runs_of_escapes_are_found_and_decoded() -> None:
    text = f"a {PERCENT_KEY} b \\u0073k-x c%20d"
    spans = list(encoded_runs(text))
    assert [text[s:e] for s, e in spans] == [PERCENT_KEY, "\\u0073k-x", "c%20d"]
    assert KEY in decodings(PERCENT_KEY)
    assert "a+b c" in decodings("a+b%20c") and "a b c" in decodings("a+b%20c")
    assert KEY in decodings(KEY.replace("-", "%252D"))  # percent-encoded twice


def test_a_key_behind_escapes_is_found_and_replaced_whole() -> None:
    assert find_secrets(f"see {PERCENT_KEY} now") == [PERCENT_KEY]
    assert scrub_text(f"see {PERCENT_KEY}, now") == "see <REDACTED>, now"
    url = scrub_url(f"https://h/p?q={KEY[:10]}%{ord(KEY[10]):02X}{KEY[11:]}&x=1")
    assert url.endswith("?q=REDACTED&x=1")
    assert scrub_text("50% off, 100%ab, \\u00e9") == "50% off, 100%ab, \\u00e9"  # nothing hides


def test_credentials_of_a_request_in_every_spelling_they_are_repeated_in() -> None:
    basic = base64.b64encode(b"agent:secret-password-1").decode()
    found = credentials_of(
        [
            ("Authorization", f"Basic {basic}"),
            ("x-api-key", "short"),
            ("cookie", "session=cookie-value-123; theme=dark"),
            ("content-type", "application/json"),
        ]
    )
    assert "secret-password-1" in found and "agent:secret-password-1" in found
    assert basic in found and f"Basic {basic}" in found
    assert "cookie-value-123" in found
    assert "short" not in found  # too short to look for in texts
    assert "application/json" not in found


def test_known_secrets_are_replaced_in_every_spelling() -> None:
    secret = "pass word/é!12"
    known = KnownSecrets([secret])
    spelled = [
        secret,
        "pass%20word%2F%C3%A9%2112",
        "pass+word%2F%c3%a9%2112",
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=True)[1:-1],
    ]
    for text in spelled:
        assert known.in_text(f"x {text} y"), text
        assert secret not in known.text(f"x {text} y")
    value = {"a": [secret, {secret: 1}], "b": 2}
    assert json.dumps(redact_known(value, [secret])).count("<REDACTED>") == 2
    assert redact_known({"a": "clean"}, [secret]) == {"a": "clean"}


@given(st.text(max_size=40), st.sampled_from([KEY, PERCENT_KEY, KEY.replace("-", "%252D")]))
def test_scrubbing_text_with_hidden_keys_is_idempotent(text: str, key: str) -> None:
    scrubber = Scrubber(RULES)
    once = scrubber.text(f"{text} {key} {text}")
    assert scrubber.text(once) == once
    assert scrubber.find(once) == []
    assert KEY not in once


def test_binary_that_reads_as_utf16_still_loses_a_key_written_in_ascii() -> None:
    scrubber = Scrubber()
    body = b"\x00\x01" * 40 + KEY.encode() + b"\x00"  # even length, zeros first: UTF-16-like
    assert not scrubber.body_is_clean(body, {})
    scrubbed = scrubber.body(body, {}, part="request body")
    assert isinstance(scrubbed, bytes) and KEY.encode() not in scrubbed
    text = json.dumps({"content": f"use {KEY}"}).encode("utf-16-le")  # real UTF-16 text
    cleaned = scrubber.body(text, {}, part="request body")
    assert isinstance(cleaned, bytes)
    assert KEY not in cleaned.decode("utf-16-le") and "<REDACTED>" in cleaned.decode("utf-16-le")
