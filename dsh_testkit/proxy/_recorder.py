"""The proxy's recorder: every exchange to the trace file, and nothing of it kept in memory.

An exchange is scrubbed, encoded and appended to the trace file as one line the moment it ends
(:class:`~dsh_testkit.traces._file.TraceWriter`: one writer per file, appended, never truncated), then
handed to the listeners (:meth:`Recorder.subscribe`) with the byte offset of its line; the
recorder keeps only counts. Without an ``out`` file the lines go to an anonymous temporary file
(removed by the system when the recorder is dropped, or the process ends, even by a crash):
the report at the end and ``GET /_dsh/report`` read the exchanges back from the file, so the
heap holds no request or answer once its exchange is written, however long the session.

Credentials never reach the file: the client's own credentials (every value its credential
headers present) in every spelling, everything key-shaped and every credential field, by the
one scrubbing rule (:meth:`~dsh_testkit.scrub.Scrubber.json` with the request's
:class:`~dsh_testkit.scrub._spellings.KnownSecrets`).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import os
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from dsh_core._json_text import loads_json

from ..scrub._scrubber import Scrubber
from ..scrub._spellings import KnownSecrets
from ..traces import Exchange, Trace, TraceError, loads_trace
from ..traces._file import TraceWriter, encode_record, read_trace_lines
from ..traces._readers._trace_file import records_trace

__all__ = [
    "REPORT_READ_LIMIT",
    "TRIM_ABOVE",
    "Followed",
    "Listener",
    "Recorder",
    "session_summary",
    "trim_heap",
]

_SCRUBBER: Final = Scrubber.for_rules(None)

REPORT_READ_LIMIT: Final = 256 << 20
"""The largest continued trace file whose earlier exchanges the live report reads back when the
proxy restarts; a larger one's earlier exchanges are left to ``dsh-testkit cache-report`` (the
live report covers what this session records), so a restart cannot take the proxy's memory."""
TRIM_ABOVE: Final = 8 << 20
"""An exchange larger than this (bytes, request and answer) hands the allocator's free memory
back once it is recorded and dropped."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def trim_heap() -> None:
    """Give the C allocator's free memory back to the system (glibc's ``malloc_trim``).

    A large exchange is parsed, encoded and written in a few transient copies; once they are
    freed, glibc keeps much of that memory for reuse (the copies below its mmap threshold sit in
    the heap), so the resident set would stay at the peak of the largest exchange seen. A few
    milliseconds, after an exchange of more than :data:`TRIM_ABOVE` only."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


Listener = Callable[[Mapping[str, Any], int], object]
"""Called with each exchange record as written (scrubbed; do not change it) and the byte offset
of its line in the trace file, on the proxy's event loop, right after the line is written."""


