"""Dev-mode invariants: every loop request equals its reconstruction; the log is well formed.

Both are on in this project's tests and in the testkit's fixtures, off by default in production
(``AgentOptions(invariants=True)`` turns them on). One-shot requests (compaction's summary call)
are exempt: they are not loop requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._errors import InvariantViolation
from ._events import Event, turn_step
from ._messages import Message
from ._reconstruct import RequestWitness, diff_requests
from ._request import GenerateOptions
from ._session import Session
from ._views import PrefixView

__all__ = ["LogInvariant", "RequestInvariant"]


class RequestInvariant:
    """Rebuilds each loop request from the log prefix and compares it with what is dispatched."""

    def __init__(self) -> None:
        self._witness = RequestWitness()
        self.checked = 0
        """How many requests were checked (tests assert the check really ran)."""
        self._verified: tuple[Sequence[Message], Sequence[Message]] | None = None
        """The messages of the last request found equal to the log's, and the log's own.

        Views of append-only histories: a later request whose views share a prefix with these
        (:meth:`PrefixView.shared_prefix`) holds the very same, already verified messages there,
        so each check compares only the new messages and its cost does not grow with history."""

    def check(self, session: Session, step_start_seq: int, request: GenerateOptions) -> None:
        """Raise :class:`InvariantViolation` with a readable diff when the request is not the log's."""
        expected = self._witness.expected(session.events, step_start_seq, session.id)
        known = 0
        if self._verified is not None:
            sent, owed = self._verified
            same_sent = _shared_prefix(request.messages, sent)
            same_owed = _shared_prefix(expected.messages, owed)
            if same_sent is not None and same_owed is not None:
                known = min(same_sent, same_owed)
        differences = diff_requests(expected, request, known_equal_messages=known)
        self.checked += 1
        if differences:
            raise InvariantViolation(
                f"request of the step at seq {step_start_seq} is not a pure function of the log",
                diff=differences,
            )
        self._verified = (request.messages, expected.messages)


def _shared_prefix(view: Sequence[Message], other: Sequence[Message]) -> int | None:
    return view.shared_prefix(other) if isinstance(view, PrefixView) else None


@dataclass(slots=True)
class _Trace:
    open_turn: int | None = None
    next_turn: int = 1
    open_step: int | None = None
    next_step: int = 1
    pending_calls: set[str] = field(default_factory=set)


def _call_id(event: Event) -> object:
    data = event.data if isinstance(event.data, Mapping) else {}
    return data.get("callId")


def _pair(event: Event) -> tuple[int | None, int | None]:
    named = turn_step(event)
    return named.turn, named.step


_IN_TURN_TYPES = frozenset(
    {"request/header", "request/header-delta", "request/context", "todo/write"}
)
"""Log-only types that belong to a turn (docs/design.md §8)."""


def _not_started(event: Event) -> bool:
    """A synthetic ``TOOL_NOT_STARTED`` result (crash repair: the call never logged a
    ``tool/call``), which answers no pending call."""
    data = event.data if isinstance(event.data, Mapping) else {}
    error = data.get("error")
    return isinstance(error, Mapping) and error.get("code") == "TOOL_NOT_STARTED"


def _result_call_id(event: Event) -> object:
    data = event.data if isinstance(event.data, Mapping) else {}
    message = data.get("message")
    source = message.get("source") if isinstance(message, Mapping) else None
    return source.get("callId") if isinstance(source, Mapping) else None


class LogInvariant:
    """A pre-commit session validator: balanced turn/step nesting; tool results answer calls.

    Install with ``session.add_validator(LogInvariant.for_session(session))``; a violation vetoes
    the append (the log stays unchanged) by raising :class:`InvariantViolation`.
    """

    def __init__(self) -> None:
        self._trace = _Trace()

    @classmethod
    def for_session(cls, session: Session) -> LogInvariant:
        """An invariant whose trace starts from the session's current log."""
        invariant = cls()
        for event in session.events:
            invariant._advance(event)
        return invariant

    def __call__(self, event: Event, session: Session) -> None:
        self.check(event)

    def check(self, event: Event) -> None:
        """Check ``event`` as the next event of the log, then record it."""
        self._check(event)
        self._advance(event)

    def _fail(self, event: Event, message: str) -> InvariantViolation:
        return InvariantViolation(
            f"session log invariant: {event.type} at seq {event.seq}: {message}"
        )

    def _check(self, event: Event) -> None:
        t = self._trace
        kind = event.type
        if kind == "turn/start":
            turn = turn_step(event).turn
            if t.open_turn is not None:
                raise self._fail(event, f"turn {t.open_turn} is still open")
            if turn != t.next_turn:
                raise self._fail(event, f"expected turn {t.next_turn}, got {turn}")
        elif kind == "turn/end":
            turn = turn_step(event).turn
            if t.open_turn is None or turn != t.open_turn:
                raise self._fail(event, f"no open turn {turn} to end")
            if t.open_step is not None:
                raise self._fail(event, f"step {t.open_step} is still open")
        elif kind == "step/start":
            turn, step = _pair(event)
            if t.open_turn is None or turn != t.open_turn:
                raise self._fail(event, "a step must open inside its open turn")
            if t.open_step is not None:
                raise self._fail(event, f"step {t.open_step} is still open")
            if step != t.next_step:
                raise self._fail(event, f"expected step {t.next_step}, got {step}")
        elif kind in ("step/end", "assistant/chunk", "assistant/message", "tool/call"):
            self._check_names_open_step(event)
        elif kind == "tool/result":
            if t.open_turn is None:
                raise self._fail(event, "a tool result needs an open turn")
            if event.surface_op == "append":
                if t.open_step is None:
                    raise self._fail(event, "an appended tool result needs an open step")
                self._check_names_open_step(event)
                call_id = _result_call_id(event)
                if call_id not in t.pending_calls and not _not_started(event):
                    raise self._fail(
                        event, f"answers {call_id!r}, which is not a pending call of this step"
                    )
        elif kind in _IN_TURN_TYPES and t.open_turn is None:
            raise self._fail(event, "must be inside an open turn")

    def _check_names_open_step(self, event: Event) -> None:
        t = self._trace
        turn, step = _pair(event)
        if t.open_step is None:
            # Without this, an event naming no turn/step would match the closed (None, None).
            raise self._fail(event, f"names turn {turn} step {step}, but no step is open")
        if (turn, step) != (t.open_turn, t.open_step):
            raise self._fail(
                event,
                f"names turn {turn} step {step}, open is turn {t.open_turn} step {t.open_step}",
            )

    def _advance(self, event: Event) -> None:
        t = self._trace
        kind = event.type
        if kind == "turn/start":
            turn = turn_step(event).turn
            t.open_turn, t.next_turn, t.next_step, t.open_step = turn, (turn or 0) + 1, 1, None
            t.pending_calls.clear()
        elif kind == "turn/end":
            t.open_turn, t.open_step = None, None
            t.pending_calls.clear()
        elif kind == "step/start":
            step = turn_step(event).step
            t.open_step, t.next_step = step, (step or 0) + 1
        elif kind == "step/end":
            t.open_step = None
            t.pending_calls.clear()
        elif kind == "tool/call":
            t.pending_calls.add(str(_call_id(event)))
        elif kind == "tool/result" and event.surface_op == "append":
            t.pending_calls.discard(str(_result_call_id(event)))
