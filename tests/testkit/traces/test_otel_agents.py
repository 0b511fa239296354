"""Every common GenAI instrumentation, read into one model, judged with the provider's figures.

The samples in tests/fixtures/otel/agents were recorded by the real instrumentation packages
(tools/otel_instrumentations: one pinned environment per family) against `dsh-testkit serve`:
a weather agent, five user turns, seven model requests, once with the current time at the end
of its system prompt ("clock") and once without ("clean"). The mock answered with its simulated
cache, so the provider's figures are known: the clean agent hits 512 or 640 tokens from its
second request on, the clock agent only the 256 tokens before the clock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_testkit.doctor import DoctorReport, diagnose
from dsh_testkit.traces import load_trace
from tests._support import run_cli

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "otel" / "agents"

CLOCK_HITS = [0, 256, 256, 256, 256, 256, 256]
"""The clock agent's hits, as the mock reported them to every instrumentation."""

INSTRUMENTATIONS = {
    # sample: (where its cache figures come from, the convention that reads it)
    "openinference-openai": ("reported", "openinference"),
    "openinference-langchain": ("reported", "openinference"),
    "openinference-llamaindex": ("reported", "openinference"),
    "otel-openai-v2-events": ("simulated", "genai-log-events"),
    "otel-openai-v2-span": ("simulated", "genai"),
    "otel-openai-v2-latest-events": ("simulated", "genai-log-events"),
    "logfire-openai": ("reported", "logfire"),
    "logfire-pydantic-ai": ("reported", "genai"),
    "openllmetry-openai": ("reported", "genai"),
    "openllmetry-langchain": ("reported", "genai"),
    "openllmetry-llamaindex": ("reported", "llamaindex"),
    "openllmetry-legacy-openai": ("reported", "genai-indexed"),
    "openllmetry-legacy-llamaindex": ("simulated", "llamaindex"),
    "azure-ai-inference": ("simulated", "genai-span-events"),
}
"""Each instrumentation (and mode) with a clock and a clean sample. Where it records no cache
figure at all (openai-v2, Azure, OpenLLMetry 0.53's LlamaIndex) the hits are simulated, the
prompt counts still the provider's."""


def report_of(name: str) -> DoctorReport:
    return diagnose(AGENTS / f"{name}.otlp.jsonl")


def losses(report: DoctorReport) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for request in report.requests:
        for finding in request.findings:
            if finding.severity != "note":
                out.setdefault(finding.code, []).append(request.index)
    return out


def reported_prompts(name: str) -> list[int]:
    """The prompt counts the instrumentation recorded, read from the file by hand: the
    span's input token count (once per call: the largest per distinct count, in order)."""
    keys = ("gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.usage.prompt_tokens")
    found: list[int] = []
    for line in (AGENTS / f"{name}.otlp.jsonl").read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line).get("resourceSpans", ()):
            for group in resource["scopeSpans"]:
                for span in group["spans"]:
                    for attribute in span.get("attributes", ()):
                        if attribute["key"] in keys:
                            found.append(int(attribute["value"]["intValue"]))
    return sorted(set(found))


@pytest.mark.parametrize("name", sorted(INSTRUMENTATIONS))
def test_a_clock_in_the_system_prompt_is_a_loss_on_every_later_request(name: str) -> None:
    source, convention = INSTRUMENTATIONS[name]
    report = report_of(f"{name}-clock")
    assert len(report.requests) == 7
    assert losses(report) == {"volatile-system-text": [1, 2, 3, 4, 5, 6]}
    assert [r.hit_tokens for r in report.requests] == CLOCK_HITS
    assert {r.hit_source for r in report.requests} == {source}
    # the provider's prompt counts, never the simulator's
    assert {r.prompt_source for r in report.requests} == {"reported"}
    assert sorted(r.prompt_tokens or 0 for r in report.requests) == reported_prompts(
        f"{name}-clock"
    )
    trace = load_trace(AGENTS / f"{name}-clock.otlp.jsonl")
    assert f"model calls read per convention: 7 by {convention}" in trace.notes


@pytest.mark.parametrize("name", sorted(INSTRUMENTATIONS))
def test_the_same_agent_without_the_clock_has_no_cause(name: str) -> None:
    report = report_of(f"{name}-clean")
    assert len(report.requests) == 7
    assert losses(report) == {}
    assert report.totals.lost_tokens == 0
    hits = [r.hit_tokens for r in report.requests]
    assert hits[0] == 0 and all(h is not None and h >= 512 for h in hits[1:])


def test_reported_figures_are_the_providers_own() -> None:
    # Logfire leaves a cache read of 0 out of gen_ai.usage.cache_read.input_tokens; its
    # gen_ai.usage.raw keeps DeepSeek's prompt_cache_hit_tokens: 0.
    first = load_trace(AGENTS / "logfire-openai-clock.otlp.jsonl").exchanges[0]
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.hit_tokens) == (582, 0)
    assert first.usage.origin == "gen_ai.usage.raw: the provider's own usage"
    # pydantic-ai leaves it out too, and says nothing else: the absence is read as 0, saying so
    first = load_trace(AGENTS / "logfire-pydantic-ai-clock.otlp.jsonl").exchanges[0]
    assert first.usage is not None and first.usage.hit_tokens == 0
    # OpenInference keeps the provider's usage in output.value
    first = load_trace(AGENTS / "openinference-openai-clock.otlp.jsonl").exchanges[0]
    assert first.usage is not None
    assert first.usage.origin == "output.value usage: the provider's own usage"
    report = report_of("otel-openai-v2-span-clock")
    assert report.figures == "simulated"
    assert report.requests[1].to_json()["figures"] == {
        "prompt": "reported",
        "hit": "simulated",
        "origin": "gen_ai.usage.input_tokens; no cache figure recorded",
    }


