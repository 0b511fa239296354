"""15. The cache doctor at production scale, side by side with parsing the trace (issue 37).

The 10,000-request proxy trace of section 9 (``bench_traces._write``), and the yardstick the
issue sets: parsing every line of the same file with the standard ``json`` module. Each sample
runs in a fresh Python (a child process, as the command runs), timed after the imports:

- ``parse``: ``json.loads`` of every line;
- ``json``: what ``dsh-testkit cache-report TRACE --json`` does (read the file, diagnose, the
  compact JSON document, formatVersion 4, one line by the C encoder);
- ``json-full``: the same with the full document (formatVersion 3, ``DoctorReport.to_json``)
  written with a two-space indent, as ``--json`` wrote it before the compact one;
- ``text``: the text report written to a pipe (no colour: the plain table layout);
- ``html``: the Cache Explorer page (``--html``);
- ``json-jobs2``: ``json`` with the conversations diagnosed on two processes (``--jobs 2``):
  its figure is the *wall* time beside ``json``'s (one process) in the same round, since the
  second process's CPU is not this one's;
- ``stream``: ``json`` read as a stream (``--stream``: two passes, line by line, finished
  conversations spilled), for its peak memory beside ``json``'s.

Figures are CPU time (``process_time``: the machine is shared, and other jobs inflate wall time
far more than CPU time), the child's peak RSS (``ru_maxrss``: the interpreter and its imports
included) and the output's size; the modes run in every round in rotating order, and each ratio
is the median over rounds of the paired ratio mode / parse.

Long sessions: one conversation of N requests, each resending the whole history (+2 messages a
request: an answer with a tool call and its reasoning, then the tool's result). The figure is
CPU time per byte sent for ``--json`` at two lengths, beside ``json.loads`` of the same file:
linear in the bytes sent means the same time per byte at both.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._common import Figure, Section, median
from .bench_traces import _write, write_otlp

__all__ = ["run"]

REQUESTS = 10_000
QUICK_REQUESTS = 200
ROUNDS = 3
QUICK_ROUNDS = 1
MODES = ("parse", "json", "json-full", "text", "html", "json-jobs2", "stream")
LONG = (250, 500)
QUICK_LONG = (10, 20)
GOAL_RATIO = 8.0

_CHILD = r"""
import io, json, resource, sys, time
trace, mode = sys.argv[1:3]
if mode != "parse":
    import argparse
    from dsh_testkit._console import dumps_report_json, emit, make_console
    from dsh_testkit.cli._doctor import read_input
    from dsh_testkit.doctor import diagnose
    from dsh_testkit.doctor._render import render_report
    from dsh_testkit.explorer._page import render_html
    from dsh_testkit.doctor._compact import write_compact
    from dsh_testkit.doctor._stream import diagnose_stream
    from dsh_testkit.traces import load_trace
wall, cpu = time.perf_counter(), time.process_time()
if mode == "parse":
    with open(trace, "rb") as file:
        for line in file:
            json.loads(line)
    size = 0
    document_cpu = 0.0
elif mode == "otlp":
    size = len(load_trace(trace))
    document_cpu = 0.0
else:
    args = argparse.Namespace(log=trace, sidecars=None, fill=None)
    if mode == "stream":
        report = diagnose_stream(trace)
    else:
        report = diagnose(read_input("cache-report", args), jobs=2 if mode == "json-jobs2" else 1)
    document_cpu = time.process_time()
    if mode in ("stream", "json", "json-jobs2"):  # as cache-report --json writes it
        parts = []
        write_compact(report, parts.append)
        out = "".join(parts)
    elif mode == "json-full":
        out = dumps_report_json(report.to_json())
    elif mode == "text":
        buffer = io.StringIO()  # a pipe: no colour
        emit(make_console(buffer), *render_report(report))
        out = buffer.getvalue()
    else:
        out = render_html(report)
    document_cpu = time.process_time() - document_cpu
    size = len(out.encode("utf-8"))
