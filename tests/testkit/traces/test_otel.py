"""OpenTelemetry GenAI spans (OTLP JSON) read into the Trace model.

The samples in tests/fixtures/otel were recorded by real instrumentations against the loopback
mock (tools/otel_samples.py): pydantic-ai, the OpenAI Agents SDK through the OpenTelemetry
contrib bridge, and OpenLLMetry in its current and its older attribute style. One test records
spans live and compares what the reader rebuilds with what the mock received on the wire.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.doctor import conversations, diagnose, expand_report
from dsh_testkit.mock import MockServer, Reply
from dsh_testkit.traces import Exchange, Trace, TraceError, load_trace, loads_trace
from dsh_testkit.traces._readers._otlp import read_otlp_json, sniff_otlp_json
from tests._support import run_cli
from tools import otel_samples
from tools.otel_samples import RULES, SpanRecorder, fake_clock, record_pydantic_ai

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "otel"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
START = 1_796_230_800.0
"""The samples' fake clock starts at 2026-12-02T17:00:00Z and ticks half a second per reading."""


def sample(name: str) -> Trace:
    return load_trace(FIXTURES / f"{name}.otlp.jsonl")


def attributes_of(name: str) -> list[dict[str, Any]]:
    """Each span's raw attributes in the sample, decoded by hand (a second reading of the file)."""
    out = []
    for line in (FIXTURES / f"{name}.otlp.jsonl").read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for group in resource["scopeSpans"]:
                for span in group["spans"]:
                    out.append({a["key"]: a["value"] for a in span["attributes"]})
    return out


def tool_calls(exchange: Exchange) -> list[tuple[str, str, str]]:
    return [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for m in exchange.messages
        for c in m.get("tool_calls") or ()
    ]


def otlp_line(*spans: dict[str, Any], scope: str = "test-instrumentation") -> str:
    return json.dumps(
        {"resourceSpans": [{"scopeSpans": [{"scope": {"name": scope}, "spans": list(spans)}]}]}
    )


def chat_span(span_id: str = "01", start: int = 1_000_000_000, **attributes: Any) -> dict[str, Any]:
    """A span with string attributes (and any raw AnyValue given as a dict); ``__`` in a
    keyword stands for a dot."""
    attributes = {k.replace("__", "."): v for k, v in attributes.items()}
    attributes.setdefault("gen_ai.operation.name", "chat")
    attributes.setdefault(
        "gen_ai.input.messages",
        json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]),
    )
    return {
        "traceId": "aa" * 16,
        "spanId": span_id * 8,
        "name": "chat",
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500_000_000),
        "attributes": [
            {"key": k, "value": v if isinstance(v, dict) else {"stringValue": v}}
            for k, v in attributes.items()
        ],
    }


# -- the samples ----------------------------------------------------------------------------------


