"""The dev-mode invariants on their own: ``LogInvariant``'s every rule, and ``RequestInvariant``'s
incremental fast path (only new messages are compared while the backing lists stay the same)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dsh_core import (
    EpochHeader,
    Event,
    GenerateOptions,
    InvariantViolation,
    LlmCallConfig,
    MessageView,
    RequestInvariant,
    Session,
    assistant_message,
    tool_result_message,
    user_message,
)
from dsh_core._invariants import LogInvariant
from dsh_core._messages import ToolCallBlock

# --------------------------------------------------------------------------------------------
# LogInvariant, event by event


def ev(type_: str, data: Any = None, seq: int = 0, **extra: Any) -> Event:
    return Event(type=type_, seq=seq, time=0, data={} if data is None else data, **extra)


def result(call_id: str, turn: int = 1, step: int = 1, **extra: Any) -> Event:
    message = tool_result_message(call_id, "ok", id=f"r-{call_id}")
    data = {"turn": turn, "step": step, "message": message.to_json(), **extra}
    return ev("tool/result", data, surface_op="append")


def replayed(*events: Event) -> LogInvariant:
    invariant = LogInvariant()
    for event in events:
        invariant.check(event)
    return invariant


def in_step(turn: int = 1, step: int = 1) -> LogInvariant:
    return replayed(
        ev("turn/start", {"turn": turn}), ev("step/start", {"turn": turn, "step": step})
    )


def refused(invariant: LogInvariant, event: Event) -> str:
    with pytest.raises(InvariantViolation) as info:
        invariant.check(event)
    assert info.value.diff == ()
    return str(info.value)


def test_a_well_formed_turn_passes() -> None:
    invariant = replayed(
        ev("user/message", user_message("queued").to_json(), surface_op="append"),
        ev("session/end-seed"),
        ev("plugin/anything", {"free": True}),
        ev("turn/start", {"turn": 1}),
        ev("request/header", {}),
        ev("request/header-delta", {}),
        ev("request/context", {}),
        ev("todo/write", {}),
        ev("step/start", {"turn": 1, "step": 1}),
        ev("assistant/chunk", {"turn": 1, "step": 1}),
        ev("assistant/message", {"turn": 1, "step": 1}),
        ev("tool/call", {"turn": 1, "step": 1, "callId": "c1"}),
        ev("tool/call", {"turn": 1, "step": 1, "callId": "c2"}),
        result("c2"),
        result("c1"),
        ev("step/end", {"turn": 1, "step": 1}),
        ev("step/start", {"turn": 1, "step": 2}),
        ev("step/end", {"turn": 1, "step": 2}),
        ev("turn/end", {"turn": 1}),
        ev("turn/start", {"turn": 2}),
        ev("step/start", {"turn": 2, "step": 1}),  # step numbers restart per turn
    )
    assert invariant._trace.open_turn == 2 and invariant._trace.open_step == 1


def test_turns_are_numbered_from_one_without_gaps() -> None:
    assert refused(LogInvariant(), ev("turn/start", {"turn": 2}, seq=4)) == (
        "session log invariant: turn/start at seq 4: expected turn 1, got 2"
    )
    after_one = replayed(ev("turn/start", {"turn": 1}), ev("turn/end", {"turn": 1}))
    assert refused(after_one, ev("turn/start", {"turn": 1})).endswith("expected turn 2, got 1")
    assert refused(LogInvariant(), ev("turn/start", {})).endswith("expected turn 1, got None")


def test_a_turn_cannot_open_inside_another() -> None:
    assert refused(replayed(ev("turn/start", {"turn": 1})), ev("turn/start", {"turn": 2})).endswith(
        "turn/start at seq 0: turn 1 is still open"
    )


def test_a_turn_end_needs_its_open_turn_and_no_open_step() -> None:
    assert refused(LogInvariant(), ev("turn/end", {"turn": 1})).endswith("no open turn 1 to end")
    assert refused(replayed(ev("turn/start", {"turn": 1})), ev("turn/end", {"turn": 2})).endswith(
        "no open turn 2 to end"
    )
    assert refused(in_step(), ev("turn/end", {"turn": 1})).endswith("step 1 is still open")


def test_a_step_opens_inside_its_open_turn() -> None:
    message = "a step must open inside its open turn"
    assert refused(LogInvariant(), ev("step/start", {"turn": 1, "step": 1})).endswith(message)
    open_turn = replayed(ev("turn/start", {"turn": 1}))
    assert refused(open_turn, ev("step/start", {"turn": 2, "step": 1})).endswith(message)


def test_steps_do_not_nest_and_are_numbered_without_gaps() -> None:
    assert refused(in_step(), ev("step/start", {"turn": 1, "step": 2})).endswith(
        "step 1 is still open"
    )
    open_turn = replayed(ev("turn/start", {"turn": 1}))
    assert refused(open_turn, ev("step/start", {"turn": 1, "step": 2})).endswith(
        "expected step 1, got 2"
    )
    after_one = replayed(
        ev("turn/start", {"turn": 1}),
        ev("step/start", {"turn": 1, "step": 1}),
        ev("step/end", {"turn": 1, "step": 1}),
    )
    assert refused(after_one, ev("step/start", {"turn": 1, "step": 1})).endswith(
        "expected step 2, got 1"
    )


@pytest.mark.parametrize("kind", ["step/end", "assistant/chunk", "assistant/message", "tool/call"])
def test_step_events_must_name_the_open_turn_and_step(kind: str) -> None:
    assert refused(in_step(), ev(kind, {"turn": 1, "step": 2}, seq=7)) == (
        f"session log invariant: {kind} at seq 7: names turn 1 step 2, open is turn 1 step 1"
    )
    assert refused(in_step(), ev(kind, {"turn": 2, "step": 1})).endswith(
        "names turn 2 step 1, open is turn 1 step 1"
    )


@pytest.mark.parametrize("kind", ["step/end", "assistant/chunk", "assistant/message", "tool/call"])
def test_step_events_outside_a_step_are_refused_even_naming_nothing(kind: str) -> None:
    assert refused(LogInvariant(), ev(kind, {"turn": 1, "step": 1})).endswith(
        "names turn 1 step 1, but no step is open"
    )
    # An event naming no turn and no step must not match the closed (None, None) state.
    assert refused(LogInvariant(), ev(kind, {})).endswith(
        "names turn None step None, but no step is open"
    )
    between_steps = replayed(ev("turn/start", {"turn": 1}))
    assert refused(between_steps, ev(kind, ["unreadable"])).endswith("but no step is open")


def test_a_tool_result_needs_an_open_turn() -> None:
    assert refused(LogInvariant(), result("c1")).endswith("a tool result needs an open turn")
    replace = ev(
        "tool/result",
        {"message": {}},
        surface_op={"op": "replace", "start": 0, "end": 0},
    )
    assert refused(LogInvariant(), replace).endswith("a tool result needs an open turn")


def test_an_appended_tool_result_needs_an_open_step() -> None:
    open_turn = replayed(ev("turn/start", {"turn": 1}))
    assert refused(open_turn, result("c1")).endswith("an appended tool result needs an open step")


def test_a_replacing_tool_result_needs_only_an_open_turn() -> None:
    invariant = replayed(ev("turn/start", {"turn": 1}))
    invariant.check(
        ev("tool/result", {"message": {}}, surface_op={"op": "replace", "start": 3, "end": 3})
    )


def test_an_appended_tool_result_must_name_the_open_step() -> None:
    invariant = in_step()
    invariant.check(ev("tool/call", {"turn": 1, "step": 1, "callId": "c1"}))
    assert refused(invariant, result("c1", step=2)).endswith(
        "names turn 1 step 2, open is turn 1 step 1"
    )


def test_a_tool_result_must_answer_a_pending_call_of_this_step() -> None:
    invariant = in_step()
    assert refused(invariant, result("c9")).endswith(
        "answers 'c9', which is not a pending call of this step"
    )
    invariant.check(ev("tool/call", {"turn": 1, "step": 1, "callId": "c1"}))
    invariant.check(result("c1"))
    assert refused(invariant, result("c1")).endswith(  # answered already
        "answers 'c1', which is not a pending call of this step"
    )
    no_source = ev("tool/result", {"turn": 1, "step": 1, "message": "x"}, surface_op="append")
    assert refused(invariant, no_source).endswith(
        "answers None, which is not a pending call of this step"
    )


def test_pending_calls_end_with_their_step() -> None:
    invariant = in_step()
    invariant.check(ev("tool/call", {"turn": 1, "step": 1, "callId": "c1"}))
    invariant.check(ev("step/end", {"turn": 1, "step": 1}))
    invariant.check(ev("step/start", {"turn": 1, "step": 2}))
    assert refused(invariant, result("c1", step=2)).endswith(
        "answers 'c1', which is not a pending call of this step"
    )


def test_a_synthetic_not_started_result_answers_no_pending_call() -> None:
    """Crash repair answers a call that never logged a tool/call (docs/design.md §9.1)."""
    invariant = in_step()
    invariant.check(result("c1", error={"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}))
    other = result("c2", error={"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"})
    assert refused(invariant, other).endswith(
        "answers 'c2', which is not a pending call of this step"
    )


@pytest.mark.parametrize(
    "kind", ["request/header", "request/header-delta", "request/context", "todo/write"]
)
def test_turn_events_outside_a_turn_are_refused(kind: str) -> None:
    assert refused(LogInvariant(), ev(kind, {}, seq=3)) == (
        f"session log invariant: {kind} at seq 3: must be inside an open turn"
    )


def test_a_refused_event_leaves_the_trace_as_it_was() -> None:
    invariant = in_step()
    refused(invariant, ev("step/start", {"turn": 1, "step": 2}))
    invariant.check(ev("step/end", {"turn": 1, "step": 1}))  # step 1 is still the open one
    invariant.check(ev("step/start", {"turn": 1, "step": 2}))


# --------------------------------------------------------------------------------------------
# LogInvariant on a session


CONFIG = LlmCallConfig(provider="p", model="m1")
HEADER = EpochHeader(config=CONFIG, system="sys")


def test_for_session_starts_from_the_existing_log_and_vetoes_appends() -> None:
    session = Session.create("s1", clock=lambda: 0)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("tool/call", {"turn": 1, "step": 1, "callId": "c1"})
    session.add_validator(LogInvariant.for_session(session))
    before = list(session.events)
    with pytest.raises(InvariantViolation, match="step/start at seq 3: step 1 is still open"):
        session.append("step/start", {"turn": 1, "step": 2})
    with pytest.raises(InvariantViolation, match="answers 'c9'"):
        session.append(
            "tool/result",
            {"turn": 1, "step": 1, "message": tool_result_message("c9", "x", id="r9").to_json()},
            surface_op="append",
            source_event_seqs=[2],
        )
    assert list(session.events) == before and session.seq == 3  # vetoed: nothing logged
    assert session.derive_messages() == []
    # The pending call from before the invariant was installed can be answered.
    session.append(
        "tool/result",
        {"turn": 1, "step": 1, "message": tool_result_message("c1", "x", id="r1").to_json()},
        surface_op="append",
        source_event_seqs=[2],
    )
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1})
    assert session.seq == 6


def test_a_fresh_invariant_on_a_session_mid_turn_would_refuse_what_for_session_accepts() -> None:
    session = Session.create("s1", clock=lambda: 0)
    session.append("turn/start", {"turn": 1})
    step_end = ev("step/start", {"turn": 1, "step": 1}, seq=1)
    LogInvariant.for_session(session).check(step_end)
    with pytest.raises(InvariantViolation, match="a step must open inside its open turn"):
        LogInvariant().check(step_end)


def test_the_invariant_is_a_session_validator() -> None:
    session = Session.create("s1", clock=lambda: 0)
    invariant = LogInvariant()
    remove = session.add_validator(invariant)
    with pytest.raises(InvariantViolation):
        session.append("step/start", {"turn": 1, "step": 1})
    remove()
    session.append("step/start", {"turn": 1, "step": 1})  # no validator: accepted
    assert session.seq == 1


# --------------------------------------------------------------------------------------------
# RequestInvariant


def request_for(session: Session, messages: Any = None) -> GenerateOptions:
    """The request a correct loop builds: the header, the session's message view."""
    return GenerateOptions(
        provider=CONFIG.provider,
        model=CONFIG.model,
        messages=session.message_view() if messages is None else messages,
        system=HEADER.system,
        session_id=session.id,
    )


