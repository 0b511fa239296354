"""Readers: every recording of an agent's traffic as a :class:`Trace`.

:func:`load_trace` reads a file and detects its kind from its content (never its name):

- a ``dsh-trace`` file (``dsh-testkit proxy --out``, :meth:`RequestCapture.save`);
- a ``dsh_core`` session log (JSONL starting with a session header): requests rebuilt with
  ``reconstruct_requests`` and the provider's own serializer, usage from the logged answers;
- a dsh cassette (YAML, ``format: dsh-cassette``): request bodies, SSE or JSON answers, usage;
- the mock's request log (``GET /_dsh/requests`` saved as JSON): bodies and the simulated usage;
- a HAR 1.2 file (browser devtools, mitmproxy, Charles, …): bodies, answers, timings.

:func:`trace_of` also takes objects: a :class:`Trace`, a ``RequestCapture`` or its requests, a
``MockDeepSeek`` (or its ``requests``), a list of wire bodies, or a path. Requests that are not
model requests (a model listing, the mock's control endpoints) are skipped with a note.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dsh_core import ToolsPlaceholder

from .._secrets import scrub_json, scrub_url
from ._errors import TraceError
from ._file import read_trace_lines
from ._model import Exchange, Trace, TraceSource, TraceUsage, paused_gc
from ._wire import answer_of_events, answer_of_text, endpoint_of

__all__ = ["load_trace", "loads_trace", "trace_of"]

SESSION_HEADERS = ("x-dsh-conversation", "x-deepseek-harness-session-id", "x-session-id")
"""Request headers read as an explicit conversation key, first found wins."""


def _header_key(headers: Sequence[tuple[str, str]] | Mapping[str, Any] | None) -> str | None:
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    lowered: dict[str, str] = {}
    for name, value in pairs:
        text = value[0] if isinstance(value, list) and value else value
        lowered.setdefault(str(name).lower(), str(text))
    for name in SESSION_HEADERS:
        if name in lowered:
            return lowered[name]
    return None


class _Builder:
    """Collects exchanges; skips non-model requests with one note per kind."""

    def __init__(self, source: TraceSource, path: str | None, *, scrubbed: bool = False) -> None:
        self.scrubbed = scrubbed
        """Whether the recording is already scrubbed (a dsh-trace file is, when written)."""
        self.source = source
        self.path = path
        self.exchanges: list[Exchange] = []
        self.skipped = 0
        self.notes: list[str] = []

    def add(
        self,
        *,
        url: str | None,
        body: Any,
        status: int | None = None,
        response: Mapping[str, Any] | None = None,
        usage: TraceUsage | None = None,
        started: float | None = None,
        first_byte: float | None = None,
        finished: float | None = None,
        conversation: str | None = None,
    ) -> None:
        endpoint = endpoint_of(url, body)
        if endpoint is None:
            self.skipped += 1
            return
        self.exchanges.append(
            Exchange(
                index=len(self.exchanges),
                endpoint=endpoint,
                url=scrub_url(url) if url else None,
                body=dict(body) if self.scrubbed else scrub_json(dict(body)),
                status=status,
                response=response,
                usage=usage,
                started=started,
                first_byte=first_byte,
                finished=finished,
                conversation=conversation,
            )
        )

    def trace(self) -> Trace:
        notes = list(self.notes)
        if self.skipped:
            notes.append(
                f"{self.skipped} request(s) that are not model requests (no JSON `messages` "
                "list) were skipped"
            )
        return Trace(
            exchanges=tuple(self.exchanges), source=self.source, path=self.path, notes=tuple(notes)
        )


def _json_or_none(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


# -- the trace file ---------------------------------------------------------------------------


def _from_trace_file(text: str | bytes, path: str | None) -> Trace:
    header, records, notes = read_trace_lines(text, path=path)
    source = header.get("source")
    builder = _Builder(
        source if source in ("proxy", "capture", "memory") else "proxy", path, scrubbed=True
    )
    builder.notes.extend(notes)
    for number, record in records:
        # Files our writer wrote are scrubbed already; a hand-made one is scrubbed here.
        builder.scrubbed = not record.get("_mayHoldKey", True)
        try:
            usage = record.get("usage")
            builder.add(
                url=record.get("url"),
                body=record.get("request"),
                status=record.get("status"),
                response=record.get("response"),
                usage=TraceUsage.from_json(usage) if isinstance(usage, Mapping) else None,
                started=record.get("started"),
                first_byte=record.get("firstByte"),
                finished=record.get("finished"),
                conversation=record.get("conversation"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"line {number}: malformed exchange ({exc})", path=path) from None
    return builder.trace()


# -- session logs -----------------------------------------------------------------------------


def _from_session_log(text: str, path: str | None) -> Trace:
    from dsh_core import DshError, reconstruct_requests
    from dsh_core.persistence import loads_session
    from dsh_core.providers import anthropic, deepseek

    from ..reports._log_facts import find_usage

    try:
        loaded = loads_session(text, audit=True, path=path)
        rebuilt = list(reconstruct_requests(loaded.events))
    except DshError as exc:
        raise TraceError(f"the session log does not fold: {exc}", path=path) from None
    builder = _Builder("session-log", path)
    events = loaded.events
    for index, item in enumerate(rebuilt):
        options = item.request
        end = rebuilt[index + 1].first_response_seq if index + 1 < len(rebuilt) else None
        found = find_usage(events, item, end if end is not None else len(events))
        usage = None
        if found is not None:
            usage = TraceUsage(
                prompt_tokens=found.usage.prompt_tokens,
                hit_tokens=found.usage.cache_read_tokens,
                completion_tokens=found.usage.output_tokens,
            )
        placeholder = (
            options.tools.to_json() if isinstance(options.tools, ToolsPlaceholder) else None
        )
        if placeholder is not None:
            # The reference harness logs its tools as a placeholder: serialize without them and
            # keep the placeholder text, so a change of it still shows.
            options = dataclasses.replace(options, tools=())
        try:
            if options.provider == "anthropic":
                body = anthropic.serialize_request(options)
                url = "/anthropic/v1/messages"
            else:
                body = deepseek.serialize_request(options)
                url = "/chat/completions"
            if placeholder is not None:
                body["tools"] = placeholder
        except DshError as exc:
            builder.notes.append(f"request {index + 1} cannot be serialized: {exc}")
            continue
        builder.add(url=url, body=body, usage=usage, conversation=loaded.info.id)
    if loaded.dropped is not None:
        builder.notes.append(f"an unfinished last line (line {loaded.dropped.line}) was dropped")
    return builder.trace()


# -- cassettes ----------------------------------------------------------------------------------


def _from_cassette(text: str, path: str | None) -> Trace:
    from ..cassettes._format import CassetteSerializer

    try:
        data = CassetteSerializer.deserialize(text)
    except ValueError as exc:
        raise TraceError(f"not a readable cassette: {exc}", path=path) from None
    builder = _Builder("cassette", path)
    for interaction in data.get("interactions") or []:
        request, response = interaction["request"], interaction["response"]
        body = _json_or_none(request.get("body"))
        url = request.get("uri")
        endpoint = endpoint_of(url, body)
        answer: Mapping[str, Any] | None = None
        usage: TraceUsage | None = None
        if endpoint is not None:
            resp_body = response.get("body") or {}
            chunks = resp_body.get("chunks")
            if chunks is not None:
                events = [
                    c.decode("utf-8", "replace") if isinstance(c, bytes) else c for c in chunks
                ]
                answer, usage = answer_of_events(events, endpoint)
            else:
                raw = resp_body.get("string")
                if isinstance(raw, bytes):
                    raw = raw.decode("utf-8", "replace")
                if isinstance(raw, str) and raw:
                    answer, usage = answer_of_text(raw, endpoint)
        builder.add(
            url=url,
            body=body,
            status=(response.get("status") or {}).get("code"),
            response=answer,
            usage=usage,
            conversation=_header_key(request.get("headers")),
        )
    return builder.trace()


# -- the mock's request log ---------------------------------------------------------------------


def _mock_reply(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The answer a mock record's script entry gave, in chat shape (tool-call ids unknown)."""
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


