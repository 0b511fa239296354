"""The JSONL session store: one append-only file per session, interchangeable with the reference
harness's ``session.jsonl``.

Layout: line 1 is the header record ``{"type":"session","version":0,"id":…,"createdAt":…,
"delegationDepth":0}`` (:func:`header_line`, which the reference harness's reader accepts); every further line is one storage record, compact JSON with
``type`` first, UTF-8, ``\\n``-terminated: an event (:meth:`Event.to_json`) or, when the writer
packs, a chunk row (:class:`ChunkRow`). The same events always encode to the same bytes.

Reading (:func:`load_session`) never modifies the file. It is strict about everything a crash
cannot produce and lenient about the one thing a crash does produce:

* an UNTERMINATED last line (no ``\n`` after it) that is the unfinished start of a record is a
  write the process did not finish: it is dropped and reported (:class:`DroppedTail`), every
  complete event is kept. A crash only ever cuts a line short, so an unterminated line that
  holds a complete record followed by more bytes (two lines merged by a lost newline) or
  bytes that are not UTF-8 is corruption, not a crash tail;
* anything else that does not read (a newline-terminated line that is not valid JSON, even the
  last one, a malformed envelope, event or chunk row, a payload field of the wrong type, a seq
  gap, a surface rule, an unknown event type, nesting deeper than
  :data:`~dsh_core.MAX_JSON_DEPTH`) raises :class:`CorruptLogError` with ``.line``, ``.path``
  and ``.seq`` where known, and nothing is dropped or changed;
* another format ``version`` raises :class:`UnsupportedVersionError` (logs are never migrated);
* an event type this build does not model is refused unless it is ``ignorable`` or the reader
  is in audit mode (reading other harnesses' logs), where it is carried as an opaque event;
* a log that ends inside an open turn is closed in memory with
  :func:`interrupted_turn_closers`; the file is not touched.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias, TypeGuard

from .._errors import (
    CorruptLogError,
    DshError,
    InvalidEventError,
    JsonValueError,
    UnsupportedVersionError,
)
from .._events import CORE_EVENT_TYPES, Event
from .._json import MAX_JSON_DEPTH, dumps_canonical, freeze_json, loads_json
from .._session import SESSION_FORMAT_VERSION, Session, SessionInfo
from .._sidecars import Sidecars
from ._checks import RECORD_NESTING, check_positions, describe, is_cut_short
from ._chunk_rows import CHUNK_ROW_TYPES, ChunkRow, RunPacker, pack_chunk_rows
from ._header_line import header_line
from ._lock import LogLockedError, lock_for_writing, open_new
from ._repair import interrupted_turn_closers

__all__ = [
    "DroppedTail",
    "FsyncPolicy",
    "JsonlWriter",
    "LoadedLog",
    "LogLockedError",
    "dumps_session",
    "load_session",
    "loads_session",
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
# Loading


@dataclass(frozen=True, slots=True, kw_only=True)
class DroppedTail:
    """An unfinished last line the loader dropped: the tail of a write that a crash cut off."""

    line: int
    """1-based line number where the dropped bytes start."""
    offset: int
    """Byte offset where the dropped bytes start (everything before it was kept)."""
    data: bytes
    """The dropped bytes, up to the end of the file."""
    reason: str
    """Why the line does not read, e.g. the JSON parser's message."""

    @property
    def size(self) -> int:
        """How many bytes were dropped."""
        return len(self.data)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedLog:
    """What :func:`load_session` read: the header, the events, and what it had to do about them."""

    info: SessionInfo
    """The header record."""
    events: tuple[Event, ...]
    """The stored events, packed rows expanded, exactly as the file holds them."""
    closers: tuple[Event, ...] = ()
    """Crash repair: the events that close a log ending inside an open turn (in memory only)."""
    dropped: DroppedTail | None = None
    """An unfinished last line that was dropped, or ``None``."""
    opaque_types: frozenset[str] = frozenset()
    """Event types this build does not model, carried as opaque log-only events."""
    audit: bool = False
    """Loaded in audit mode: unknown types allowed, message shapes not checked."""
    path: str | None = None
    """The file read, when read from a file."""
    committed_bytes: int = 0
    """Length of the readable prefix: where the next record goes once a dropped tail is cut."""

    @property
    def repaired_events(self) -> tuple[Event, ...]:
        """The events a resumed session starts from: stored events plus crash-repair closers."""
        return self.events + self.closers

    @property
    def interrupted(self) -> bool:
        """True when the log ended inside an open turn (and :attr:`closers` closes it)."""
        return bool(self.closers)

    def to_session(self, *, clock: Callable[[], int] | None = None) -> Session:
        """An in-memory session seeded with :attr:`repaired_events` (no writer attached).

        Like every seeded session it ends with a ``session/end-seed`` marker (appended unless
        the log already ends with one).
        """
        return Session.create(
            self.info.id,
            self.repaired_events,
            info=self.info,
            clock=clock,
            check_shapes=not self.audit,
        )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_header(value: object, *, line: int, path: str | None) -> SessionInfo:
    def corrupt(message: str) -> CorruptLogError:
        return CorruptLogError(message, line=line, path=path)

    if not isinstance(value, dict) or value.get("type") != "session":
        got = value.get("type") if isinstance(value, dict) else type(value).__name__
        raise corrupt(
            'the first record is not a session header {"type":"session","version":0,"id":…,'
            f'"createdAt":…}} (got {got!r}): this is not a session log, or its start is lost'
        )
    version = value.get("version")
    if not _is_int(version):
        raise corrupt(f"session header version must be an integer, got {version!r}")
    if version > SESSION_FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"session format version {version} was written by a newer harness; this build reads "
            f"version {SESSION_FORMAT_VERSION} only: upgrade dsh-testkit to read this log",
            line=line,
            path=path,
        )
    if version < SESSION_FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"session format version {version} has no upgrade path: this build reads version "
            f"{SESSION_FORMAT_VERSION} only and never migrates logs",
            line=line,
            path=path,
        )
    session_id = value.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise corrupt(f"session header id must be a non-empty string, got {session_id!r}")
    created = value.get("createdAt")
    if not _is_int(created) or created < 0:
        raise corrupt(f"session header createdAt must be a non-negative integer, got {created!r}")
    for key in ("cwd", "parentSession"):
        if key in value and not isinstance(value[key], str):
            raise corrupt(f"session header {key} must be a string, got {value[key]!r}")
    seed_length = value.get("seedLength")
    if "seedLength" in value and not (_is_int(seed_length) and seed_length >= 0):
        raise corrupt(
            f"session header seedLength must be a non-negative integer, got {seed_length!r}"
        )
    depth = value.get("delegationDepth")
    if "delegationDepth" in value and not (_is_int(depth) and depth >= 0):
        raise corrupt(
            f"session header delegationDepth must be a non-negative integer, got {depth!r}"
        )
    if depth == 0:
        # The default every header we write carries (the reference reader requires it): 0 and
        # absent are one value, so a log read and written again keeps its bytes.
        value = {k: v for k, v in value.items() if k != "delegationDepth"}
    try:
        return SessionInfo.from_json(freeze_json(value, path="header"))
    except JsonValueError as exc:
        raise corrupt(f"session header is not lossless JSON: {exc}") from exc


