"""Reader: a HAR 1.2 file (browser devtools, mitmproxy, Charles, Playwright, …).

Each entry's request body (``postData.text``, base64 or not), the answer (JSON or an event
stream), its status and error, and its timing: ``startedDateTime`` and ``time`` give when it was
sent and finished, the timings up to ``wait`` its first byte. Many tools write whole seconds
(an HTTP ``Date`` header as start time): the trace says so (:attr:`Trace.time_resolution`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .._errors import TraceError
from .._model import Trace, TraceUsage
from .._wire import answer_of_text, endpoint_of, error_of_text
from ._build import TraceBuilder, decode_text, json_document, json_or_none

__all__ = ["read", "sniff"]


def sniff(head: str) -> bool:
    stripped = head.removeprefix("\ufeff").lstrip()
    return stripped.startswith("{") and '"log"' in head[:4096]


def _time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _text(content: Mapping[str, Any], key: str = "text") -> str | None:
    text = content.get(key)
    if content.get("encoding") == "base64" and isinstance(text, str):
        return base64.b64decode(text).decode("utf-8", "replace")
    return text if isinstance(text, str) else None


def read(data: bytes, path: str | None) -> Trace:
    text, _ = decode_text(data, path=path, line_based=False)
    document = json_document(text, path=path, what="a HAR file")
    entries = (document.get("log") or {}).get("entries") if isinstance(document, Mapping) else None
    if not isinstance(entries, list):
        raise TraceError("a HAR file needs log.entries (a list)", path=path)
    builder = TraceBuilder("har", path)
    for number, entry in enumerate(entries):
        try:
            request = entry["request"]
            response = entry.get("response") or {}
            body_text = _text(request.get("postData") or {})
            body = json_or_none(body_text)
            url = request.get("url")
            endpoint = endpoint_of(url, body)
            status = response.get("status")
            answer: Mapping[str, Any] | None = None
            usage: TraceUsage | None = None
            error: str | None = None
            content = response.get("content") or {}
            answer_text = _text(content)
            if endpoint is not None and answer_text:
                if isinstance(status, int) and status >= 400:
                    error = error_of_text(answer_text)
                else:
                    mime = str(content.get("mimeType") or "")
                    answer, usage = answer_of_text(
                        answer_text, endpoint, event_stream=True if "event-stream" in mime else None
                    )
            started = _time(entry.get("startedDateTime"))
            timings = entry.get("timings") or {}
            total = entry.get("time")
            finished = first_byte = None
            if started is not None and isinstance(total, (int, float)) and total >= 0:
                finished = started + total / 1000
                before = sum(
                    float(timings.get(k) or 0) if (timings.get(k) or 0) > 0 else 0
                    for k in ("blocked", "dns", "connect", "send", "wait")
                )
                first_byte = started + before / 1000
            builder.add(
                url=url,
                body=body,
                content=body_text.encode("utf-8") if body_text is not None else None,
                method=request.get("method"),
                headers=[
                    (str(h.get("name", "")), str(h.get("value", "")))
                    for h in request.get("headers") or ()
                ],
                status=status
                if isinstance(status, int) and not isinstance(status, bool) and status > 0
                else None,
                error=error,
                response=answer,
                usage=usage,
                started=started,
                first_byte=first_byte,
                finished=finished,
                where=f"log.entries[{number}]",
                body_of_content=True,
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise TraceError(
                f"log.entries[{number}] is not a HAR entry ({type(exc).__name__}: {exc})", path=path
            ) from None
    return builder.trace()
