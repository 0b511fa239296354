"""``Session``: the append-only event log and its two cached folds (messages and header).

The log is the single source of truth. ``derive_messages()`` projects each surface node exactly
once through :func:`derive_event_message` and rebuilds only after a replace; ``request_header()``
folds header events with a cursor. Both caches are private to the session: the reconstructor in
``_reconstruct`` shares none of this state, so it can witness against it.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, cast

from ._errors import CorruptLogError, ForkError, InvalidEventError, JsonValueError
from ._events import (
    Event,
    SurfaceOp,
    check_event_shape,
    open_turn,
    parse_source_seqs,
    parse_surface_op,
)
from ._header import EpochHeader
from ._header_delta import fold_request_header
from ._json import FrozenDict, freeze_json
from ._messages import Message, derive_event_message, parse_event_message
from ._surface import SurfaceFold
from ._views import MessageView, PrefixView

__all__ = ["SESSION_FORMAT_VERSION", "EventLog", "Session", "SessionInfo", "fork"]

SESSION_FORMAT_VERSION: Final = 0
"""The one session format version written and accepted (logs are rejected, never migrated)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """Storage metadata of a session (the JSONL header record), not part of the log."""

    id: str
    created_at: int
    """Unix epoch milliseconds."""
    version: int = SESSION_FORMAT_VERSION
    cwd: str | None = None
    parent_session: str | None = None
    """The session this one was forked from."""
    seed_length: int | None = None
    """How many events were seeded (a fork's slice of its parent)."""
    extra: FrozenDict = field(default_factory=lambda: FrozenDict())
    """Other header fields written by other harnesses, kept verbatim."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "session", "version": self.version, "id": self.id}
        out["createdAt"] = self.created_at
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.parent_session is not None:
            out["parentSession"] = self.parent_session
        if self.seed_length is not None:
            out["seedLength"] = self.seed_length
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SessionInfo:
        known = {"type", "version", "id", "createdAt", "cwd", "parentSession", "seedLength"}
        return cls(
            id=str(obj["id"]),
            created_at=int(obj.get("createdAt", 0)),
            version=int(obj["version"]),
            cwd=obj.get("cwd"),
            parent_session=obj.get("parentSession"),
            seed_length=obj.get("seedLength"),
            extra=freeze_json({k: v for k, v in obj.items() if k not in known}, path="header"),
        )


class EventLog(PrefixView[Event]):
    """An immutable view of the first ``len`` events of a log (O(1) to take; never grows)."""

    __slots__ = ()
    _noun = "event"


Validator = Callable[[Event, "Session"], None]
"""Runs before an append is committed; raising vetoes the append (the log stays unchanged)."""
Listener = Callable[[Event, "Session"], None]
"""Runs after an append is committed (persistence, observers)."""


def _now_ms() -> int:
    return int(_time.time() * 1000)


_S = TypeVar("_S")


class Session:
    """An append-only session log with cached message and header folds.

    Create one with :meth:`create`. Logged events, derived messages and their blocks are
    immutable; ``derive_messages()`` returns a new list per call over shared messages.
    """

    __slots__ = (
        "_appending",
        "_clock",
        "_derived",
        "_derived_generation",
        "_derived_nodes",
        "_events",
        "_fold_states",
        "_header",
        "_header_cursor",
        "_listeners",
        "_surface",
        "_validators",
        "info",
    )

    def __init__(self, info: SessionInfo, *, clock: Callable[[], int] | None = None) -> None:
        self.info = info
        self._clock = clock or _now_ms
        self._events: list[Event] = []
        self._surface = SurfaceFold()
        self._derived: list[Message] = []
        self._derived_nodes = 0
        self._derived_generation = 0
        self._header: EpochHeader | None = None
        self._header_cursor = 0
        self._validators: list[Validator] = []
        self._listeners: list[Listener] = []
        self._appending = False
        self._fold_states: dict[object, object] = {}

    # ---------------------------------------------------------------- construction

    @classmethod
    def create(
        cls,
        session_id: str,
        seed: Sequence[Event | Mapping[str, Any]] | None = None,
        *,
        info: SessionInfo | None = None,
        clock: Callable[[], int] | None = None,
        check_shapes: bool = True,
    ) -> Session:
        """A new session, optionally seeded with an existing log.

        Each seed event is validated (envelope, shape, ``seq == index``, surface rules, header
        fold) and frozen. When a seed is given and does not already end with
        ``session/end-seed``, that marker is appended, so re-opening an untouched log does not
        grow it. ``check_shapes=False`` skips the message-shape checks (audit mode, for logs of
        other harnesses).
        """
        clock = clock or _now_ms
        session = cls(info or SessionInfo(id=session_id, created_at=clock()), clock=clock)
        if seed is None:
            return session
        for index, raw in enumerate(seed):
            # An Event instance is re-checked through its JSON form: the envelope rules apply to
            # hand-built events too (its frozen data is shared, not copied).
            event = _event_from_json(raw.to_json() if isinstance(raw, Event) else raw, index)
            try:
                if check_shapes:
                    check_event_shape(event)
                if event.seq != index:
                    raise InvalidEventError(
                        f"seed must be contiguous from 0: it has seq {event.seq}",
                        seq=event.seq,
                        event_type=event.type,
                    )
                plan = session._surface.plan(event, index, session._events)
            except InvalidEventError as exc:
                raise type(exc)(
                    f"invalid seed event at index {index}: {exc}",
                    seq=exc.seq,
                    event_type=exc.event_type,
                ) from exc
            session._surface.apply(plan)
            session._events.append(event)
        session.request_header()  # a seed whose header does not fold is refused here
        if not session._events or session._events[-1].type != "session/end-seed":
            session.append("session/end-seed", {})
        return session

    # ---------------------------------------------------------------- the log

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def events(self) -> EventLog:
        """The log so far, as an immutable view (later appends do not show in it)."""
        return EventLog(self._events, len(self._events))

    @property
    def seq(self) -> int:
        """The seq the next event will get (== the number of events)."""
        return len(self._events)

    @property
    def surface_nodes(self) -> tuple[int, ...]:
        return tuple(self._surface.nodes)

    @property
    def surface_generation(self) -> int:
        return self._surface.generation

    def fold_state(self, key: object, factory: Callable[[], _S]) -> _S:
        """The state an incremental fold over this log keeps between calls, made on first use.

        Owned by the session, so it lives and dies with it (no module-level cache keyed by
        ``id(session)``, no state shared between sessions). ``key`` names the fold: its owner's
        class or function, so two folds never share a state. The fold itself decides whether
        the state still matches the log (e.g. by the identity of the last event it folded).
        """
        state = self._fold_states.get(key)
        if state is None:
            state = self._fold_states[key] = factory()
        return cast(_S, state)  # one key, one factory: one type

    def add_validator(self, validator: Validator) -> Callable[[], None]:
        """Register a pre-commit check; returns a function that removes it."""
        self._validators.append(validator)
        return lambda: self._validators.remove(validator)

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Register a post-commit observer; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | str | Mapping[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> Event:
        """Validate, freeze and append one event; returns the logged event.

        A refused append (non-JSON data, a surface rule, a validator's veto) raises and leaves
        the log, the surface and every cache unchanged. Listeners run after the commit; an
        append from inside a validator or listener is refused.
        """
        if self._appending:
            raise InvalidEventError(
                "session append cannot reenter while another append is being published",
                event_type=type,
            )
        seq = len(self._events)
        if not isinstance(type, str) or not type:
            raise InvalidEventError(f"event type must be a non-empty string, got {type!r}", seq=seq)
        if not isinstance(ignorable, bool):
            raise InvalidEventError(
                f"ignorable must be a bool, got {ignorable!r}", seq=seq, event_type=type
            )
        try:
            frozen = freeze_json(data, path="data")
        except JsonValueError as exc:
            raise InvalidEventError(
                f"{type} carries non-JSON-serializable data: {exc}", seq=seq, event_type=type
            ) from exc
        op = parse_surface_op(
            surface_op if not isinstance(surface_op, Mapping) else dict(surface_op),
            seq=seq,
            event_type=type,
        )
        cited = parse_source_seqs(
            list(source_event_seqs)
            if isinstance(source_event_seqs, Sequence)
            and not isinstance(source_event_seqs, (str, bytes))
            else source_event_seqs,
            seq=seq,
            event_type=type,
        )
        event = Event(
            type=type,
            seq=seq,
            time=self._clock(),
            data=frozen,
            surface_op=op,
            source_event_seqs=cited,
            ignorable=ignorable,
        )
        plan = self._surface.plan(event, seq, self._events)
        if plan is not None:
            _check_projectable(event)
        header = self._fold_candidate_header(event)
        self._appending = True
        try:
            for validator in tuple(self._validators):
                validator(event, self)
            self._surface.apply(plan)
            self._events.append(event)
            if header is not None and self._header_cursor == seq:
                self._header, self._header_cursor = header, seq + 1
            for listener in tuple(self._listeners):
                listener(event, self)
        finally:
            self._appending = False
        return event

    def _fold_candidate_header(self, event: Event) -> EpochHeader | None:
        """The header after ``event`` when it is a header event; one that does not fold is
        refused, so the live log always folds (``request_header()`` never breaks later)."""
        if event.type not in ("request/header", "request/header-delta"):
            return None
        check_event_shape(event)  # the reason vocabulary, as a reader will check it
        try:
            return fold_request_header((event,), self.request_header())
        except CorruptLogError as exc:
            raise InvalidEventError(
                f"{event.type} at seq {event.seq} does not fold onto the log's header: {exc}",
                seq=event.seq,
                event_type=event.type,
            ) from exc

    # ---------------------------------------------------------------- folds

    def derive_messages(self) -> list[Message]:
        """What the model sees now: a new list per call over shared, immutable messages."""
        self._refresh_messages()
        return list(self._derived)

    def message_view(self) -> MessageView:
        """Like :meth:`derive_messages`, as an O(1) immutable view (the loop's request snapshot)."""
        self._refresh_messages()
        return MessageView(self._derived, len(self._derived))

    def _refresh_messages(self) -> None:
        """Project the surface nodes not yet seen (each exactly once); a replace rebuilds."""
        surface = self._surface
        if surface.generation != self._derived_generation:
            self._derived = []
            self._derived_nodes = 0
            self._derived_generation = surface.generation
        nodes = surface.nodes
        events = self._events
        while self._derived_nodes < len(nodes):
            # Advance the cursor node by node: if a projection raises (a seed loaded without
            # shape checks), nothing is projected twice on the next call.
            message = derive_event_message(events[nodes[self._derived_nodes]])
            if message is not None:
                self._derived.append(message)
            self._derived_nodes += 1

    def request_header(self) -> EpochHeader | None:
        """The folded request header (``None`` before the first snapshot)."""
        n = len(self._events)
        if self._header_cursor < n:
            self._header = fold_request_header(
                (self._events[i] for i in range(self._header_cursor, n)), self._header
            )
            self._header_cursor = n
        return self._header

    def fork(self, at_seq: int, *, child_id: str | None = None) -> Session:
        """A new session seeded with ``events[0..at_seq]`` (inclusive); see :func:`fork`."""
        return fork(self, at_seq, child_id=child_id)


def _check_projectable(event: Event) -> None:
    """Refuse a surface event whose message :func:`derive_event_message` could not project:
    logged, it would make every later ``derive_messages()`` raise."""
    try:
        parse_event_message(event)
    except InvalidEventError as exc:
        raise InvalidEventError(
            f"{exc} (refused: derive_messages() could not project this message)",
            seq=event.seq,
            event_type=event.type,
        ) from exc


def _event_from_json(raw: Mapping[str, Any], index: int) -> Event:
    try:
        return Event.from_json(raw)
    except InvalidEventError as exc:
        raise InvalidEventError(
            f"seed event at index {index} is invalid: {exc}", seq=exc.seq, event_type=exc.event_type
        ) from exc


def fork(session: Session, at_seq: int, *, child_id: str | None = None) -> Session:
    """Fork ``session`` after ``at_seq`` (inclusive), which must lie at a turn boundary.

    ``child_id`` defaults to ``"<parent id>/fork@<at_seq>"``.

    The child is seeded with ``events[0..at_seq]``, records ``parentSession`` and ``seedLength``
    in its info, and gets its own ``session/end-seed`` marker. A boundary inside an open turn
    raises :class:`ForkError`.
    """
    events = session.events
    if isinstance(at_seq, bool) or not isinstance(at_seq, int) or at_seq < 0:
        raise ForkError(f"fork boundary must be a non-negative seq, got {at_seq!r}", seq=None)
    if at_seq >= len(events):
        last = len(events) - 1 if events else "none"
        raise ForkError(f"fork boundary seq {at_seq} does not exist (last seq: {last})", seq=at_seq)
    inside = open_turn(events, at_seq + 1)
    if inside is not None:
        raise ForkError(
            f"fork boundary seq {at_seq} ends inside open turn {inside.turn} (opened at seq "
            f"{inside.seq}); fork at a turn boundary",
            seq=at_seq,
        )
    seed = events[: at_seq + 1]
    child_id = child_id if child_id is not None else f"{session.id}/fork@{at_seq}"
    info = SessionInfo(
        id=child_id,
        created_at=session._clock(),
        cwd=session.info.cwd,
        parent_session=session.id,
        seed_length=len(seed),
    )
    return Session.create(child_id, seed, info=info, clock=session._clock, check_shapes=False)
