"""The JSONL session store: one append-only file per session, interchangeable with the reference
harness's ``session.jsonl``.

Layout: line 1 is the header record ``{"type":"session","version":0,"id":…,"createdAt":…,
"delegationDepth":0}`` (:func:`header_line`, which the reference harness's reader accepts); every further line is one storage record, compact JSON with
``type`` first, UTF-8, ``\\n``-terminated: an event (:meth:`Event.to_json`) or, when the writer
packs, a chunk row (:class:`ChunkRow`). The same events always encode to the same bytes.

Reading (:func:`load_session`, in ``_reading.py``) never modifies the file; its rules for what a
crash leaves and what is corruption are stated there.

A log has ONE writer. Every writer (:func:`write_session`, :func:`open_session`,
:meth:`JsonlWriter.create`, :meth:`JsonlWriter.append_to`) holds an exclusive advisory lock on
the file (``fcntl.flock``) from open to :meth:`JsonlWriter.close`; a second writer, in this
process or another, gets :class:`LogLockedError` naming the path instead of interleaving or
overwriting lines. Readers take no lock. (On Windows, which has no ``flock``, the lock is not
taken and one writer per log is the caller's duty.)

Writing (:class:`JsonlWriter`) attaches to a live :class:`Session` as a listener, so every
committed append lands on disk as one ``write`` of one line before ``append`` returns (plus an
``fsync`` with ``fsync="always"``). Reopening (:func:`open_session`) continues the file: bytes
already committed are never rewritten; only an unfinished last line is cut off first.

Session listeners run synchronously inside ``Session.append``, so this store is synchronous;
from async code, load with ``await asyncio.to_thread(load_session, path)``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias

from .._errors import (
    CorruptLogError,
    DshError,
    JsonValueError,
)
from .._events import Event
from .._json_text import dumps_canonical
from .._session import Session, SessionInfo
from ._chunk_rows import ChunkRow, RunPacker, pack_chunk_rows
from ._header_line import header_line
from ._lock import LogLockedError, lock_for_writing, open_new
from ._reading import LoadedLog, loads_session

__all__ = [
    "FsyncPolicy",
    "JsonlWriter",
    "LogLockedError",
    "dumps_session",
    "open_session",
    "write_session",
]

FsyncPolicy: TypeAlias = Literal["never", "always"]
"""``"never"``: each write reaches the OS at once (survives a process crash, not a power cut).
``"always"``: each write is also ``fsync``-ed (and a new file's directory entry)."""

_FSYNC_POLICIES: Final = ("never", "always")

StrPath: TypeAlias = "str | os.PathLike[str]"

# ---------------------------------------------------------------------------------------------
# Encoding


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _line(record: Mapping[str, Any]) -> bytes:
    """One record as a ``\\n``-terminated UTF-8 line of compact JSON, keys in the given order."""
    text = dumps_canonical(record)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate is valid in a JSON string only as an escape; json.loads turns the
        # escape back into the same code point, so the round trip stays lossless. A pair held as
        # two code points would read back as one character: frozen event data never holds one
        # (freeze_json refuses it), but a header's fields are plain strings, so check here too.
        pair = _SURROGATE_PAIR.search(text)
        if pair is not None:
            raise JsonValueError(
                f"a string holds the surrogates {pair.group()!r} as two code points; JSON text "
                "reads them back as one character, so the record would not survive a round trip",
                path=str(record.get("type", "record")),
            ) from None
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        return (text + "\n").encode("utf-8")


def _record_lines(records: Iterable[Event | ChunkRow]) -> bytes:
    return b"".join(_line(record.to_json()) for record in records)


def dumps_session(
    info: SessionInfo, events: Iterable[Event], *, pack_chunks: bool = False
) -> bytes:
    """The exact bytes of a session file holding ``events`` (pure; byte-stable).

    ``pack_chunks`` packs runs of delta chunks into rows, as the reference harness writes them.
    """
    records = pack_chunk_rows(events) if pack_chunks else events
    return _line(header_line(info)) + _record_lines(records)


# ---------------------------------------------------------------------------------------------
# Writing


def _fsync_directory(path: str) -> None:
    """Make a new file's directory entry durable (POSIX; a no-op where directories can't open)."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


class JsonlWriter:
    """Appends events to a session file, one line per write, never rewriting committed bytes.

    Make one with :meth:`create` (a new file), :meth:`append_to` (continue a file), or the
    helpers :func:`write_session` / :func:`open_session`, which also attach a session. Attached
    (:meth:`attach`), it writes every event the session commits before ``append`` returns.
    Every event must carry the next seq: the writer refuses to leave a gap.

    With ``pack_chunks=True``, runs of delta chunks are stored as chunk rows; a run is written
    when it ends (the next event, :meth:`flush` or :meth:`close`), every other event at once.
    Close the writer (or use it as a context manager) to flush a pending run and the file.

    A write that fails (a full disk) raises out of ``Session.append`` after the event was
    committed in memory; the file is cut back to its last complete record, and the writer then
    refuses later events (they would leave a gap). Reopen the session to continue.
    """

    __slots__ = (
        "_detach",
        "_file",
        "_fsync",
        "_info",
        "_loaded",
        "_next_seq",
        "_packer",
        "_path",
        "_session",
        "_size",
    )

    def __init__(
        self,
        *,
        file: io.FileIO,
        path: str,
        info: SessionInfo,
        next_seq: int,
        size: int,
        fsync: FsyncPolicy,
        pack_chunks: bool,
        loaded: LoadedLog | None = None,
    ) -> None:
        """Internal: use :meth:`create`, :meth:`append_to`, :func:`write_session` or
        :func:`open_session`."""
        self._file: io.FileIO | None = file
        self._path = path
        self._info = info
        self._next_seq = next_seq
        self._size = size
        self._fsync = fsync
        self._packer = RunPacker() if pack_chunks else None
        self._loaded = loaded
        self._session: Session | None = None
        self._detach: Callable[[], None] | None = None

    # ---------------------------------------------------------------- construction

    @classmethod
    def create(
        cls,
        path: StrPath,
        info: SessionInfo,
        *,
        fsync: FsyncPolicy = "never",
        pack_chunks: bool = False,
        overwrite: bool = False,
    ) -> JsonlWriter:
        """A new session file holding just the header record (an existing file is an error
        unless ``overwrite``)."""
        _check_fsync(fsync)
        name = os.fspath(path)
        header = _line(header_line(info))  # a header that cannot be written leaves no file
        file = open_new(name, overwrite=overwrite)
        try:
            lock_for_writing(file, name)
            file.truncate(0)
        except BaseException:
            file.close()
            raise
        writer = cls(
            file=file,
            path=name,
            info=info,
            next_seq=0,
            size=0,
            fsync=fsync,
            pack_chunks=pack_chunks,
        )
        try:
            writer._write_bytes(header)
            if fsync == "always":
                _fsync_directory(name)
        except BaseException:
            writer.close()
            raise
        return writer

    @classmethod
    def append_to(
        cls,
        path: StrPath,
        *,
        audit: bool = False,
        fsync: FsyncPolicy = "never",
        pack_chunks: bool = False,
    ) -> JsonlWriter:
        """Continue an existing session file after its last event (no session attached).

        The file is read as :func:`load_session` reads it (the report is :attr:`loaded`); an
        unfinished last line is cut off, nothing else changes. Crash-repair closers are NOT
        written: use :func:`open_session` to resume a session.
        """
        file, loaded, raw = _read_for_append(path, audit=audit, fsync=fsync)
        try:
            return cls._continuing(file, loaded, raw, fsync=fsync, pack_chunks=pack_chunks)
        except BaseException:
            file.close()
            raise

    @classmethod
    def _continuing(
        cls,
        file: io.FileIO,
        loaded: LoadedLog,
        raw: bytes,
        *,
        fsync: FsyncPolicy,
        pack_chunks: bool,
    ) -> JsonlWriter:
        size = loaded.committed_bytes
        if loaded.dropped is not None:
            file.truncate(size)
        writer = cls(
            file=file,
            path=loaded.path or "",
            info=loaded.info,
            next_seq=len(loaded.events),
            size=size,
            fsync=fsync,
            pack_chunks=pack_chunks,
            loaded=loaded,
        )
        if raw[size - 1 : size] != b"\n":
            # The last record is complete but lost its newline: end it before appending.
            writer._write_bytes(b"\n")
        return writer

    # ---------------------------------------------------------------- state

    @property
    def path(self) -> str:
        return self._path

    @property
    def info(self) -> SessionInfo:
        """The session header the file starts with."""
        return self._info

    @property
    def next_seq(self) -> int:
        """The seq the next written event must carry."""
        return self._next_seq

    @property
    def loaded(self) -> LoadedLog | None:
        """For a continued file, what loading it found (dropped tail, repairs); else ``None``."""
        return self._loaded

    @property
    def closed(self) -> bool:
        return self._file is None

    @property
    def attached(self) -> bool:
        """Whether a session's appends are being written."""
        return self._session is not None

    @property
    def session(self) -> Session:
        """The attached session; raises :class:`DshError` when none is attached."""
        if self._session is None:
            raise DshError(f"no session is attached to the writer of {self._path}")
        return self._session

    def __repr__(self) -> str:
        state = "closed" if self._file is None else f"next_seq={self._next_seq}"
        return f"<JsonlWriter {self._path!r} {state}>"

    # ---------------------------------------------------------------- writing

    def _write_bytes(self, data: bytes) -> None:
        file = self._file
        if file is None:
            raise DshError(
                f"the writer of {self._path} is closed; open the session again to append"
            )
        try:
            file.seek(self._size)
            view = memoryview(data)
            while view:
                view = view[file.write(view) :]
            if self._fsync == "always":
                os.fsync(file.fileno())
        except BaseException:
            # Roll back a partial line so the file still ends on a record boundary.
            with contextlib.suppress(OSError):
                file.truncate(self._size)
            raise
        self._size += len(data)

    def write(self, events: Iterable[Event]) -> None:
        """Write events that continue the file (their seqs must be :attr:`next_seq`, +1, …).

        The batch is checked first and written with one ``write``; a refused or failed batch
        leaves the file as it was.
        """
        batch = list(events)
        expected = self._next_seq
        for event in batch:
            if event.seq != expected:
                raise CorruptLogError(
                    f"refusing to write {event.type} with seq {event.seq} to the log: seq "
                    f"{expected} comes next, and a log must stay contiguous",
                    seq=event.seq,
                    path=self._path,
                )
            expected += 1
        packer = self._packer.copy() if self._packer is not None else None
        records: list[Event | ChunkRow] = []
        if packer is None:
            records = list(batch)
        else:
            for event in batch:
                records.extend(packer.feed(event))
        if records:
            self._write_bytes(_record_lines(records))
        self._packer = packer
        self._next_seq = expected

    def flush(self) -> None:
        """Write a held-back run of delta chunks now (packing only; otherwise a no-op)."""
        if self._packer is None or not self._packer.pending:
            return
        packer = self._packer.copy()
        self._write_bytes(_record_lines(packer.finish()))
        self._packer = packer

    # ---------------------------------------------------------------- sessions

    def attach(self, session: Session) -> None:
        """Write the session's events the file lacks, then every event it commits."""
        if self._session is not None:
            raise DshError(f"the writer of {self._path} is already attached to a session")
        if session.id != self._info.id:
            raise CorruptLogError(
                f"cannot attach session {session.id!r}: the file holds session {self._info.id!r}",
                path=self._path,
            )
        if session.seq < self._next_seq:
            raise CorruptLogError(
                f"cannot attach session {session.id!r} with {session.seq} events: the file "
                f"already holds {self._next_seq}",
                path=self._path,
            )
        self.write(session.events[self._next_seq :])
        self._detach = session.add_listener(self._on_append)
        self._session = session

    def _on_append(self, event: Event, session: Session) -> None:
        self.write((event,))

    def detach(self) -> None:
        """Stop writing the attached session's appends (a held-back run is flushed)."""
        if self._detach is not None:
            self._detach()
        self._detach = None
        self._session = None
        if self._file is not None:
            self.flush()

    def close(self) -> None:
        """Detach, flush and close the file. Idempotent."""
        if self._file is None:
            return
        try:
            self.detach()
        finally:
            file, self._file = self._file, None
            file.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _check_fsync(fsync: str) -> None:
    if fsync not in _FSYNC_POLICIES:
        raise ValueError(f"fsync must be one of {_FSYNC_POLICIES}, got {fsync!r}")


def _read_for_append(
    path: StrPath, *, audit: bool, fsync: str
) -> tuple[io.FileIO, LoadedLog, bytes]:
    _check_fsync(fsync)
    name = os.fspath(path)
    file = open(name, "r+b", buffering=0)  # noqa: SIM115 (handed to the writer)
    try:
        lock_for_writing(file, name)
        raw = file.readall()
        return file, loads_session(raw, audit=audit, path=name), raw
    except BaseException:
        file.close()
        raise


def write_session(
    path: StrPath,
    session: Session,
    *,
    fsync: FsyncPolicy = "never",
    pack_chunks: bool = False,
    overwrite: bool = False,
) -> JsonlWriter:
    """Write a new session file (header, then every event so far) and keep it attached.

    Returns the writer: later appends to ``session`` land in the file until it is closed. For a
    one-shot dump, ``write_session(path, session).close()``.
    """
    writer = JsonlWriter.create(
        path, session.info, fsync=fsync, pack_chunks=pack_chunks, overwrite=overwrite
    )
    try:
        writer.attach(session)
    except BaseException:
        writer.close()
        raise
    return writer


def open_session(
    path: StrPath,
    *,
    audit: bool = False,
    fsync: FsyncPolicy = "never",
    pack_chunks: bool = False,
    clock: Callable[[], int] | None = None,
) -> JsonlWriter:
    """Resume a stored session: load it, seed a :class:`Session`, and keep writing to the file.

    The session (``writer.session``) starts from the stored events plus the crash-repair
    closers, and, as every seeded session, ends with a ``session/end-seed`` marker. The writer
    appends what the file lacks (the closers and the marker, so the file equals the session's
    log and turn numbering continues) and then every new event. Committed bytes are never
    rewritten; an unfinished last line is cut off first. Reopening an untouched session adds
    nothing. The file is not modified when loading or seeding fails.
    """
    file, loaded, raw = _read_for_append(path, audit=audit, fsync=fsync)
    try:
        session = loaded.to_session(clock=clock)
        writer = JsonlWriter._continuing(file, loaded, raw, fsync=fsync, pack_chunks=pack_chunks)
    except BaseException:
        file.close()
        raise
    try:
        writer.attach(session)
    except BaseException:
        writer.close()
        raise
    return writer
