"""What every generator shares: the mock, the scenario, and the OTLP files written.

Runs inside each instrumentation family's own virtual environment (``venvs/<family>``, built
by ``make_venvs.sh`` from ``requirements/<family>.txt``): it needs only the OpenTelemetry SDK,
the official OTLP encoder (``opentelemetry-exporter-otlp-proto-common``) and protobuf. The
mock is the project's ``dsh-testkit serve`` (``$DSH_TESTKIT``, by default the project's
``.venv/bin/dsh-testkit``), a separate process, so these environments need no dsh-testkit.

The scenario: a weather agent, five user turns, seven model requests (turns 1 and 3 call the
``get_weather`` tool once each), answered by a script (``onExhausted: error``: a request the
script does not expect fails the run). ``--clock`` ends the system prompt with the current
time, rendered anew for every model request from a fake clock that advances one second per
request (so every request's prompt differs, and the files are the same on every run).

Written (``Recorder.write``), one export per user turn as a batch processor sends them:

- ``<stem>.otlp.jsonl``: one ``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest`` as
  OTLP JSON per line, spans and log records interleaved as the collector's file exporter
  writes them when the traces and logs pipelines share it;
- with ``--binary``, ``<stem>.binpb``: the same exports in the collector's ``format: proto``
  (each message after its size as a 4-byte big-endian integer), traces and logs in one file.

What varies from run to run is made stable before writing: trace and span ids are numbered in
order of appearance, every time is replaced by its rank (one millisecond apart, order and
equality kept), UUIDs in texts are numbered, the mock's port is 8765, the resource keeps only
``service.name`` and ``telemetry.sdk.*``, Logfire's measured durations read 0.1 s.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import struct
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DSH = Path(os.environ.get("DSH_TESTKIT", ROOT / ".venv" / "bin" / "dsh-testkit"))
OUT = Path(os.environ.get("OTEL_SAMPLES_OUT", ROOT / "tests" / "fixtures" / "otel" / "agents"))
API_KEY = "sk-otel-agents-not-a-key"
MODEL = "deepseek-chat"
FIXED_PORT = 8765
START_NS = 1_796_230_800_000_000_000
"""2026-12-02T17:00:00Z: the first time written; each later one a millisecond after."""

RULES = "\n".join(
    f"Rule {i}: answer weather questions briefly, use the get_weather tool for current "
    "conditions, name the city, and give the temperature in degrees Celsius."
    for i in range(1, 9)
)
"""A system prompt of several cache units (about 255 tokens)."""
TURNS = (
    "What's the weather in Oslo?",
    "Should I take a coat?",
    "And in Paris?",
    "Which of the two is warmer?",
    "Thanks. Sum it up in one line.",
)
WEATHER = {"Oslo": "light snow, -3 °C", "Paris": "sunny, 14 °C"}
TOOL_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city's name."}},
    "required": ["city"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": TOOL_SCHEMA,
        },
    }
]


def _call(city: str, call_id: str) -> dict[str, Any]:
    return {"name": "get_weather", "arguments": json.dumps({"city": city}), "id": call_id}


SCRIPT = {
    "version": 1,
    "onExhausted": "error",
    "entries": [
        {"kind": "reply", "toolCalls": [_call("Oslo", "call_oslo")]},
        {"kind": "reply", "text": "Oslo: light snow, -3 °C."},
        {"kind": "reply", "text": "Yes, take a warm coat."},
        {"kind": "reply", "toolCalls": [_call("Paris", "call_paris")]},
        {"kind": "reply", "text": "Paris: sunny, 14 °C."},
        {"kind": "reply", "text": "Paris is warmer: 14 °C against -3 °C."},
        {"kind": "reply", "text": "Oslo snowy at -3 °C, Paris sunny at 14 °C."},
    ],
}


def get_weather(city: str) -> str:
    return WEATHER.get(city, "unknown")


class Scenario:
    """The system prompt for each model request (with or without the clock)."""

    def __init__(self, clock: bool) -> None:
        self._seconds = itertools.count() if clock else None

    def system(self) -> str:
        if self._seconds is None:
            return RULES
        second = next(self._seconds)
        return f"{RULES}\nCurrent time: 2026-12-02 17:{second // 60:02d}:{second % 60:02d} UTC."


class Mock:
    """``dsh-testkit serve`` on loopback with the scenario's script."""

    def __init__(self) -> None:
        self.script = Path(os.environ.get("TMPDIR", "/tmp")) / f"otel-agents-{os.getpid()}.json"
        self.script.write_text(json.dumps(SCRIPT), encoding="utf-8")
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> Mock:
        self.process = subprocess.Popen(
            [str(DSH), "serve", "--port", "0", "--script", str(self.script)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"dsh-testkit serve said {self.base_url!r}")
        return self

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0])

    def unscripted(self) -> list[Any]:
        with urllib.request.urlopen(self.base_url.rstrip("/") + "/_dsh/requests") as reply:
            return list(json.loads(reply.read()).get("unscripted") or [])

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
        self.script.unlink(missing_ok=True)


# -- stable output ----------------------------------------------------------------------------

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TOOK = re.compile(r"took \d+\.\d+s")


