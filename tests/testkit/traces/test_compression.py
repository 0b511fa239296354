"""Compressed recordings (zstd, gzip) read wherever a plain one is, by content.

The reference harness writes its session log as ``session.jsonl.zstd`` by default: a frame
holding the header line, then one independent zstd frame appended per durable batch (with a
checksum). The OpenTelemetry Collector's file exporter compresses each message alone and
length-prefixes it (its default zstd form), or compresses the whole file as one stream (its
``exporter.file.nativeCompression`` form). Made here with the real zstd codec the kit reads
with (``backports.zstd`` / ``compression.zstd``), from committed plain fixtures.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_testkit.reports import audit_file
from dsh_testkit.traces import TraceError, load_trace
from dsh_testkit.traces._compression import (
    CompressedDataError,
    DecompressingReader,
    compression_of,
    decompressed,
    read_recording,
)
from tests._support import run_cli

try:
    from compression import zstd  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    from backports import zstd  # type: ignore[no-redef,unused-ignore]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REFERENCE = FIXTURES / "reference-forms" / "message-prefix"
AGENTS = FIXTURES / "otel" / "agents"


def frame(data: bytes) -> bytes:
    """One independent zstd frame with a checksum, as Node's zlib.zstdCompress writes."""
    return zstd.compress(data, options={zstd.CompressionParameter.checksum_flag: 1})


def harness_log(tmp_path: Path, *, torn: bool = False) -> Path:
    """The reference-form log as the harness writes it by default: a header frame, then one
    frame per turn (its durable batch), beside its sidecars."""
    lines = (REFERENCE / "session.jsonl").read_text(encoding="utf-8").splitlines()
    batches: list[list[str]] = [[]]
    for line in lines[1:]:
        batches[-1].append(line)
        if json.loads(line).get("type") == "turn/end":
            batches.append([])
    frames = [frame((lines[0] + "\n").encode())]
    frames += [frame(("\n".join(b) + "\n").encode()) for b in batches if b]
    data = b"".join(frames)
    if torn:
        data = data[: len(data) - len(frames[-1]) // 2]
    folder = tmp_path / "session"
    folder.mkdir()
    for sidecar in REFERENCE.iterdir():
        if sidecar.name != "session.jsonl":
            shutil.copy(sidecar, folder / sidecar.name)
    target = folder / "session.jsonl.zstd"
    target.write_bytes(data)
    assert len(frames) >= 3
    return target


def test_the_harness_default_session_log_audits_without_being_decompressed(tmp_path) -> None:
    log = harness_log(tmp_path)
    plain = audit_file(REFERENCE / "session.jsonl")
    report = audit_file(log)
    assert report.ok and plain.ok
    assert report.to_json()["requests"] == plain.to_json()["requests"]
    done = run_cli("audit", str(log))
    assert done.returncode == 0, done.stderr
    assert "audit: OK, no violations" in done.stdout
    rebuilt = run_cli("rebuild", str(log))
    assert (
        rebuilt.returncode == 0
        and rebuilt.stdout == run_cli("rebuild", str(REFERENCE / "session.jsonl")).stdout
    )
    report_plain = run_cli("cache-report", "--json", str(REFERENCE / "session.jsonl"))
    report_zstd = run_cli("cache-report", "--json", str(log))
    assert report_zstd.returncode == 0
    assert json.loads(report_zstd.stdout)["totals"] == json.loads(report_plain.stdout)["totals"]
    assert json.loads(report_zstd.stdout)["totals"]["measured"] == 2


def test_a_torn_last_frame_is_a_torn_tail_not_an_error(tmp_path) -> None:
    log = harness_log(tmp_path, torn=True)
    report = audit_file(log)
    assert [v.code for v in report.violations] == ["truncated-tail"]
    assert "is cut short, as a crash while appending leaves it" in report.violations[0].message
    # what came before was read: the frames before the torn one hold whole turns
    assert report.event_count > 0
    found = read_recording(log)
    assert found.compression == "zstd" and found.frames >= 2 and found.note is not None


def test_a_damaged_frame_is_an_error_naming_it(tmp_path) -> None:
    log = harness_log(tmp_path)
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(
        CompressedDataError, match=r"zstd frame \d+ \(from byte [\d,]+\) is damaged"
    ):
        read_recording(log)
    done = run_cli("audit", str(log))
    assert done.returncode == 2
    assert "is damaged" in done.stderr


def test_only_the_first_frame_is_not_enough() -> None:
    """The pitfall the harness warns of: one-shot decoders stop after the header frame."""
    header = b'{"type":"session"}\n'
    body = b'{"seq":0}\n{"seq":1}\n'
    data = frame(header) + frame(body)
    assert zstd.ZstdDecompressor().decompress(data) == header  # one frame only
    assert decompressed(data).data == header + body


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=6), st.sampled_from(["zstd", "gzip"]))
def test_concatenated_frames_read_as_their_concatenation(chunks: list[bytes], kind: str) -> None:
    if kind == "zstd":
        data = b"".join(frame(c) for c in chunks)
    else:
        data = b"".join(gzip.compress(c, mtime=0) for c in chunks)
    found = decompressed(data)
    assert found.data == b"".join(chunks)
    assert (found.compression, found.frames, found.note) == (kind, len(chunks), None)


