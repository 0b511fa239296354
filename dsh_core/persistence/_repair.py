"""Crash repair: the synthetic events that close a log which ends inside an open turn.

A process that dies mid-turn leaves a log whose last turn never ended, maybe with an open step
and tool calls the model asked for but never got answers to. A provider refuses such a
transcript (every tool call needs a result), so before a log is resumed its tail is closed with
deterministic events: an error ``tool/result`` per unanswered call, then
``step/end`` if a step is open, then ``turn/end {reason: {kind: "interrupted"}}``. Seqs continue
the log and every closer reuses the last event's time, so repairing the same log twice yields
the same events. The loader applies them in memory only; the loop never calls this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._events import Event, open_turn
from .._json import freeze_json
from .._messages import tool_result_message

__all__ = [
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "interrupted_turn_closers",
]

TOOL_NOT_STARTED: Final = "TOOL_NOT_STARTED"
"""Error code of a synthetic result for a call the model asked for but nobody started."""

TOOL_OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"
"""Error code of a synthetic result for a call that was started (``tool/call`` logged) but whose
result never reached the log: it may or may not have had its effect."""

# The wording is the reference harness's, so a repaired log reads the same to the model whichever
# harness repaired it.
_OUTCOME_UNKNOWN_TEXT: Final = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
_NOT_STARTED_TEXT: Final = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _pending_calls_of(message: Any) -> list[str]:
    content = _get(message, "content")
    if not isinstance(content, list):
        return []
    return [
        block["id"]
        for block in content
        if _get(block, "type") == "tool-call" and isinstance(block.get("id"), str)
    ]


def interrupted_turn_closers(events: Sequence[Event]) -> tuple[Event, ...]:
    """The events that close ``events`` when it ends inside an open turn (pure; ``()`` otherwise).

    The scan: ``turn/start`` opens a turn (clearing the step and pending calls), ``turn/end``
    clears everything, ``step/start`` opens a step, ``step/end`` closes it and forgets its
    pending calls; each ``tool-call`` block of an ``assistant/message`` becomes a pending call (in
    content order), a ``tool/call`` records its seq on the pending entry, a ``tool/result``
    answers it. Unanswered calls get an error result: ``TOOL_OUTCOME_UNKNOWN`` citing the
    ``tool/call`` when one was logged, else ``TOOL_NOT_STARTED``. Only the open turn is scanned
    (found by :func:`dsh_core._events.open_turn`): its ``turn/start`` clears everything before it.
    """
    inside = open_turn(events)
    if inside is None:
        return ()
    turn: Any = None
    open_step: Any = None
    step_open = False
    # call id -> (step of the assistant message, seq of its tool/call or None); dicts keep
    # first-registration order even when an entry is overwritten, like the reference's Map.
    pending: dict[str, tuple[Any, int | None]] = {}
    for event in events[inside.seq - events[0].seq :]:
        kind, data = event.type, event.data
        if kind == "turn/start":  # the open turn's own start: the scan begins there
            turn = _get(data, "turn")
        elif kind == "step/start":
            open_step, step_open = _get(data, "step"), True
        elif kind == "step/end":
            pending.clear()
            open_step, step_open = None, False
        elif kind == "assistant/message":
            for call_id in _pending_calls_of(_get(data, "message")):
                pending[call_id] = (_get(data, "step"), None)
        elif kind == "tool/call":
            call_id = _get(data, "callId")
            if isinstance(call_id, str) and call_id in pending:
                pending[call_id] = (pending[call_id][0], event.seq)
        elif kind == "tool/result":
            call_id = _get(_get(_get(data, "message"), "source"), "callId")
            if isinstance(call_id, str):
                pending.pop(call_id, None)

    seq = events[-1].seq + 1
    time = events[-1].time
    closers: list[Event] = []
    for call_id, (step, call_seq) in pending.items():
        started = call_seq is not None
        message = tool_result_message(
            call_id,
            _OUTCOME_UNKNOWN_TEXT if started else _NOT_STARTED_TEXT,
            is_error=True,
            id=f"interrupted-tool-result-{call_id}-{seq}",
        )
        error = (
            {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
            if started
            else {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
        )
        closers.append(
            Event(
                type="tool/result",
                seq=seq,
                time=time,
                data=freeze_json(
                    {"turn": turn, "step": step, "message": message.to_json(), "error": error}
                ),
                surface_op="append",
                source_event_seqs=(call_seq,) if call_seq is not None else None,
            )
        )
        seq += 1
    if step_open:
        closers.append(
            Event(
                type="step/end",
                seq=seq,
                time=time,
                data=freeze_json({"turn": turn, "step": open_step}),
            )
        )
        seq += 1
    closers.append(
        Event(
            type="turn/end",
            seq=seq,
            time=time,
            data=freeze_json({"turn": turn, "reason": {"kind": "interrupted"}}),
        )
    )
    return tuple(closers)
