"""Rebuilding requests from a log alone: the pure function every loop request must equal.

:func:`reconstruct_request` folds :func:`derive_event_message` over the surface and the header
events over the log. It shares no state with :class:`Session`'s caches, which is what makes it a
witness: the dev-mode invariant compares each dispatched request with it.

Two boundary rules exist, one per generation of the design, and a log follows exactly one:

- ``step-start`` (this project; docs/design.md §7): a step's messages are the derivation over the
  events before its ``step/start``; its header is the fold through the step's own header event.
  The turn's prompt is appended before the ``step/start``.
- ``first-chunk`` (the reference harness's current logs): the boundary is just before the
  attempt's first ``assistant/chunk``; the claimed prompt is appended after ``step/start``.

:func:`detect_boundary_rule` decides once per log, from the first turn; it never guesses per
request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._differences import (
    Sides,
    ToolList,
    config_differences,
    count_difference,
    first_json_difference,
    system_difference,
    tools_differences,
)
from ._errors import CorruptLogError, DshError
from ._events import SURFACE_EVENT_TYPES, Event, turn_step
from ._header import EpochHeader, ToolSchema, ToolsPlaceholder
from ._header_delta import fold_request_header
from ._json_text import dumps_canonical
from ._messages import Message, derive_event_message
from ._request import GenerateOptions
from ._stream import TokenUsage
from ._surface import SurfaceFold
from ._views import MessageView

__all__ = [
    "BoundaryRule",
    "ReconstructedRequest",
    "RequestWitness",
    "detect_boundary_rule",
    "diff_requests",
    "reconstruct_request",
    "reconstruct_requests",
]

BoundaryRule: TypeAlias = Literal["step-start", "first-chunk"]


_REFERENCE_ONLY_TYPES = frozenset({"request/context", "agent/inbox/spliced", "session/title"})
"""Event types only the reference harness's current generation writes (our loop never does)."""


def detect_boundary_rule(events: Sequence[Event]) -> BoundaryRule:
    """Which generation's boundary rule a log follows (decided once, from the log itself).

    In order: header deltas, ``fallback`` snapshots and ``compact/*`` events exist only in this
    design (``step-start``); ``request/context``, ``agent/inbox/spliced`` and ``session/title``
    only in the reference harness's current generation (``first-chunk``). Otherwise the first
    turn decides: a prompt appended before its first ``step/start`` is this design, one appended
    after it is the reference harness's.
    """
    reference_marker = False
    first_turn: BoundaryRule | None = None
    in_turn = False
    seen_step = False
    for event in events:
        kind = event.type
        if kind == "request/header-delta" or kind.startswith("compact/"):
            return "step-start"
        if (
            kind == "request/header"
            and isinstance(event.data, Mapping)
            and event.data.get("reason") == "fallback"
        ):
            return "step-start"
        if kind in _REFERENCE_ONLY_TYPES:
            reference_marker = True
        elif kind == "turn/start":
            in_turn, seen_step = True, False
        elif kind == "turn/end":
            in_turn = False
        elif kind == "step/start" and in_turn:
            seen_step = True
        elif (
            first_turn is None
            and in_turn
            and kind in SURFACE_EVENT_TYPES
            and event.surface_op == "append"
        ):
            first_turn = "first-chunk" if seen_step else "step-start"
    if reference_marker:
        return "first-chunk"
    return first_turn or "step-start"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconstructedRequest:
    """One request rebuilt from a log, and where it sits."""

    request: GenerateOptions
    turn: int
    step: int
    attempt: int
    """0 for the first attempt of a step, 1.. for retries."""
    step_start_seq: int
    boundary_seq: int
    """Messages are the derivation over ``events[:boundary_seq]``."""
    first_response_seq: int | None
    """Seq of the attempt's first chunk (or its message), ``None`` if nothing was logged."""
    header_seq: int | None
    """Seq of the last header event folded into this request's header."""
    reply: Message | None = None
    """The attempt's answer: the assistant message the log recorded for it (``None`` when the
    attempt failed, was retried or was cut off before one was logged)."""
    reply_seq: int | None = None
    """Seq of the ``assistant/message`` that holds :attr:`reply`."""
    usage: TokenUsage | None = None
    """The usage the provider reported for this attempt, when logged: the reply's usage, else
    the attempt's last ``usage`` chunk (input = cache-miss tokens, output, cache read, …)."""


