"""Reader: the mock DeepSeek's request log (``GET /_dsh/requests`` saved as JSON), and the
mock's in-memory records.

Each record holds the request as received (credentials redacted), the status answered, the
error that refused it, the answer the mock sent (``response``, when the record has it; else the
script entry that answered, rebuilt), and the simulated cache figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import TraceError
from .._model import Trace, TraceSource, TraceUsage
from .._wire import error_of_json
from ._build import TraceBuilder, decode_text, json_document

__all__ = ["read", "records_trace", "sniff"]


def sniff(head: str) -> bool:
    stripped = head.lstrip()
    if stripped.startswith("{") and '"requests"' in head[:4096]:
        return True
    return stripped.startswith("[") and '"seq"' in head[:4096] and '"endpoint"' in head[:4096]


def read(data: bytes, path: str | None) -> Trace:
    text, _ = decode_text(data, path=path, line_based=False)
    document = json_document(text, path=path, what="the mock's request log")
    if isinstance(document, Mapping) and isinstance(document.get("requests"), list):
        return records_trace(document["requests"], path=path, source="mock-requests")
    if isinstance(document, list):
        return records_trace(document, path=path, source="mock-requests")
    raise TraceError(
        "not the mock's request log: expected a JSON object with a `requests` list (GET "
        "/_dsh/requests) or a list of request records",
        path=path,
    )


def _entry_reply(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The answer a record's script entry gave, in chat shape (for records without
    ``response``; tool-call ids unknown)."""
    entry = record.get("entry")
    if not isinstance(entry, Mapping) or entry.get("kind", "reply") != "reply":
        return None
    if record.get("endpoint") != "chat" or record.get("status") != 200:
        return None
    out: dict[str, Any] = {"role": "assistant", "content": entry.get("text") or ""}
    if isinstance(entry.get("reasoning"), str):
        out["reasoning_content"] = entry["reasoning"]
    calls = entry.get("toolCalls") or entry.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {"name": call.get("name"), "arguments": call.get("arguments", "{}")},
            }
            for call in calls
            if isinstance(call, Mapping)
        ]
    return out


def _usage(record: Mapping[str, Any]) -> TraceUsage | None:
    prompt, hit = record.get("promptTokens"), record.get("cacheHitTokens")
    if isinstance(prompt, int) and isinstance(hit, int):
        completion = record.get("completionTokens")
        return TraceUsage(
            prompt_tokens=prompt,
            hit_tokens=hit,
            completion_tokens=completion if isinstance(completion, int) else None,
        )
    return None


def records_trace(
    records: Sequence[Any], *, path: str | None = None, source: TraceSource = "mock-requests"
) -> Trace:
    """The mock's request records (their JSON) as a trace."""
    builder = TraceBuilder(source, path)
    for number, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise TraceError(f"request record {number} is not a JSON object", path=path)
        if record.get("endpoint") not in ("chat", "anthropic"):
            builder.skipped += 1
            continue
        response = record.get("response")
        error = record.get("error")
        headers = record.get("headers") or ()
        try:
            pairs = [(str(h[0]), str(h[1])) for h in headers]
        except (TypeError, IndexError, KeyError):
            raise TraceError(f"request record {number}: headers are not pairs", path=path) from None
        builder.add(
            url=record.get("path"),
            body=record.get("body"),
            method=record.get("method"),
            headers=pairs,
            status=record.get("status"),
            error=error_of_json(error) or (str(error) if error is not None else None),
            response=response if isinstance(response, Mapping) else _entry_reply(record),
            usage=_usage(record),
        )
    return builder.trace()
