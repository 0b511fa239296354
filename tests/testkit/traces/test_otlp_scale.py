"""Reading OpenTelemetry records costs time in proportion to the calls, and says what the
definitions say.

The three steps that compare calls with one another (a loose record joined to the span that
was running at its time, a streamed call's tail merged into its request, a call described twice
read once) find their partners through indexes. Each is checked here against its definition,
written the plain way (every pair compared), over generated records full of ties: equal start
times, overlapping and nested intervals, identical messages, spans with no end, tails with
and without their request. Then a generated export that compared every pair of calls took
15 s at 8,000 calls (4× per doubling); the test asserts the comparisons now grow linearly.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_testkit.traces import load_trace
from dsh_testkit.traces._readers._otlp import _calls
from dsh_testkit.traces._readers._otlp._common import ModelCall, operation_of
from dsh_testkit.traces._readers._otlp._genai import CHOICE_EVENT
from dsh_testkit.traces._readers._otlp._records import OtelLog, OtelSpan

# -- the definitions, every pair compared -----------------------------------------------------


def holder_by_definition(spans: Sequence[OtelSpan], time_ns: int) -> OtelSpan | None:
    calls = [s for s in spans if operation_of(s) is not None and s.start_ns is not None]
    holders = [
        s
        for s in calls
        if s.start_ns is not None and s.start_ns <= time_ns <= (s.end_ns or s.start_ns)
    ]
    return max(holders, key=lambda s: s.start_ns or 0) if holders else None


def merged_by_definition(calls: list[ModelCall]) -> list[ModelCall]:
    out: list[ModelCall] = []
    for call in calls:
        if not call.stream_tail:
            out.append(call)
            continue
        key = _calls.input_key(call.body)
        at = call.started if call.started is not None else float("inf")
        match = next(
            (
                i
                for i in range(len(out) - 1, -1, -1)
                if not out[i].stream_tail
                and out[i].usage is None
                and out[i].response is None
                and out[i].span.parent_id == call.span.parent_id
                and out[i].span.trace_id == call.span.trace_id
                and (out[i].started or 0.0) <= at
                and _calls.input_key(out[i].body) == key
            ),
            None,
        )
        if match is None:
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


def deduped_by_definition(calls: list[ModelCall]) -> tuple[list[ModelCall], list[str]]:
    calls = list(calls)
    keys = [_calls.input_key(c.body) for c in calls]
    dropped: set[int] = set()
    pairs: Counter[tuple[str, str]] = Counter()
    for i in range(len(calls)):
        if i in dropped:
            continue
        for j in range(i + 1, len(calls)):
            if j in dropped or keys[j] != keys[i] or not _calls._overlap(calls[i], calls[j]):
                continue
            if calls[j].span.span_id == calls[i].span.span_id:
                continue
            keep, lose = (i, j) if _calls._score(calls[i]) >= _calls._score(calls[j]) else (j, i)
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
    notes = [
        f"{count} model call(s) were described twice "
        f"({f'by {a} and {b}' if a != b else f'twice by {a}'}: the same messages, at the same "
        "time): each was read once"
        for (a, b), count in sorted(pairs.items())
    ]
    return [c for i, c in enumerate(calls) if i not in dropped], notes


# -- generated records ---------------------------------------------------------------------------

_TIMES = st.integers(min_value=0, max_value=12)
_TEXTS = st.sampled_from(["hi", "hi", "hello"])


@st.composite
def spans(draw: st.DrawFn) -> list[OtelSpan]:
    out = []
    for order in range(draw(st.integers(min_value=0, max_value=14))):
        start = draw(st.none() | _TIMES)
        end = draw(st.none() | _TIMES)
        if end is not None and draw(st.booleans()):
            end += start or 0  # mostly after its start, sometimes before it
        attributes = {"gen_ai.operation.name": "chat"} if draw(st.booleans()) or order else {}
        out.append(
            OtelSpan(
                where=f"line {order}",
                scope=draw(st.sampled_from(["pydantic-ai", "logfire.openai"])),
                trace_id=draw(st.sampled_from(["t1", "t1", "t1", "t2"])),
                span_id=draw(st.sampled_from([f"s{order}", "same"])),
                parent_id=draw(st.sampled_from(["", "p1", "p1"])),
                name="chat",
                start_ns=start,
                end_ns=end,
                attributes=attributes,
                order=order,
            )
        )
    return out


@st.composite
def model_calls(draw: st.DrawFn) -> list[ModelCall]:
    out = []
    for span in sorted(draw(spans()), key=lambda s: (s.start_ns is None, s.start_ns or 0, s.order)):
        messages: list[dict[str, Any]] = [{"role": "user", "content": draw(_TEXTS)}]
        if draw(st.booleans()):
            arguments: Any = draw(st.sampled_from(['{"a": 1}', '{ "a":1 }', {"a": 1}]))
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "f", "arguments": arguments}}],
                }
            )
        body: dict[str, Any] = {"messages": messages}
        if draw(st.booleans()):
            body["model"] = "deepseek-chat"
        out.append(
            ModelCall(
                convention="genai",
                span=span,
                body=body,
                response=draw(st.none() | st.just({"role": "assistant", "content": "x"})),
                usage=None,
                started=None if span.start_ns is None else span.start_ns / 1e9,
                finished=None if span.end_ns is None else span.end_ns / 1e9,
                conversation=draw(st.none() | st.just("c")),
                stream_tail=draw(st.booleans()),
            )
        )
    return out


@settings(max_examples=300)
@given(spans(), st.lists(_TIMES, max_size=8))
def test_a_loose_record_joins_the_span_its_definition_names(
    found: list[OtelSpan], times: list[int]
) -> None:
    logs = [
        OtelLog(
            where=f"line {i}",
            scope="openllmetry",
            trace_id="",
            span_id="",
            event_name=CHOICE_EVENT,
            time_ns=t,
            body=None,
            attributes={},
            order=i,
        )
        for i, t in enumerate(times)
    ]
    joined = _calls._join(found, logs)
    for log in logs:
        expected = holder_by_definition(found, log.time_ns or 0)
        holders = [key for key, records in joined.items() if log in records]
        if expected is None:
            assert holders == []
        else:
            assert holders == [(expected.trace_id, expected.span_id)]
            # the very span: the first given of the latest started
            assert _calls._Holders(found).latest_holding(log.time_ns or 0) is expected


@settings(max_examples=300)
@given(model_calls(), st.randoms(use_true_random=False), st.booleans())
def test_tails_merge_and_twice_described_calls_dedupe_as_defined(
    calls: list[ModelCall], shuffler: Any, shuffled: bool
) -> None:
    merged = _calls._merge_tails(list(calls))
    assert merged == merged_by_definition(list(calls))
    if shuffled:  # not in the order they started: the way without the early stop
        shuffler.shuffle(merged)
    notes: list[str] = []
    deduped = _calls._dedupe(list(merged), notes)
    expected, expected_notes = deduped_by_definition(list(merged))
    assert deduped == expected
    assert notes == expected_notes


def _export(calls: int) -> str:
    """A batch job: the same question asked ``calls`` times, one call after another."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": "Summarize the report."}]}]
    lines = []
    for i in range(calls):
        start = 1_780_000_000_000_000_000 + i * 1_000_000_000
        span = {
            "traceId": f"{i:032x}",
            "spanId": f"{i + 1:016x}",
            "name": "chat",
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 500_000_000),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(messages)}},
            ],
        }
        scope = {"scope": {"name": "x"}, "spans": [span]}
        lines.append(json.dumps({"resourceSpans": [{"scopeSpans": [scope]}]}))
    return "\n".join(lines) + "\n"


def test_the_comparisons_grow_with_the_calls_not_their_square(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted, not timed: how often two calls with the same messages are checked for
    overlapping in time while deduplicating."""
    counts = []
    real = _calls._overlap
    compared = Counter[str]()

    def counted(a: ModelCall, b: ModelCall) -> bool:
        compared["overlap"] += 1
        return real(a, b)

    monkeypatch.setattr(_calls, "_overlap", counted)
    for calls in (400, 800):
        path = tmp_path / f"{calls}.jsonl"
        path.write_text(_export(calls), encoding="utf-8")
        compared.clear()
        trace = load_trace(path)
        assert len(trace) == calls  # asked again and again, never twice at once: all kept
        counts.append(compared["overlap"])
    # every pair would be 79,800 and 319,600 checks: each call now stops at the next one,
    # which started after it ended
    assert counts == [0, 0]
