"""A trace file read as a stream gives the report the whole-file reader gives, byte for byte,
while holding only the open conversations.

The corpus: the benchmark's trace (conversations of 20 requests, ten interleaved, volatile
system prompts), a trace without usage (simulated figures), one with usage on some requests only
(mixed), a credential named only late in the file (scrubbed from the earlier requests before
they are linked), a torn last line, a line that does not read, and the command line's choices.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_traces import _records as benchmark_records
from benchmarks.bench_traces import _write as write_benchmark_trace
from dsh_testkit.doctor import diagnose
from dsh_testkit.doctor._compact import compact_report, dumps_compact
from dsh_testkit.doctor._render import report_text
from dsh_testkit.doctor._stream import SpilledConversations, diagnose_stream
from dsh_testkit.traces import TraceError, load_trace
from dsh_testkit.traces._stream import TraceStream

from ..._support import with_memory_limit

ROOT = Path(__file__).resolve().parents[3]
HEADER = '{"format":"dsh-trace","version":1,"source":"proxy"}\n'
KEY = "sk-FAKE-" + "7a" * 16


def _write(path: Path, records: list[dict[str, Any]], *, tail: str = "") -> Path:
    with path.open("w", encoding="utf-8", newline="\n") as file:
        file.write(HEADER)
        for record in records:
            file.write(json.dumps(record, separators=(",", ":")) + "\n")
        file.write(tail)
    return path


def _same(path: Path, **options: Any) -> None:
    whole = diagnose(load_trace(path), **options)
    streamed = diagnose_stream(path, **options)
    assert isinstance(streamed.conversations, SpilledConversations)
    assert [c.key for c in streamed.conversations] == [c.key for c in whole.conversations]
    assert streamed == whole
    assert dumps_compact(compact_report(streamed)) == dumps_compact(compact_report(whole))
    assert report_text(streamed) == report_text(whole)
    assert report_text(streamed, full=True) == report_text(whole, full=True)


def test_the_benchmark_trace_streams_to_the_same_report(tmp_path: Path) -> None:
    path = tmp_path / "bench.trace"
    write_benchmark_trace(path, 400)
    report = diagnose_stream(path)
    assert report.counts().get("volatile-system-text", 0) > 0
    assert len(report.conversations) == 20
    _same(path)
    _same(path, conversation="#7")
    _same(path, simulate=True)


def test_figures_simulated_or_mixed_stream_the_same(tmp_path: Path) -> None:
    records = benchmark_records(120)
    bare = [{k: v for k, v in r.items() if k != "usage"} for r in records]
    _same(_write(tmp_path / "bare.trace", bare))
    mixed = [
        r if i % 3 else {k: v for k, v in r.items() if k != "usage"} for i, r in enumerate(records)
    ]
    path = _write(tmp_path / "mixed.trace", mixed)
    assert diagnose_stream(path).figures == "mixed"
    _same(path)


def test_a_credential_named_late_is_scrubbed_before_the_requests_are_linked(tmp_path: Path) -> None:
    records = benchmark_records(40)
    # An early request quotes the key; only a later one names it (its Authorization header),
    # so the whole-file reader scrubs it from the early one at the end.
    early = records[3]
    last = early["request"]["messages"][-1]
    early["request"]["messages"][-1] = {**last, "content": f"{last['content']} (my key is {KEY})"}
    early["_mayHoldKey"] = True
    records[30]["headers"] = [["authorization", f"Bearer {KEY}"]]
    records[30]["_mayHoldKey"] = True
    path = _write(tmp_path / "late.trace", records)
    stream = TraceStream(path)
    for _ in stream.read():
        pass
    assert stream.summary is not None and 3 in stream.summary.late
    exchanges = list(stream.read())
    assert KEY not in json.dumps(exchanges[3].body)
    assert tuple(exchanges) == load_trace(path).exchanges
    _same(path)
    assert KEY not in dumps_compact(compact_report(diagnose_stream(path)))


def test_a_torn_last_line_is_dropped_with_the_same_note(tmp_path: Path) -> None:
    records = benchmark_records(40)
    path = _write(tmp_path / "torn.trace", records, tail='{"started":17800')
    report = diagnose_stream(path)
    torn = f"unfinished last line (line {len(records) + 2}"
    assert any(torn in note for note in report.notes)
    _same(path)


def test_a_file_still_being_written_is_read_as_the_first_pass_found_it(tmp_path: Path) -> None:
    """The proxy appends while the report is made: the line it was writing when the first pass
    ended is dropped in every pass, and what it appends later is not read."""
    records = benchmark_records(40)
    full = json.dumps(records[-1], separators=(",", ":"))
    path = _write(tmp_path / "live.trace", records[:-1], tail=full[:50])
    stream = TraceStream(path)
    first = list(stream.read())
    with path.open("a", encoding="utf-8") as file:
        file.write(full[50:] + "\n" + full + "\n")  # the line finished, and one more
    second = list(stream.read())
    assert tuple(second) == tuple(first) == load_trace_text(path, len(records) - 1)
    assert stream.summary is not None
    assert any("unfinished last line" in note for note in stream.summary.notes)


def load_trace_text(path: Path, count: int) -> tuple[Any, ...]:
    """The first ``count`` exchanges the whole-file reader gives for ``path`` now."""
    return load_trace(path).exchanges[:count]


def test_a_file_changed_between_the_passes_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "changing.trace", benchmark_records(40))
    stream = TraceStream(path)
    for _ in stream.read():
        pass
    text = path.read_text(encoding="utf-8").replace("Question 3", "Question 9", 1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError, match="changed between two passes"):
        for _ in stream.read():
            pass


def test_a_bad_record_before_a_bad_line_fails_as_the_whole_file_reading_does(
    tmp_path: Path,
) -> None:
    """The whole-file reader parses every line before it builds an exchange: a line that is not
    JSON is the error even after a record that does not make an exchange."""
    records = benchmark_records(40)
    records[0]["status"] = "two hundred"
    path = _write(tmp_path / "bad.trace", records)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[5] = lines[5][:30]
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TraceError) as whole:
        load_trace(path)
    with pytest.raises(TraceError) as streamed:
        diagnose_stream(path)
    assert str(streamed.value) == str(whole.value)
    assert "line 6 is not JSON" in str(whole.value)


def test_a_line_that_does_not_read_is_an_error_naming_it(tmp_path: Path) -> None:
    records = benchmark_records(30)
    path = tmp_path / "bad.trace"
    _write(path, records)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[12] = lines[12][:40]
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TraceError, match="line 13 is not JSON"):
        diagnose_stream(path)
    failed = _cli(str(path), "--stream")
    assert failed.returncode == 1
    assert b"line 13 is not JSON" in failed.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", "cache-report", *args],
        capture_output=True,
        cwd=ROOT,
        check=False,
    )


def test_an_empty_or_request_less_file_says_so_as_the_whole_file_reading_does(
    tmp_path: Path,
) -> None:
    empty = _write(tmp_path / "empty.trace", [])
    skipped = _write(tmp_path / "skipped.trace", [{"index": 0, "request": {"model": "x"}}])
    for path in (empty, skipped):
        streamed, whole = _cli(str(path), "--stream"), _cli(str(path), "--no-stream")
        assert streamed.returncode == whole.returncode == 2
        assert streamed.stderr == whole.stderr
        assert b"nothing to report" in streamed.stderr


def test_the_command_line_streams_to_the_same_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bench.trace"
    write_benchmark_trace(path, 200)
    for extra in ([], ["--json"], ["--allow", "volatile-system-text"], ["--conversation", "#3"]):
        streamed = _cli(str(path), "--stream", *extra)
        whole = _cli(str(path), "--no-stream", *extra)
        assert streamed.returncode == 0, streamed.stderr
        assert streamed.stdout == whole.stdout
    pooled = _cli(str(path), "--stream", "--jobs", "2", "--json")
    assert pooled.returncode == 0
    assert b"--jobs: a streamed trace is diagnosed in one process" in pooled.stderr
    har = tmp_path / "trace.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": []}}), encoding="utf-8")
    whole = _cli(str(har), "--stream")
    assert b"--stream reads dsh-trace files (what proxy writes, compressed or not)" in whole.stderr
    unknown = _cli(str(path), "--stream", "--conversation", "#99")
    assert unknown.returncode == 2 and b"no conversation '#99'" in unknown.stderr


@pytest.mark.slow
def test_a_trace_larger_than_memory_allows_streams(tmp_path: Path) -> None:
    """A trace whose whole-file analysis needs more memory than the process is given is read as
    a stream within it. The limit is on address space (measured here on this trace: the stream
    peaks at about 120 MB of it, the whole-file reading at about 210 MB; the interpreter and its
    imports take about 70 MB)."""
    path = tmp_path / "big.trace"
    write_benchmark_trace(path, 10_000)  # the benchmark's trace: 33 MB of JSON lines
    program = (
        "import sys; from dsh_testkit.cli import main; sys.exit(main(['cache-report', "
        f"{str(path)!r}, '--json', '--jobs', '1', '--' + sys.argv[1]]))"
    )
    budget = 165 * 2**20
    streamed = subprocess.run(
        with_memory_limit(budget, "-c", program, "stream"), capture_output=True, cwd=ROOT
    )
    assert streamed.returncode == 0, streamed.stderr[-2000:]
    whole = subprocess.run(
        with_memory_limit(budget, "-c", program, "no-stream"), capture_output=True, cwd=ROOT
    )
    assert whole.returncode != 0 and b"MemoryError" in whole.stderr
    assert json.loads(streamed.stdout)["totals"]["requests"] == 10_000
