"""What the loader refuses beyond the event model: the checks hostile logs taught us.

A crash only cuts the last line short, so :func:`is_cut_short` tells a crash tail from damage;
:func:`check_positions` holds the ``turn``/``step`` fields every reader counts with to their
types; :func:`describe` names a wrong value in an error message without dumping it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final, TypeGuard

from .._errors import CorruptLogError
from .._events import Event
from .._json import json_kind
from .._json_text import MAX_JSON_DEPTH, loads_json

__all__ = ["RECORD_NESTING", "check_positions", "describe", "is_cut_short"]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


RECORD_NESTING: Final = 1
"""The levels a record adds around its ``data`` (the envelope object); ``data`` itself may nest
:data:`MAX_JSON_DEPTH` levels, so a line may nest one more."""

_POSITION_KEYS: Final = ("turn", "step")
_MAX_POSITION: Final = 2**53 - 1
_REQUIRED_POSITIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "turn/start": ("turn",),
    "turn/end": ("turn",),
    "step/start": ("turn", "step"),
    "step/end": ("turn", "step"),
}
"""The structure events: readers (and crash repair, which copies ``turn`` into the closers it
writes) need their positions, so these must be present."""


def check_positions(event: Event, *, line: int, path: str | None) -> None:
    """``turn`` and ``step`` in an event's data are positions every reader (reconstruction,
    audit, cache report, replay, crash repair) counts with: where present, on any event type and
    in audit mode too, they must be non-negative safe integers, and the turn and step events
    must carry them, or the log is corrupt."""
    data = event.data
    required = _REQUIRED_POSITIONS.get(event.type, ())
    if required and not isinstance(data, Mapping):
        raise CorruptLogError(
            f"{event.type} at seq {event.seq}: data must be an object holding "
            f"{' and '.join(required)}, got {describe(data)}",
            seq=event.seq,
            line=line,
            path=path,
        )
    if not isinstance(data, Mapping):
        return
    for key in _POSITION_KEYS:
        if key not in data and key in required:
            raise CorruptLogError(
                f"{event.type} at seq {event.seq}: data.{key} is missing (a non-negative integer)",
                seq=event.seq,
                line=line,
                path=path,
            )
        if key in data:
            value = data[key]
            if not (_is_int(value) and 0 <= value <= _MAX_POSITION):
                raise CorruptLogError(
                    f"{event.type} at seq {event.seq}: data.{key} must be a non-negative "
                    f"integer, got {describe(value)}",
                    seq=event.seq,
                    line=line,
                    path=path,
                )


def describe(value: object) -> str:
    """A wrong value in an error message: its JSON kind, and the value when it is short."""
    kind = json_kind(value)
    if value is None or isinstance(value, (dict, list, tuple)):
        return kind
    text = repr(value)
    return f"{kind} {text}" if len(text) <= 40 else kind


def is_cut_short(body: bytes) -> bool:
    """Whether an unparsable unterminated last line can be a write a crash cut off.

    A cut leaves a prefix of one record: UTF-8 except perhaps a last, incomplete character, and
    text that ends before the record does. A complete value followed by more bytes ("Extra
    data": a lost newline merged two records) or bytes that are not UTF-8 inside the line are
    not something a crash writes, so dropping them could delete a complete event.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end != len(body) or exc.reason != "unexpected end of data":
            return False
        try:
            text = body[: exc.start].decode("utf-8")
        except UnicodeDecodeError:  # pragma: no cover - the first error was at exc.start
            return False
    try:
        loads_json(text, max_depth=MAX_JSON_DEPTH + RECORD_NESTING)
    except json.JSONDecodeError as exc:
        return exc.msg != "Extra data"
    except ValueError:  # too deep: no crash cuts a record deeper than a writer writes
        return False
    return False  # a whole record, then a stray incomplete character: not a cut
