"""9. Trace analysis: ``cache-report`` over a 10,000-request trace is linear in the trace.

A synthetic proxy trace (the ``dsh-trace`` file ``dsh-testkit proxy`` writes) of N requests:
conversations of 20 requests each, ten at a time interleaved (as concurrent agents behind one
proxy), every request carrying its answer and reported usage, one conversation in ten busting its
cache with a timestamp in its system prompt. The measured work is what ``dsh-testkit
cache-report TRACE --json`` does: read and detect the file, split the conversations, attribute
every request, render the JSON document — with the reported usage, and with ``--simulate`` (the
mock's prefix-cache simulator over the whole trace). Linear means t(10k) / t(5k) ≤ 2.2.

Every sample runs in a fresh Python of its own, as the command does (the timer starts after
the imports): run in one process, a sample's cost depended on the heap earlier samples and
sections left behind (the larger trace pays page faults for memory the smaller one found
already mapped), which measured the benchmark's history, not the command: t(10k) / t(5k) came
out 2.08× to 2.40× in-process for one and the same code, whose profile is linear function by
function. The two sizes run back to back in each round, their order alternating; the scaling
figure is the median over rounds of the paired ratio t(10k) / t(5k) in wall time, the same in
CPU time (``process_time``, which other jobs on a shared machine do not inflate) beside it.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import Figure, Section, median

__all__ = ["run"]

REQUESTS = 10_000
QUICK_REQUESTS = 200
PER_CONVERSATION = 20
INTERLEAVED = 10
ROUNDS = 9
QUICK_ROUNDS = 1
GOAL_RATIO = 2.2


def _system(conversation: int, request: int) -> str:
    rules = "\n".join(f"Rule {i}: answer precisely and cite the file you read." for i in range(24))
    head = f"Agent {conversation}: you review repository {conversation % 7}.\n{rules}"
    if conversation % 10 == 9:
        return f"{head}\nCurrent time: 2026-12-02T17:{request:02d}:00Z"
    return head


def _records(total: int) -> list[dict[str, Any]]:
    """Exchange records in proxy order: groups of conversations interleaved request by request."""
    records: list[dict[str, Any]] = []
    conversations = max(1, total // PER_CONVERSATION)
    for group in range(0, conversations, INTERLEAVED):
        members = range(group, min(group + INTERLEAVED, conversations))
        histories: dict[int, list[dict[str, Any]]] = {c: [] for c in members}
        for step in range(PER_CONVERSATION):
            for c in members:
                history = histories[c]
                history.append(
                    {"role": "user", "content": f"Question {step} about module {c}.{step}?"}
                )
                answer = {
                    "role": "assistant",
                    "content": f"Module {c}.{step} adds a constant to its input; see src/m{step}.py.",
                }
                prompt = 400 + 30 * len(history)
                records.append(
                    {
                        "index": len(records),
                        "endpoint": "chat",
                        "url": "https://api.deepseek.com/chat/completions",
                        "conversation": None,
                        "started": 1_780_000_000.0 + len(records),
                        "firstByte": 1_780_000_000.2 + len(records),
                        "finished": 1_780_000_000.5 + len(records),
                        "status": 200,
                        "request": {
                            "model": "deepseek-v4-flash",
                            "messages": [
                                {"role": "system", "content": _system(c, step)},
                                *history,
                            ],
                            "stream": True,
                        },
                        "response": answer,
                        "usage": {
                            "promptTokens": prompt,
                            "hitTokens": 0
                            if step == 0 or c % 10 == 9
                            else (prompt - 40) // 64 * 64,
                            "completionTokens": 20,
                        },
                    }
                )
                history.append(answer)
                if len(records) >= total:
                    return records
    return records


def _write(path: Path, total: int) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as file:
        file.write('{"format":"dsh-trace","version":1,"source":"proxy"}\n')
        for record in _records(total):
            file.write(json.dumps(record, separators=(",", ":")) + "\n")


def _otlp_span(record: dict[str, Any], number: int) -> dict[str, Any]:
    """One exchange record as the span the OpenTelemetry GenAI conventions describe it with
    (messages as parts, usage and cache read as attributes)."""

    def parts(message: dict[str, Any]) -> dict[str, Any]:
        return {"role": message["role"], "parts": [{"type": "text", "content": message["content"]}]}

    answer = {**parts(record["response"]), "finish_reason": "stop"}
    start = int(record["started"] * 1e9)
    texts = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "deepseek",
        "gen_ai.request.model": record["request"]["model"],
        "gen_ai.input.messages": json.dumps([parts(m) for m in record["request"]["messages"]]),
        "gen_ai.output.messages": json.dumps([answer]),
    }
    counts = {
        "gen_ai.usage.input_tokens": record["usage"]["promptTokens"],
        "gen_ai.usage.cache_read.input_tokens": record["usage"]["hitTokens"],
        "gen_ai.usage.output_tokens": record["usage"]["completionTokens"],
    }
    return {
        "traceId": f"{number // PER_CONVERSATION:032x}",
        "spanId": f"{number + 1:016x}",
        "name": f"chat {record['request']['model']}",
        "kind": 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500_000_000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in texts.items()]
        + [{"key": k, "value": {"intValue": str(v)}} for k, v in counts.items()],
    }


def write_otlp(path: Path, total: int, *, batch: int = 50) -> None:
    """The same traffic as :func:`_write`, as the collector's file exporter writes the spans of
    an OpenTelemetry GenAI instrumentation: one export request per line, ``batch`` spans each."""
    records = _records(total)
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}
    scope = {"name": "opentelemetry.instrumentation.openai_v2"}
    with path.open("w", encoding="utf-8", newline="\n") as file:
        for at in range(0, len(records), batch):
            spans = [_otlp_span(r, at + k) for k, r in enumerate(records[at : at + batch])]
            export = {
                "resourceSpans": [
                    {"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}
                ]
            }
            file.write(json.dumps(export, separators=(",", ":")) + "\n")


def _report_once(path: Path, simulate: bool) -> tuple[float, float, dict[str, int]]:
    """Wall and CPU seconds of one ``cache-report --json`` over ``path``, and the cause counts
    and conversations it found."""
    from dsh_testkit._console import dumps_report_json
    from dsh_testkit.doctor import diagnose
    from dsh_testkit.traces import load_trace

    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    report = diagnose(load_trace(path), simulate=simulate)
    dumps_report_json(report.to_json())
    wall, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return wall, cpu_seconds, {"conversations": len(report.conversations), **report.counts()}


def _sample_apart(path: Path, simulate: bool) -> tuple[float, float, dict[str, int]]:
    """:func:`_report_once` in a fresh Python, as ``dsh-testkit cache-report`` runs: the heap
    starts empty for every sample, whatever ran before."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_traces",
            str(path),
            "simulate" if simulate else "reported",
        ],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu, counts = json.loads(done.stdout)
    return float(wall), float(cpu), dict(counts)