def _mock_answer(record: Mapping[str, Any]) -> TraceUsage | None:
    prompt, hit = record.get("promptTokens"), record.get("cacheHitTokens")
    if isinstance(prompt, int) and isinstance(hit, int):
        return TraceUsage(prompt_tokens=prompt, hit_tokens=hit)
    return None


def _from_mock_records(
    records: Sequence[Mapping[str, Any]], path: str | None, source: TraceSource
) -> Trace:
    builder = _Builder(source, path)
    for record in records:
        if not isinstance(record, Mapping):
            raise TraceError("a request record is not a JSON object", path=path)
        endpoint = record.get("endpoint")
        if endpoint not in ("chat", "anthropic"):
            builder.skipped += 1
            continue
        builder.add(
            url=record.get("path"),
            body=record.get("body"),
            status=record.get("status"),
            response=_mock_reply(record),
            usage=_mock_answer(record),
            conversation=_header_key([tuple(h) for h in record.get("headers") or ()]),
        )
    return builder.trace()


# -- HAR 1.2 ------------------------------------------------------------------------------------


def _har_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _from_har(document: Mapping[str, Any], path: str | None) -> Trace:
    entries = (document.get("log") or {}).get("entries")
    if not isinstance(entries, list):
        raise TraceError("a HAR file needs log.entries (a list)", path=path)
    builder = _Builder("har", path)
    for number, entry in enumerate(entries):
        try:
            request = entry["request"]
            response = entry.get("response") or {}
            post = request.get("postData") or {}
            text = post.get("text")
            if post.get("encoding") == "base64" and isinstance(text, str):
                text = base64.b64decode(text).decode("utf-8", "replace")
            body = _json_or_none(text)
            url = request.get("url")
            endpoint = endpoint_of(url, body)
            answer: Mapping[str, Any] | None = None
            usage: TraceUsage | None = None
            content = response.get("content") or {}
            answer_text = content.get("text")
            if content.get("encoding") == "base64" and isinstance(answer_text, str):
                answer_text = base64.b64decode(answer_text).decode("utf-8", "replace")
            if endpoint is not None and isinstance(answer_text, str) and answer_text:
                mime = str(content.get("mimeType") or "")
                answer, usage = answer_of_text(
                    answer_text, endpoint, event_stream=True if "event-stream" in mime else None
                )
            started = _har_time(entry.get("startedDateTime"))
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
                status=response.get("status"),
                response=answer,
                usage=usage,
                started=started,
                first_byte=first_byte,
                finished=finished,
                conversation=_header_key(
                    [(h.get("name", ""), h.get("value", "")) for h in request.get("headers") or ()]
                ),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise TraceError(
                f"log.entries[{number}] is not a HAR entry ({type(exc).__name__}: {exc})", path=path
            ) from None
    return builder.trace()