class Recorder:
    """Writes each exchange to the trace file ``out`` (continued when it exists), or to a
    temporary file when ``out`` is ``None``; counts what happened.

    Raises :class:`~dsh_testkit.traces.TraceError` when ``out`` has another writer or is not a
    proxy trace it may continue, ``OSError`` when it cannot be opened.
    """

    def __init__(
        self,
        out: str | os.PathLike[str] | None,
        *,
        fsync: bool = False,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        if out is None:
            self.writer = TraceWriter.spool(source="proxy")
        else:
            self.writer = TraceWriter(out, source="proxy", fsync=fsync, append=True)
        self.path = self.writer.path
        """The trace file (``None`` when spooled to a temporary file)."""
        self.continued = self.writer.records
        """Exchanges the file held when this recorder opened it (a restart continues it)."""
        self.counts: collections.Counter[str] = collections.Counter()
        """Exchanges recorded by this recorder, by outcome (``delivered``, ``abandoned``, …)."""
        self.events: collections.Counter[str] = collections.Counter()
        """What the proxy counted rather than printed: ``refused`` (over the connection cap),
        ``upstream-unreachable`` (the request never left), ``accept-failed`` (out of file
        descriptors), ``send-failed``, ``not-recorded`` (not a model request),
        ``write-failed``, ``listener-failed``."""
        self.reset_seen: str | None = None
        """A reset of the upstream's cache relayed since the last record (``POST /_dsh/reset``
        to the mock): the next record carries it as a ``reset`` event, so the cache doctor
        starts a cold cache there."""
        self._warn = warn if warn is not None else _stderr
        self._warned: set[str] = set()
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._ending = 0
        """Exchanges whose client has the end of the answer but which are not recorded yet."""

    # -- writing -----------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(record, offset)`` for every exchange written from now on; returns a
        function that unsubscribes it. A listener that raises is counted (``listener-failed``)
        and reported once; the proxy goes on."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe

    def record(self, record: dict[str, Any], *, secrets: Iterable[str] = ()) -> int | None:
        """Write one exchange record; returns the byte offset of its line (``None`` when it
        could not be written: counted as ``write-failed`` and reported once, the file left
        whole).

        ``secrets`` are the client's own credentials: removed in every spelling, with anything
        key-shaped and credential fields, in one pass: neither the trace file nor the reports
        show them. The line is encoded first and checked as a whole (every spelling reads the
        same in it); when it holds none of the client's credentials and nothing the scrubber
        would change (:meth:`Scrubber.body_is_clean`), the walk over every value is skipped.
        """
        known = KnownSecrets(secrets)
        url = record.get("url")
        if isinstance(url, str):
            record["url"] = _SCRUBBER.url(url, known)
        with self._lock:
            record["index"] = self.writer.records
            line = encode_record(record)
            if not _SCRUBBER.body_is_clean(line, {}, known):
                record = _SCRUBBER.json(record, known=known)
                line = encode_record(record)
            try:
                offset = self.writer.append_encoded(line)
            except (OSError, ValueError) as exc:
                self.events["write-failed"] += 1
                self._warn_once(
                    "write",
                    f"cannot write the trace {self.path or '(temporary file)'}: "
                    f"{getattr(exc, 'strerror', None) or exc}; exchanges are not being recorded "
                    "(the file is left whole)",
                )
                return None
            self.counts[str(record.get("outcome", "delivered"))] += 1
        for listener in list(self._listeners):
            try:
                listener(record, offset)
            except Exception as exc:
                self.events["listener-failed"] += 1
                self._warn_once("listener", f"a trace listener failed: {exc!r}")
        return offset

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self._warn(message)

    @contextlib.contextmanager
    def ending(self) -> Iterator[None]:
        """Around sending an answer's end and recording it (synchronous code, no await): a
        :meth:`trace` from another thread waits for the exchange to be in."""
        with self._lock:
            self._ending += 1
        try:
            yield
        finally:
            with self._lock:
                self._ending -= 1
                if not self._ending:
                    self._settled.notify_all()

    # -- reading back ------------------------------------------------------------------------

    @property
    def recorded(self) -> int:
        """Exchange records in the trace file (those it held before included)."""
        return self.writer.records

    def trace(self) -> Trace:
        """The trace file read back: every exchange recorded so far (those whose client already
        has the whole answer included), and those of earlier sessions it continues."""
        with self._settled:
            self._settled.wait_for(lambda: not self._ending, timeout=5.0)
            data = self.writer.read_back()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            read_trace_lines(data, path=self.path)  # raises the TraceError naming the line
            raise TraceError("the trace file is not UTF-8", path=self.path) from None
        # No path on the trace: the report heads it "(proxy trace)", as the live report it is.
        return loads_trace(text)

    def follow(self, *, keep: int) -> Followed:
        """The exchanges of the trace, each read back once, in order, as they are recorded
        (and those of the earlier sessions the file continues): what a live report diagnoses
        one at a time. ``keep``: how many of the latest it can read back again by index."""
        return Followed(self, keep=keep)

    def close(self) -> None:
        """Stop recording and release the file (:meth:`trace` still reads it)."""
        with self._lock:
            self.writer.close()


def _stderr(message: str) -> None:
    print(f"dsh-testkit proxy: {message}", file=sys.stderr, flush=True)


def session_summary(recorder: Recorder, grace: float) -> str:
    """The line a stopping proxy prints: how each exchange of the session ended, and what was
    counted rather than printed."""
    counts = recorder.counts
    total = sum(counts.values())
    parts = [f"{counts['delivered']} delivered"]
    if counts["abandoned"]:
        parts.append(f"{counts['abandoned']} abandoned by their client (cancelled upstream)")
    if counts["interrupted"]:
        parts.append(
            f"{counts['interrupted']} interrupted: still in flight when the {grace:g} s "
            "grace ended (request complete, answer partial)"
        )
    else:
        parts.append("none in flight at the end")
    if counts["upstream-timeout"]:
        parts.append(f"{counts['upstream-timeout']} upstream timeout(s)")
    if counts["upstream-error"]:
        parts.append(f"{counts['upstream-error']} upstream error(s)")
    where = recorder.path or "a temporary file, now removed"
    line = f"stopped; {total} exchange(s) recorded this session ({', '.join(parts)}) in {where}"
    if recorder.continued:
        line += f" after the {recorder.continued} already in it"
    events = recorder.events
    counted = [
        (events["refused"], "connection(s) refused over the cap (503)"),
        (events["upstream-unreachable"], "request(s) the upstream could not be reached for"),
        (events["not-recorded"], "request(s) that were not model requests (forwarded only)"),
        (events["accept-failed"], "accept() failure(s) for want of file descriptors"),
        (events["send-failed"], "write(s) to clients that had left"),
        (events["write-failed"], "exchange(s) NOT written: the trace file could not be written"),
        (events["listener-failed"], "listener failure(s)"),
    ]
    extra = [f"{n} {what}" for n, what in counted if n]
    if extra:
        line += "; counted: " + ", ".join(extra)
    return line


class Followed:
    """A recorder's exchanges for a live report: each exchange is read back from the trace file
    when it is taken (the heap holds none), and the latest ``keep`` can be read back again by
    index (the doctor's earlier requests). Recording may go on in another thread."""

    def __init__(self, recorder: Recorder, *, keep: int) -> None:
        self._recorder = recorder
        self._keep = keep
        self._pending: deque[int] = deque()
        self._offsets: OrderedDict[int, int] = OrderedDict()
        self._taken = 0
        self._unsubscribe = recorder.subscribe(self._on_record)
        self.skipped_earlier = 0
        """Exchanges of a continued trace too large to read back at start (not followed)."""
        if recorder.continued and recorder.writer.size > REPORT_READ_LIMIT:
            self.skipped_earlier = recorder.continued
        elif recorder.continued:  # a restart: the session's earlier exchanges count too
            data = recorder.writer.read_back()
            at = data.find(b"\n") + 1  # past the header
            while 0 < at < len(data):
                end = data.find(b"\n", at)
                if end == -1:
                    break
                self._pending.append(at)
                at = end + 1

    @property
    def path(self) -> str | None:
        """The trace file (``None`` when spooled to a temporary file)."""
        return self._recorder.path

    def _on_record(self, record: Mapping[str, Any], offset: int) -> None:
        self._pending.append(offset)

    def waiting(self) -> int:
        """Exchanges recorded but not taken yet."""
        return len(self._pending)

    def _read(self, offset: int, index: int) -> Exchange | None:
        line = self._recorder.writer.read_line(offset)
        try:
            record = loads_json(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
        if not isinstance(record, Mapping):
            return None
        try:
            trace = records_trace([(index + 1, record)], source="proxy", scrubbed=True)
        except TraceError:
            return None
        if not trace.exchanges:
            return None
        return dataclasses.replace(trace.exchanges[0], index=index)

    def take(self) -> Iterator[Exchange]:
        """The exchanges recorded since the last call, each read back as it is reached, indexed
        from 0 on (a line that does not read back is skipped). One taker at a time."""
        while self._pending:
            offset = self._pending.popleft()
            exchange = self._read(offset, self._taken)
            if exchange is None:
                continue
            self._offsets[self._taken] = offset
            while len(self._offsets) > self._keep:
                self._offsets.popitem(last=False)
            self._taken += 1
            yield exchange

    def exchange(self, index: int) -> Exchange:
        """A taken exchange, read back again (``LookupError`` once it is no longer kept)."""
        offset = self._offsets.get(index)
        exchange = self._read(offset, index) if offset is not None else None
        if exchange is None:
            raise LookupError(f"exchange {index} is no longer kept for the live report")
        return exchange

    def close(self) -> None:
        self._unsubscribe()
