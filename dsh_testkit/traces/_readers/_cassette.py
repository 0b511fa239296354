"""Reader: a dsh cassette (YAML, ``format: dsh-cassette``; ``cassettes/_format.py``).

Each interaction's request body and answer (streamed chunks replayed event by event, or one JSON
body), its status and usage; the conversation key from the request's headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...cassettes._format import CassetteSerializer
from .._errors import TraceError
from .._model import Trace, TraceUsage
from .._wire import answer_of_events, answer_of_text, endpoint_of, error_of_text
from ._build import TraceBuilder, decode_text, json_or_none

__all__ = ["read", "sniff"]


def sniff(head: str) -> bool:
    stripped = head.lstrip()
    if stripped.startswith(("format: dsh-cassette", "---\nformat: dsh-cassette")):
        return True
    return "\nformat: dsh-cassette" in head[:2000] and not stripped.startswith(("{", "["))


def read(data: bytes, path: str | None) -> Trace:
    text, _ = decode_text(data, path=path, line_based=False)
    try:
        document = CassetteSerializer.deserialize(text)
    except ValueError as exc:
        raise TraceError(f"not a readable cassette: {exc}", path=path) from None
    builder = TraceBuilder("cassette", path)
    for interaction in document.get("interactions") or []:
        request, response = interaction["request"], interaction["response"]
        raw = request.get("body")
        body = json_or_none(raw)
        url = request.get("uri")
        endpoint = endpoint_of(url, body)
        answer: Mapping[str, Any] | None = None
        usage: TraceUsage | None = None
        status = (response.get("status") or {}).get("code")
        error: str | None = None
        if endpoint is not None:
            resp_body = response.get("body") or {}
            chunks = resp_body.get("chunks")
            if chunks is not None:
                events = [
                    c.decode("utf-8", "replace") if isinstance(c, bytes) else c for c in chunks
                ]
                answer, usage = answer_of_events(events, endpoint)
            else:
                answer_text = resp_body.get("string")
                if isinstance(answer_text, bytes):
                    answer_text = answer_text.decode("utf-8", "replace")
                if isinstance(answer_text, str) and answer_text:
                    if isinstance(status, int) and status >= 400:
                        error = error_of_text(answer_text)
                    else:
                        answer, usage = answer_of_text(answer_text, endpoint)
        headers = request.get("headers") or {}
        builder.add(
            url=url,
            body=body,
            content=raw.encode("utf-8")
            if isinstance(raw, str)
            else raw
            if isinstance(raw, bytes)
            else None,
            method=request.get("method"),
            headers=[
                (str(k), str(v[0] if isinstance(v, list) and v else v)) for k, v in headers.items()
            ]
            if isinstance(headers, Mapping)
            else [],
            status=status,
            error=error,
            response=answer,
            usage=usage,
        )
    return builder.trace()