class _Fold:
    """An independent incremental fold: surface, derived messages, header (no Session state)."""

    def __init__(self, events: Sequence[Event], errors: list[DshError] | None = None) -> None:
        self.events = events
        self.errors = errors
        """Where to report an event that does not derive (it is then left out); ``None``: raise."""
        self.surface = SurfaceFold()
        self.count = 0
        self.messages: list[Message] = []
        self.projected = 0
        self.generation = 0
        self.header: EpochHeader | None = None
        self.header_count = 0
        self.header_seq: int | None = None

    def messages_through(self, end: int) -> MessageView:
        events = self.events
        while self.count < end:
            event = events[self.count]
            self.surface.apply(self.surface.plan(event, self.count, events))
            self.count += 1
        if self.surface.generation != self.generation:
            self.messages, self.projected, self.generation = [], 0, self.surface.generation
        nodes = self.surface.nodes
        for seq in nodes[self.projected :]:
            try:
                message = derive_event_message(events[seq])
            except DshError as exc:
                if self.errors is None:
                    raise
                self.errors.append(exc)
                continue
            if message is not None:
                self.messages.append(message)
        self.projected = len(nodes)
        return MessageView(self.messages, len(self.messages))

    def header_through(self, end: int) -> EpochHeader | None:
        events = self.events
        while self.header_count < end:
            event = events[self.header_count]
            if event.type in ("request/header", "request/header-delta"):
                self.header = fold_request_header((event,), self.header)
                self.header_seq = event.seq
            self.header_count += 1
        return self.header


def _build(
    header: EpochHeader | None, messages: MessageView, session_id: str | None, where: int
) -> GenerateOptions:
    if header is None:
        raise CorruptLogError(
            f"the request at seq {where} has no request header in the log before it", seq=where
        )
    return GenerateOptions.from_header(header, messages, session_id=session_id)


_ATTEMPT_END_TYPES = frozenset({"step/start", "step/end", "turn/start", "turn/end"})


def _usage_of(value: object) -> TokenUsage | None:
    try:
        return TokenUsage.from_json(value) if value is not None else None
    except DshError:  # an unreadable usage object counts as none; the audit reports shapes
        return None


def _outcome(
    events: Sequence[Event], start: int
) -> tuple[Message | None, int | None, TokenUsage | None]:
    """The reply, its seq and the usage of the attempt whose first response is at ``start``.

    The attempt ends at its ``assistant/message``, at a step or turn boundary, or where a new
    run of chunks starts after a ``finish`` chunk (a retry).
    """
    usage: TokenUsage | None = None
    finished = False
    for i in range(start, len(events)):
        event = events[i]
        kind = event.type
        if kind in _ATTEMPT_END_TYPES:
            break
        data = event.data if isinstance(event.data, Mapping) else {}
        if kind == "assistant/chunk":
            if finished:
                break
            chunk = data.get("chunk")
            if isinstance(chunk, Mapping):
                if chunk.get("type") == "usage":
                    usage = _usage_of(chunk.get("usage")) or usage
                elif chunk.get("type") == "finish":
                    finished = True
        elif kind == "assistant/message":
            try:
                reply = derive_event_message(event)
            except DshError:
                reply = None
            return reply, event.seq, _usage_of(data.get("usage")) or usage
    return None, None, usage


def reconstruct_requests(
    events: Sequence[Event],
    *,
    session_id: str | None = None,
    rule: BoundaryRule | None = None,
    errors: list[DshError] | None = None,
) -> Iterator[ReconstructedRequest]:
    """Every request of a log, in order: one per attempt (retries included). Linear in the log.

    An attempt is a run of ``assistant/chunk`` events of one step ended by a ``finish`` chunk (a
    retry starts a new run), or an ``assistant/message`` with no chunks before it.

    By default a log that cannot be rebuilt raises (:class:`CorruptLogError`, naming the seq).
    With ``errors`` (a list), rebuilding goes on: a message event that does not derive is left
    out of the messages, a request with no header before it is skipped, and each problem is
    appended to ``errors`` (an auditor reports them all, not only the first).
    """
    rule = rule or detect_boundary_rule(events)
    fold = _Fold(events, errors)
    step_start: Event | None = None
    attempt = 0
    in_attempt = False
    for event in events:
        kind = event.type
        if kind == "step/start":
            step_start, attempt, in_attempt = event, 0, False
            continue
        if kind in ("step/end", "turn/end"):
            step_start, in_attempt = None, False
            continue
        if step_start is None:
            continue
        starts = (kind == "assistant/chunk" and not in_attempt) or (
            kind == "assistant/message" and not in_attempt and not event.source_event_seqs
        )
        if starts:
            boundary = step_start.seq if rule == "step-start" else event.seq
            messages = fold.messages_through(boundary)
            header = fold.header_through(event.seq)
            named = turn_step(step_start)
            turn, step = named.turn or 0, named.step or 0
            reply, reply_seq, usage = _outcome(events, event.seq)
            request: GenerateOptions | None = None
            try:
                request = _build(header, messages, session_id, event.seq)
            except CorruptLogError as exc:
                if errors is None:
                    raise
                errors.append(exc)
            if request is not None:
                yield ReconstructedRequest(
                    request=request,
                    turn=turn,
                    step=step,
                    attempt=attempt,
                    step_start_seq=step_start.seq,
                    boundary_seq=boundary,
                    first_response_seq=event.seq,
                    header_seq=fold.header_seq,
                    reply=reply,
                    reply_seq=reply_seq,
                    usage=usage,
                )
            attempt += 1
            in_attempt = kind == "assistant/chunk"
        if kind == "assistant/chunk" and in_attempt:
            chunk = event.data.get("chunk") if isinstance(event.data, Mapping) else None
            if isinstance(chunk, Mapping) and chunk.get("type") == "finish":
                in_attempt = False
        elif kind == "assistant/message":
            in_attempt = False