def test_pydantic_ai_sample() -> None:
    trace = sample("pydantic-ai")
    assert trace.source == "otel"
    assert len(trace) == 5  # three user turns, two of them with a tool round trip
    assert all(not e.body_exact and e.endpoint == "chat" for e in trace)
    first, second = trace.exchanges[:2]
    # pydantic-ai keeps the system prompt in gen_ai.system_instructions: it comes first again.
    assert first.body["messages"] == [
        {"role": "system", "content": RULES},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    assert first.body["model"] == "deepseek-v4-flash"
    # pydantic-ai derives the schema from the function (hence additionalProperties).
    (tool,) = first.body["tools"]
    assert tool["type"] == "function"
    assert {k: tool["function"][k] for k in ("name", "description")} == {
        "name": "get_weather",
        "description": "The current weather in a city.",
    }
    assert tool["function"]["parameters"]["properties"] == {"city": {"type": "string"}}
    assert first.response == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "The user asks for Oslo; call the tool.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    # The answer comes back as the next request's assistant turn, the tool's result after it.
    assert second.messages[2] == first.response
    assert second.messages[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "light snow, -3 °C",
    }
    assert tool_calls(trace.exchanges[4]) == [
        ("call_1", "get_weather", '{"city": "Oslo"}'),
        ("call_2", "get_weather", '{"city": "Paris"}'),
    ]
    assert trace.exchanges[4].messages[-1] == {
        "role": "user",
        "content": "Which of the two is warmer?",
    }
    # One conversation id across three agent runs (three traces).
    (conversation,) = conversations(trace)
    assert conversation.key == first.conversation and len(conversation) == 5
    # Times: from the span, in seconds, in order.
    assert (first.started, first.finished) == (START + 0.5, START + 1.0)
    assert [e.started for e in trace] == sorted(e.started or 0 for e in trace)
    assert all(e.first_byte is None for e in trace)  # pydantic-ai records no chunk events
    assert any("'execute_tool' are not model calls" in n for n in trace.notes)
    assert any("'invoke_agent' are not model calls" in n for n in trace.notes)


def test_pydantic_ai_omits_a_zero_cache_read_count_which_reads_as_zero() -> None:
    trace = sample("pydantic-ai")
    chats = [a for a in attributes_of("pydantic-ai") if "gen_ai.input.messages" in a]
    # What the file holds: no cache-read attribute on the first call, a count on the others.
    assert "gen_ai.usage.cache_read.input_tokens" not in chats[0]
    reported = [int(a["gen_ai.usage.cache_read.input_tokens"]["intValue"]) for a in chats[1:]]
    usage = [e.usage for e in trace]
    assert all(u is not None for u in usage)
    assert [u.hit_tokens for u in usage if u] == [0, *reported]
    assert [u.prompt_tokens for u in usage if u] == [
        int(a["gen_ai.usage.input_tokens"]["intValue"]) for a in chats
    ]
    assert trace.has_usage


def test_a_missing_cache_read_count_is_unknown_outside_pydantic_ai() -> None:
    line = otlp_line(chat_span(gen_ai__usage__input_tokens={"intValue": "300"}))
    (exchange,) = read_otlp_json(line + "\n")
    assert exchange.usage is not None
    assert (exchange.usage.prompt_tokens, exchange.usage.hit_tokens) == (300, None)
    pydantic = otlp_line(
        chat_span(gen_ai__usage__input_tokens={"intValue": "300"}), scope="pydantic-ai"
    )
    (exchange,) = read_otlp_json(pydantic + "\n")
    assert exchange.usage is not None and exchange.usage.hit_tokens == 0


def test_pydantic_ai_timestamp_sample_is_diagnosed() -> None:
    trace = sample("pydantic-ai-timestamp")
    systems = [e.messages[0]["content"] for e in trace]
    assert [s.splitlines()[-1] for s in systems] == [
        f"Now: 2026-12-02T17:{m:02d}:00Z" for m in range(5)
    ]
    assert {e.conversation for e in trace} == {trace.exchanges[0].conversation}
    report = diagnose(trace)
    assert report.figures == "reported"
    # four requests lost by the ticking clock; the first is named a risk (its clock, not yet moved)
    assert report.counts() == {"volatile-system-text": 5}


def test_openai_agents_sample() -> None:
    trace = sample("openai-agents")
    assert len(trace) == 5
    first, second = trace.exchanges[:2]
    # The bridge writes the system prompt both in the messages and apart: it is kept once.
    assert first.body["messages"] == [
        {"role": "system", "content": RULES},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    # It writes each tool result twice (a text part and the response part): one tool message.
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "light snow, -3 °C",
    }
    assert second.messages[2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
    # What it does not record: tool definitions, the cache-read count, the tool calls it answered.
    assert all("tools" not in e.body for e in trace)
    assert any("carry no tool definitions" in n for n in trace.notes)
    assert not trace.has_usage
    assert [e.usage.hit_tokens for e in trace if e.usage] == [None] * 5
    assert first.response == {"role": "assistant", "content": ""}
    # No conversation id: the requests are grouped by content, into one conversation.
    assert all(e.conversation is None for e in trace)
    assert [len(c) for c in conversations(trace)] == [5]
    assert diagnose(trace).figures == "simulated"
    assert any("'unknown' are not model calls" in n for n in trace.notes)


def test_openllmetry_sample() -> None:
    trace = sample("openllmetry")
    assert len(trace) == 5
    attributes = attributes_of("openllmetry")
    assert {a["gen_ai.provider.name"]["stringValue"] for a in attributes} == {"openai"}
    first = trace.exchanges[0]
    assert first.body["messages"][0]["role"] == "system"  # in the input messages
    assert first.body["messages"][0]["content"].startswith(RULES)
    assert first.body["tools"] == [WEATHER_TOOL]
    # Arguments are recorded as objects: rebuilt as compact JSON text.
    assert tool_calls(trace.exchanges[4]) == [
        ("call_1", "get_weather", '{"city":"Oslo"}'),
        ("call_2", "get_weather", '{"city":"Paris"}'),
    ]
    assert first.response is not None and first.response["content"] == ""
    # Streamed calls: the first chunk event gives the first byte.
    streamed = [e.body.get("stream") is True for e in trace]
    assert streamed == [False, True, False, True, False]
    for exchange, stream in zip(trace, streamed, strict=True):
        if stream:
            assert exchange.started is not None and exchange.first_byte is not None
            assert exchange.started < exchange.first_byte < (exchange.finished or 0)
        else:
            assert exchange.first_byte is None
    # OpenLLMetry writes the cache-read count even when it is zero.
    assert attributes[0]["gen_ai.usage.cache_read.input_tokens"] == {"intValue": "0"}
    assert first.usage is not None and first.usage.hit_tokens == 0
    # No conversation id, no parent span: linked by content despite the changing system prompt.
    assert all(e.conversation is None for e in trace)
    assert [len(c) for c in conversations(trace)] == [5]
    assert diagnose(trace).counts() == {"volatile-system-text": 5}  # 4 losses, 1 risk


def test_openllmetry_legacy_attributes_give_the_same_requests() -> None:
    legacy, current = sample("openllmetry-legacy"), sample("openllmetry")
    assert "gen_ai.prompt.0.role" in attributes_of("openllmetry-legacy")[0]
    assert len(legacy) == len(current) == 5

    def normalized(exchange: Exchange) -> list[Any]:
        out = []
        for message in exchange.messages:
            message = dict(message)
            if message.get("tool_calls"):
                message["content"] = message.get("content") or None
                message["tool_calls"] = [
                    {
                        **c,
                        "function": {
                            **c["function"],
                            "arguments": json.loads(c["function"]["arguments"]),
                        },
                    }
                    for c in message["tool_calls"]
                ]
            out.append(message)
        return out

    for old, new in zip(legacy, current, strict=True):
        assert normalized(old) == normalized(new)
        assert old.body["tools"] == new.body["tools"] == [WEATHER_TOOL]
        assert old.usage == new.usage
        assert (old.started, old.finished, old.first_byte) == (
            new.started,
            new.finished,
            new.first_byte,
        )
    # The older attributes carried the arguments as the model wrote them.
    assert tool_calls(legacy.exchanges[4])[0] == ("call_1", "get_weather", '{"city": "Oslo"}')


@pytest.mark.slow
def test_cache_report_command_on_a_sample() -> None:
    path = str(FIXTURES / "openllmetry.otlp.jsonl")
    done = run_cli("cache-report", path)
    assert done.returncode == 0, done.stderr
    assert "otel · 1 conversation(s) · 5 request(s)" in done.stdout
    assert "note: requests rebuilt from OpenTelemetry records" in done.stdout
    as_json = run_cli("cache-report", "--json", path)
    assert as_json.returncode == 0, as_json.stderr
    report = expand_report(json.loads(as_json.stdout))
    assert (report["source"], report["figures"]) == ("otel", "reported")
    (conversation,) = report["conversations"]
    usage = [e.usage for e in sample("openllmetry")]
    assert [(r["promptTokens"], r["hitTokens"]) for r in conversation["requests"]] == [
        (u.prompt_tokens, u.hit_tokens) for u in usage if u
    ]
    assert [[f["code"] for f in r["findings"]] for r in conversation["requests"]] == [
        ["volatile-system-text"],  # the first: a risk (its clock, not yet moved), costing nothing
        *[["volatile-system-text"]] * 4,
    ]
    assert [f["severity"] for f in conversation["requests"][0]["findings"]] == ["note"]


def test_body_exact_is_written_only_when_false() -> None:
    exchange = sample("openllmetry").exchanges[0]
    assert exchange.to_json()["bodyExact"] is False
    exact = Exchange(index=0, endpoint="chat", body={"messages": []})
    assert exact.body_exact and "bodyExact" not in exact.to_json()


# -- the file -------------------------------------------------------------------------------------


def test_sniff() -> None:
    for name in ("pydantic-ai", "openllmetry-legacy"):
        head = (FIXTURES / f"{name}.otlp.jsonl").read_text(encoding="utf-8")[:4096]
        assert sniff_otlp_json(head)
    assert sniff_otlp_json('\ufeff{\n  "resourceSpans": [')
    for other in (
        '{"format": "dsh-trace", "version": 1}',
        '{"type": "session", "id": "x"}',
        '{"log": {"entries": []}}',
        '{"requests": [], "resourceSpans": []}',
        "format: dsh-cassette\n",
        "",
    ):
        assert not sniff_otlp_json(other), other


def test_one_json_document_reads_as_its_lines() -> None:
    text = (FIXTURES / "openllmetry.otlp.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    merged = {"resourceSpans": [r for line in lines for r in json.loads(line)["resourceSpans"]]}
    whole = loads_trace(json.dumps(merged, indent=2), path="whole.json")
    assert whole.source == "otel"
    assert [e.body for e in whole] == [e.body for e in sample("openllmetry")]


def test_other_signals_and_duplicate_spans_are_noted() -> None:
    line = otlp_line(chat_span())
    text = "\n".join([line, '{"resourceLogs": []}', '{"resourceMetrics": []}', line]) + "\n"
    trace = read_otlp_json(text)
    assert len(trace) == 1
    assert "1 export request(s) of resourceMetrics (not spans or logs) were skipped" in trace.notes
    assert any("1 duplicate span(s)" in n for n in trace.notes)


def test_structured_attribute_values_read_like_json_strings() -> None:
    """gen_ai.* values as arrayValue/kvlistValue, counts as numbers, as the OTLP mapping allows."""

    def kv(**values: Any) -> dict[str, Any]:
        return {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in values.items()]}}

    text = {"stringValue": "text"}
    parts = {"arrayValue": {"values": [kv(type=text, content={"stringValue": "hi"})]}}
    messages = {"arrayValue": {"values": [kv(role={"stringValue": "user"}, parts=parts)]}}
    structured = otlp_line(
        chat_span(
            gen_ai__input__messages=messages,
            gen_ai__usage__input_tokens={"intValue": 70},
            gen_ai__usage__cache_read__input_tokens={"intValue": "64"},
            gen_ai__request__temperature={"doubleValue": 0.5},
            gen_ai__is_streaming={"boolValue": True},
        )
    )
    (exchange,) = read_otlp_json(structured + "\n")
    assert exchange.body == {
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.5,
        "stream": True,
    }
    assert exchange.usage is not None
    assert (exchange.usage.prompt_tokens, exchange.usage.hit_tokens) == (70, 64)


def test_spans_are_ordered_by_start_and_undated_ones_last() -> None:
    def said(text: str) -> str:
        return json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])

    late = chat_span("02", start=3_000_000_000, gen_ai__input__messages=said("late"))
    early = chat_span("03", start=2_000_000_000, gen_ai__input__messages=said("early"))
    undated = chat_span("04", gen_ai__input__messages=said("undated"))
    del undated["startTimeUnixNano"], undated["endTimeUnixNano"]
    trace = read_otlp_json(otlp_line(undated, late, early) + "\n")
    assert [e.messages[0]["content"] for e in trace] == ["early", "late", "undated"]
    assert [e.index for e in trace] == [0, 1, 2]
    assert trace.exchanges[2].started is None