@given(st.lists(st.binary(min_size=1, max_size=200), min_size=2, max_size=5), st.data())
def test_a_cut_anywhere_in_the_last_frame_keeps_the_frames_before(chunks, data) -> None:
    whole = [frame(c) for c in chunks]
    cut = data.draw(st.integers(1, len(whole[-1]) - 1))
    found = decompressed(b"".join(whole)[:-cut])
    assert found.data.startswith(b"".join(chunks[:-1]))
    assert found.frames == len(chunks) - 1 and found.note is not None


def test_plain_bytes_pass_through() -> None:
    assert compression_of(b'{"a":1}') is None
    assert decompressed(b'{"a":1}\n').data == b'{"a":1}\n'


def _lines(name: str) -> list[bytes]:
    return [line for line in (AGENTS / f"{name}.otlp.jsonl").read_bytes().split(b"\n") if line]


def _messages(name: str) -> list[bytes]:
    data = (AGENTS / f"{name}.binpb").read_bytes()
    out, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def _prefixed(messages: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


@pytest.mark.parametrize(
    "form",
    [
        "gzip",
        "native-jsonl",
        "native-protobuf",
        "legacy-json",
        "legacy-protobuf",
        "logs-first",
    ],
)
def test_every_collector_file_form_reads_the_same_trace(tmp_path, form: str) -> None:
    name = "otel-openai-v2-events-clean"  # spans and log records: both signals in one file
    lines, messages = _lines(name), _messages(name)
    data = {
        "gzip": gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0),
        "native-jsonl": b"".join(frame(line + b"\n") for line in lines),
        "native-protobuf": b"".join(frame(_prefixed([m])) for m in messages),
        "legacy-json": _prefixed([frame(line) for line in lines]),
        "legacy-protobuf": _prefixed([frame(m) for m in messages]),
        "logs-first": b"".join(
            line + b"\n" for i in range(0, len(lines), 2) for line in lines[i : i + 2][::-1]
        ),
    }[form]
    path = tmp_path / f"collector.{form}"
    path.write_bytes(data)
    expected = load_trace(AGENTS / f"{name}.otlp.jsonl")
    trace = load_trace(path)
    assert len(trace) == 7
    assert [e.body for e in trace] == [e.body for e in expected]
    done = run_cli("cache-report", str(path))
    assert done.returncode == 0, done.stderr


def test_a_damaged_compressed_trace_is_a_trace_error(tmp_path) -> None:
    data = bytearray(b"".join(frame(line + b"\n") for line in _lines("openllmetry-openai-clean")))
    data[40] ^= 0xFF
    path = tmp_path / "bad.jsonl.zst"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="is damaged"):
        load_trace(path)


# -- read as a stream ---------------------------------------------------------------------------


def _skippable(payload: bytes) -> bytes:
    return b"\x5a\x2a\x4d\x18" + struct.pack("<I", len(payload)) + payload


@st.composite
def compressed_files(draw: st.DrawFn) -> bytes:
    """Frames or members of either kind, with what files hold besides them: skippable frames,
    zero padding, a cut anywhere, garbage, a flipped byte."""
    kind = draw(st.sampled_from(["zstd", "gzip"]))
    parts: list[bytes] = []
    for chunk in draw(st.lists(st.binary(max_size=400), min_size=1, max_size=5)):
        if kind == "zstd" and draw(st.booleans()):
            parts.append(_skippable(draw(st.binary(max_size=20))))
        parts.append(frame(chunk) if kind == "zstd" else gzip.compress(chunk, mtime=0))
    data = b"".join(parts)
    change = draw(st.sampled_from(["none", "cut", "garbage", "flip", "zeros", "skip-past-end"]))
    if change == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif change == "garbage":
        data += draw(st.binary(min_size=1, max_size=9))
    elif change == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
    elif change == "zeros":
        data += b"\0" * draw(st.integers(1, 40)) + draw(st.sampled_from([b"", b"\1"]))
    elif change == "skip-past-end":
        data += b"\x50\x2a\x4d\x18" + struct.pack("<I", 1000) + b"abc"
    return data