_STEP_BOUNDARY_TYPES = frozenset({"step/start", "step/end", "turn/start", "turn/end"})


def reconstruct_request(
    events: Sequence[Event],
    step_start_seq: int,
    *,
    attempt: int = 0,
    session_id: str | None = None,
    rule: BoundaryRule | None = None,
) -> GenerateOptions:
    """The request of the step opened at ``step_start_seq`` (its ``attempt``-th attempt).

    With the ``step-start`` rule a step whose request was not answered yet (the invariant checks
    before dispatch) is rebuilt from the events logged so far.
    """
    if not 0 <= step_start_seq < len(events) or events[step_start_seq].type != "step/start":
        raise CorruptLogError(f"seq {step_start_seq} is not a step/start", seq=step_start_seq)
    rule = rule or detect_boundary_rule(events)
    end = len(events)
    for i in range(step_start_seq + 1, len(events)):
        # A step ends at its step/end; a log cut short (no step/end) ends it at the next step
        # or turn boundary, so nothing of a later step or turn leaks into this one's header.
        if events[i].type in _STEP_BOUNDARY_TYPES:
            end = i
            break
    window = events[:end]
    for rebuilt in reconstruct_requests(window, session_id=session_id, rule=rule):
        if rebuilt.step_start_seq == step_start_seq and rebuilt.attempt == attempt:
            return rebuilt.request
    if rule == "step-start" and attempt == 0:
        fold = _Fold(events)
        messages = fold.messages_through(step_start_seq)
        return _build(fold.header_through(end), messages, session_id, step_start_seq)
    raise CorruptLogError(
        f"the step at seq {step_start_seq} has no attempt {attempt} in the log", seq=step_start_seq
    )


# --------------------------------------------------------------------------------------------
# Diffs in this project's vocabulary (worded by ._differences, shared with the testkit)


def _tool_pairs(tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None) -> ToolList:
    if tools is None:
        return None
    if isinstance(tools, ToolsPlaceholder):
        # Compared as a whole: a token, or the names list as JSON text.
        return tools.token or dumps_canonical(list(tools.names or ()))
    return [(t.name, t.to_json()) for t in tools]


def _tools_text(tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None) -> str:
    if tools is None or isinstance(tools, ToolsPlaceholder):
        return dumps_canonical(tools.to_json() if tools is not None else None)
    return dumps_canonical([t.to_json() for t in tools])


def _prefix_json(request: GenerateOptions, model_visible_only: bool) -> list[Any]:
    return [
        entry
        if isinstance(entry, str)
        else entry.visible_json()
        if model_visible_only
        else entry.to_json()
        for entry in request.message_prefix
    ]


def _prefix_difference(
    expected: GenerateOptions, actual: GenerateOptions, names: Sides, *, model_visible_only: bool
) -> str | None:
    """Where two message prefixes differ (the request-only messages before the history)."""
    a = _prefix_json(expected, model_visible_only)
    b = _prefix_json(actual, model_visible_only)
    if dumps_canonical(a) == dumps_canonical(b):
        return None
    shorter = min(len(a), len(b))
    for i in range(shorter):
        if dumps_canonical(a[i]) != dumps_canonical(b[i]):
            return first_json_difference(f"messagePrefix[{i}]", a[i], b[i], names) or (
                f"messagePrefix[{i}] differs"
            )
    first = (b if len(b) > len(a) else a)[shorter]
    return count_difference(
        "messagePrefix", len(a), len(b), names, at=f"messagePrefix[{shorter}]", item=first
    )


