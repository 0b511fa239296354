"""Loading a session log: ``loads_session`` / ``load_session`` and what they give back (writing
is ``jsonl.py``'s job).

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
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeGuard

from .._errors import (
    CorruptLogError,
    InvalidEventError,
    JsonValueError,
    UnsupportedVersionError,
)
from .._events import CORE_EVENT_TYPES, Event
from .._json import freeze_json
from .._json_text import MAX_JSON_DEPTH, loads_json
from .._session import SESSION_FORMAT_VERSION, Session, SessionInfo
from .._sidecars import Sidecars
from ._checks import RECORD_NESTING, check_positions, describe, is_cut_short
from ._chunk_rows import CHUNK_ROW_TYPES, ChunkRow
from ._repair import interrupted_turn_closers

__all__ = ["DroppedTail", "LoadedLog", "load_session", "loads_session"]

StrPath: TypeAlias = "str | os.PathLike[str]"


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
