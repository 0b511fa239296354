"""Reader: a ``dsh_core`` session log (ours or the reference harness's JSONL).

Every request the log records is rebuilt (``reconstruct_requests``) and serialized by the
provider's own codec, so the trace holds the exact wire bodies the loop sent, with the usage the
log recorded for each attempt. What the log says happened between two requests — a header
snapshot or delta, a compaction, a tool-result prune, an unexplained rewrite, a resume — rides
along as :class:`~dsh_testkit.traces.LogEvent`\\ s, the evidence the doctor puts beside its
findings. Times are the log's (milliseconds): a request starts at its step's boundary event and
ends at the event that carries its usage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from dsh_core import (
    DshError,
    Event,
    GenerateOptions,
    Message,
    MessageView,
    ReconstructedRequest,
    ToolsPlaceholder,
    reconstruct_requests,
)
from dsh_core.persistence import LoadedLog, loads_session
from dsh_core.providers import anthropic, deepseek

from ...scrub._scrubber import scrub_json
from .._errors import TraceError
from .._log_facts import (
    HeaderStep,
    SurfaceRewrite,
    changes_between,
    find_usage,
    header_steps,
    surface_rewrites,
)
from .._model import LogEvent, Trace, TraceUsage
from ._build import TraceBuilder, json_or_none, without_bom

__all__ = ["read", "session_log_trace", "sniff"]


def sniff(head: str) -> bool:
    first = json_or_none(head.removeprefix("\ufeff").lstrip().split("\n", 1)[0])
    return isinstance(first, Mapping) and first.get("type") == "session"


def read(data: bytes, path: str | None) -> Trace:
    try:
        loaded = loads_session(without_bom(data), audit=True, path=path)
    except DshError as exc:
        raise TraceError(f"the session log does not read: {exc}", path=path) from None
    return session_log_trace(loaded, path=path)


def _placeholders(step: HeaderStep) -> bool:
    """Whether the header's system prompt or tools are placeholders (a normalized log)."""
    header = step.header
    system = header.system or ""
    return isinstance(header.tools, ToolsPlaceholder) or (
        system.startswith("{{") and system.rstrip().endswith("}}")
    )


def _header_event(step: HeaderStep) -> LogEvent:
    if step.changes:
        what = ": " + "; ".join(step.changes)
    elif step.reason in ("change", "fallback") and _placeholders(step):
        # a change snapshot whose values are placeholders: it changed what they stand for
        what = " (the header holds placeholders: what changed is not visible in the log)"
    else:
        what = " (header unchanged)"
    return LogEvent(
        seq=step.seq,
        kind="resume" if step.reason == "resume" else "header",
        detail=f"{step.label} at seq {step.seq}{what}",
    )


def _rewrite_event(rewrite: SurfaceRewrite) -> LogEvent:
    return LogEvent(seq=rewrite.seq, kind=rewrite.kind, detail=rewrite.description)


def _events_between(
    previous: ReconstructedRequest | None,
    item: ReconstructedRequest,
    steps: Sequence[HeaderStep],
    rewrites: Sequence[SurfaceRewrite],
) -> tuple[LogEvent, ...]:
    if previous is None:
        return ()
    by_seq_step = {s.seq: s for s in steps}
    by_seq_rewrite = {r.seq: r for r in rewrites}
    out: list[LogEvent] = []
    for seq in changes_between(previous, item, steps, rewrites):
        if seq in by_seq_step:
            out.append(_header_event(by_seq_step[seq]))
        elif seq in by_seq_rewrite:
            out.append(_rewrite_event(by_seq_rewrite[seq]))
    return tuple(out)


class _ChatBodies:
    """The Chat Completions bodies of a log's requests, each message serialized and scrubbed
    once: consecutive requests share their history, so the bodies share its dicts, and reading
    a long log stays linear in its events.

    Requests folded from one history carry views of one append-only message list
    (:class:`~dsh_core.MessageView`); for each such list the wire messages written so far are
    kept flat, with where each message's end, so a request's messages are one slice of it plus
    whatever is new (no per-message work for the history it repeats).
    """

    def __init__(self) -> None:
        self._memo: dict[tuple[int, bool], tuple[Message, list[dict[str, Any]]]] = {}
        self._flat: dict[tuple[int, bool], tuple[object, list[dict[str, Any]], list[int]]] = {}

    def body(self, options: GenerateOptions) -> tuple[dict[str, Any], bool]:
        """The body, and whether the serializer wrote it for thinking mode."""
        body = deepseek.serialize_request(dataclasses.replace(options, messages=()))
        thinking_on = body.get("thinking") != {"type": "disabled"}
        messages = scrub_json(body["messages"])
        messages.extend(self._messages(options.messages, thinking_on))
        body["messages"] = messages
        return body, thinking_on

    def _messages(self, messages: Sequence[Message], thinking: bool) -> list[dict[str, Any]]:
        backing = messages.backing if isinstance(messages, MessageView) else None
        if backing is None:
            return [wire for message in messages for wire in self._message(message, thinking)]
        key = (id(backing), thinking)
        found = self._flat.get(key)
        if found is None or found[0] is not backing:
            found = self._flat[key] = (backing, [], [])
        _, flat, ends = found
        for message in backing[len(ends) : len(messages)]:
            flat.extend(self._message(message, thinking))
            ends.append(len(flat))
        return flat[: ends[len(messages) - 1]] if messages else []

    def _message(self, message: Message, thinking: bool) -> list[dict[str, Any]]:
        key = (id(message), thinking)
        found = self._memo.get(key)
        if found is None or found[0] is not message:
            found = (message, scrub_json(deepseek.serialize_message(message, thinking=thinking)))
            self._memo[key] = found
        return found[1]


