"""The OpenTelemetry samples under ``tests/fixtures/otel/``: real instrumentations, the loopback mock.

Each sample is one weather agent's multi-turn, tool-using conversation, driven against the
project's mock DeepSeek on loopback (``MockServer``, offline) and traced by a real GenAI
instrumentation. The spans are written as the OpenTelemetry Collector's file exporter writes
them: JSON Lines, one ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) per line,
encoded with the official OTLP encoder (``opentelemetry-exporter-otlp-proto-common``) and
protobuf's JSON mapping, trace and span ids in hex as OTLP JSON requires. One line holds the
spans that ended during one user turn (an exporter's batch).

Samples (``--only`` takes these names):

- ``pydantic-ai``: pydantic-ai's own instrumentation (``InstrumentationSettings``, its default
  data format), a thinking model, three user turns;
- ``pydantic-ai-timestamp``: the same agent with a cache killer, the current time in the
  system prompt (pydantic-ai re-evaluates dynamic instructions for every model request);
- ``openai-agents``: the OpenAI Agents SDK (``OpenAIChatCompletionsModel``) through the
  OpenTelemetry contrib bridge ``opentelemetry-instrumentation-openai-agents-v2``;
- ``openllmetry``: OpenLLMetry (``opentelemetry-instrumentation-openai``) around the official
  ``openai`` client, a hand-written loop, some answers streamed; with the timestamp killer;
- ``openllmetry-legacy``: the same loop with an OpenLLMetry release that still writes the
  indexed ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes. The dev environment
  pins a newer one, so this sample is made in a separate virtual environment::

      python3 -m venv /tmp/legacy && /tmp/legacy/bin/pip install -e . --group dev \\
          opentelemetry-instrumentation-openai==0.53.4
      /tmp/legacy/bin/python -m tools.otel_samples --only openllmetry-legacy

Re-running gives the same bytes: span and trace ids come from a counter, the SDK's clock is a
fake one that advances half a second per reading from 2026-12-02T17:00:00Z (pydantic-ai's
costs are priced at that time too: DeepSeek's rates change with the hour), and what still
varies per run (the mock's port, pydantic-ai's random conversation ids) is replaced by fixed
values. Everything is scrubbed with the project's secret scrubber before it is written, and the
fake API key is checked absent.

Run: ``.venv/bin/python -m tools.otel_samples`` (all samples the environment can make).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import itertools
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from dsh_testkit.mock import MockServer, Reply, ToolCall
from dsh_testkit.scrub._scrubber import scrub_json

__all__ = [
    "SAMPLES",
    "SpanRecorder",
    "encode_line",
    "main",
    "record_pydantic_ai",
    "unwrap_openai",
]

FIXTURES: Final = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "otel"
API_KEY: Final = "sk-otel-samples-not-a-key"
START_NS: Final = 1_796_230_800_000_000_000
"""2026-12-02T17:00:00Z, the fake clock's first reading."""
TICK_NS: Final = 500_000_000
FIXED_PORT: Final = 8765
RULES: Final = "\n".join(
    f"Rule {i}: answer weather questions briefly, with the get_weather tool, and name the city."
    for i in range(1, 7)
)
"""A system prompt long enough to fill several 64-token cache units."""
TURNS: Final = ("Weather in Oslo?", "And in Paris?", "Which of the two is warmer?")
WEATHER: Final = {"Oslo": "light snow, -3 °C", "Paris": "sunny, 14 °C"}


def _script() -> list[Reply]:
    """The mock's answers for the three turns: a tool call and a summary, twice; then text."""
    return [
        Reply(
            reasoning="The user asks for Oslo; call the tool.",
            tool_calls=(ToolCall(name="get_weather", arguments='{"city": "Oslo"}', id="call_1"),),
        ),
        Reply(text="Oslo: light snow, -3 °C.", reasoning="The tool answered."),
        Reply(
            reasoning="Now Paris.",
            tool_calls=(ToolCall(name="get_weather", arguments='{"city": "Paris"}', id="call_2"),),
        ),
        Reply(text="Paris: sunny, 14 °C.", reasoning="The tool answered."),
        Reply(text="Paris is warmer: 14 °C against -3 °C.", reasoning="Compare the two."),
    ]


def _no_reasoning(replies: list[Reply]) -> list[Reply]:
    return [Reply(text=r.text, tool_calls=r.tool_calls, chunk_size=r.chunk_size) for r in replies]


