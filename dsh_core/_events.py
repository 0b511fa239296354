"""The event envelope and the core event catalog.

A session log is a list of :class:`Event`; ``seq`` equals the index. The JSON form uses the
reference harness's field names exactly (``type, seq, time, data, surfaceOp?, sourceEventSeqs?,
ignorable?``) so logs interchange. Event types this build does not model are carried as opaque,
log-only events: :class:`Session` keeps them as they are; it is the persistence read path that
refuses an unknown type unless it is ``ignorable`` or the reader is in audit mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, get_args

from ._errors import InvalidEventError, JsonValueError
from ._json import FrozenDict, freeze_json, json_kind

__all__ = [
    "CORE_EVENT_TYPES",
    "SURFACE_EVENT_TYPES",
    "Event",
    "EventType",
    "OpenTurn",
    "SurfaceOp",
    "SurfaceReplace",
    "TurnStep",
    "check_event_shape",
    "last_turn_boundary",
    "open_turn",
    "turn_step",
]

EventType: TypeAlias = Literal[
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "todo/write",
    "request/header",
    "request/header-delta",
    "request/context",
    "session/end-seed",
    "compact/start",
    "compact/summary",
    "compact/end",
    "llm/retry",
]
"""The event catalog: every type this build models (``Event.type`` stays ``str``, because a log
may carry other types as opaque, log-only events)."""

CORE_EVENT_TYPES: Final[frozenset[EventType]] = frozenset(get_args(EventType))
"""Event types this build models. Anything else is an opaque, log-only event."""

SURFACE_EVENT_TYPES: Final[frozenset[EventType]] = frozenset(
    {"user/message", "assistant/message", "tool/result"}
)
"""The only types that may carry ``surfaceOp`` / ``sourceEventSeqs`` (and must carry ``surfaceOp``)."""

HEADER_REASONS: Final = frozenset({"initial", "resume", "fallback", "change"})

_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SurfaceReplace:
    """``{op: "replace", start, end}``: replace the surface range start..end (by surface position)."""

    start: int
    """Seq of the first surface node replaced."""
    end: int
    """Seq of the last surface node replaced (inclusive; by position, so it may be < start)."""
    op: Literal["replace"] = "replace"

    def to_json(self) -> dict[str, Any]:
        return {"op": "replace", "start": self.start, "end": self.end}

    @classmethod
    def from_json(cls, obj: object) -> SurfaceReplace:
        if not isinstance(obj, Mapping) or set(obj) != {"op", "start", "end"}:
            raise InvalidEventError(
                f"surfaceOp must be 'append' or {{op, start, end}}, got {obj!r}"
            )
        if obj["op"] != "replace":
            raise InvalidEventError(f"surfaceOp.op must be 'replace', got {obj['op']!r}")
        start, end = obj["start"], obj["end"]
        if not _is_seq(start) or not _is_seq(end):
            raise InvalidEventError(
                f"surfaceOp start/end must be non-negative safe integers, got {start!r}, {end!r}"
            )
        return cls(start=start, end=end)


SurfaceOp: TypeAlias = "Literal['append'] | SurfaceReplace"


MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Seqs and times are JSON safe integers, so logs interchange with the TypeScript harness."""


def _is_safe_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_SAFE_INTEGER


