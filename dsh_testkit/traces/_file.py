"""The trace file: what ``dsh-testkit proxy`` and :meth:`RequestCapture.save` write.

JSON Lines, UTF-8, ``\\n`` endings. The first line is the header ``{"format": "dsh-trace",
"version": 2, "source": "proxy" | "capture" | …}`` (and ``"scenario"``, what the file records,
when the writer was given one: the pytest cache baseline writes the test's node id, which
``dsh-testkit compare`` matches runs by; and ``"failed": true`` when the traffic is that of a
test that failed, kept so that ``compare`` fails it); every further line is one exchange:
``index``, ``endpoint``, ``url``, ``conversation``, ``started``, ``firstByte``, ``finished``,
``status``, ``request``, ``response``, ``usage`` (:meth:`Exchange.to_json`) and, from version 2
on, the proxy's ``outcome`` (:data:`OUTCOMES`: ``delivered``, or how the exchange ended
otherwise, with a ``detail`` sentence). Captures add ``headers`` (credentials redacted) and
``requestText`` when the body bytes are not the compact JSON of ``request``. Version 1 files
(no ``outcome``: every exchange was delivered) are still read.

Each record is appended and flushed as soon as its exchange ends, in one ``write`` of the whole
line, so a crash loses at most the exchanges in flight. A writer holds an exclusive ``flock`` on
the file while it is open: a second writer, in this process or another, gets a
:class:`TraceError` instead of interleaving lines. Opened with ``append=True`` (the proxy), an
existing trace is continued, never truncated: its header must match, and a torn last line left
by a crash is cut off (it was never a record; readers drop it too). A write that fails half way
(a full disk) is cut back, so the file never holds half a record before a whole one.

Readers decode line by line (:func:`read_trace_lines`): an unfinished last line, even one cut
inside a multi-byte character, is dropped with a note; damage before it is a :class:`TraceError`
naming the line. Credentials never reach the file: the writer scrubs every string that looks
like a key.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import weakref
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Final, Self

from dsh_core._json_text import loads_json

from ..scrub._scrubber import may_hold_secret, scrub_json
from ._errors import TraceError
from ._shared_history import SharedHistory

__all__ = [
    "OUTCOMES",
    "TRACE_FORMAT",
    "TRACE_FORMAT_VERSION",
    "TraceWriter",
    "encode_record",
    "read_trace_lines",
]

TRACE_FORMAT: Final = "dsh-trace"
TRACE_FORMAT_VERSION: Final = 2
"""The version written. Version 2 added ``outcome`` (and ``detail``) to the proxy's records."""
READABLE_VERSIONS: Final = (1, 2)
"""The versions read; another is refused."""

OUTCOMES: Final = ("delivered", "abandoned", "interrupted", "upstream-timeout", "upstream-error")
"""How a proxied exchange ended (the record's ``outcome``; absent in version 1 and in captures):

- ``delivered``: the client received the whole answer;
- ``abandoned``: the client went away first; the upstream request was cancelled at once;
- ``interrupted``: the proxy stopped while the answer was still coming (after its grace period);
- ``upstream-timeout``: the upstream sent no answer head, or nothing more mid-answer, in time;
- ``upstream-error``: the upstream closed the connection or answered something unreadable.

In every case but ``delivered`` the request reached the upstream whole, ``response`` and
``usage`` hold what had arrived (often no usage), and ``detail`` says what happened."""

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_CHUNK: Final = 1 << 20


def _line(record: Mapping[str, Any]) -> str:
    return _ENCODER.encode(scrub_json(record)) + "\n"


def encode_record(record: Mapping[str, Any]) -> str:
    """An exchange record as one line of the file (compact JSON, no newline), not scrubbed."""
    return _ENCODER.encode(record)