# -- hostile input --------------------------------------------------------------------------------


def test_a_torn_last_line_is_dropped_with_a_note() -> None:
    text = (FIXTURES / "openllmetry.otlp.jsonl").read_text(encoding="utf-8")
    cut = text[: len(text) - 200]  # the last line loses its end and its newline
    trace = loads_trace(cut)
    assert len(trace) == 4  # the last line held the last user turn's one model call
    assert any("an unfinished last line (line 3" in n for n in trace.notes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            otlp_line(chat_span()) + "\n{not json\n" + otlp_line(chat_span("05")) + "\n",
            "line 2 is not JSON",
        ),
        ('{"resourceSpans": {}}\n', "line 1: resourceSpans must be a JSON list, not an object"),
        (
            '{"resourceSpans": [[]]}\n',
            "line 1: resourceSpans[0] must be a JSON object, not an array",
        ),
        ("[1, 2]\n", "line 1: an array that is not an OTLP export request"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": {}}]}]}]}\n',
            "line 1: resourceSpans[0].scopeSpans[0].spans[0].attributes must be a JSON list",
        ),
        (
            otlp_line({"spanId": "1", "startTimeUnixNano": "-5"}) + "\n",
            "startTimeUnixNano must not be negative",
        ),
        (
            otlp_line({"spanId": "1", "startTimeUnixNano": "soon"}) + "\n",
            "startTimeUnixNano must be an integer (a decimal string), not 'soon'",
        ),
        (
            otlp_line(chat_span(x={"intValue": "99999999999999999999"})) + "\n",
            "is out of the 64-bit range",
        ),
        (otlp_line(chat_span(x={"intValue": "9" * 100_000})) + "\n", "must be an integer"),
        (otlp_line(chat_span(x={"intValue": True})) + "\n", "must be an integer"),
        (otlp_line(chat_span(x={"colorValue": "red"})) + "\n", "unknown value kind 'colorValue'"),
        (
            otlp_line(chat_span(x={"stringValue": "a", "intValue": "1"})) + "\n",
            "must hold one value, it has intValue, stringValue",
        ),
        (otlp_line(chat_span(x={"boolValue": "yes"})) + "\n", "boolValue must be true or false"),
        (otlp_line(chat_span(x={"doubleValue": [1]})) + "\n", "doubleValue must be a number"),
        (
            otlp_line(chat_span(x={"arrayValue": []})) + "\n",
            "('x').arrayValue must be a JSON object, not an array",
        ),
        ('{"resourceSpans": ' + "[" * 100_000 + "\n", "line 1 is not JSON (nested too deeply)"),
        (
            '{"resourceSpans": [\n  {"scopeSpans": [}\n]}\n',
            "nor is the whole file one JSON document",
        ),
    ],
    ids=[
        "bad-middle-line",
        "resourceSpans-object",
        "resource-list",
        "not-an-object",
        "attributes-object",
        "negative-time",
        "word-time",
        "int-over-64-bits",
        "int-100k-digits",
        "int-bool",
        "unknown-kind",
        "two-values",
        "bool-string",
        "double-list",
        "value-list",
        "json-nested-deep",
        "broken-document",
    ],
)
def test_malformed_content_is_a_trace_error_naming_line_and_field(text: str, message: str) -> None:
    with pytest.raises(TraceError) as caught:
        read_otlp_json(text, path="spans.jsonl")
    assert message in str(caught.value)
    assert caught.value.path == "spans.jsonl"