def diff_requests(
    expected: GenerateOptions,
    actual: GenerateOptions,
    *,
    known_equal_messages: int = 0,
    model_visible_only: bool = False,
    names: Sides = ("expected", "actual"),
) -> tuple[str, ...]:
    """Where ``actual`` differs from ``expected``, in this project's vocabulary; ``()`` if equal.

    Config fields (``config.temperature``), the system prompt by line (and column, when the
    lines are long), tools by name, and messages by index and field
    (``messages[4].content[0].text differs: …``). ``names`` call the two sides in the text.
    The first ``known_equal_messages`` messages are not compared (a caller that verified them
    already). With ``model_visible_only`` messages compare by role and content only: ids and
    sources never reach the wire, so a replayed agent need not mint the recorded ids.
    """
    out = config_differences(expected.config.to_json(), actual.config.to_json(), names)
    system = system_difference(expected.system, actual.system, names)
    if system is not None:
        out.append(system)
    exp_tools = expected.tools or None
    act_tools = actual.tools or None
    # Compared as JSON text: a schema's key order is part of what the model sees, and schema
    # equality (dict equality) would miss it.
    if _tools_text(exp_tools) != _tools_text(act_tools):
        out.extend(tools_differences(_tool_pairs(exp_tools), _tool_pairs(act_tools), names))
    prefix = _prefix_difference(expected, actual, names, model_visible_only=model_visible_only)
    if prefix is not None:
        out.append(prefix)
    exp_msgs, act_msgs = expected.messages, actual.messages
    for i in range(
        min(known_equal_messages, len(exp_msgs), len(act_msgs)), min(len(exp_msgs), len(act_msgs))
    ):
        m, n = exp_msgs[i], act_msgs[i]
        if m is n:
            continue
        if model_visible_only:
            if m.visible_canonical_json() != n.visible_canonical_json():
                a, b = m.visible_json(), n.visible_json()
                detail = first_json_difference(f"messages[{i}]", a, b, names)
                out.append(detail or f"messages[{i}] differs")
                break
        elif m.canonical_json() != n.canonical_json():
            detail = first_json_difference(f"messages[{i}]", m.to_json(), n.to_json(), names)
            out.append(detail or f"messages[{i}] differs")
            break
    if len(exp_msgs) != len(act_msgs):
        shorter = min(len(exp_msgs), len(act_msgs))
        first = (act_msgs if len(act_msgs) > len(exp_msgs) else exp_msgs)[shorter]
        out.append(
            count_difference(
                "messages",
                len(exp_msgs),
                len(act_msgs),
                names,
                at=f"messages[{shorter}]",
                item=first.text,
            )
        )
    if (expected.session_id, expected.purpose) != (actual.session_id, actual.purpose):
        left, right = names
        out.append(
            f"envelope differs: {left}: sessionId={expected.session_id!r} "
            f"purpose={expected.purpose!r}, {right}: sessionId={actual.session_id!r} "
            f"purpose={actual.purpose!r}"
        )
    return tuple(out)


class RequestWitness:
    """An independent, incremental reconstructor over a live log (for the dev invariant).

    It keeps its own surface, message and header folds and advances them over new events only,
    so checking each request costs O(new events) to fold plus one comparison.
    """

    def __init__(self) -> None:
        self._fold: _Fold | None = None

    def expected(
        self, events: Sequence[Event], step_start_seq: int, session_id: str | None
    ) -> GenerateOptions:
        """The request the log owes for the step at ``step_start_seq`` (step-start rule).

        The folds advance only while ``events`` continues the log seen so far; an earlier step,
        a shorter log or another log (its last folded event is not the same object) refolds.
        """
        fold = self._fold
        if fold is None or not _continues(fold, events, step_start_seq):
            fold = self._fold = _Fold(events)
        fold.events = events
        messages = fold.messages_through(step_start_seq)
        header = fold.header_through(len(events))
        return _build(header, messages, session_id, step_start_seq)


def _continues(fold: _Fold, events: Sequence[Event], step_start_seq: int) -> bool:
    """Whether ``events`` extends the log ``fold`` has folded, up to ``step_start_seq`` (O(1)).

    A live session's log is append-only and hands out the same event objects, so the event at
    the last folded index being the very same object identifies the same log.
    """
    seen = fold.header_count
    if step_start_seq < fold.count or len(events) < seen:
        return False
    return seen == 0 or events[seen - 1] is fold.events[seen - 1]