# -- detection ----------------------------------------------------------------------------------


def loads_trace(text: str, *, path: str | None = None) -> Trace:
    """A trace from a recording's text; the kind is detected from the content."""
    with paused_gc():
        return _loads_trace(text, path)


def _loads_trace(text: str, path: str | None) -> Trace:
    stripped = text.lstrip()
    first = stripped.split("\n", 1)[0]
    head = _json_or_none(first)
    if isinstance(head, Mapping):
        if head.get("format") == "dsh-trace":
            return _from_trace_file(text, path)
        if head.get("type") == "session":
            return _from_session_log(text, path)
    if stripped.startswith(("format: dsh-cassette", "---\nformat: dsh-cassette")) or (
        "\nformat: dsh-cassette" in text[:2000] and not stripped.startswith(("{", "["))
    ):
        return _from_cassette(text, path)
    document = _json_or_none(text)
    if isinstance(document, Mapping) and isinstance(document.get("log"), Mapping):
        return _from_har(document, path)
    if isinstance(document, Mapping) and isinstance(document.get("requests"), list):
        return _from_mock_records(document["requests"], path, "mock-requests")
    if isinstance(document, list) and all(
        isinstance(r, Mapping) and "endpoint" in r and "seq" in r for r in document
    ):
        return _from_mock_records(document, path, "mock-requests")
    raise TraceError(
        "not a recognized trace: expected a dsh-trace file (proxy or capture), a session log, "
        "a dsh cassette, the mock's request log (GET /_dsh/requests as JSON) or a HAR 1.2 file",
        path=path,
    )


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file of any supported kind (see the module docstring).

    Raises :class:`TraceError` for content of no known kind, ``OSError`` when it cannot be read.
    """
    name = os.fspath(path)
    with open(name, "rb") as file:
        data = file.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # A trace file is decoded line by line: a last line cut inside a character is dropped.
        if data.startswith(b'{"format":"dsh-trace"'):
            return _from_trace_file(data, name)
        raise
    return loads_trace(text, path=name)


def _from_captured(requests: Sequence[Any], source: TraceSource = "capture") -> Trace:
    builder = _Builder(source, None)
    for request in requests:
        builder.add(
            url=request.url,
            body=request.json,
            conversation=_header_key(request.headers),
        )
    return builder.trace()


def trace_of(value: Any) -> Trace:
    """Anything that holds an agent's requests, as a :class:`Trace`.

    Accepts a :class:`Trace`; a path (``str`` or ``os.PathLike``) read with :func:`load_trace`;
    a ``RequestCapture`` or a list of its ``CapturedRequest``; a ``MockDeepSeek`` or its list of
    ``ReceivedRequest``; a list of wire bodies (dicts, JSON text or bytes). Raises
    :class:`TraceError` naming the type otherwise.
    """
    if isinstance(value, Trace):
        return value
    if isinstance(value, (str, os.PathLike)):
        return load_trace(value)
    from ..capture import CapturedRequest, RequestCapture

    if isinstance(value, RequestCapture):
        return _from_captured(value.requests)
    requests = getattr(value, "requests", None)
    if requests is not None and not isinstance(value, Sequence):
        value = requests  # a MockDeepSeek (or anything with a request list)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, str)):
        items = list(value)
        if all(isinstance(r, CapturedRequest) for r in items):
            return _from_captured(items)
        if all(hasattr(r, "to_json") and hasattr(r, "endpoint") for r in items):
            return _from_mock_records([r.to_json() for r in items], None, "memory")
        builder = _Builder("memory", None)
        for item in items:
            body = _json_or_none(item) if isinstance(item, (bytes, str)) else item
            if not isinstance(body, Mapping):
                raise TraceError(
                    f"a trace is made of wire bodies, captured or received requests; got "
                    f"{type(item).__name__}"
                )
            builder.add(url=None, body=body)
        return builder.trace()
    raise TraceError(
        "expected a Trace, a path, a RequestCapture, a MockDeepSeek or a list of requests; got "
        f"{type(value).__name__}"
    )
