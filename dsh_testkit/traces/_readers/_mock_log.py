"""Reader: the mock DeepSeek's request log (``GET /_dsh/requests`` saved as JSON, or the file
``dsh-testkit serve --request-log`` appends to), and the mock's in-memory records.

Each record holds the request as received (credentials redacted), the status answered, the
error that refused it, the answer the mock sent (``response``, when the record has it; else the
script entry that answered, rebuilt), the simulated cache figures, and when the request
started and its answer ended (``started`` / ``finished``, UNIX seconds; records from before
the mock kept times have none).

The request log file is JSON Lines: a ``{"format": "dsh-mock-requests", "version": 1}`` header,
then one record per line in the order the answers ended. It is read while the mock appends to
it: an unfinished last line is dropped with a note (``_file.read_trace_lines``).

A field of the wrong type (a status ``"200"``, a path that is not a string, a response that is
not an object, a token count ``"12"``) is a :class:`TraceError` naming the record and the field; a figure that cannot
be true is left out with a note (``_fields.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import TraceError
from .._file import read_trace_lines
from .._model import Trace, TraceSource, TraceUsage
from .._wire import error_of_json
from ._build import TraceBuilder, decode_text, json_document, json_or_none, without_bom
from ._fields import Malformed, optional_int, optional_object, optional_string, optional_time

__all__ = ["read", "records_trace", "sniff"]


REQUEST_LOG_FORMAT = "dsh-mock-requests"
"""The request log file's header ``format`` (``MockDeepSeek.log_requests_to`` writes it)."""


def sniff(head: str) -> bool:
    stripped = head.removeprefix("\ufeff").lstrip()
    first = json_or_none(stripped.split("\n", 1)[0])
    if isinstance(first, Mapping) and first.get("format") == REQUEST_LOG_FORMAT:
        return True
    if stripped.startswith("{") and '"requests"' in head[:4096]:
        return True
    return stripped.startswith("[") and '"seq"' in head[:4096] and '"endpoint"' in head[:4096]


def read(data: bytes, path: str | None) -> Trace:
    first = json_or_none(without_bom(data).lstrip().split(b"\n", 1)[0])
    if isinstance(first, Mapping) and first.get("format") == REQUEST_LOG_FORMAT:
        _, lines, notes = read_trace_lines(
            without_bom(data), path=path, file_format=REQUEST_LOG_FORMAT, versions=(1,)
        )
        trace = records_trace([record for _, record in lines], path=path, source="mock-requests")
        return dataclasses.replace(trace, notes=(*notes, *trace.notes))
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
    """The record's cache figures: integers (else :class:`Malformed`); the builder leaves out
    what is not a count."""
    prompt: Any = optional_int(record.get("promptTokens"), "promptTokens")
    hit = optional_int(record.get("cacheHitTokens"), "cacheHitTokens")
    completion = optional_int(record.get("completionTokens"), "completionTokens")
    if prompt is None and hit is None:
        return None
    return TraceUsage(prompt_tokens=prompt, hit_tokens=hit, completion_tokens=completion)


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
        error = record.get("error")
        headers = record.get("headers") or ()
        try:
            pairs = [(str(h[0]), str(h[1])) for h in headers]
        except (TypeError, IndexError, KeyError):
            raise TraceError(f"request record {number}: headers are not pairs", path=path) from None
        try:
            response = optional_object(record.get("response"), "response")
            builder.add(
                url=optional_string(record.get("path"), "path"),
                body=record.get("body"),
                method=optional_string(record.get("method"), "method"),
                headers=pairs,
                status=optional_int(record.get("status"), "status"),
                error=error_of_json(error) or (str(error) if error is not None else None),
                response=response if response is not None else _entry_reply(record),
                usage=_usage(record),
                started=optional_time(record.get("started"), "started"),
                finished=optional_time(record.get("finished"), "finished"),
                where=f"request record {number}",
            )
        except Malformed as exc:
            raise TraceError(f"request record {number}: {exc}", path=path) from None
    return builder.trace()