def _split_records(raw: bytes) -> list[tuple[int, int, bytes]]:
    """The non-blank lines as ``(line number, start offset, bytes without the newline)``."""
    records: list[tuple[int, int, bytes]] = []
    pos, line, size = 0, 0, len(raw)
    while pos < size:
        newline = raw.find(b"\n", pos)
        end = size if newline < 0 else newline
        line += 1
        body = raw[pos:end]
        if body.strip(b" \t\r"):
            records.append((line, pos, body))
        pos = end + 1
    return records


def loads_session(data: bytes | str, *, audit: bool = False, path: str | None = None) -> LoadedLog:
    """Read a session log from its bytes; see :func:`load_session` (``path`` names it in errors)."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    records = _split_records(raw)
    if not records:
        raise CorruptLogError(
            "empty log: there is no session header record (line 1 must be "
            '{"type":"session","version":0,…})',
            path=path,
        )
    last = len(records) - 1
    info: SessionInfo | None = None
    events: list[Event] = []
    line_of: list[int] = []
    opaque: set[str] = set()
    dropped: DroppedTail | None = None

    for i, (line, start, body) in enumerate(records):
        try:
            value = loads_json(body.decode("utf-8"), max_depth=MAX_JSON_DEPTH + RECORD_NESTING)
        except JsonValueError as exc:  # nested past the limit: no write ever produced it
            raise CorruptLogError(
                f"the record nests deeper than the {MAX_JSON_DEPTH}-level limit: {exc}",
                line=line,
                path=path,
            ) from exc
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are ValueErrors
            unterminated = start + len(body) == len(raw)
            if i == last and i > 0 and unterminated and is_cut_short(body):
                dropped = DroppedTail(line=line, offset=start, data=raw[start:], reason=str(exc))
                break
            if i == 0:
                what = "the session header"
            elif unterminated:
                what = "the unterminated last line is not the start of a record cut short: it"
            elif i == last:
                what = "the last line, although complete (newline-terminated),"
            else:
                what = "a record before the last line"
            after = f" (after seq {len(events) - 1})" if events else ""
            raise CorruptLogError(
                f"{what} is not valid JSON{after}: {exc}. Only an unfinished last line can be "
                "dropped (a write a crash cut short, with no newline after it); a damaged line "
                "inside the log means the file is corrupt",
                line=line,
                path=path,
            ) from exc
        if i == 0:
            info = _parse_header(value, line=line, path=path)
            continue
        if not isinstance(value, dict):
            raise CorruptLogError(
                f"a record must be a JSON object (an event or a chunk row), got {type(value).__name__}",
                line=line,
                path=path,
            )
        tag = value.get("type")
        if not isinstance(tag, str):
            raise CorruptLogError(
                f"a record's type must be a string (an event type or a chunk-row tag), got "
                f"{describe(tag)}",
                seq=value["seq"] if _is_int(value.get("seq")) else None,
                line=line,
                path=path,
            )
        try:
            if tag in CHUNK_ROW_TYPES:
                decoded = ChunkRow.from_json(value).expand()
            else:
                decoded = [Event.from_json(value)]
        except CorruptLogError as exc:
            raise CorruptLogError(str(exc), seq=exc.seq, line=line, path=path) from exc
        except InvalidEventError as exc:
            raise CorruptLogError(
                f"invalid event: {exc}", seq=exc.seq, line=line, path=path
            ) from exc
        for event in decoded:
            check_positions(event, line=line, path=path)
            if event.seq != len(events):
                raise CorruptLogError(
                    f"{event.type} has seq {event.seq} where seq {len(events)} was expected: "
                    "seqs must run 0, 1, 2, … without gaps",
                    seq=event.seq,
                    line=line,
                    path=path,
                )
            if event.type not in CORE_EVENT_TYPES:
                if not (event.ignorable or audit):
                    raise CorruptLogError(
                        f"event type {event.type!r} at seq {event.seq} is unknown to this build "
                        "and not marked ignorable; load with audit=True to carry it as an "
                        "opaque event",
                        seq=event.seq,
                        line=line,
                        path=path,
                    )
                opaque.add(event.type)
            events.append(event)
            line_of.append(line)

    assert info is not None  # record 0 is the header or raised
    closers = interrupted_turn_closers(events)
    _check_seeds(info, events, closers, line_of, audit=audit, path=path)
    return LoadedLog(
        info=info,
        events=tuple(events),
        closers=closers,
        dropped=dropped,
        opaque_types=frozenset(opaque),
        audit=audit,
        path=path,
        committed_bytes=dropped.offset if dropped is not None else len(raw),
    )


def _check_seeds(
    info: SessionInfo,
    events: Sequence[Event],
    closers: Sequence[Event],
    line_of: Sequence[int],
    *,
    audit: bool,
    path: str | None,
) -> None:
    """Seed a throwaway session with the repaired log, so a loaded log always seeds one.

    The session's own seed checks (envelope, message shapes unless auditing, surface rules,
    header fold) are the single definition of a valid log; this only adds line numbers.
    """
    try:
        Session.create(
            info.id, [*events, *closers], info=info, clock=lambda: 0, check_shapes=not audit
        )
    except (InvalidEventError, CorruptLogError) as exc:
        seq = exc.seq
        line = line_of[seq] if seq is not None and seq < len(line_of) else None
        repair = " (a crash-repair event)" if seq is not None and seq >= len(line_of) else ""
        raise CorruptLogError(f"{exc}{repair}", seq=seq, line=line, path=path) from exc


def load_session(
    path: StrPath, *, audit: bool = False, fill: Sidecars | Literal["auto"] | None = None
) -> LoadedLog:
    """Read a session file (never modifying it).

    Returns the header, the events (packed rows expanded), the crash-repair closers when the
    log ends inside an open turn, and a report of an unfinished last line that was dropped.
    ``audit=True`` reads logs of other harnesses: unknown event types are carried as opaque
    events and message shapes are not checked. Raises :class:`CorruptLogError` (``.line``,
    ``.path``, ``.seq``) for a log that does not read, :class:`UnsupportedVersionError` for
    another format version.

    ``fill`` fills a normalized log's placeholders (``{{system}}``, ``{{tools}}``, …) in memory:
    a :class:`~dsh_core.Sidecars`, or ``"auto"`` for the sidecar files found beside the log
    (none found: nothing filled).
    """
    name = os.fspath(path)
    with open(name, "rb") as file:
        raw = file.read()
    loaded = loads_session(raw, audit=audit, path=name)
    if fill == "auto":
        fill = Sidecars.for_log(name)
    return loaded if fill is None or fill.empty else fill.fill(loaded)


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
