"""Spans and log records → the model calls they describe, each once, in the order they started.

1. **Join**: log records belong to the span whose trace and span id they carry. A message
   record with no span id (OpenLLMetry's ``gen_ai.choice`` of a streamed call) goes to the
   model-call span whose interval holds its time.
2. **Read**: each span is read by the first convention that claims it (``_conventions.py``).
   A span that is a model call but whose request cannot be rebuilt is skipped with a note
   saying why; a span that is not a model call is counted by what it is.
3. **Merge a streamed call's halves**: Logfire writes the answer of a streamed call as a second
   span when the stream ends; it is merged into the request it answers (same parent, same
   messages, started before it).
4. **Read a call described twice once**: two instrumentations on the same call (a framework's
   and its HTTP client's, pydantic-ai's and Logfire's openai one) give two spans with the same
   messages whose intervals overlap, often in different traces. The one with the better
   figures is kept (the provider's cache figure, then any usage, a model, tools), completed
   with what only the other has, and a note says how many and by whom.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ._common import ModelCall, SpanNotes, Unreadable, operation_of
from ._conventions import CONVENTIONS, skipped_label
from ._genai import CHOICE_EVENT, MESSAGE_EVENTS
from ._records import OtelLog, OtelSpan

__all__ = ["model_calls"]


def _join(
    spans: Sequence[OtelSpan], logs: Sequence[OtelLog]
) -> dict[tuple[str, str], list[OtelLog]]:
    by_span: dict[tuple[str, str], list[OtelLog]] = {}
    loose: list[OtelLog] = []
    for log in logs:
        if log.span_id:
            by_span.setdefault((log.trace_id, log.span_id), []).append(log)
        elif log.event_name in MESSAGE_EVENTS or log.event_name == CHOICE_EVENT:
            loose.append(log)
    if loose:
        holders = _Holders(spans)
        for log in loose:
            if log.time_ns is None:
                continue
            span = holders.latest_holding(log.time_ns)
            if span is not None:
                by_span.setdefault((span.trace_id, span.span_id), []).append(log)
    return by_span


class _Holders:
    """The model-call spans by start time, to find the one a loose record's time falls in: of
    the spans whose interval holds it, the latest started (the first of them as given, on a
    tie). A binary search, then a walk back that stops where no earlier span can still be
    running (the running maximum of the ends): time in proportion to the spans open at that
    moment, not to the file."""

    def __init__(self, spans: Sequence[OtelSpan]) -> None:
        calls = [s for s in spans if operation_of(s) is not None and s.start_ns is not None]
        ordered = sorted(range(len(calls)), key=lambda i: (calls[i].start_ns or 0, i))
        self._spans = [calls[i] for i in ordered]
        self._starts = [s.start_ns or 0 for s in self._spans]
        self._reach: list[int] = []
        """The latest end of the spans up to each position."""
        reach = -1
        for span in self._spans:
            reach = max(reach, span.end_ns or span.start_ns or 0)
            self._reach.append(reach)

    def latest_holding(self, time_ns: int) -> OtelSpan | None:
        found: OtelSpan | None = None
        at = bisect.bisect_right(self._starts, time_ns) - 1
        while at >= 0 and self._reach[at] >= time_ns:
            span = self._spans[at]
            start = self._starts[at]
            if found is not None and start < (found.start_ns or 0):
                break
            if time_ns <= (span.end_ns or start):
                found = span  # an earlier one of the same start replaces it: the first given
            at -= 1
        return found


def _read(span: OtelSpan, logs: Sequence[OtelLog], notes: SpanNotes) -> ModelCall | None:
    for convention in CONVENTIONS:
        if not convention.claims(span, logs):
            continue
        try:
            call = convention.read(span, notes, logs)
        except Unreadable as problem:
            notes.add(problem.kind, problem.reason, span.where)
            return None
        except RecursionError:
            notes.add(
                "too-deep", "messages nested too deeply to read; the span was skipped", span.where
            )
            return None
        return call
    if operation_of(span) is not None:
        notes.add(
            "no-messages",
            "model-call spans without recorded messages were skipped: the instrumentation's "
            "content capture is off (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "
            "TRACELOOP_TRACE_CONTENT, …), or its messages went to log records that are not in "
            "this file",
            span.where,
        )
        return None
    notes.skipped[skipped_label(span)] += 1
    return None


def _canonical_arguments(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return json.dumps(json.loads(text), sort_keys=True)
        except (ValueError, RecursionError):
            return text
    return text


def _content_key(content: Any) -> str:
    if isinstance(content, str) or content is None:
        return content or ""
    return json.dumps(content, sort_keys=True, default=str)


def input_key(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """What two descriptions of one call share whatever their formatting: each message's role,
    text, tool calls (arguments compared as JSON values) and tool-call id."""
    out = []
    for message in body.get("messages", ()):
        if not isinstance(message, Mapping):
            continue
        calls = tuple(
            (
                (call.get("function") or {}).get("name"),
                _canonical_arguments((call.get("function") or {}).get("arguments")),
            )
            for call in message.get("tool_calls") or ()
            if isinstance(call, Mapping)
        )
        out.append((message.get("role"), _content_key(message.get("content")), calls))
    return tuple(out)


def _merge_tails(calls: list[ModelCall]) -> list[ModelCall]:
    """Each streamed call's tail merged into the request span it answers: the latest one
    before it under the same parent that has no answer yet and the same messages."""
    out: list[ModelCall] = []
    siblings: dict[tuple[str, str | None], list[int]] = {}
    """Positions in ``out`` of the requests under each (trace, parent)."""
    for call in calls:
        if not call.stream_tail:
            siblings.setdefault((call.span.trace_id, call.span.parent_id), []).append(len(out))
            out.append(call)
            continue
        key = input_key(call.body)
        at = call.started if call.started is not None else float("inf")
        candidates = siblings.get((call.span.trace_id, call.span.parent_id), ())
        match = next(
            (
                i
                for i in reversed(candidates)
                if out[i].usage is None
                and out[i].response is None
                and (out[i].started or 0.0) <= at
                and input_key(out[i].body) == key
            ),
            None,
        )
        if match is None:
            siblings.setdefault((call.span.trace_id, call.span.parent_id), []).append(len(out))
            out.append(dataclasses.replace(call, stream_tail=False))
            continue
        request = out[match]
        out[match] = dataclasses.replace(
            request,
            response=call.response,
            usage=call.usage,
            finished=call.finished if call.finished is not None else request.finished,
            body={**call.body, **request.body},
        )
    return out


def _score(call: ModelCall) -> tuple[int, ...]:
    usage = call.usage
    return (
        int(usage is not None and usage.hit_tokens is not None),
        int(usage is not None),
        int(usage is not None and usage.origin is not None and "provider's own" in usage.origin),
        int("model" in call.body),
        int("tools" in call.body),
        int(call.response is not None),
    )


def _overlap(a: ModelCall, b: ModelCall) -> bool:
    if a.started is None or b.started is None:
        return False
    a_end = a.finished if a.finished is not None else a.started
    b_end = b.finished if b.finished is not None else b.started
    return a.started <= b_end and b.started <= a_end


def _same_inputs(keys: Sequence[tuple[Any, ...]]) -> list[list[int]]:
    """The positions of ``keys`` grouped by equal key, each group in order (keys that cannot be
    hashed — a tool call's arguments given as an object — share one group, compared there)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    loose: list[int] = []
    for i, key in enumerate(keys):
        try:
            groups.setdefault(key, []).append(i)
        except TypeError:
            loose.append(i)
    return [*groups.values(), loose] if loose else list(groups.values())


def _dedupe(calls: list[ModelCall], notes: list[str]) -> list[ModelCall]:
    """Calls described twice (the same messages, overlapping in time) read once. Only calls
    with the same messages are compared, and, the calls being in the order they started, each
    with the ones that started before it ended: time in proportion to the calls, not their
    square."""
    keys = [input_key(c.body) for c in calls]
    dropped: set[int] = set()
    pairs: Counter[tuple[str, str]] = Counter()
    for group in _same_inputs(keys):
        starts = [calls[i].started for i in group]
        ordered = all(
            b is None or (a is not None and a <= b) for a, b in itertools.pairwise(starts)
        )
        for at, i in enumerate(group):
            if i in dropped:
                continue
            first = calls[i]
            end = first.finished if first.finished is not None else first.started
            for j in group[at + 1 :]:
                later = calls[j].started
                if ordered and (later is None or end is None or later > end):
                    break  # it and every later one started after this one ended (or never)
                if j in dropped or keys[j] != keys[i] or not _overlap(calls[i], calls[j]):
                    continue
                if calls[j].span.span_id == calls[i].span.span_id:
                    continue
                keep, lose = (i, j) if _score(calls[i]) >= _score(calls[j]) else (j, i)
                kept, other = calls[keep], calls[lose]
                body = dict(kept.body)
                for name in ("model", "tools"):
                    if name not in body and name in other.body:
                        body[name] = other.body[name]
                calls[keep] = dataclasses.replace(
                    kept,
                    body=body,
                    response=kept.response if kept.response is not None else other.response,
                    usage=kept.usage if kept.usage is not None else other.usage,
                    conversation=kept.conversation or other.conversation,
                )
                a, b = sorted((kept.scope or "?", other.scope or "?"))
                pairs[a, b] += 1
                dropped.add(lose)
                if lose == i:
                    break
    for (a, b), count in sorted(pairs.items()):
        who = f"by {a} and {b}" if a != b else f"twice by {a}"
        notes.append(
            f"{count} model call(s) were described twice ({who}: the same messages, at the same "
            "time): each was read once"
        )
    return [c for i, c in enumerate(calls) if i not in dropped]


def model_calls(
    spans: Sequence[OtelSpan], logs: Sequence[OtelLog], notes: SpanNotes, lines: list[str]
) -> list[ModelCall]:
    """The model calls the records describe (see the module docstring); ``lines`` gets the
    notes about merged and duplicate calls."""
    joined = _join(spans, logs)
    calls: list[ModelCall] = []
    for span in sorted(spans, key=lambda s: (s.start_ns is None, s.start_ns or 0, s.order)):
        call = _read(span, joined.get((span.trace_id, span.span_id), ()), notes)
        if call is not None:
            calls.append(call)
    tails = sum(1 for c in calls if c.stream_tail)
    calls = _merge_tails(calls)
    merged = tails - sum(1 for c in calls if c.span.attributes.get("logfire.span_type") == "log")
    if merged:
        lines.append(
            f"{merged} streamed call(s) were written as two spans (the request, and the answer "
            "when the stream ended): each pair was read as one request"
        )
    calls = _dedupe(calls, lines)
    calls.sort(key=lambda c: (c.started is None, c.started or 0.0, c.span.order))
    return calls
