"""Failure codes, and the HTTP error → :class:`LlmFailure` mapping both adapters share.

Codes follow the reference harness (docs/design.md) so logged failures interchange:
``AUTH``, ``QUOTA``, ``RATE_LIMIT``, ``INVALID_REQUEST``, ``CONTEXT_WINDOW_EXCEEDED``, ``SERVER``,
``HTTP_<status>``, ``TRANSPORT``, ``TIMEOUT``, ``STREAM_CLOSED``, ``EMPTY_RESPONSE``,
``MALFORMED_RESPONSE``, ``ABORTED``, ``MISSING_CREDENTIAL``, ``INVALID_CREDENTIAL``,
``UNSUPPORTED_REASONING_EFFORT``, ``UNSUPPORTED_CONTENT``. The adapters never retry; they say
whether a retry of the byte-identical request may help (``LlmFailure.retryable``) and the loop
decides.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from typing import Any

from .._json_text import loads_json
from .._stream import LlmFailure

__all__ = ["RETRYABLE_CODES", "classify_http_error", "failure", "parse_retry_after"]

RETRYABLE_CODES = frozenset(
    {
        "EMPTY_RESPONSE",
        "INSUFFICIENT_SYSTEM_RESOURCE",
        "RATE_LIMIT",
        "SERVER",
        "TIMEOUT",
        "TRANSPORT",
    }
)
"""Codes a retry of the same request may cure. ``STREAM_CLOSED`` (a clean cut mid-answer) is
deliberately absent, as in the reference harness."""

_QUOTA = re.compile(
    r"insufficient[ _-]?(quota|balance|credits?|funds)|(quota|usage|spend)[ _-]?limit"
    r"|quota[ _-]?exceeded|exceeded your current quota|out of credits|billing",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"context_length_exceeded|maximum context length|exceeds? (the )?(model'?s? )?context"
    r"|context window|prompt is too long",
    re.IGNORECASE,
)
_REQUEST_ID_IN_MESSAGE = re.compile(r"\(request_id: ([^)\s]+)\)")
_REQUEST_ID_HEADERS = ("x-request-id", "x-deepseek-request-id", "request-id", "x-ds-trace-id")


def failure(code: str, message: str, **facts: Any) -> LlmFailure:
    """An :class:`LlmFailure` whose ``retryable`` flag follows :data:`RETRYABLE_CODES`."""
    return LlmFailure(code=code, message=message, retryable=code in RETRYABLE_CODES, **facts)


def parse_retry_after(value: str | None, *, now: float | None = None) -> int | None:
    """``Retry-After`` in milliseconds: delta-seconds (digits only) or an HTTP date.

    ``None`` when absent, unparsable, not in the future, or not finite.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        ms = int(text) * 1000
        return ms if ms > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:  # pragma: no cover - older Pythons returned None instead of raising
        return None
    delta = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(delta) or delta <= 0:
        return None
    return math.ceil(delta * 1000)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, item in headers.items():
        if key.lower() == lowered:
            return item
    return None


def _text(body: bytes | str | Mapping[str, Any] | None) -> tuple[Mapping[str, Any] | None, str]:
    if body is None:
        return None, ""
    if isinstance(body, Mapping):
        return body, ""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        parsed = loads_json(text)  # iterative: a deeply nested body cannot overflow
    except ValueError:
        return None, text.strip()
    return (parsed, "") if isinstance(parsed, Mapping) else (None, text.strip())


def classify_http_error(
    status: int,
    body: bytes | str | Mapping[str, Any] | None,
    headers: Mapping[str, str],
    *,
    api: str = "DeepSeek API",
    now: float | None = None,
) -> LlmFailure:
    """Map a non-2xx response to a typed failure.

    The body may be an OpenAI-style ``{"error": {message, type, code}}`` (DeepSeek), an
    Anthropic-style ``{"type": "error", "error": {type, message}, "request_id"}``, or plain text
    (DeepSeek's 2024–2025 deserialization errors). Codes: 401/403 → ``AUTH``; 413 →
    ``INVALID_REQUEST``; quota wording, or 402 → ``QUOTA`` (wins over 429 and 400); 429 →
    ``RATE_LIMIT``; 400 with context-overflow wording → ``CONTEXT_WINDOW_EXCEEDED``; other 400 and
    422 → ``INVALID_REQUEST``; ≥ 500 → ``SERVER``; anything else → ``HTTP_<status>``.
    """
    parsed, text = _text(body)
    error = parsed.get("error") if parsed is not None else None
    error = error if isinstance(error, Mapping) else {}
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = f"{api} error (HTTP {status})"
        if text:
            message += ": " + (text if len(text) <= 300 else text[:297] + "...")
    wording = " ".join(
        str(part) for part in (error.get("code"), error.get("type"), message) if part is not None
    )
    if status in (401, 403):
        code = "AUTH"
    elif status == 413:
        code = "INVALID_REQUEST"
    elif status == 402 or _QUOTA.search(wording):
        code = "QUOTA"
    elif status == 429:
        code = "RATE_LIMIT"
    elif status in (400, 422):
        code = "CONTEXT_WINDOW_EXCEEDED" if _CONTEXT.search(wording) else "INVALID_REQUEST"
    elif status >= 500:
        code = "SERVER"
    else:
        code = f"HTTP_{status}"
    request_id = next(
        (v for v in (_header(headers, h) for h in _REQUEST_ID_HEADERS) if v),
        None,
    )
    if request_id is None and parsed is not None and isinstance(parsed.get("request_id"), str):
        request_id = parsed["request_id"]
    if request_id is None:
        found = _REQUEST_ID_IN_MESSAGE.search(message)
        request_id = found.group(1) if found else None
    return failure(
        code,
        message,
        status=status,
        retry_after_ms=parse_retry_after(_header(headers, "retry-after"), now=now),
        request_id=request_id,
    )