def test_values_nested_too_deep_are_refused() -> None:
    value: dict[str, Any] = {"stringValue": "x"}
    for _ in range(200):
        value = {"arrayValue": {"values": [value]}}
    with pytest.raises(TraceError, match="nests values more than 64 deep"):
        read_otlp_json(otlp_line(chat_span(x=value)) + "\n")


@pytest.mark.parametrize(
    ("attributes", "note"),
    [
        (
            {"gen_ai__input__messages": '[{"role": "user", "parts": [{"type": "te'},
            "is not valid JSON",
        ),
        ({"gen_ai__input__messages": '{"role": "user"}'}, "is not a list of messages"),
        ({"gen_ai__input__messages": "[1]"}, "is not a message with a role"),
        (
            {"gen_ai__input__messages": '[{"role": "user", "parts": [7]}]'},
            "is not a part with a type",
        ),
        (
            {"gen_ai__input__messages": '[{"role": "user", "parts": [{"type": "text"}]}]'},
            "message text was not recorded",
        ),
        (
            {"llm__request__type": "chat", "gen_ai__operation__name": {}},
            "without recorded messages",
        ),
        ({"gen_ai__tool__definitions": '"get_weather"'}, "gen_ai.tool.definitions is not a list"),
        ({"gen_ai__input__messages": "[" * 5000}, "is not valid JSON"),
    ],
    ids=[
        "truncated",
        "object",
        "number",
        "part-number",
        "no-content",
        "no-messages",
        "tools-string",
        "deep-json",
    ],
)
def test_unreadable_model_calls_are_skipped_with_a_note(
    attributes: dict[str, Any], note: str
) -> None:
    span = chat_span(**attributes)
    if attributes.get("gen_ai__operation__name") == {}:
        span["attributes"] = [
            a
            for a in span["attributes"]
            if a["key"] not in ("gen_ai.input.messages", "gen_ai.operation.name")
        ]
    good = chat_span("06", start=5_000_000_000)
    trace = read_otlp_json(otlp_line(span, good) + "\n")
    assert len(trace) == 1  # the other span is still read
    assert any(note in n and "first: line 1, span 0101010101010101" in n for n in trace.notes), (
        trace.notes
    )