if (
    sys.platform == "win32"
):  # pragma: no cover - no flock on Windows: one writer is the caller's duty

    def _try_lock(fd: int) -> bool:
        return True

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        """The exclusive advisory lock on an open file; ``False`` when another holder has it
        (``flock`` locks belong to the open file description: a second ``open`` of the same
        path conflicts within one process too; closing the file releases the lock)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def _write_all(fd: int, data: bytes, end: bytes = b"") -> None:
    """``data`` then ``end`` in one ``writev`` (no copy joining them), then what is left."""
    if end and hasattr(os, "writev"):
        written = os.writev(fd, [data, end])
        whole = len(data) + len(end)
        if written == whole:
            return
        rest = memoryview(data + end)[written:]  # a short write (a full disk): rare
    else:
        rest = memoryview(data + end)
    while rest:
        rest = rest[os.write(fd, rest) :]


class TraceWriter:
    """Appends exchanges to a trace file, one flushed line each (crash-safe), as its one writer.

    ``append=False`` (what :meth:`RequestCapture.save` uses) starts the file anew, truncating it
    only once the lock is held; ``append=True`` (the proxy) continues an existing trace of the
    same ``source`` and version (:attr:`records` counts the exchanges already in it) and creates
    a missing one. ``fsync=True`` also syncs every line to disk (survives a machine crash, costs
    a syscall). Raises :class:`TraceError` when another writer holds the file or, with
    ``append=True``, when the file is not a trace this writer may continue (nothing in it is
    changed then); ``OSError`` when it cannot be opened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        source: str,
        fsync: bool = False,
        append: bool = False,
        scenario: str | None = None,
        failed: bool = False,
        file_format: str = TRACE_FORMAT,
        version: int = TRACE_FORMAT_VERSION,
    ) -> None:
        self.path: str | None = os.fspath(path)
        self.source = source
        self.file_format = file_format
        """The header's ``format`` (another line-log format may share this writer's rules: the
        mock's request log file)."""
        self.version = version
        self.scenario = scenario
        """What the file records (a test's node id), written in its header when given."""
        self.failed = failed
        """Whether the traffic is a failed test's (``"failed": true`` in the header)."""
        self._fsync = fsync
        self.records = 0
        """Exchange records in the file: those found when it was continued, plus those written."""
        self.size = 0
        """The file's length in bytes (its writer knows it: no one else appends)."""
        self.dropped_tail = 0
        """Bytes of a torn last line (an earlier writer's crash) cut off when continuing."""
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(self.path, flags, 0o644)
        try:
            if not _try_lock(fd):
                raise TraceError(
                    "already open for writing by another writer (a proxy or a capture, in this "
                    "process or another): a trace file has one writer at a time. Stop the other "
                    "writer, or write to another file",
                    path=self.path,
                )
            size = os.fstat(fd).st_size
            if append and size:
                self._continue(fd, size)
            else:
                os.ftruncate(fd, 0)
                self._fd = fd
                self._write_line(self._header())
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._closed = False
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @classmethod
    def spool(cls, *, source: str) -> TraceWriter:
        """A writer to an anonymous temporary file (:func:`tempfile.TemporaryFile`, in
        ``$TMPDIR``): removed by the system as soon as its descriptor closes, even after a
        crash. :meth:`read_back` keeps working after :meth:`close`; the descriptor closes when
        the writer is garbage collected."""
        self = cls.__new__(cls)
        self.scenario = None
        self.failed = False
        self.path = None
        self.source = source
        self.file_format = TRACE_FORMAT
        self.version = TRACE_FORMAT_VERSION
        self._fsync = False
        self.records = 0
        self.size = 0
        self.dropped_tail = 0
        fd, name = tempfile.mkstemp(prefix="dsh-proxy-", suffix=".trace")
        os.unlink(name)
        self._fd = fd
        self._closed = False
        self._finalizer = weakref.finalize(self, os.close, fd)
        self._write_line(self._header())
        return self

    def _header(self) -> bytes:
        header: dict[str, Any] = {
            "format": self.file_format,
            "version": self.version,
            "source": self.source,
        }
        if self.scenario is not None:
            header["scenario"] = self.scenario
        if self.failed:
            header["failed"] = True
        return _line(header).encode("utf-8")

    def _continue(self, fd: int, size: int) -> None:
        """Check the header of an existing file, count its records, and settle its last line."""
        path = self.path
        first = os.pread(fd, min(size, 64 * 1024), 0).split(b"\n", 1)[0]
        try:
            header = json.loads(first.decode("utf-8"))
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != self.file_format:
            raise TraceError(
                f"exists and is not a {self.file_format} file (no {self.file_format} header on "
                "line 1); it is left as it is: write to another file",
                path=path,
            )
        if header.get("version") != self.version:
            raise TraceError(
                f"is a {self.file_format} format version {header.get('version')!r} file; this "
                f"dsh-testkit appends only to version {self.version} files, so it is left as it "
                "is: write to another file",
                path=path,
            )
        if header.get("source") != self.source:
            raise TraceError(
                f"is a {header.get('source')!r} trace, not a {self.source!r} one; it is left as "
                "it is: write the trace to another file",
                path=path,
            )
        lines = 0
        last_newline = -1
        offset = 0
        while offset < size:
            chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
            if not chunk:
                break
            lines += chunk.count(b"\n")
            found = chunk.rfind(b"\n")
            if found >= 0:
                last_newline = offset + found
            offset += len(chunk)
        self.size = size
        self._fd = fd
        if last_newline == size - 1:
            self.records = lines - 1
            return
        tail = os.pread(fd, size - last_newline - 1, last_newline + 1)
        if last_newline < 0:
            self._write_line(b"\n")  # the header alone, its newline not written yet
            return
        try:
            whole = isinstance(json.loads(tail.decode("utf-8")), dict)
        except ValueError:
            whole = False
        if whole:  # a complete record that only lacks its newline
            self._write_line(b"\n")
            self.records = lines
        else:
            os.ftruncate(fd, last_newline + 1)
            self.size = last_newline + 1
            self.dropped_tail = len(tail)
            self.records = lines - 1

    def _write_line(self, data: bytes, end: bytes = b"") -> None:
        """Append ``data + end`` in one write; a failed write is cut back, leaving the file
        whole."""
        try:
            _write_all(self._fd, data, end)
            if self._fsync:
                os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):  # cannot even cut back: the error says enough
                os.ftruncate(self._fd, self.size)
            raise
        self.size += len(data) + len(end)

    def append(self, record: Mapping[str, Any], *, scrubbed: bool = False) -> int:
        """Write one exchange record and flush it; scrubbed first unless ``scrubbed`` says the
        caller did it already. Returns the byte offset of its line in the file."""
        if scrubbed:
            return self.append_encoded(_ENCODER.encode(record))
        return self.append_encoded(_line(record)[:-1])

    def append_encoded(self, line: str) -> int:
        """Write one exchange the caller scrubbed and encoded as compact JSON (one line, no
        newline: :func:`encode_record`) and flush it. Returns the byte offset of the line;
        raises ``OSError`` (with the file unchanged) when it cannot be written."""
        if self._closed:
            raise ValueError("the trace writer is closed")
        offset = self.size
        self._write_line(line.encode("utf-8"), b"\n")
        self.records += 1
        return offset

    def read_line(self, offset: int) -> bytes:
        """The line (without its newline) that starts at byte ``offset`` of the file."""
        if self._closed and self.path is not None:
            with open(self.path, "rb") as file:
                file.seek(offset)
                return file.readline().rstrip(b"\n")
        out = bytearray()
        at = offset
        while at < self.size:
            chunk = os.pread(self._fd, min(_CHUNK, self.size - at), at)
            if not chunk:
                break
            end = chunk.find(b"\n")
            if end != -1:
                out += chunk[:end]
                break
            out += chunk
            at += len(chunk)
        return bytes(out)

    def read_back(self) -> bytes:
        """The file as it stands: the bytes this writer (and the ones it continued) wrote.

        Works after :meth:`close` too (for a file with a path, by reading it again)."""
        if self._closed and self.path is not None:
            with open(self.path, "rb") as file:
                return file.read()
        out = bytearray()
        while len(out) < self.size:
            chunk = os.pread(self._fd, min(_CHUNK, self.size - len(out)), len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop writing and release the lock (a spool keeps its descriptor for reading)."""
        if self._closed:
            return
        self._closed = True
        if self._finalizer is None:
            os.close(self._fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_trace_lines(
    data: str | bytes,
    *,
    path: str | None = None,
    file_format: str = TRACE_FORMAT,
    versions: tuple[int, ...] = READABLE_VERSIONS,
    share_history: bool = True,
) -> tuple[Mapping[str, Any], Iterator[tuple[int, Mapping[str, Any]]], list[str]]:
    """The header, the records (with their line numbers) and notes of a trace file's content.

    With ``share_history`` (the default) the messages a line resends from an earlier line are
    that line's parsed objects, and only a line's new part is parsed and sniffed for secrets
    (:mod:`._shared_history`); the records are equal to a plain parse of each line either way.

    Bytes are decoded line by line, so only the line that holds bytes that are not UTF-8 is
    affected: the unfinished last line (no newline after it) is dropped with a note when it does
    not read, even when it was cut inside a multi-byte character. Raises :class:`TraceError` for
    another format or version, or a line before the last that is not UTF-8, not JSON, or not an
    object.
    """
    binary = isinstance(data, bytes)
    lines: list[Any] = data.split(b"\n") if isinstance(data, bytes) else data.split("\n")
    ended = len(lines[-1]) == 0
    if ended:
        lines.pop()
    header = trace_header(
        lines[0] if lines else ("" if not binary else b""),
        path=path,
        file_format=file_format,
        versions=versions,
    )
    reader = TraceLines(path=path, share_history=share_history)
    records: list[tuple[int, Mapping[str, Any]]] = []
    count = len(lines)
    for number, raw in enumerate(lines[1:], start=2):
        record = reader.record(number, raw, torn=number == count and not ended)
        if record is None:
            break
        records.append((number, record))
    return header, iter(records), reader.notes


def trace_header(
    first: str | bytes,
    *,
    path: str | None = None,
    file_format: str = TRACE_FORMAT,
    versions: tuple[int, ...] = READABLE_VERSIONS,
) -> Mapping[str, Any]:
    """A trace file's first line, checked: :class:`TraceError` for another format or version."""
    try:
        header = loads_json(first.decode("utf-8") if isinstance(first, bytes) else first)
    except ValueError:
        header = None
    if not isinstance(header, Mapping) or header.get("format") != file_format:
        raise TraceError(f"not a {file_format} file (no format header on line 1)", path=path)
    if header.get("version") not in versions:
        readable = " and ".join(str(v) for v in versions)
        raise TraceError(
            f"{file_format} format version {header.get('version')!r}; this dsh-testkit reads "
            f"version(s) {readable}",
            path=path,
        )
    return header


class TraceLines:
    """A trace file's records parsed one line at a time (the lines after the header, in order),
    with the notes of what was dropped: :func:`read_trace_lines` over a whole content, a stream
    over a file's lines (``dsh_testkit.traces._stream``)."""

    def __init__(self, *, path: str | None = None, share_history: bool = True) -> None:
        self.path = path
        self.notes: list[str] = []
        self._shared = SharedHistory(may_hold_secret) if share_history else None

    def record(self, number: int, raw: str | bytes, *, torn: bool) -> dict[str, Any] | None:
        """Line ``number``'s record (``raw`` without its newline); ``None`` when it is an
        unfinished last line (``torn``: no newline after it) that does not read, dropped with
        a note. Raises :class:`TraceError` for a line that is not UTF-8, not JSON or not an
        object."""
        path = self.path
        shared = self._shared
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if torn:
                    self.notes.append(
                        f"an unfinished last line (line {number}, {len(raw)} bytes, cut inside "
                        "a multi-byte character) was dropped: the recording stopped while "
                        "writing it"
                    )
                    return None
                raise TraceError(
                    f"line {number} is not UTF-8 (byte {exc.start + 1} of the line)", path=path
                ) from None
        else:
            line = raw
        try:
            record = shared.load(line) if shared is not None else loads_json(line)
        except ValueError:
            if torn:
                self.notes.append(
                    f"an unfinished last line (line {number}, {len(line)} characters) was "
                    "dropped: the recording stopped while writing it"
                )
                return None
            raise TraceError(f"line {number} is not JSON", path=path) from None
        if not isinstance(record, dict):
            raise TraceError(f"line {number} is not a JSON object", path=path)
        if not (shared.may_hold_secret() if shared is not None else may_hold_secret(line)):
            record["_mayHoldKey"] = False  # the reader may skip scrubbing this record
        return record