def _time(events: Sequence[Event], seq: int | None) -> float | None:
    if seq is None or not 0 <= seq < len(events) or events[seq].time <= 0:
        return None  # a normalized log's times are zero: unknown, not the epoch
    return events[seq].time / 1000


_REFUSED: dict[str, int] = {
    "CONTEXT_WINDOW_EXCEEDED": 400,
    "INVALID_REQUEST": 400,
    "AUTH": 401,
    "QUOTA": 402,
    "RATE_LIMIT": 429,
}
"""The status the API answered an attempt the log records failing with this code before its
first byte (a refused request: it cached nothing and is never a parent)."""


def _refused(events: Sequence[Event], item: ReconstructedRequest) -> tuple[int, str] | None:
    """``(status, message)`` when the attempt's first logged chunk is its failure: the API
    refused it before answering anything (a context window exceeded, an invalid request)."""
    seq = item.first_response_seq
    if item.reply is not None or seq is None or not 0 <= seq < len(events):
        return None
    event = events[seq]
    data = event.data if isinstance(event.data, Mapping) else {}
    chunk = data.get("chunk") if event.type == "assistant/chunk" else None
    if not isinstance(chunk, Mapping) or chunk.get("type") != "finish":
        return None
    reason = chunk.get("reason")
    failure = reason.get("failure") if isinstance(reason, Mapping) else None
    if not isinstance(failure, Mapping):
        return None
    status = _REFUSED.get(str(failure.get("code")))
    if status is None:
        return None
    return status, str(failure.get("message") or failure.get("code"))


def session_log_trace(loaded: LoadedLog, *, path: str | None = None) -> Trace:
    """A loaded session log as a trace of its rebuilt wire requests (see the module docstring).

    Raises :class:`TraceError` when the log's requests cannot be rebuilt.
    """

    events = loaded.events
    try:
        rebuilt = list(reconstruct_requests(events))
        steps, rewrites = header_steps(events), surface_rewrites(events)
    except DshError as exc:
        raise TraceError(f"the session log does not fold: {exc}", path=path) from None
    builder = TraceBuilder("session-log", path, scrubbed=True)  # scrubbed message by message
    builder.resolution = 0.001
    chat = _ChatBodies()
    previous: ReconstructedRequest | None = None
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
        thinking_on = True
        try:
            if options.provider == "anthropic":
                body = scrub_json(anthropic.serialize_request(options))
                url = "/anthropic/v1/messages"
            else:
                body, thinking_on = chat.body(options)
                url = "/chat/completions"
            if placeholder is not None:
                body["tools"] = placeholder
        except DshError as exc:
            builder.notes.append(f"request {index + 1} cannot be serialized: {exc}")
            previous = item
            continue
        response = None
        if item.reply is not None:
            try:
                # as the next request resends it: serialized with the same thinking decision
                if options.provider == "anthropic":
                    response = scrub_json(anthropic.serialize_message(item.reply))
                else:
                    response = chat._message(item.reply, thinking_on)[0]
            except (DshError, IndexError):
                response = None
        started = _time(events, item.boundary_seq)
        finished = _time(events, found.seq if found is not None else None)
        if started is not None and finished is not None and not 0 <= finished - started <= 3600:
            finished = None  # stored logs mix recording runs: that end belongs to another one
        refused = _refused(events, item)
        builder.add(
            url=url,
            body=body,
            status=200 if item.reply is not None else refused[0] if refused else None,
            error=refused[1] if refused else None,
            response=response,
            usage=None if refused else usage,
            started=started,
            finished=finished,
            conversation=loaded.info.id,
            log_events=_events_between(previous, item, steps, rewrites),
        )
        previous = item
    if loaded.dropped is not None:
        builder.notes.append(f"an unfinished last line (line {loaded.dropped.line}) was dropped")
    return builder.trace()