def _streamed(data: bytes, chunk: int) -> tuple[bytes, str | None]:
    kind = compression_of(data[:8])
    assert kind is not None
    reader = DecompressingReader(io.BytesIO(data), kind, path="t.zst", chunk=chunk)
    out = io.BufferedReader(reader, 7).read()
    return out, reader.note


@settings(max_examples=400)
@given(compressed_files(), st.integers(1, 64))
def test_a_stream_decompresses_what_the_whole_file_reading_does(data: bytes, chunk: int) -> None:
    """Byte for byte, the same torn-tail note, the same error, however the bytes arrive."""
    if compression_of(data[:8]) is None:
        return  # a cut before the magic: not compressed, not this reader's
    try:
        whole = decompressed(data, path="t.zst")
    except CompressedDataError as exc:
        with pytest.raises(CompressedDataError) as raised:
            _streamed(data, chunk)
        assert (str(raised.value), raised.value.offset) == (str(exc), exc.offset)
        return
    assert _streamed(data, chunk) == (whole.data, whole.note)


def test_a_compressed_trace_file_streams_to_the_report_read_whole(tmp_path: Path) -> None:
    """zstd frames appended per batch and gzip members, whole or torn, through the doctor."""
    from benchmarks.bench_traces import _write as write_benchmark_trace
    from dsh_testkit.doctor import diagnose
    from dsh_testkit.doctor._compact import compact_report, dumps_compact
    from dsh_testkit.doctor._stream import SpilledConversations, diagnose_stream

    plain = tmp_path / "bench.trace"
    write_benchmark_trace(plain, 300)
    lines = plain.read_bytes().splitlines(keepends=True)
    batches = [b"".join(lines[i : i + 40]) for i in range(0, len(lines), 40)]
    files = {
        "zstd": b"".join(frame(b) for b in batches),
        "gzip": b"".join(gzip.compress(b, mtime=0) for b in batches),
    }
    files["zstd-torn"] = files["zstd"][:-25]
    files["gzip-torn"] = files["gzip"][:-25]
    for name, data in files.items():
        path = tmp_path / f"bench.trace.{name}"
        path.write_bytes(data)
        whole = diagnose(load_trace(path))
        streamed = diagnose_stream(path)
        assert isinstance(streamed.conversations, SpilledConversations)
        assert streamed == whole, name
        assert dumps_compact(compact_report(streamed)) == dumps_compact(compact_report(whole))
        if name.endswith("torn"):
            assert streamed.notes[0].startswith("the last "), streamed.notes
        if name in ("zstd", "gzip-torn"):  # the command's choice, twice (each run ~1 s)
            by_cli = run_cli("cache-report", "--json", "--stream", str(path))
            read_whole = run_cli("cache-report", "--json", "--no-stream", str(path))
            assert by_cli.returncode == 0 and by_cli.stdout == read_whole.stdout, by_cli.stderr
            assert "read whole" not in by_cli.stderr
    # a damaged frame in the middle: the same error and exit status either way
    damaged = bytearray(files["zstd"])
    damaged[len(damaged) // 2] ^= 0xFF
    path = tmp_path / "damaged.trace.zst"
    path.write_bytes(bytes(damaged))
    streamed_run = run_cli("cache-report", "--stream", str(path))
    whole_run = run_cli("cache-report", "--no-stream", str(path))
    assert streamed_run.returncode == whole_run.returncode == 2
    assert streamed_run.stderr == whole_run.stderr and "is damaged" in whole_run.stderr


def test_a_compressed_trace_streams_by_its_plain_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cache-report streams a trace of STREAM_BYTES or more, counted decompressed (a trace
    compresses 40 to 120 times: its compressed size says little)."""
    import argparse

    from benchmarks.bench_traces import _write as write_benchmark_trace
    from dsh_testkit.cli import _doctor

    plain = tmp_path / "bench.trace"
    write_benchmark_trace(plain, 200)
    size = plain.stat().st_size
    packed = tmp_path / "bench.trace.zst"
    packed.write_bytes(b"".join(frame(line) for line in plain.read_bytes().splitlines(True)))
    assert packed.stat().st_size < size

    def streamed(path: Path, stream: bool | None = None) -> bool:
        return _doctor._streamed(argparse.Namespace(log=str(path), stream=stream))

    monkeypatch.setattr(_doctor, "STREAM_BYTES", size)
    assert streamed(plain) and streamed(packed)  # one frame a line: each piece counted
    monkeypatch.setattr(_doctor, "STREAM_BYTES", size + 1)
    assert not streamed(plain) and not streamed(packed)
    assert streamed(packed, True) and not streamed(packed, False)
