"""Loading a log for a report: sidecars, the "not a session log" verdict, and the readable prefix.

Every report command (audit, cache-report, rebuild) reads its log here, so they agree on three
things:

- **sidecars**: a normalized log's placeholders are filled from ``--sidecars DIR`` or, by
  default, from the sidecar files found beside the log (:class:`dsh_core.Sidecars`);
- **not a session log**: what the reference harness's own reader refuses is refused here with
  one line (:class:`NotASessionLogError`; the commands exit 2): a first record that is not a
  session header it accepts (not JSON, not ``{"type":"session",…}``, no integer ``version``,
  no ``id`` or ``createdAt``, or no header at all), a message event without an identified
  message (no ``id``, the wrong ``role``, no ``source.kind``, no ``content`` list: its load
  boundary checks these), and a seq gap with a ``turn/end`` after it (its scanner keeps the
  prefix before a gap only when no turn completes after it). A log of another format version is
  refused the same way, with the loader's "upgrade" message;
- **the readable prefix**: a log whose body breaks at some line (a seq gap left by trimming, a
  malformed event) is still a log; :func:`readable_prefix` loads the events before that line
  so the audit can report them beside the violation;
- **compressed logs**: a log compressed with zstd or gzip (the reference harness writes
  ``session.jsonl.zstd`` by default: a header frame, then one frame per durable batch) is read
  as the plain log it holds, by its content (``dsh_testkit.traces._compression``); a torn last frame is
  a truncated tail, as an unfinished last line is in a plain log.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Literal, TypeAlias

from dsh_core import CorruptLogError, DshError, Event, Sidecars, UnsupportedVersionError
from dsh_core._json_text import loads_json
from dsh_core.persistence import DroppedTail, LoadedLog, loads_session
from dsh_core.persistence._chunk_rows import ChunkRow

from .._errors import TestkitError
from ..traces._compression import read_recording

__all__ = [
    "NotASessionLogError",
    "SidecarOption",
    "load_log",
    "readable_prefix",
]

SidecarOption: TypeAlias = "Sidecars | Literal['auto'] | None"
"""``"auto"``: the sidecars beside the log; a :class:`Sidecars`; ``None``: fill nothing."""


class NotASessionLogError(TestkitError, ValueError):
    """The file is not a session log (or not one this build reads): ``.path``, ``.reason``."""

    def __init__(self, reason: str, *, path: str) -> None:
        super().__init__(f"not a session log: {reason}")
        self.reason = reason
        self.path = path


# A traceback names it where users import it from, not this private module.
NotASessionLogError.__module__ = "dsh_testkit.reports"


def _header_line(raw: bytes) -> int | None:
    """The 1-based line of the first non-blank line (the session header's), if any."""
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if line.strip(b" \t\r\n"):
            return number
    return None


def _content(path: str) -> tuple[bytes, str | None]:
    """The log's bytes (decompressed when compressed) and what a torn last frame cost."""
    found = read_recording(path)
    return found.data, found.note


def _with_torn_frame(loaded: LoadedLog, raw: bytes, note: str | None) -> LoadedLog:
    """A torn last frame as the log's dropped tail (its unfinished line, if any, with it)."""
    if note is None:
        return loaded
    if loaded.dropped is not None:
        tail = loaded.dropped
        return dataclasses.replace(
            loaded, dropped=dataclasses.replace(tail, reason=f"{tail.reason}; {note}")
        )
    line = raw.count(b"\n") + 1
    return dataclasses.replace(
        loaded, dropped=DroppedTail(line=line, offset=len(raw), data=b"", reason=note)
    )


_MESSAGE_EVENTS = ("user/message", "assistant/message", "tool/result")


def message_shape_problem(event: Event) -> str | None:
    """Why the reference harness's load boundary refuses this message event, or ``None``."""
    if event.type not in _MESSAGE_EVENTS:
        return None
    data = event.data if isinstance(event.data, Mapping) else None
    message = data if event.type == "user/message" else (data or {}).get("message")
    where = f"{event.type} at seq {event.seq}"
    if (
        not isinstance(message, Mapping)
        or not isinstance(message.get("id"), str)
        or not message["id"]
    ):
        return f"{where} lacks an identified message (a message object with a non-empty id)"
    role = "assistant" if event.type == "assistant/message" else "user"
    if message.get("role") != role:
        return f"{where}: its message must have role {role!r}, got {message.get('role')!r}"
    source = message.get("source")
    if (
        not isinstance(source, Mapping)
        or not isinstance(source.get("kind"), str)
        or not source["kind"]
    ):
        return f"{where}: its message has no source kind"
    if not isinstance(message.get("content"), (list, tuple)):
        return f"{where}: its message content is not a list"
    return None


def _seq_gap(raw: bytes) -> tuple[int, int, int, bool] | None:
    """The first seq gap as ``(line, expected seq, found seq, a turn/end follows)``."""
    lines = raw.split(b"\n")
    expected = 0
    gap: tuple[int, int, int] | None = None
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        try:
            value = loads_json(raw.decode("utf-8"))
            events = (
                ChunkRow.from_json(value).expand()
                if isinstance(value, Mapping) and "seq0" in value
                else [Event.from_json(value)]
            )
        except (ValueError, DshError):
            continue  # the loader reports unreadable lines itself
        for event in events:
            if gap is not None:
                if event.type == "turn/end":
                    return (*gap, True)
            elif event.seq != expected:
                gap = (number, expected, event.seq)
            else:
                expected += 1
    return (*gap, False) if gap is not None else None


def load_log(path: str | os.PathLike[str], *, sidecars: SidecarOption = "auto") -> LoadedLog:
    """Load ``path`` in audit mode, placeholders filled from ``sidecars``.

    A log compressed with zstd or gzip is read as the log it holds (a torn last frame becomes
    its dropped tail). Raises :class:`NotASessionLogError` when the header record is missing or
    invalid, :class:`CorruptLogError` when the body breaks (``.line`` says where),
    :class:`OSError` when the file cannot be read, :class:`dsh_core.SidecarError` when a sidecar
    does not fit, :class:`~dsh_testkit.traces._compression.CompressedDataError` when a compressed frame
    is damaged.
    """
    name = os.fspath(path)
    raw, torn = _content(name)
    try:
        loaded = _with_torn_frame(loads_session(raw, audit=True, path=name), raw, torn)
        if sidecars == "auto":
            sidecars = Sidecars.for_log(name)
        if sidecars is not None and not sidecars.empty:
            loaded = sidecars.fill(loaded)
    except UnsupportedVersionError as exc:
        raise NotASessionLogError(_without_path(exc, name), path=name) from exc
    except CorruptLogError as exc:
        header = _header_line(raw)
        if header is None or (exc.seq is None and exc.line in (None, header)):
            raise NotASessionLogError(_without_path(exc, name), path=name) from exc
        gap = _seq_gap(raw) if exc.seq is not None else None
        if gap is not None and gap[3]:
            line, expected, found, _ = gap
            raise NotASessionLogError(
                f"seq gap at line {line} (seq {found} where seq {expected} was expected) with a "
                "completed turn after it: events were removed from this file (the reference "
                "harness's reader refuses it too)",
                path=name,
            ) from exc
        raise
    for event in loaded.events:
        problem = message_shape_problem(event)
        if problem is not None:
            raise NotASessionLogError(
                f"{problem} (the reference harness's reader refuses it too)", path=name
            )
    return loaded


def _without_path(exc: CorruptLogError, name: str) -> str:
    text = str(exc)
    for prefix in (f"{name}:", f"{exc.path}:"):
        if text.startswith(prefix):
            text = text[len(prefix) :].lstrip()
    # The loader's advice about damaged lines inside a log does not apply to its first line.
    text = text.split(". Only an unfinished last line")[0]
    return " ".join(text.split())


def readable_prefix(
    path: str | os.PathLike[str], line: int, *, sidecars: SidecarOption = "auto"
) -> LoadedLog | None:
    """The log made of the lines before ``line`` (``None`` when even that does not read)."""
    name = os.fspath(path)
    raw, _ = _content(name)
    cut = 0
    for _ in range(line - 1):
        newline = raw.find(b"\n", cut)
        if newline < 0:
            return None
        cut = newline + 1
    try:
        loaded = loads_session(raw[:cut], audit=True, path=name)
        if sidecars == "auto":
            sidecars = Sidecars.for_log(name)
        return loaded if sidecars is None or sidecars.empty else sidecars.fill(loaded)
    except CorruptLogError:
        return None