def _is_seq(value: object) -> bool:
    return _is_safe_int(value) and value >= 0  # type: ignore[operator]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One logged event. Immutable all the way down: ``data`` is frozen JSON."""

    type: str
    """The event type, e.g. ``user/message``."""
    seq: int
    """Index of the event in its log (contiguous from 0)."""
    time: int
    """Unix epoch milliseconds at append (informational: never infer order from it)."""
    data: Any
    """The payload, frozen lossless JSON."""
    surface_op: SurfaceOp | None = None
    """Only on surface types, and there mandatory: ``"append"`` or a :class:`SurfaceReplace`."""
    source_event_seqs: tuple[int, ...] | None = None
    """Provenance: earlier seqs this event cites (the chunks of a message, a call, a shadowed range)."""
    ignorable: bool = False
    """A reader that does not know ``type`` may skip it only when this is true."""

    def __post_init__(self) -> None:
        # An event built by hand gets the same deep immutability as a logged one (already-frozen
        # data is shared, so this costs nothing on the hot path).
        try:
            data = freeze_json(self.data, path="data")
        except JsonValueError as exc:
            raise InvalidEventError(
                f"event data is not lossless JSON: {exc}", seq=self.seq, event_type=self.type
            ) from exc
        if data is not self.data:
            object.__setattr__(self, "data", data)
        if self.source_event_seqs is not None and not isinstance(self.source_event_seqs, tuple):
            object.__setattr__(self, "source_event_seqs", tuple(self.source_event_seqs))

    def to_json(self) -> dict[str, Any]:
        """The envelope as JSON in the reference harness's key order: ``type, seq, time, data,
        sourceEventSeqs?, surfaceOp?, ignorable?`` (``type`` first: raw-text probes of JSONL
        depend on it)."""
        out: dict[str, Any] = {
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
            "data": self.data,
        }
        # The reference harness writes provenance before the surface marker; byte-identical
        # re-encoding of its logs depends on this order.
        if self.source_event_seqs is not None:
            out["sourceEventSeqs"] = list(self.source_event_seqs)
        if self.surface_op is not None:
            out["surfaceOp"] = (
                "append" if self.surface_op == "append" else self.surface_op.to_json()
            )
        if self.ignorable:
            out["ignorable"] = True
        return out

    @classmethod
    def from_json(cls, obj: object) -> Event:
        """Parse and validate an envelope (not the surface rules, which need the log)."""
        if not isinstance(obj, Mapping):
            raise InvalidEventError(f"an event must be a JSON object, got {json_kind(obj)}")
        seq_hint = obj.get("seq") if _is_seq(obj.get("seq")) else None
        type_hint = obj.get("type") if isinstance(obj.get("type"), str) else None
        extra = set(obj) - _ENVELOPE_KEYS
        if extra:
            raise InvalidEventError(
                f"event has unknown envelope keys {sorted(extra)}; allowed: {sorted(_ENVELOPE_KEYS)}",
                seq=seq_hint,
                event_type=type_hint,
            )
        for key in ("type", "seq", "time", "data"):
            if key not in obj:
                raise InvalidEventError(
                    f"event lacks required key {key!r}", seq=seq_hint, event_type=type_hint
                )
        if not isinstance(obj["type"], str) or not obj["type"]:
            raise InvalidEventError("event type must be a non-empty string", seq=seq_hint)
        if not _is_seq(obj["seq"]):
            raise InvalidEventError(
                f"event seq must be a non-negative safe integer, got {obj['seq']!r}",
                event_type=type_hint,
            )
        if not _is_safe_int(obj["time"]):
            raise InvalidEventError(
                f"event time must be a safe integer (epoch ms), got {obj['time']!r}",
                seq=seq_hint,
                event_type=type_hint,
            )
        ignorable = obj.get("ignorable", False)
        if "ignorable" in obj and ignorable is not True:
            raise InvalidEventError(
                "ignorable must be absent or exactly true", seq=seq_hint, event_type=type_hint
            )
        for key in ("surfaceOp", "sourceEventSeqs"):
            if key in obj and obj[key] is None:
                raise InvalidEventError(
                    f"{key} must be absent or a value, not null", seq=seq_hint, event_type=type_hint
                )
        surface_op = parse_surface_op(obj.get("surfaceOp"), seq=seq_hint, event_type=type_hint)
        seqs = parse_source_seqs(obj.get("sourceEventSeqs"), seq=seq_hint, event_type=type_hint)
        try:
            data = freeze_json(obj["data"], path="data")
        except JsonValueError as exc:
            raise InvalidEventError(
                f"event data is not lossless JSON: {exc}", seq=seq_hint, event_type=type_hint
            ) from exc
        return cls(
            type=obj["type"],
            seq=obj["seq"],
            time=obj["time"],
            data=data,
            surface_op=surface_op,
            source_event_seqs=seqs,
            ignorable=bool(ignorable),
        )


def parse_surface_op(
    value: object, *, seq: int | None = None, event_type: str | None = None
) -> SurfaceOp | None:
    """``None``, ``"append"`` or a replace object; anything else is refused."""
    if value is None or isinstance(value, SurfaceReplace):
        return value
    if value == "append":
        return "append"
    try:
        return SurfaceReplace.from_json(value)
    except InvalidEventError as exc:
        raise InvalidEventError(str(exc), seq=seq, event_type=event_type) from None


def parse_source_seqs(
    value: object, *, seq: int | None = None, event_type: str | None = None
) -> tuple[int, ...] | None:
    """``sourceEventSeqs`` as a tuple; it must be an array of non-negative integers."""
    if value is None:
        return None
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise InvalidEventError(
            f"sourceEventSeqs must be an array, got {json_kind(value)}",
            seq=seq,
            event_type=event_type,
        )
    for item in value:
        if not _is_seq(item):
            raise InvalidEventError(
                f"sourceEventSeqs entries must be non-negative safe integers, got {item!r}",
                seq=seq,
                event_type=event_type,
            )
    return tuple(value)


def _non_empty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _fail(event: Event, message: str) -> InvalidEventError:
    return InvalidEventError(
        f"{event.type} at seq {event.seq}: {message}", seq=event.seq, event_type=event.type
    )


def _message_of(event: Event) -> Any:
    if event.type == "user/message":
        return event.data
    return event.data.get("message") if isinstance(event.data, FrozenDict) else None