def start_step(session: Session, step: int) -> int:
    seq = session.append("step/start", {"turn": 1, "step": step}).seq
    if session.request_header() is None:
        session.append("request/header", {"header": HEADER.to_json(), "reason": "initial"})
    return seq


def finish_step(session: Session, step: int, text: str) -> None:
    answer = assistant_message(text, provider="p", model="m1", id=f"a{step}")
    session.append(
        "assistant/message",
        {"turn": 1, "step": step, "message": answer.to_json()},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append("step/end", {"turn": 1, "step": step})


def conversation() -> Session:
    session = Session.create("s1", clock=lambda: 0)
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("hi", id="u1").to_json(), surface_op="append")
    return session


@pytest.fixture
def known_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``known_equal_messages`` of each comparison the invariant makes."""
    import dsh_core._invariants as invariants

    seen: list[int] = []
    real: Callable[..., tuple[str, ...]] = invariants.diff_requests  # type: ignore[attr-defined]

    def spy(expected: Any, actual: Any, **kw: Any) -> tuple[str, ...]:
        seen.append(kw.get("known_equal_messages", 0))
        return real(expected, actual, **kw)

    monkeypatch.setattr(invariants, "diff_requests", spy)
    return seen


def test_after_a_verified_request_only_new_messages_are_compared(known_spy: list[int]) -> None:
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    invariant.check(session, s1, request_for(session))
    finish_step(session, 1, "one")
    s2 = start_step(session, 2)
    invariant.check(session, s2, request_for(session))
    finish_step(session, 2, "two")
    s3 = start_step(session, 3)
    invariant.check(session, s3, request_for(session))
    assert known_spy == [0, 1, 2]  # each check trusts what the previous one verified
    assert invariant.checked == 3


def test_a_retry_of_the_same_request_trusts_all_of_it(known_spy: list[int]) -> None:
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    request = request_for(session)
    invariant.check(session, s1, request)
    invariant.check(session, s1, request)
    assert known_spy == [0, 1]


def test_a_surface_replace_forces_a_full_compare(known_spy: list[int]) -> None:
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    invariant.check(session, s1, request_for(session))
    finish_step(session, 1, "one")
    old_backing = session.message_view().backing
    session.append(
        "user/message",
        user_message("summary", id="sum").to_json(),
        surface_op={"op": "replace", "start": 1, "end": 1},
        source_event_seqs=[1],
    )
    s2 = start_step(session, 2)
    request = request_for(session)
    assert request.messages.backing is not old_backing  # type: ignore[attr-defined]
    invariant.check(session, s2, request)
    assert known_spy == [0, 0]
    assert [m.text for m in request.messages] == ["summary", "one"]


def test_requests_without_a_message_view_are_compared_in_full(known_spy: list[int]) -> None:
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    invariant.check(session, s1, request_for(session, tuple(session.derive_messages())))
    finish_step(session, 1, "one")
    s2 = start_step(session, 2)
    invariant.check(session, s2, request_for(session, tuple(session.derive_messages())))
    assert known_spy == [0, 0]


def test_a_tampered_earlier_message_in_a_new_list_is_caught() -> None:
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    invariant.check(session, s1, request_for(session))
    finish_step(session, 1, "one")
    s2 = start_step(session, 2)
    honest = session.message_view()
    tampered = [user_message("edited", id="u1"), *list(honest)[1:]]
    with pytest.raises(InvariantViolation) as info:
        invariant.check(session, s2, request_for(session, MessageView(tampered)))
    assert str(info.value).startswith(
        f"request of the step at seq {s2} is not a pure function of the log"
    )
    assert info.value.diff == (
        "messages[0].content[0].text differs: expected: 'hi', actual: 'edited'",
    )
    assert invariant.checked == 2


def test_a_failed_check_does_not_extend_what_is_trusted(known_spy: list[int]) -> None:
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    invariant.check(session, s1, request_for(session))
    finish_step(session, 1, "one")
    s2 = start_step(session, 2)
    wrong = GenerateOptions(
        provider="p", model="other", messages=session.message_view(), session_id="s1"
    )
    with pytest.raises(
        InvariantViolation, match=r"config\.model differs: expected: 'm1', actual: 'other'"
    ):
        invariant.check(session, s2, wrong)
    invariant.check(session, s2, request_for(session))
    assert known_spy == [0, 1, 1]  # still what the first (passing) check verified


def test_an_unlogged_extra_message_on_the_same_backing_is_still_caught() -> None:
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    invariant.check(session, s1, request_for(session))
    finish_step(session, 1, "one")
    s2 = start_step(session, 2)
    # The session's list grows after the boundary; a view over more of it is caught by count.
    session.append("user/message", user_message("late", id="late").to_json(), surface_op="append")
    with pytest.raises(InvariantViolation) as info:
        invariant.check(session, s2, request_for(session))
    assert info.value.diff == (
        "messages: expected has 2, actual has 3 (first extra: messages[2] 'late')",
    )


def test_tool_calls_survive_the_fast_path() -> None:
    """A tool call and its result in the history compare like any other messages."""
    session, invariant = conversation(), RequestInvariant()
    s1 = start_step(session, 1)
    invariant.check(session, s1, request_for(session))
    call = assistant_message(
        [ToolCallBlock(id="c1", name="read", arguments="{}")], provider="p", model="m1", id="a1"
    )
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": call.to_json()},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append(
        "tool/result",
        {"turn": 1, "step": 1, "message": tool_result_message("c1", "ok", id="r1").to_json()},
        surface_op="append",
    )
    session.append("step/end", {"turn": 1, "step": 1})
    s2 = start_step(session, 2)
    request = request_for(session)
    invariant.check(session, s2, request)
    assert len(request.messages) == 3
