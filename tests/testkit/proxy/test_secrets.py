"""Credentials in every spelling through the proxy: nothing of them reaches the trace file,
the report or what :meth:`Recorder.trace` reads back.

The client's own credential here is not key-shaped (only the header it came in says it is a
secret), so the proxy must find it by value wherever the request repeats it: escaped in JSON,
in a UTF-16 or UTF-32 body, percent-encoded in the URL, or as the password of a Basic
credential; key-shaped secrets it finds by shape, percent-encoded too.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from dsh_testkit.doctor import diagnose, report_text
from tests.testkit.proxy._proxy_rig import run, start, stream

CREDENTIAL = "Plain7Credential8Value9"
"""A client credential with no key shape."""
PASSWORD = "correct-horse-battery-9"
KEY = "sk-" + "Pct0Encoded1Key2Tail3" + "-TAILPIECE99"
BASIC = "Basic " + base64.b64encode(f"agent:{PASSWORD}".encode()).decode()


def body(content: str) -> dict[str, Any]:
    return {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [{"role": "user", "content": content}],
    }


def escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


CASES: list[tuple[str, dict[str, str], str, bytes]] = [
    (
        "json-unicode-escaped",
        {"x-api-key": CREDENTIAL},
        "/chat/completions",
        json.dumps(body("KEY")).replace("KEY", escaped(CREDENTIAL)).encode(),
    ),
    (
        "json-escaped-in-a-key-name",
        {"x-api-key": CREDENTIAL},
        "/chat/completions",
        json.dumps({**body("hi"), "metadata": {"KEY": 1}})
        .replace("KEY", escaped(CREDENTIAL))
        .encode(),
    ),
    (
        "utf-16-body",
        {"x-api-key": CREDENTIAL, "content-type": "application/json; charset=utf-16"},
        "/chat/completions",
        json.dumps(body(f"my key is {CREDENTIAL}")).encode("utf-16"),
    ),
    (
        "utf-32-body-without-a-mark",
        {"x-api-key": CREDENTIAL},
        "/chat/completions",
        json.dumps(body(f"my key is {CREDENTIAL} and {KEY}")).encode("utf-32-le"),
    ),
    (
        "percent-encoded-credential-in-the-query",
        {"x-api-key": CREDENTIAL},
        "/chat/completions?note=" + "".join(f"%{b:02X}" for b in CREDENTIAL.encode()),
        json.dumps(body("hi")).encode(),
    ),
    (
        "percent-encoded-key-in-the-query-keeps-no-tail",
        {},
        "/chat/completions?q=" + KEY.replace("-TAIL", "%2DTAIL"),
        json.dumps(body("hi")).encode(),
    ),
    (
        "key-encoded-twice-in-the-query",
        {},
        "/chat/completions?q=" + KEY.replace("-", "%252D"),
        json.dumps(body("hi")).encode(),
    ),
    (
        "basic-password-repeated-in-the-body",
        {"authorization": BASIC},
        "/chat/completions",
        json.dumps(body(f"log in with {PASSWORD}")).encode(),
    ),
    (
        "credential-percent-encoded-in-the-body",
        {"x-api-key": CREDENTIAL},
        "/chat/completions",
        json.dumps(
            body(f"https://x/?k={CREDENTIAL[:5]}%{ord(CREDENTIAL[5]):02x}{CREDENTIAL[6:]}")
        ).encode(),
    ),
    (
        "credential-in-the-conversation-header",
        {"x-api-key": CREDENTIAL, "x-session-id": f"run-{CREDENTIAL}"},
        "/chat/completions",
        json.dumps(body("hi")).encode(),
    ),
]

SECRETS = (CREDENTIAL, PASSWORD, "TAILPIECE99", "Tail3", KEY[:12])


@pytest.mark.parametrize(("name", "headers", "path", "payload"), CASES, ids=[c[0] for c in CASES])
def test_no_spelling_of_a_credential_reaches_the_trace(
    name: str, headers: dict[str, str], path: str, payload: bytes
) -> None:
    async def handler(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        # The answer echoes the key, and the client's credential when it presented one.
        echo = CREDENTIAL if b"x-api-key" in head.lower() else ""
        await stream(writer, [f"echo {echo} {KEY}"])

    async def main() -> tuple[int, bytes, str]:
        rig = await start(handler)
        status, _, _ = await rig.exchange(payload, path=path, headers=headers)
        recorder = await rig.stopped()
        trace = recorder.trace()
        diagnosed = diagnose(trace)
        report = report_text(diagnosed) + json.dumps(diagnosed.to_json(), ensure_ascii=False)
        read_back = json.dumps([e.to_json() for e in trace], ensure_ascii=False)
        return status, recorder.writer.read_back(), report + read_back

    status, written, shown = run(main)
    assert status == 200
    text = written.decode("utf-8")
    assert len(text.splitlines()) == 2, "the exchange is recorded"
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} reached the trace file"
        assert secret not in shown, f"{secret!r} reached a report"
    assert "<REDACTED>" in text or "REDACTED" in text