@pytest.mark.parametrize(
    ("usage", "note"),
    [
        ({"gen_ai__usage__input_tokens": "many"}, "is not a token count"),
        ({"gen_ai__usage__input_tokens": {"intValue": str(2**60)}}, "is not a token count"),
        ({"gen_ai__usage__input_tokens": {"intValue": "-1"}}, "is not a token count"),
        (
            {
                "gen_ai__usage__input_tokens": {"intValue": "10"},
                "gen_ai__usage__cache_read__input_tokens": {"intValue": "64"},
            },
            "exceeds the input tokens",
        ),
    ],
)
def test_odd_usage_is_left_out_with_a_note(usage: dict[str, Any], note: str) -> None:
    (exchange,) = trace = read_otlp_json(otlp_line(chat_span(**usage)) + "\n")
    assert exchange.usage is None or exchange.usage.hit_tokens is None
    assert any(note in n for n in trace.notes), trace.notes


def test_an_operation_name_that_is_not_text_is_not_a_model_call() -> None:
    kv = {"kvlistValue": {"values": [{"key": "name", "value": {"stringValue": "chat"}}]}}
    trace = read_otlp_json(otlp_line(chat_span(gen_ai__operation__name=kv)) + "\n")
    assert len(trace) == 0
    assert trace.notes == (
        "no model call can be rebuilt from 1 span(s) and 0 log record(s): 1 span(s) without "
        "gen_ai.operation.name are not model calls and were skipped",
        "1 span(s) without gen_ai.operation.name are not model calls and were skipped",
    )