# -- recording ------------------------------------------------------------------------------------


class _CountingIds(IdGenerator):
    """Span and trace ids from a counter, so a re-run writes the same ids."""

    def __init__(self) -> None:
        self._spans = itertools.count(0x1000)
        self._traces = itertools.count(0x100)

    def generate_span_id(self) -> int:
        return next(self._spans)

    def generate_trace_id(self) -> int:
        return 0x5EED_0000_0000_0000_0000_0000_0000_0000 + next(self._traces)


class SpanRecorder:
    """A tracer provider whose finished spans are kept, batched into OTLP JSON lines on demand."""

    def __init__(self, service: str) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(
            resource=Resource({"service.name": service}), id_generator=_CountingIds()
        )
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.lines: list[str] = []

    def flush(self) -> None:
        """One line with every span finished since the last flush (nothing when none did)."""
        spans = self.exporter.get_finished_spans()
        self.exporter.clear()
        if spans:
            self.lines.append(encode_line(spans))


def _hex_ids(value: Any) -> Any:
    """OTLP JSON writes trace and span ids in hex; protobuf's JSON mapping gives base64."""
    if isinstance(value, dict):
        return {
            k: (
                base64.b64decode(v).hex()
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                else _hex_ids(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def encode_line(spans: Sequence[ReadableSpan]) -> str:
    """Spans as one OTLP JSON line (no newline): the official encoder, then the JSON mapping."""
    from google.protobuf.json_format import MessageToDict

    request = encode_spans(spans)
    document = MessageToDict(request, use_integers_for_enums=True)
    return json.dumps(_hex_ids(document), ensure_ascii=False, separators=(",", ":"))


@contextlib.contextmanager
def fake_clock() -> Iterator[None]:
    """The SDK's span clock replaced by one that advances :data:`TICK_NS` per reading."""
    import opentelemetry.sdk.trace as sdk_trace

    ticks = itertools.count()
    namespace = vars(sdk_trace)  # the module reads time_ns from its globals on every span
    real = namespace["time_ns"]
    namespace["time_ns"] = lambda: START_NS + TICK_NS * next(ticks)
    try:
        yield
    finally:
        namespace["time_ns"] = real


@contextlib.contextmanager
def fixed_price_time() -> Iterator[None]:
    """pydantic-ai's cost (``operation.cost``) priced at the fake clock's start, not now.

    pydantic-ai prices each answer with genai-prices at the answer's timestamp, which is the
    machine's clock; DeepSeek's rates change with the hour (off-peak and peak windows, UTC), so
    the sample's cost would depend on when it was made (a test failed between 01:00 and 04:00
    UTC). The price lookup is given the fake clock's first reading instead."""
    import pydantic_ai._genai_prices

    namespace = vars(pydantic_ai._genai_prices)  # it calls calc_price from its globals
    real = namespace["calc_price"]
    when = datetime.datetime.fromtimestamp(START_NS / 1e9, datetime.UTC)

    def at_start(*args: Any, **kwargs: Any) -> Any:
        kwargs["genai_request_timestamp"] = when
        return real(*args, **kwargs)

    namespace["calc_price"] = at_start
    try:
        yield
    finally:
        namespace["calc_price"] = real


_UUID: Final = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def _stable(lines: Sequence[str], port: int, keep_uuids: Sequence[str] = ()) -> str:
    """The sample's text: the port fixed, random ids numbered, scrubbed; the key checked gone."""
    numbered: dict[str, str] = {}

    def number(match: re.Match[str]) -> str:
        found = match.group(0)
        if found in keep_uuids:
            return found
        if found not in numbered:
            numbered[found] = f"00000000-0000-7000-8000-{len(numbered) + 1:012d}"
        return numbered[found]

    out: list[str] = []
    for line in lines:
        line = line.replace(f"127.0.0.1:{port}", f"127.0.0.1:{FIXED_PORT}")
        line = line.replace(f'{{"intValue":"{port}"}}', f'{{"intValue":"{FIXED_PORT}"}}')
        line = _UUID.sub(number, line)
        scrubbed = json.dumps(
            scrub_json(json.loads(line)), ensure_ascii=False, separators=(",", ":")
        )
        if API_KEY in scrubbed:
            raise RuntimeError("the fake API key reached a sample")
        out.append(scrubbed + "\n")
    return "".join(out)


def _mock_ids(server: MockServer) -> list[str]:
    """The mock's response ids (seeded, so already stable: kept as they are)."""
    found: list[str] = []
    for request in server.mock.requests:
        found.extend(_UUID.findall(json.dumps(request.to_json())))
    return found


# -- pydantic-ai ----------------------------------------------------------------------------------


async def record_pydantic_ai(
    server: MockServer, recorder: SpanRecorder, *, timestamp: bool, model: str
) -> None:
    """A pydantic-ai agent, instrumented, over the mock: three user turns, one history."""
    import pydantic_ai
    from openai import AsyncOpenAI
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.deepseek import DeepSeekProvider

    async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0) as client:
        chat_model = OpenAIChatModel(model, provider=DeepSeekProvider(openai_client=client))
        agent: pydantic_ai.Agent[None, str] = pydantic_ai.Agent(
            chat_model, instructions=None if timestamp else RULES
        )
        agent.instrument = InstrumentationSettings(tracer_provider=recorder.provider)
        minute = itertools.count()

        if timestamp:

            @agent.instructions
            def now() -> str:
                # The classic cache killer: a clock in the system prompt, new on every request.
                return f"{RULES}\nNow: 2026-12-02T17:{next(minute):02d}:00Z"

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """The current weather in a city."""
            return WEATHER.get(city, "unknown")

        history: list[Any] = []
        for prompt in TURNS:
            result = await agent.run(prompt, message_history=history)
            history = result.all_messages()
            recorder.flush()


def _pydantic_ai(timestamp: bool) -> Callable[[], str]:
    def make() -> str:
        with MockServer() as server, fake_clock(), fixed_price_time():
            script = _script()
            server.mock.push(*(_no_reasoning(script) if timestamp else script))
            recorder = SpanRecorder("weather-agent")
            model = "deepseek-chat" if timestamp else "deepseek-v4-flash"
            asyncio.run(record_pydantic_ai(server, recorder, timestamp=timestamp, model=model))
            return _stable(recorder.lines, server.port, _mock_ids(server))

    return make


# -- the OpenAI Agents SDK ------------------------------------------------------------------------


def _openai_agents() -> str:
    import agents
    from openai import AsyncOpenAI
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    async def run(server: MockServer, recorder: SpanRecorder) -> None:
        async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0) as c:

            @agents.function_tool
            def get_weather(city: str) -> str:
                """The current weather in a city."""
                return WEATHER.get(city, "unknown")

            agent = agents.Agent(
                name="weather",
                instructions=RULES,
                model=agents.OpenAIChatCompletionsModel(model="deepseek-chat", openai_client=c),
                tools=[get_weather],
            )
            items: list[Any] = []
            for prompt in TURNS:
                result = await agents.Runner.run(
                    agent, [*items, {"role": "user", "content": prompt}]
                )
                items = result.to_input_list()
                recorder.flush()

    with MockServer() as server, fake_clock():
        server.mock.push(*_no_reasoning(_script()))
        recorder = SpanRecorder("weather-agent")
        # Only the bridge's processor: the SDK's default one would export to OpenAI's servers.
        agents.set_trace_processors([])
        instrumentor = OpenAIAgentsInstrumentor()
        instrumentor.instrument(tracer_provider=recorder.provider)
        try:
            asyncio.run(run(server, recorder))
        finally:
            instrumentor.uninstrument()
            agents.set_trace_processors([])
        return _stable(recorder.lines, server.port, _mock_ids(server))


# -- OpenLLMetry ----------------------------------------------------------------------------------

TOOLS: Final = [
    {
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
]


def _openllmetry_loop(server: MockServer, recorder: SpanRecorder) -> None:
    """A hand-written agent loop on the official client; the system prompt carries the time."""
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
    create: Any = client.chat.completions.create  # plain dicts, not the SDK's TypedDicts
    history: list[dict[str, Any]] = []
    minute = itertools.count()
    calls = itertools.count()
    try:
        for prompt in TURNS:
            history.append({"role": "user", "content": prompt})
            while True:
                system = f"{RULES}\nNow: 2026-12-02T17:{next(minute):02d}:00Z"
                messages = [{"role": "system", "content": system}, *history]
                if next(calls) % 2:  # every other request streamed, with usage at the end
                    stream = create(
                        model="deepseek-chat",
                        messages=messages,
                        tools=TOOLS,
                        stream=True,
                        stream_options={"include_usage": True},
                    )
                    text: list[str] = []
                    tool_calls: dict[int, dict[str, Any]] = {}
                    for chunk in stream:
                        for choice in chunk.choices:
                            text.append(choice.delta.content or "")
                            for call in choice.delta.tool_calls or ():
                                slot = tool_calls.setdefault(
                                    call.index,
                                    {
                                        "id": call.id,
                                        "type": "function",
                                        "function": {"name": "", "arguments": ""},
                                    },
                                )
                                if call.function and call.function.name:
                                    slot["function"]["name"] += call.function.name
                                if call.function and call.function.arguments:
                                    slot["function"]["arguments"] += call.function.arguments
                    message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
                    if tool_calls:
                        message["tool_calls"] = [tool_calls[i] for i in sorted(tool_calls)]
                else:
                    reply = create(model="deepseek-chat", messages=messages, tools=TOOLS)
                    message = reply.choices[0].message.model_dump(exclude_none=True)
                history.append(message)
                if not message.get("tool_calls"):
                    break
                for call in message["tool_calls"]:
                    city = json.loads(call["function"]["arguments"])["city"]
                    history.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": WEATHER[city]}
                    )
            recorder.flush()
    finally:
        client.close()


def unwrap_openai() -> list[str]:
    """Remove what an instrumentation left wrapped on the ``openai`` SDK's resource classes;
    the names it unwrapped.

    OpenLLMetry's ``uninstrument()`` (0.62.4) unwraps the chat, completion and embedding
    methods under module paths the SDK no longer uses, so they stay wrapped: every later request
    of the process would carry a ``traceparent`` header and spans for the sample's provider.
    """
    import importlib
    import inspect
    import pkgutil

    import openai.resources

    unwrapped = []
    for info in pkgutil.walk_packages(openai.resources.__path__, "openai.resources."):
        module = importlib.import_module(info.name)
        for class_name, cls in vars(module).items():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for name, value in list(vars(cls).items()):
                if type(value).__name__ == "FunctionWrapper" and hasattr(value, "__wrapped__"):
                    setattr(cls, name, value.__wrapped__)
                    unwrapped.append(f"{module.__name__}.{class_name}.{name}")
    return unwrapped


def _openllmetry(expect_legacy: bool) -> Callable[[], str]:
    def make() -> str:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        with MockServer() as server, fake_clock():
            server.mock.push(*_no_reasoning(_script()))
            recorder = SpanRecorder("weather-loop")
            instrumentor = OpenAIInstrumentor()
            instrumentor.instrument(tracer_provider=recorder.provider)
            try:
                _openllmetry_loop(server, recorder)
            finally:
                instrumentor.uninstrument()
                unwrap_openai()
            text = _stable(recorder.lines, server.port, _mock_ids(server))
        legacy = '"gen_ai.prompt.0.role"' in text
        if legacy != expect_legacy:
            raise SystemExit(
                "the installed opentelemetry-instrumentation-openai writes "
                + ("the legacy indexed attributes" if legacy else "gen_ai.input.messages")
                + "; see this module's docstring for the release each sample needs"
            )
        return text

    return make


SAMPLES: Final[dict[str, Callable[[], str]]] = {
    "pydantic-ai": _pydantic_ai(timestamp=False),
    "pydantic-ai-timestamp": _pydantic_ai(timestamp=True),
    "openai-agents": _openai_agents,
    "openllmetry": _openllmetry(expect_legacy=False),
    "openllmetry-legacy": _openllmetry(expect_legacy=True),
}
"""Sample name → a function that records it and returns the file's text."""

_DEFAULT: Final = ("pydantic-ai", "pydantic-ai-timestamp", "openai-agents", "openllmetry")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.otel_samples", description=__doc__)
    parser.add_argument("--only", nargs="+", choices=sorted(SAMPLES), default=list(_DEFAULT))
    parser.add_argument("--out", type=Path, default=FIXTURES, help="the folder written to")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        text = SAMPLES[name]()
        target = args.out / f"{name}.otlp.jsonl"
        target.write_text(text, encoding="utf-8", newline="\n")
        print(f"{target}: {text.count(chr(10))} line(s), {len(text.encode())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