def check_event_shape(event: Event) -> None:
    """The shape checks a seed or a loaded log must pass (docs/design.md §2.4).

    Surface types must hold an identified message of the right role and source; header events
    must carry a config with a provider and a model. Live appends skip these checks (as in the
    reference harness); the dev-mode log invariant covers them.
    """
    if event.type in SURFACE_EVENT_TYPES:
        message = _message_of(event)
        if not isinstance(message, FrozenDict) or not (
            isinstance(message.get("id"), str) and message["id"]
        ):
            raise _fail(event, "lacks an identified message (a non-empty string id)")
        role = message.get("role")
        want = "assistant" if event.type == "assistant/message" else "user"
        if role != want:
            raise _fail(event, f"message role must be {want!r}, got {role!r}")
        source = message.get("source")
        if not isinstance(source, FrozenDict) or not (
            isinstance(source.get("kind"), str) and source["kind"]
        ):
            raise _fail(event, "message source must be an object with a non-empty kind")
        content = message.get("content")
        if not isinstance(content, list):
            raise _fail(event, "message content must be an array")
        if event.type == "assistant/message" and (
            source["kind"] != "model"
            or not _non_empty_str(source.get("provider"))
            or not _non_empty_str(source.get("model"))
        ):
            raise _fail(event, "assistant message source must be {kind:'model', provider, model}")
        if event.type == "tool/result":
            call_id = source.get("callId")
            if source["kind"] != "tool" or not (isinstance(call_id, str) and call_id):
                raise _fail(event, "tool result source must be {kind:'tool', callId}")
            if (
                len(content) != 1
                or not isinstance(content[0], FrozenDict)
                or content[0].get("type") != "tool-result"
                or not isinstance(content[0].get("content"), list)
            ):
                raise _fail(event, "tool result content must be exactly one tool-result block")
            if content[0].get("toolCallId") != call_id:
                raise _fail(
                    event,
                    f"tool-result block toolCallId {content[0].get('toolCallId')!r} "
                    f"does not match source.callId {call_id!r}",
                )
    elif event.type == "request/header":
        data = event.data
        if not isinstance(data, FrozenDict) or not isinstance(data.get("header"), FrozenDict):
            raise _fail(event, "data must be {header, reason}")
        config = data["header"].get("config")
        if not isinstance(config, FrozenDict) or not (
            isinstance(config.get("provider"), str)
            and config["provider"]
            and isinstance(config.get("model"), str)
            and config["model"]
        ):
            raise _fail(event, "header config lacks provider/model")
        effort = config.get("reasoningEffort")
        if "reasoningEffort" in config and not (isinstance(effort, str) and effort):
            raise _fail(event, f"reasoningEffort must be a non-empty string, got {effort!r}")
        if data.get("reason") not in HEADER_REASONS:
            raise _fail(
                event, f"reason must be one of {sorted(HEADER_REASONS)}, got {data.get('reason')!r}"
            )
    elif event.type == "request/header-delta" and not isinstance(event.data, FrozenDict):
        raise _fail(event, "data must be an object {system?, tools?, config?}")


# --------------------------------------------------------------------------------------------
# Typed payload readers: the fields many event types share, read in one place


def _int_field(data: Any, key: str) -> int | None:
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStep:
    """The turn and step an event names (``turn/*``, ``step/*``, ``assistant/*``, tool events)."""

    turn: int | None
    """``data.turn``; ``None`` when the event names no turn or names it with a non-integer."""
    step: int | None
    """``data.step``; ``None`` when the event names no step or names it with a non-integer."""


def turn_step(event: Event) -> TurnStep:
    """The turn and step ``event`` names (the one reader of ``data.turn`` / ``data.step``)."""
    return TurnStep(turn=_int_field(event.data, "turn"), step=_int_field(event.data, "step"))


_TURN_BOUNDARY_TYPES: Final[frozenset[EventType]] = frozenset({"turn/start", "turn/end"})


def last_turn_boundary(events: Sequence[Event], end: int | None = None) -> Event | None:
    """The last ``turn/start`` or ``turn/end`` of ``events[:end]``, ``None`` if there is none.

    It scans back from ``end``, so it costs the length of the last turn, not of the log.
    """
    for i in range(len(events) if end is None else min(end, len(events)), 0, -1):
        event = events[i - 1]
        if event.type in _TURN_BOUNDARY_TYPES:
            return event
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenTurn:
    """A turn whose ``turn/start`` has no ``turn/end`` yet."""

    turn: int | None
    """The number its ``turn/start`` names (``None`` if it names none)."""
    seq: int
    """Seq of its ``turn/start``."""


def open_turn(events: Sequence[Event], end: int | None = None) -> OpenTurn | None:
    """The turn still open after ``events[:end]`` (the one open-turn walker), or ``None``."""
    boundary = last_turn_boundary(events, end)
    if boundary is None or boundary.type != "turn/start":
        return None
    return OpenTurn(turn=turn_step(boundary).turn, seq=boundary.seq)
