"""classify_http_error and Retry-After parsing (shared by both adapters)."""

from __future__ import annotations

import pytest

from dsh_core.providers._failures import RETRYABLE_CODES, parse_retry_after
from dsh_core.providers.deepseek import classify_http_error

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("3", 3000),
        (" 10 ", 10_000),
        ("0", None),
        ("-1", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("Fri, 15 Jan 2027 08:00:02 GMT", 2000),
        ("Fri, 15 Jan 2027 07:59:00 GMT", None),
        ("Fri, 15 Jan 2027 08:00:00 GMT", None),
        ("Fri, 99 Foo 2027 08:00:00 GMT", None),
    ],
)
def test_retry_after(value: str | None, expected: int | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_retry_after_header_name_is_case_insensitive() -> None:
    failure = classify_http_error(429, b"", {"Retry-After": "2"})
    assert failure.retry_after_ms == 2000


@pytest.mark.parametrize(
    ("status", "message", "code"),
    [
        (403, "forbidden", "AUTH"),
        (413, "too large", "INVALID_REQUEST"),
        (400, "Insufficient Balance", "QUOTA"),
        (429, "usage limit exceeded", "QUOTA"),
        (400, "the prompt exceeds the model's context window", "CONTEXT_WINDOW_EXCEEDED"),
        (422, "maximum context length is 1048576", "CONTEXT_WINDOW_EXCEEDED"),
        (504, "gateway", "SERVER"),
        (409, "conflict", "HTTP_409"),
    ],
)
def test_status_and_wording(status: int, message: str, code: str) -> None:
    failure = classify_http_error(status, {"error": {"message": message}}, {})
    assert (failure.code, failure.status, failure.message) == (code, status, message)
    assert failure.retryable is (code in RETRYABLE_CODES)


def test_request_id_sources_in_order() -> None:
    both = {"x-request-id": "a", "x-deepseek-request-id": "b"}
    assert classify_http_error(500, b"", both).request_id == "a"
    assert classify_http_error(500, b"", {"x-deepseek-request-id": "b"}).request_id == "b"
    assert classify_http_error(500, b"", {"x-ds-trace-id": "t" * 32}).request_id == "t" * 32
    body = {"error": {"message": "Authentication Fails (request_id: 4f1e-9a)"}}
    assert classify_http_error(401, body, {}).request_id == "4f1e-9a"
    assert classify_http_error(401, b"", {}).request_id is None


@pytest.mark.parametrize(
    "body",
    [b"", b"null", b"[]", b'{"error": "flat string"}', b'{"error": {"message": ""}}', None],
)
def test_bodies_without_a_message_keep_the_status_line(body: bytes | None) -> None:
    failure = classify_http_error(502, body, {})
    assert failure.message.startswith("DeepSeek API error (HTTP 502)")
    assert failure.code == "SERVER"


def test_long_text_bodies_are_shortened() -> None:
    failure = classify_http_error(502, "x" * 1000, {})
    assert failure.message.endswith("...")
    assert len(failure.message) < 400


def test_retryable_codes_match_the_reference_policy_plus_resource_exhaustion() -> None:
    assert {
        "EMPTY_RESPONSE",
        "RATE_LIMIT",
        "SERVER",
        "TIMEOUT",
        "TRANSPORT",
        "INSUFFICIENT_SYSTEM_RESOURCE",
    } == RETRYABLE_CODES
    assert "STREAM_CLOSED" not in RETRYABLE_CODES