class _Stable:
    """Numbers ids and UUIDs in order of appearance; maps times to their rank."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.ids: dict[bytes, bytes] = {}
        self.uuids: dict[str, str] = {}
        self.times: dict[int, int] = {}

    def id(self, value: bytes) -> bytes:
        if not value:
            return value
        if value not in self.ids:
            self.ids[value] = (len(self.ids) + 1).to_bytes(len(value), "big")
        return self.ids[value]

    def _uuid(self, match: re.Match[str]) -> str:
        found = match.group(0)
        return self.uuids.setdefault(found, f"00000000-0000-7000-8000-{len(self.uuids) + 1:012d}")

    def text(self, value: str) -> str:
        value = value.replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{FIXED_PORT}")
        value = _TOOK.sub("took 0.10s", value)
        return _UUID.sub(self._uuid, value)

    def value(self, any_value: Any) -> None:
        kind = any_value.WhichOneof("value")
        if kind == "string_value":
            any_value.string_value = self.text(any_value.string_value)
        elif kind == "int_value" and any_value.int_value == self.port:
            any_value.int_value = FIXED_PORT
        elif kind == "array_value":
            for item in any_value.array_value.values:
                self.value(item)
        elif kind == "kvlist_value":
            self.attributes(any_value.kvlist_value.values)

    def attributes(self, pairs: Any) -> None:
        for pair in pairs:
            if pair.key == "duration" and pair.value.WhichOneof("value") == "double_value":
                pair.value.double_value = 0.1
            else:
                self.value(pair.value)


def _resource(resource: Any) -> None:
    kept = [
        (a.key, a.value)
        for a in resource.attributes
        if a.key == "service.name" or a.key.startswith("telemetry.sdk.")
    ]
    del resource.attributes[:]
    for key, value in kept:
        item = resource.attributes.add()
        item.key = key
        item.value.CopyFrom(value)


def _walk(exports: list[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    for signal, request in exports:
        groups = request.resource_spans if signal == "traces" else request.resource_logs
        for group in groups:
            yield "resource", group.resource
            for scope in group.scope_spans if signal == "traces" else group.scope_logs:
                for item in scope.spans if signal == "traces" else scope.log_records:
                    yield signal, item


def stabilize(exports: list[tuple[str, Any]], port: int) -> None:
    """Make the exports the same on every run (see the module docstring), in place."""
    stable = _Stable(port)
    times: set[int] = set()
    for kind, item in _walk(exports):
        if kind == "traces":
            times.update((item.start_time_unix_nano, item.end_time_unix_nano))
            times.update(e.time_unix_nano for e in item.events)
        elif kind == "logs":
            times.update((item.time_unix_nano, item.observed_time_unix_nano))
    ranks = {t: START_NS + i * 1_000_000 for i, t in enumerate(sorted(times - {0}))}
    ranks[0] = 0
    for kind, item in _walk(exports):
        if kind == "resource":
            _resource(item)
            continue
        item.trace_id = stable.id(item.trace_id)
        item.span_id = stable.id(item.span_id)
        stable.attributes(item.attributes)
        if kind == "traces":
            item.parent_span_id = stable.id(item.parent_span_id)
            item.start_time_unix_nano = ranks[item.start_time_unix_nano]
            item.end_time_unix_nano = ranks[item.end_time_unix_nano]
            for event in item.events:
                event.time_unix_nano = ranks[event.time_unix_nano]
                stable.attributes(event.attributes)
            for link in item.links:
                link.trace_id = stable.id(link.trace_id)
                link.span_id = stable.id(link.span_id)
        else:
            item.time_unix_nano = ranks[item.time_unix_nano]
            item.observed_time_unix_nano = ranks[item.observed_time_unix_nano]
            stable.value(item.body)


def _hex_ids(value: Any) -> Any:
    """protobuf's JSON mapping writes bytes in base64; OTLP JSON wants trace/span ids in hex."""
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex()
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
            else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


class Recorder:
    """Tracer and logger providers whose output is kept per user turn, then written."""

    def __init__(self, service: str) -> None:
        resource = Resource({"service.name": service, "telemetry.sdk.language": "python"})
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.log_exporter = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))
        self.exports: list[tuple[str, Any]] = []

    def install_globals(self) -> None:
        from opentelemetry import trace
        from opentelemetry._logs import set_logger_provider

        trace.set_tracer_provider(self.tracer_provider)
        set_logger_provider(self.logger_provider)

    def flush(self) -> None:
        """One export of each signal with what ended since the last flush."""
        spans = self.span_exporter.get_finished_spans()
        self.span_exporter.clear()
        if spans:
            self.exports.append(("traces", encode_spans(spans)))
        logs = self.log_exporter.get_finished_logs()
        self.log_exporter.clear()
        if logs:
            self.exports.append(("logs", encode_logs(logs)))

    def write(self, stem: str, *, port: int, binary: bool) -> None:
        self.flush()
        stabilize(self.exports, port)
        OUT.mkdir(parents=True, exist_ok=True)
        lines = []
        framed = bytearray()
        for _, request in self.exports:
            document = _hex_ids(MessageToDict(request, use_integers_for_enums=True))
            line = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
            payload = request.SerializeToString(deterministic=True)
            if API_KEY in line or API_KEY.encode() in payload:
                raise RuntimeError("the API key reached a sample")
            lines.append(line + "\n")
            framed += struct.pack(">I", len(payload)) + payload
        target = OUT / f"{stem}.otlp.jsonl"
        target.write_text("".join(lines), encoding="utf-8", newline="\n")
        print(f"{target}: {target.stat().st_size} bytes", file=sys.stderr)
        if binary:
            target = OUT / f"{stem}.binpb"
            target.write_bytes(bytes(framed))
            print(f"{target}: {target.stat().st_size} bytes", file=sys.stderr)