def run(quick: bool) -> Section:
    total = QUICK_REQUESTS if quick else REQUESTS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    section = Section(
        key="traces",
        title="Trace analysis",
        method=(
            f"A synthetic proxy trace of {total:,} (and {total // 2:,}) chat requests: "
            f"conversations of {PER_CONVERSATION} requests, {INTERLEAVED} interleaved at a time, "
            "each request with its answer and reported usage, one conversation in ten with a "
            "timestamp in its system prompt. Timed: `load_trace` + `diagnose` + the JSON "
            "document (what `dsh-testkit cache-report TRACE --json` does), reported usage and "
            "`--simulate`, each sample in a fresh Python (as the command runs; timed after the "
            "imports; in one process the heap earlier samples left behind skewed the ratio). "
            f"{rounds} round(s), each running the two sizes back to back in "
            "alternating order; times are medians; the scaling figure is "
            "the median of the per-round t(large) / t(small) in wall time (the same in CPU "
            "time, `process_time`, in its note)."
        ),
    )
    with tempfile.TemporaryDirectory() as tmp:
        big, half = Path(tmp) / "big.trace", Path(tmp) / "half.trace"
        _write(big, total)
        _write(half, total // 2)
        for simulate in (False, True):
            wall: dict[Path, list[float]] = {big: [], half: []}
            cpu: dict[Path, list[float]] = {big: [], half: []}
            found: dict[str, int] = {}
            for round_number in range(rounds):
                for path in (half, big) if round_number % 2 else (big, half):
                    seconds, cpu_seconds, counts = _sample_apart(path, simulate)
                    wall[path].append(seconds)
                    cpu[path].append(cpu_seconds)
                    if path is big:
                        found = counts
            paired = [b / h for b, h in zip(wall[big], wall[half], strict=True) if h]
            paired_cpu = [b / h for b, h in zip(cpu[big], cpu[half], strict=True) if h]
            ratio = statistics.median(paired) if paired else None
            mode = "--simulate" if simulate else "reported usage"
            section.figures.append(
                Figure(
                    label=f"cache-report, {total:,} requests ({mode})",
                    value=median(wall[big]),
                    unit="s",
                    note=f"CPU {median(cpu[big]):.3f} s; {total // 2:,} requests: "
                    f"{median(wall[half]):.3f} s",
                )
            )
            section.figures.append(
                Figure(
                    label=f"t({total:,}) / t({total // 2:,}) ({mode})",
                    value=ratio,
                    unit="×",
                    goal=f"≤ {GOAL_RATIO}",
                    ok=None if ratio is None else ratio <= GOAL_RATIO,
                    note=f"median of {len(paired)} paired wall-time ratios; in CPU time "
                    f"{statistics.median(paired_cpu):.2f}×; ratio of median wall times "
                    f"{median(wall[big]) / median(wall[half]):.2f}×"
                    if paired and paired_cpu
                    else "",
                )
            )
            conversations = found.pop("conversations", 0)
            section.notes.append(f"{mode}: {conversations} conversations found, causes {found}.")
    return section


if __name__ == "__main__":
    _path, _mode = sys.argv[1:3]
    print(json.dumps(_report_once(Path(_path), _mode == "simulate")))
