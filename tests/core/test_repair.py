"""Crash repair, ``interrupted_turn_closers`` (docs/design.md §9.1): every case of its test list,
plus determinism, purity, and that the closers seed a session."""

from __future__ import annotations

from typing import Any

from dsh_core import Event, Session, assistant_message, tool_result_message, user_message
from dsh_core._messages import TextBlock, ToolCallBlock
from dsh_core.persistence import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from dsh_core.persistence._repair import interrupted_turn_closers


class Log:
    """Builds a log event by event, times 100, 101, … so closers' times are checkable."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, type: str, data: Any, **kw: Any) -> Event:
        seq = len(self.events)
        event = Event(type=type, seq=seq, time=100 + seq, data=data, **kw)
        self.events.append(event)
        return event

    def turn(self, turn: int = 1) -> Log:
        self.add("turn/start", {"turn": turn})
        return self

    def end_turn(self, turn: int = 1) -> Log:
        self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        return self

    def step(self, step: int = 1, turn: int = 1) -> Log:
        self.add("step/start", {"turn": turn, "step": step})
        return self

    def end_step(self, step: int = 1, turn: int = 1) -> Log:
        self.add("step/end", {"turn": turn, "step": step})
        return self

    def ask(self, *call_ids: str, step: int = 1) -> Log:
        blocks = [TextBlock(text="calling")] + [
            ToolCallBlock(id=c, name="bash", arguments="{}") for c in call_ids
        ]
        message = assistant_message(blocks, provider="p", model="m", id=f"a{len(self.events)}")
        self.add(
            "assistant/message",
            {"turn": 1, "step": step, "message": message.to_json()},
            surface_op="append",
        )
        return self

    def call(self, call_id: str) -> Log:
        self.add(
            "tool/call",
            {"turn": 1, "step": 1, "callId": call_id, "name": "bash", "arguments": "{}"},
        )
        return self

    def answer(self, call_id: str) -> Log:
        message = tool_result_message(call_id, "ok", id=f"r-{call_id}")
        self.add(
            "tool/result", {"turn": 1, "step": 1, "message": message.to_json()}, surface_op="append"
        )
        return self

    def prompt(self) -> Log:
        self.add("user/message", user_message("hi", id="u").to_json(), surface_op="append")
        return self


def kinds(events: tuple[Event, ...]) -> list[str]:
    return [e.type for e in events]


def test_a_balanced_log_needs_nothing() -> None:
    log = Log().turn().step().prompt().end_step().end_turn()
    assert interrupted_turn_closers(log.events) == ()


def test_an_empty_log_needs_nothing() -> None:
    assert interrupted_turn_closers([]) == ()


def test_a_log_without_turns_needs_nothing() -> None:
    assert interrupted_turn_closers(Log().prompt().events) == ()


def test_an_open_turn_gets_an_interrupted_turn_end_at_the_next_seq() -> None:
    [closer] = interrupted_turn_closers(Log().turn(3).events)
    assert closer == Event(
        type="turn/end", seq=1, time=100, data={"turn": 3, "reason": {"kind": "interrupted"}}
    )


def test_an_open_step_is_closed_before_the_turn() -> None:
    closers = interrupted_turn_closers(Log().turn().step().prompt().events)
    assert kinds(closers) == ["step/end", "turn/end"]
    assert closers[0].data == {"turn": 1, "step": 1}
    assert [c.seq for c in closers] == [3, 4]
    assert {c.time for c in closers} == {102}  # the last real event's time, never a new one


def test_an_unanswered_call_without_tool_call_gets_a_not_started_result() -> None:
    closers = interrupted_turn_closers(Log().turn().step().ask("c1").events)
    assert kinds(closers) == ["tool/result", "step/end", "turn/end"]
    assert [c.seq for c in closers] == [3, 4, 5]
    result = closers[0]
    assert result.surface_op == "append"
    assert result.source_event_seqs is None
    assert result.data["turn"] == 1 and result.data["step"] == 1
    assert result.data["error"] == {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    message = result.data["message"]
    assert message["id"] == "interrupted-tool-result-c1-3"
    assert message["role"] == "user"
    assert message["source"] == {"kind": "tool", "callId": "c1"}
    [block] = message["content"]
    assert block["type"] == "tool-result" and block["toolCallId"] == "c1"
    assert block["isError"] is True
    assert block["content"] == [
        {
            "type": "text",
            "text": "The tool call was interrupted before the Harness recorded it as started. "
            "Retry it if it is still needed.",
        }
    ]


def test_an_answered_call_gets_no_result() -> None:
    closers = interrupted_turn_closers(Log().turn().step().ask("c1").call("c1").answer("c1").events)
    assert kinds(closers) == ["step/end", "turn/end"]


def test_after_a_closed_step_only_the_turn_is_closed() -> None:
    # The step's pending calls were cleared by its step/end.
    closers = interrupted_turn_closers(Log().turn().step().ask("c1").end_step().events)
    assert kinds(closers) == ["turn/end"]


def test_earlier_closed_turns_contribute_nothing() -> None:
    log = Log().turn(1).step().ask("old").end_turn(1).turn(2)
    [closer] = interrupted_turn_closers(log.events)
    assert closer.data == {"turn": 2, "reason": {"kind": "interrupted"}}


def test_with_two_calls_and_one_answered_only_the_other_gets_a_result() -> None:
    log = Log().turn().step().ask("c1", "c2").call("c1").answer("c1")
    closers = interrupted_turn_closers(log.events)
    assert kinds(closers) == ["tool/result", "step/end", "turn/end"]
    assert closers[0].data["message"]["source"]["callId"] == "c2"


def test_a_logged_tool_call_gets_an_outcome_unknown_result_citing_it() -> None:
    log = Log().turn().step().ask("c1").call("c1")
    result = interrupted_turn_closers(log.events)[0]
    assert result.data["error"] == {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
    assert result.source_event_seqs == (3,)
    text = result.data["message"]["content"][0]["content"][0]["text"]
    assert "outcome is unknown" in text and "retry only if the operation is read-only" in text


def test_an_orphan_tool_call_gets_no_result() -> None:
    closers = interrupted_turn_closers(Log().turn().step().call("never-asked").events)
    assert kinds(closers) == ["step/end", "turn/end"]


def test_pending_calls_are_answered_in_the_order_the_model_asked_for_them() -> None:
    log = Log().turn().step().ask("b", "a").call("a").ask("c", step=1)
    closers = interrupted_turn_closers(log.events)
    assert [c.data["message"]["source"]["callId"] for c in closers[:3]] == ["b", "a", "c"]
    assert [c.seq for c in closers] == list(range(len(log.events), len(log.events) + 5))
    assert closers[1].data["error"]["code"] == TOOL_OUTCOME_UNKNOWN


def test_repair_is_deterministic_and_pure() -> None:
    log = Log().turn().step().ask("c1", "c2").call("c2")
    before = list(log.events)
    assert interrupted_turn_closers(log.events) == interrupted_turn_closers(log.events)
    assert log.events == before


def test_the_closers_seed_a_session_whose_messages_answer_every_call() -> None:
    log = Log().turn().step().prompt().ask("c1", "c2").call("c1")
    closers = interrupted_turn_closers(log.events)
    session = Session.create("s", [*log.events, *closers])  # shape checks on
    messages = session.derive_messages()
    assert [m.role for m in messages] == ["user", "assistant", "user", "user"]
    answered = [m.source["callId"] for m in messages[2:]]
    assert answered == ["c1", "c2"]
    assert session.events[-1].type == "session/end-seed"


def test_odd_shapes_from_other_harnesses_do_not_break_the_scan() -> None:
    log = Log().turn().step()
    log.add("assistant/message", {"turn": 1, "step": 1, "message": {"content": "not a list"}})
    log.add(
        "assistant/message", {"turn": 1, "step": 1, "message": {"content": [{"type": "tool-call"}]}}
    )
    log.add("tool/result", {"message": None})
    log.add("tool/call", {"callId": 5})
    assert kinds(interrupted_turn_closers(log.events)) == ["step/end", "turn/end"]
