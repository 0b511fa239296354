"""Reader: a dsh cassette (YAML, ``format: dsh-cassette``; ``cassettes/_format.py``).

Each interaction's request body and answer (streamed chunks replayed event by event, or one JSON
body), its status and usage; the conversation key from the request's headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...cassettes._format import CassetteSerializer
from ...scrub._scrubber import scrub_text
from .._errors import TraceError
from .._model import Trace, TraceUsage
from .._wire import answer_of_text, endpoint_of, error_of_text
from ._build import TraceBuilder, decode_text, json_or_none

__all__ = ["read", "sniff"]


def sniff(head: str) -> bool:
    stripped = head.removeprefix("\ufeff").lstrip()
    if stripped.startswith(("format: dsh-cassette", "---\nformat: dsh-cassette")):
        return True
    return "\nformat: dsh-cassette" in head[:2000] and not stripped.startswith(("{", "["))


def read(data: bytes, path: str | None) -> Trace:
    """The cassette's interactions as a trace; a :class:`TraceError` naming the file (and the
    interaction) when it is not a readable dsh cassette: not YAML, another format version,
    aliases, an interaction of the wrong shape."""
    text, _ = decode_text(data, path=path, line_based=False)
    try:
        document = CassetteSerializer.deserialize(text)
    except ValueError as exc:  # the format's own errors are ValueErrors (CassetteFormatError)
        # the message may quote the file (a body): no key leaves through it
        raise TraceError(f"not a readable cassette: {scrub_text(str(exc))}", path=path) from None
    builder = TraceBuilder("cassette", path)
    for number, interaction in enumerate(document["interactions"]):
        # deserialize() gives every interaction one shape (method, uri, headers, body, status)
        request, response = interaction["request"], interaction["response"]
        raw = request["body"]
        body = json_or_none(raw)
        url = request["uri"]
        endpoint = endpoint_of(url, body)
        answer: Mapping[str, Any] | None = None
        usage: TraceUsage | None = None
        status = response["status"]["code"]
        error: str | None = None
        if endpoint is not None:
            resp_body = response["body"]
            chunks = resp_body.get("chunks")
            if chunks is not None:
                streamed = "".join(
                    c.decode("utf-8", "replace") if isinstance(c, bytes) else c for c in chunks
                )
                answer, usage = answer_of_text(streamed, endpoint, event_stream=True)
            else:
                answer_text = resp_body.get("string")
                if isinstance(answer_text, bytes):
                    answer_text = answer_text.decode("utf-8", "replace")
                if isinstance(answer_text, str) and answer_text:
                    if status >= 400:
                        error = error_of_text(answer_text)
                    else:
                        answer, usage = answer_of_text(answer_text, endpoint)
        builder.add(
            url=url,
            body=body,
            content=raw.encode("utf-8")
            if isinstance(raw, str)
            else raw
            if isinstance(raw, bytes)
            else None,
            method=request["method"],
            headers=[
                (str(k), str(v[0] if isinstance(v, list) and v else v))
                for k, v in request["headers"].items()
            ],
            status=status,
            error=error,
            response=answer,
            usage=usage,
            where=f"interactions[{number}]",
            body_of_content=True,
        )
    return builder.trace()