def test_a_span_that_ends_before_it_starts_keeps_its_start() -> None:
    span = chat_span(start=9_000_000_000)
    span["endTimeUnixNano"] = "1000"
    (exchange,) = trace = read_otlp_json(otlp_line(span) + "\n")
    assert (exchange.started, exchange.finished) == (9.0, None)
    assert any("ends before it starts" in n for n in trace.notes)


def test_a_sample_cut_anywhere_reads_or_raises_a_trace_error() -> None:
    text = (FIXTURES / "openllmetry.otlp.jsonl").read_text(encoding="utf-8")
    for end in range(0, len(text), max(1, len(text) // 150)):
        try:
            trace = loads_trace(text[:end] or " ")
        except TraceError:
            continue
        assert trace.source == "otel"


# -- live ------------------------------------------------------------------------------------------


def test_live_pydantic_ai_spans_match_what_the_mock_received(tmp_path: Path) -> None:
    """A real instrumentation, in process, against the loopback mock: the rebuilt requests are
    the wire requests, except what spans do not record (their difference is asserted too)."""
    with MockServer() as server, fake_clock():
        server.mock.push(*otel_samples._script())
        recorder = SpanRecorder("live")
        asyncio.run(
            record_pydantic_ai(server, recorder, timestamp=False, model="deepseek-v4-flash")
        )
        received = [r for r in server.mock.requests if r.endpoint == "chat"]
    path = tmp_path / "live.otlp.jsonl"
    path.write_text("".join(line + "\n" for line in recorder.lines), encoding="utf-8")
    trace = load_trace(path)
    assert len(trace) == len(received) == 5
    for exchange, request in zip(trace, received, strict=True):
        wire = request.body
        rebuilt = dict(exchange.body)
        assert rebuilt["model"] == wire["model"]
        assert [t["function"]["name"] for t in rebuilt["tools"]] == [
            t["function"]["name"] for t in wire["tools"]
        ]
        assert len(rebuilt["messages"]) == len(wire["messages"])
        for ours, theirs in zip(rebuilt["messages"], wire["messages"], strict=True):
            # Arguments are the model's text in the span; pydantic-ai re-serializes them.
            ours_calls = [
                (c["id"], json.loads(c["function"]["arguments"]))
                for c in ours.get("tool_calls", ())
            ]
            theirs_calls = [
                (c["id"], json.loads(c["function"]["arguments"]))
                for c in theirs.get("tool_calls", ())
            ]
            assert ours_calls == theirs_calls
            assert {k: v for k, v in ours.items() if k != "tool_calls"} == {
                k: v for k, v in theirs.items() if k != "tool_calls"
            }
        assert exchange.usage is not None
        assert (exchange.usage.prompt_tokens, exchange.usage.hit_tokens) == (
            request.extras["promptTokens"],
            request.extras["cacheHitTokens"],
        )


@pytest.mark.slow
# OpenLLMetry 0.62.4 declares a pydantic model with a class-based config (pydantic deprecates it).
@pytest.mark.filterwarnings(
    "ignore:Support for class-based:pydantic.warnings.PydanticDeprecatedSince20"
)
@pytest.mark.parametrize(
    "name", ["pydantic-ai", "pydantic-ai-timestamp", "openai-agents", "openllmetry"]
)
def test_the_committed_samples_are_what_the_generator_writes(name: str) -> None:
    committed = (FIXTURES / f"{name}.otlp.jsonl").read_text(encoding="utf-8")
    assert otel_samples.SAMPLES[name]() == committed, (
        f"{name}: the instrumentation now writes other spans; re-run python -m tools.otel_samples"
    )


@pytest.mark.slow
@pytest.mark.filterwarnings(
    "ignore:Support for class-based:pydantic.warnings.PydanticDeprecatedSince20"
)
@pytest.mark.parametrize("name", ["openllmetry", "openai-agents"])
def test_a_sample_leaves_no_instrumentation_behind(name: str) -> None:
    """After a sample is generated, the openai SDK is as it was: a later request of the process
    carries no trace context (a cassette recorded after it would differ on every run)."""
    import openai

    otel_samples.SAMPLES[name]()
    assert otel_samples.unwrap_openai() == []
    with MockServer() as server:
        server.mock.push(Reply(text="ok"))
        with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client:
            client.chat.completions.create(
                model="deepseek-v4-flash", messages=[{"role": "user", "content": "hi"}]
            )
        [request] = server.mock.requests
    names = {name.lower() for name, _ in request.headers}
    assert not names & {"traceparent", "tracestate", "baggage"}, sorted(names)