def test_a_streamed_call_logfire_writes_as_two_spans_is_one_request() -> None:
    trace = load_trace(AGENTS / "logfire-openai-clean.otlp.jsonl")
    assert len(trace) == 7
    assert (
        "2 streamed call(s) were written as two spans (the request, and the answer when the "
        "stream ended): each pair was read as one request"
    ) in trace.notes
    streamed = trace.exchanges[1]
    assert streamed.response is not None and streamed.usage is not None
    assert streamed.started is not None and streamed.finished is not None
    assert streamed.finished > streamed.started


@pytest.mark.parametrize(
    ("name", "pair"),
    [
        ("logfire-pydantic-ai+openai-clean", "logfire.openai and pydantic-ai"),
        (
            "openinference-langchain+openai-clean",
            "openinference.instrumentation.langchain and openinference.instrumentation.openai",
        ),
    ],
)
def test_two_instrumentations_on_one_call_are_read_once(name: str, pair: str) -> None:
    trace = load_trace(AGENTS / f"{name}.otlp.jsonl")
    assert len(trace) == 7
    assert any(
        n.startswith(f"7 model call(s) were described twice (by {pair}") for n in trace.notes
    )
    report = diagnose(trace)
    assert losses(report) == {}


def test_openinference_genai_mode_keeps_the_request_model() -> None:
    # Its gen_ai.request.model is the response's model (deepseek-v4-flash, a thinking model
    # that must get its reasoning back): read as such, every turn would be a refusal.
    report = report_of("openinference-openai-genai-clean")
    assert {r.model for r in report.requests} == {"deepseek-chat"}
    assert losses(report) == {}


def test_llamaindex_tool_calls_come_from_its_own_objects() -> None:
    # OpenLLMetry's GenAI attributes lose LlamaIndex's tool calls; traceloop.entity.input has them
    for name in ("openllmetry-llamaindex-clean", "openllmetry-legacy-llamaindex-clean"):
        trace = load_trace(AGENTS / f"{name}.otlp.jsonl")
        calls = [c for m in trace.exchanges[2].messages for c in m.get("tool_calls") or ()]
        assert [c["function"]["name"] for c in calls] == ["get_weather"], name
        assert trace.exchanges[2].body["tools"][0]["function"]["name"] == "get_weather"
        assert any("request model is not recorded" in n for n in trace.notes)


def test_what_an_instrumentation_does_not_record_is_said() -> None:
    trace = load_trace(AGENTS / "otel-openai-v2-events-clean.otlp.jsonl")
    assert any(
        n.startswith("model calls that use tools carry no tool definitions") for n in trace.notes
    )
    trace = load_trace(AGENTS / "openllmetry-openai-events-clean.otlp.jsonl")
    assert len(trace) == 7
    assert any(n.startswith("tool results are recorded without the id") for n in trace.notes)


@pytest.mark.parametrize(
    "name",
    [
        "otel-openai-v2-span-and-event-clean",
        "logfire-openai-v1-clean",
        "openllmetry-openai-events-clean",
    ],
)
def test_the_other_published_shapes_read_the_same_requests(name: str) -> None:
    trace = load_trace(AGENTS / f"{name}.otlp.jsonl")
    assert len(trace) == 7
    report = diagnose(trace)
    assert losses(report) == {}
    user = [m["content"] for m in trace.exchanges[-1].messages if m["role"] == "user"]
    assert user[-1] == "Thanks. Sum it up in one line."


def test_messages_evicted_by_the_attribute_count_limit_are_not_guessed() -> None:
    trace = load_trace(AGENTS / "openinference-openai-attrlimit32-clean.otlp.jsonl")
    assert len(trace) < 7
    assert any("attribute count limit evicted the oldest attributes" in n for n in trace.notes)
    assert all(e.messages[0]["role"] == "system" for e in trace)


@pytest.mark.parametrize("name", ["openinference-openai-clock", "otel-openai-v2-events-clock"])
def test_the_collectors_protobuf_form_reads_as_its_json_form(name: str) -> None:
    from_json = load_trace(AGENTS / f"{name}.otlp.jsonl")
    from_protobuf = load_trace(AGENTS / f"{name}.binpb")
    assert [e.body for e in from_protobuf] == [e.body for e in from_json]
    assert [e.usage for e in from_protobuf] == [e.usage for e in from_json]
    assert [e.started for e in from_protobuf] == [e.started for e in from_json]


def test_a_file_the_doctor_cannot_use_is_an_error_saying_why(tmp_path: Path) -> None:
    # The spans alone: openai-v2 keeps its messages in log records
    spans = tmp_path / "spans.otlp.jsonl"
    lines = (AGENTS / "otel-openai-v2-events-clean.otlp.jsonl").read_text(encoding="utf-8")
    spans.write_text(
        "".join(line + "\n" for line in lines.splitlines() if '"resourceSpans"' in line),
        encoding="utf-8",
    )
    done = run_cli("cache-report", str(spans))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "nothing to report: no model call can be rebuilt from 7 span(s) and 0 log record(s)" in (
        done.stderr
    )
    assert "content capture is off" in done.stderr