print(json.dumps({
    "document": document_cpu,
    "cpu": time.process_time() - cpu,
    "wall": time.perf_counter() - wall,
    "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "size": size,
}))
"""


def _sample(trace: Path, mode: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(trace), mode],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _write_long(path: Path, requests: int) -> int:
    """A single long session (see the module docstring); returns the bytes its requests sent."""
    rnd = random.Random(7)
    words = [
        "the",
        "of",
        "a",
        "to",
        "in",
        "file",
        "read",
        "module",
        "test",
        "function",
        "value",
        "error",
        "line",
        "path",
        "call",
    ]

    def text(chars: int) -> str:
        return " ".join(rnd.choice(words) for _ in range(max(1, chars // 5)))

    system = "You are a coding agent.\n" + "\n".join(f"Rule {i}: {text(60)}" for i in range(20))
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": text(80),
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
        for i in range(6)
    ]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the test. " + text(120)}]
    sent = 0
    previous = 0
    with path.open("w", encoding="utf-8", newline="\n") as file:
        file.write('{"format":"dsh-trace","version":1,"source":"proxy"}\n')
        for i in range(requests):
            body = {
                "model": "deepseek-v4-flash",
                "messages": [{"role": "system", "content": system}, *history],
                "tools": tools,
                "stream": True,
            }
            sent += len(json.dumps(body, separators=(",", ":")).encode("utf-8"))
            prompt = sent // max(1, i + 1) // 4
            answer = {
                "role": "assistant",
                "content": "",
                "reasoning_content": text(120),
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": f"tool_{i % 6}", "arguments": '{"path":"a.py"}'},
                    }
                ],
            }
            record = {
                "index": i,
                "endpoint": "chat",
                "url": "https://api.deepseek.com/chat/completions",
                "started": 1_780_000_000.0 + i,
                "finished": 1_780_000_000.5 + i,
                "status": 200,
                "request": body,
                "response": answer,
                "usage": {
                    "promptTokens": prompt,
                    "hitTokens": 0 if i == 0 else min(prompt, previous) // 128 * 128,
                    "completionTokens": 40,
                },
            }
            file.write(json.dumps(record, separators=(",", ":")) + "\n")
            previous = prompt + 40
            history += [answer, {"role": "tool", "tool_call_id": f"call_{i}", "content": text(120)}]
    return sent


def _otlp_figures(tmp: Path, total: int, rounds: int) -> list[Figure]:
    """Reading an OpenTelemetry export of the same traffic (``load_trace``: the records joined,
    read, merged and deduplicated into exchanges) at half and all of ``total`` calls, beside
    ``json.loads`` of its lines: the time per call should not grow with the file."""
    per_call: list[tuple[int, float]] = []
    figures: list[Figure] = []
    for calls in (total // 2, total):
        path = tmp / f"otlp{calls}.jsonl"
        write_otlp(path, calls)
        read: list[float] = []
        parse: list[float] = []
        for round_number in range(rounds):
            for mode in ("otlp", "parse") if round_number % 2 else ("parse", "otlp"):
                (read if mode == "otlp" else parse).append(_sample(path, mode)["cpu"])
        per_call.append((calls, median(read) / calls))
        figures.append(
            Figure(
                label=f"OpenTelemetry export, {calls:,} calls ({_mb(path.stat().st_size)}): read",
                value=median(read),
                unit="s",
                note=f"CPU; json.loads of its lines {median(parse):.2f} s "
                f"({median(read) / median(parse):.1f}×)",
            )
        )
    (half, short), (whole, long) = per_call
    figures.append(
        Figure(
            label=f"OpenTelemetry export: time per call, {whole:,} / {half:,} calls",
            value=long / short if short else None,
            unit="×",
            goal="≤ 1.2",
            ok=long <= 1.2 * short,
            note="1: linear in the calls (every pair of calls was compared before: 4× per "
            "doubling)",
        )
    )
    return figures


def _mb(value: float) -> str:
    return f"{value / 1e6:,.0f} MB"


def run(quick: bool) -> Section:
    total = QUICK_REQUESTS if quick else REQUESTS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    lengths = QUICK_LONG if quick else LONG
    section = Section(
        key="scale",
        title="The cache doctor at production scale",
        method=(
            f"The proxy trace of section 9 ({total:,} requests). Each sample is a fresh Python "
            "timed after its imports: `json.loads` of every line (the yardstick), "
            "`cache-report --json` (read, diagnose, the JSON document), the text report written "
            "to a pipe, and `--html` (the page). CPU time (`process_time`), the child's peak "
            f"RSS (`ru_maxrss`, the interpreter included) and the output's size; {rounds} "
            "round(s), the modes in rotating order; each ratio is the median of the per-round "
            "CPU ratios mode / parse. Long sessions: one conversation, each request resending "
            f"the whole history (+2 messages a request), at {lengths[0]} and {lengths[1]} "
            "requests: `--json` CPU time per byte the requests sent, beside `json.loads` of "
            "the same file."
        ),
    )
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "bench.trace"
        _write(trace, total)
        file_size = trace.stat().st_size
        samples: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
        for round_number in range(rounds):
            shift = round_number % len(MODES)
            for mode in MODES[shift:] + MODES[:shift]:
                samples[mode].append(_sample(trace, mode))
        parse_cpu = [s["cpu"] for s in samples["parse"]]
        section.figures.append(
            Figure(
                label=f"json.loads of every line ({_mb(file_size)})",
                value=median(parse_cpu),
                unit="s",
                note=f"CPU; peak RSS {_mb(median([s['rss'] for s in samples['parse']]))}",
            )
        )
        for mode, label in (
            ("json", "--json (one process)"),
            ("json-full", "--json as formatVersion 3 (indent 2)"),
            ("text", "text report"),
            ("html", "--html"),
        ):
            cpu = [s["cpu"] for s in samples[mode]]
            paired = [c / p for c, p in zip(cpu, parse_cpu, strict=True) if p]
            ratio = statistics.median(paired) if paired else None
            section.figures.append(
                Figure(
                    label=f"cache-report {label} / parse, {total:,} requests",
                    value=ratio,
                    unit="×",
                    goal=f"≤ {GOAL_RATIO:g}",
                    ok=None if ratio is None else ratio <= GOAL_RATIO,
                    note=f"CPU {median(cpu):.2f} s (wall {median([s['wall'] for s in samples[mode]]):.2f} s); "
                    f"peak RSS {_mb(median([s['rss'] for s in samples[mode]]))} "
                    f"({median([s['rss'] for s in samples[mode]]) / file_size:.1f}× the file); "
                    f"output {_mb(samples[mode][0]['size'])} (its text or page "
                    f"{median([s['document'] for s in samples[mode]]):.2f} s CPU)",
                )
            )
        one = [s["wall"] for s in samples["json"]]
        two = [s["wall"] for s in samples["json-jobs2"]]
        speedup = statistics.median([a / b for a, b in zip(one, two, strict=True) if b])
        section.figures.append(
            Figure(
                label=f"--json on two processes: speed-up over one, {total:,} requests",
                value=speedup,
                unit="×",
                goal="≥ 1.6",
                ok=speedup >= 1.6,
                note=f"wall {median(one):.2f} s on one, {median(two):.2f} s on two (the same "
                "bytes); the plan (reading and linking every request) runs on one",
            )
        )
        whole_rss = median([s["rss"] for s in samples["json"]])
        stream_rss = median([s["rss"] for s in samples["stream"]])
        section.figures.append(
            Figure(
                label=f"--json read as a stream: peak RSS, {total:,} requests",
                value=stream_rss / 1e6,
                unit="MB",
                note=f"{whole_rss / 1e6:,.0f} MB read whole; CPU "
                f"{median([s['cpu'] for s in samples['stream']]):.2f} s against "
                f"{median([s['cpu'] for s in samples['json']]):.2f} s (two passes)",
            )
        )
        section.figures.extend(_otlp_figures(Path(tmp), total, rounds))
        per_byte: list[tuple[int, float, float]] = []
        for requests in lengths:
            path = Path(tmp) / f"long{requests}.trace"
            sent = _write_long(path, requests)
            json_cpu: list[float] = []
            parse_cpu_long: list[float] = []
            for round_number in range(rounds):
                for mode in ("json", "parse") if round_number % 2 else ("parse", "json"):
                    (json_cpu if mode == "json" else parse_cpu_long).append(
                        _sample(path, mode)["cpu"]
                    )
            ns = median(json_cpu) / sent * 1e9
            per_byte.append((requests, ns, median(json_cpu) / median(parse_cpu_long)))
            section.figures.append(
                Figure(
                    label=f"long session, {requests} requests ({_mb(sent)} sent): --json per byte",
                    value=ns,
                    unit="ns/byte",
                    note=f"CPU {median(json_cpu):.2f} s; json.loads of the file "
                    f"{median(parse_cpu_long):.2f} s ({median(json_cpu) / median(parse_cpu_long):.1f}× parse)",
                )
            )
        (short, ns_short, _), (long, ns_long, _) = per_byte
        section.figures.append(
            Figure(
                label=f"time per byte sent, {long} / {short} requests",
                value=ns_long / ns_short if ns_short else None,
                unit="×",
                goal="≤ 1.2",
                ok=ns_long <= 1.2 * ns_short,
                note="1: linear in the bytes sent; above: time grows faster than the bytes sent",
            )
        )
    return section
