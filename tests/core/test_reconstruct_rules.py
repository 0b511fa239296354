"""Reconstruction over hand-built logs: the boundary rules, attempt splitting, single-step
rebuilds and the incremental ``RequestWitness``. (The reference harness's real logs are in
``test_reconstruct.py``; the loop's own logs in the loop tests.)"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import (
    CorruptLogError,
    EpochHeader,
    Event,
    LlmCallConfig,
    Session,
    assistant_message,
    reconstruct_request,
    reconstruct_requests,
    user_message,
)
from dsh_core._reconstruct import RequestWitness, detect_boundary_rule

CONFIG = LlmCallConfig(provider="p", model="m1")


class Log:
    """Appends hand-built events with contiguous seqs (no session rules: shapes only)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, type_: str, data: Any = None, **extra: Any) -> Event:
        event = Event(
            type=type_, seq=len(self.events), time=0, data={} if data is None else data, **extra
        )
        self.events.append(event)
        return event

    def turn(self, n: int) -> Event:
        return self.add("turn/start", {"turn": n})

    def end_turn(self, n: int) -> Event:
        return self.add("turn/end", {"turn": n, "reason": {"kind": "completed"}})

    def step(self, turn: int, step: int) -> Event:
        return self.add("step/start", {"turn": turn, "step": step})

    def end_step(self, turn: int, step: int) -> Event:
        return self.add("step/end", {"turn": turn, "step": step})

    def user(self, text: str) -> Event:
        return self.add(
            "user/message",
            user_message(text, id=f"u{len(self.events)}").to_json(),
            surface_op="append",
        )

    def header(
        self, system: str | None = None, reason: str = "initial", config: LlmCallConfig = CONFIG
    ) -> Event:
        header = EpochHeader(config=config, system=system)
        return self.add("request/header", {"header": header.to_json(), "reason": reason})

    def chunk(self, turn: int, step: int, chunk: dict[str, Any]) -> Event:
        return self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})

    def text(self, turn: int, step: int, text: str) -> Event:
        return self.chunk(turn, step, {"type": "text-delta", "index": 0, "text": text})

    def finish(self, turn: int, step: int, kind: str = "stop") -> Event:
        return self.chunk(turn, step, {"type": "finish", "reason": {"kind": kind}})

    def answer(self, turn: int, step: int, text: str, seqs: tuple[int, ...] | None) -> Event:
        message = assistant_message(text, provider="p", model="m1", id=f"a{len(self.events)}")
        return self.add(
            "assistant/message",
            {"turn": turn, "step": step, "message": message.to_json()},
            surface_op="append",
            source_event_seqs=seqs,
        )


def texts(request: Any) -> list[str]:
    return [m.text for m in request.messages]


# --------------------------------------------------------------------------------------------
# detect_boundary_rule


def test_an_empty_log_follows_this_design() -> None:
    assert detect_boundary_rule([]) == "step-start"


def test_a_log_without_any_turn_content_follows_this_design() -> None:
    log = Log()
    log.user("outside any turn")  # not a turn's prompt: it decides nothing
    log.turn(1)
    log.step(1, 1)
    log.end_step(1, 1)
    assert detect_boundary_rule(log.events) == "step-start"


def test_a_prompt_before_the_first_step_is_this_design() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    log.step(1, 1)
    assert detect_boundary_rule(log.events) == "step-start"


def test_a_prompt_after_the_first_step_start_is_the_reference_harness() -> None:
    log = Log()
    log.turn(1)
    log.step(1, 1)
    log.user("hi")
    assert detect_boundary_rule(log.events) == "first-chunk"


def test_the_first_turn_with_a_prompt_decides_and_later_turns_do_not() -> None:
    log = Log()
    log.turn(1)  # a turn with no surface append decides nothing
    log.step(1, 1)
    log.end_step(1, 1)
    log.end_turn(1)
    log.turn(2)
    log.step(2, 1)
    log.user("late prompt")  # the first prompt: after step/start
    log.end_step(2, 1)
    log.end_turn(2)
    log.turn(3)
    log.user("early prompt")  # a later turn cannot change the decision
    log.step(3, 1)
    assert detect_boundary_rule(log.events) == "first-chunk"


def test_a_step_start_outside_a_turn_and_a_surface_replace_decide_nothing() -> None:
    log = Log()
    log.step(1, 1)  # outside a turn: not "the first turn's step"
    log.turn(1)
    first = log.user("hi")
    log.add(
        "user/message",
        user_message("summary", id="s").to_json(),
        surface_op={"op": "replace", "start": first.seq, "end": first.seq},
    )
    assert detect_boundary_rule(log.events) == "step-start"  # decided by the append only
    log2 = Log()
    log2.step(1, 1)
    log2.turn(1)
    log2.add(
        "user/message",
        user_message("x", id="x").to_json(),
        surface_op={"op": "replace", "start": 0, "end": 0},
    )
    log2.step(1, 1)
    log2.user("after the step")
    assert detect_boundary_rule(log2.events) == "first-chunk"


@pytest.mark.parametrize("marker", ["request/context", "agent/inbox/spliced", "session/title"])
def test_reference_only_event_types_mean_the_reference_harness(marker: str) -> None:
    log = Log()
    log.add(marker, {"turn": 1})
    log.turn(1)
    log.user("hi")  # the first turn alone would say step-start
    log.step(1, 1)
    assert detect_boundary_rule(log.events) == "first-chunk"


def test_this_design_s_markers_win_over_reference_markers_and_the_first_turn() -> None:
    def reference_shaped() -> Log:
        log = Log()
        log.add("request/context", {})
        log.turn(1)
        log.step(1, 1)
        log.user("hi")
        return log

    assert detect_boundary_rule(reference_shaped().events) == "first-chunk"
    for marker, data in [
        ("request/header-delta", {"system": None}),
        ("compact/start", {"turn": 1}),
        ("compact/summary", {}),
        ("compact/end", {"turn": 1}),
    ]:
        log = reference_shaped()
        log.add(marker, data)
        assert detect_boundary_rule(log.events) == "step-start", marker
    fallback = reference_shaped()
    fallback.header(reason="fallback")
    assert detect_boundary_rule(fallback.events) == "step-start"


def test_an_ordinary_header_snapshot_is_no_marker() -> None:
    log = Log()
    log.header(reason="initial")
    log.header(reason="change")
    log.add("request/header", ["not", "an", "object"])  # unreadable data: not a fallback
    log.turn(1)
    log.step(1, 1)
    log.user("hi")
    assert detect_boundary_rule(log.events) == "first-chunk"


# --------------------------------------------------------------------------------------------
# reconstruct_requests: attempts


def test_retries_are_runs_of_chunks_each_ended_by_a_finish() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    s1 = log.step(1, 1)
    h = log.header("sys")
    c0 = log.text(1, 1, "x")
    log.finish(1, 1, "error")
    log.add("llm/retry", {"turn": 1, "step": 1, "retry": 1})
    c1 = log.finish(1, 1, "error")  # an attempt that is a lone finish
    c2 = log.text(1, 1, "ok")
    log.finish(1, 1)
    log.answer(1, 1, "ok", (c2.seq, c2.seq + 1))
    log.end_step(1, 1)
    log.end_turn(1)
    rebuilt = list(reconstruct_requests(log.events, session_id="s1"))
    assert [(r.turn, r.step, r.attempt) for r in rebuilt] == [(1, 1, 0), (1, 1, 1), (1, 1, 2)]
    assert [r.first_response_seq for r in rebuilt] == [c0.seq, c1.seq, c2.seq]
    assert {r.boundary_seq for r in rebuilt} == {s1.seq}  # step-start: one boundary per step
    assert {r.step_start_seq for r in rebuilt} == {s1.seq}
    assert {r.header_seq for r in rebuilt} == {h.seq}
    assert all(texts(r.request) == ["hi"] for r in rebuilt)
    assert all(r.request.system == "sys" and r.request.session_id == "s1" for r in rebuilt)


def test_under_the_first_chunk_rule_each_attempt_has_its_own_boundary() -> None:
    log = Log()
    log.add("session/title", {"title": "t"})
    log.turn(1)
    log.step(1, 1)
    log.header()
    log.user("hi")
    c0 = log.finish(1, 1, "error")
    log.user("steered between attempts")
    c1 = log.text(1, 1, "ok")
    log.answer(1, 1, "ok", (c1.seq,))  # no finish: the message ends the attempt
    log.end_step(1, 1)
    rebuilt = list(reconstruct_requests(log.events))
    assert [r.boundary_seq for r in rebuilt] == [c0.seq, c1.seq]
    assert [texts(r.request) for r in rebuilt] == [["hi"], ["hi", "steered between attempts"]]
    assert rebuilt[0].request.session_id is None


def test_an_explicit_rule_overrides_detection() -> None:
    log = Log()
    log.turn(1)
    log.user("before")
    s1 = log.step(1, 1)
    log.header()
    log.user("after")
    c = log.text(1, 1, "x")
    (by_design,) = reconstruct_requests(log.events)
    (by_chunk,) = reconstruct_requests(log.events, rule="first-chunk")
    assert (by_design.boundary_seq, texts(by_design.request)) == (s1.seq, ["before"])
    assert (by_chunk.boundary_seq, texts(by_chunk.request)) == (c.seq, ["before", "after"])


def test_a_chunkless_message_is_an_attempt_of_its_own() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    log.step(1, 1)
    log.header()
    empty = log.answer(1, 1, "", ())  # the adapter yielded nothing: sourceEventSeqs []
    log.end_step(1, 1)
    log.step(1, 2)
    unmarked = log.answer(1, 2, "", None)  # no sourceEventSeqs at all
    log.end_step(1, 2)
    rebuilt = list(reconstruct_requests(log.events))
    assert [(r.step, r.attempt, r.first_response_seq) for r in rebuilt] == [
        (1, 0, empty.seq),
        (2, 0, unmarked.seq),
    ]


def test_a_message_after_a_finished_run_citing_chunks_is_no_new_attempt() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    log.step(1, 1)
    log.header()
    c = log.text(1, 1, "a")
    f = log.finish(1, 1)
    log.answer(1, 1, "a", (c.seq, f.seq))
    log.end_step(1, 1)
    assert len(list(reconstruct_requests(log.events))) == 1


def test_responses_outside_a_step_are_not_requests() -> None:
    log = Log()
    log.header()
    log.text(0, 0, "stray chunk before any step")
    log.turn(1)
    log.user("hi")
    log.step(1, 1)
    log.finish(1, 1)
    log.end_step(1, 1)
    log.text(1, 1, "after the step")  # step/end closed it
    log.answer(1, 1, "late", ())
    log.step(1, 2)
    log.end_turn(1)  # turn/end closes an open step too
    log.finish(1, 2)
    assert [(r.step, r.attempt) for r in reconstruct_requests(log.events)] == [(1, 0)]


def test_chunks_without_a_readable_chunk_keep_the_attempt_open() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    log.step(1, 1)
    log.header()
    log.add("assistant/chunk", {"turn": 1, "step": 1})  # no chunk
    log.add("assistant/chunk", ["not", "an", "object"])
    log.text(1, 1, "still the first attempt")
    log.end_step(1, 1)
    assert [r.attempt for r in reconstruct_requests(log.events)] == [0]


def test_turn_and_step_default_to_zero_when_the_step_start_names_none() -> None:
    log = Log()
    log.header()
    log.add("step/start", ["unreadable"])
    log.finish(0, 0)
    log.add("step/start", {"turn": None})
    log.finish(0, 0)
    assert [(r.turn, r.step) for r in reconstruct_requests(log.events)] == [(0, 0), (0, 0)]


def test_a_request_with_no_header_before_it_names_its_seq() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    log.step(1, 1)
    chunk = log.text(1, 1, "x")
    with pytest.raises(CorruptLogError) as info:
        list(reconstruct_requests(log.events))
    assert str(info.value) == (
        f"the request at seq {chunk.seq} has no request header in the log before it"
    )
    assert info.value.seq == chunk.seq


def test_a_header_change_applies_from_the_next_request() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    log.step(1, 1)
    first = log.header("one")
    log.finish(1, 1)
    log.end_step(1, 1)
    log.step(1, 2)
    second = log.header("two", reason="change")
    log.finish(1, 2)
    rebuilt = list(reconstruct_requests(log.events))
    assert [(r.request.system, r.header_seq) for r in rebuilt] == [
        ("one", first.seq),
        ("two", second.seq),
    ]


# --------------------------------------------------------------------------------------------
# reconstruct_request


def two_step_log() -> tuple[Log, Event, Event]:
    log = Log()
    log.turn(1)
    log.user("hi")
    s1 = log.step(1, 1)
    log.header("sys")
    log.finish(1, 1, "error")
    c = log.text(1, 1, "a")
    log.finish(1, 1)
    log.answer(1, 1, "a", (c.seq, c.seq + 1))
    log.end_step(1, 1)
    s2 = log.step(1, 2)
    c2 = log.text(1, 2, "b")
    log.answer(1, 2, "b", (c2.seq,))
    log.end_step(1, 2)
    log.end_turn(1)
    return log, s1, s2


def test_reconstruct_request_matches_the_attempts_of_reconstruct_requests() -> None:
    log, s1, s2 = two_step_log()
    every = {
        (r.step_start_seq, r.attempt): r.request
        for r in reconstruct_requests(log.events, session_id="s")
    }
    assert set(every) == {(s1.seq, 0), (s1.seq, 1), (s2.seq, 0)}
    for (seq, attempt), request in every.items():
        assert reconstruct_request(log.events, seq, attempt=attempt, session_id="s") == request
    assert texts(every[(s2.seq, 0)]) == ["hi", "a"]


@pytest.mark.parametrize("seq", [-1, 0, 1, 99])
def test_a_seq_that_is_not_a_step_start_is_refused(seq: int) -> None:
    log, _, _ = two_step_log()
    with pytest.raises(CorruptLogError) as info:
        reconstruct_request(log.events, seq)
    assert str(info.value) == f"seq {seq} is not a step/start"
    assert info.value.seq == seq


@pytest.mark.parametrize(("step", "attempt"), [(0, 2), (0, -1), (1, 1)])
def test_an_attempt_the_step_does_not_have_is_refused(step: int, attempt: int) -> None:
    log, s1, s2 = two_step_log()
    seq = (s1, s2)[step].seq
    with pytest.raises(CorruptLogError) as info:
        reconstruct_request(log.events, seq, attempt=attempt)
    assert str(info.value) == f"the step at seq {seq} has no attempt {attempt} in the log"
    assert info.value.seq == seq


def test_an_unanswered_step_is_rebuilt_from_the_log_so_far() -> None:
    """What the dev invariant does before dispatch, under this design's rule."""
    log = Log()
    log.turn(1)
    log.user("hi")
    s1 = log.step(1, 1)
    log.header("sys")
    request = reconstruct_request(log.events, s1.seq, session_id="s")
    assert texts(request) == ["hi"] and request.system == "sys" and request.session_id == "s"
    with pytest.raises(CorruptLogError, match="has no attempt 1 in the log"):
        reconstruct_request(log.events, s1.seq, attempt=1)  # only the first attempt is owed


def test_an_unanswered_step_under_the_first_chunk_rule_is_refused() -> None:
    log = Log()
    log.turn(1)
    log.user("hi")
    s1 = log.step(1, 1)
    log.header("sys")
    with pytest.raises(CorruptLogError, match=f"the step at seq {s1.seq} has no attempt 0"):
        reconstruct_request(log.events, s1.seq, rule="first-chunk")


def test_an_unanswered_step_without_a_header_names_its_step_start() -> None:
    log = Log()
    log.turn(1)
    s1 = log.step(1, 1)
    with pytest.raises(CorruptLogError) as info:
        reconstruct_request(log.events, s1.seq)
    assert str(info.value) == (
        f"the request at seq {s1.seq} has no request header in the log before it"
    )


def test_a_cut_short_step_takes_no_header_from_a_later_turn() -> None:
    """A log cut inside a step (no step/end, no turn/end) that goes on with a new turn."""
    log = Log()
    log.turn(1)
    log.user("hi")
    s1 = log.step(1, 1)
    log.header("turn one's prompt")
    log.turn(2)  # no step/end, no turn/end: the process died
    log.header("turn two's prompt", reason="change")
    log.step(2, 1)
    assert reconstruct_request(log.events, s1.seq).system == "turn one's prompt"


# --------------------------------------------------------------------------------------------
# RequestWitness


def live_session(session_id: str = "s1", prompt: str = "hi") -> Session:
    session = Session.create(session_id, clock=lambda: 0)
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message(prompt, id="u1").to_json(), surface_op="append")
    return session


def open_step(session: Session, step: int, system: str = "sys") -> int:
    start = session.append("step/start", {"turn": 1, "step": step})
    header = EpochHeader(config=CONFIG, system=system)
    if session.request_header() != header:
        session.append(
            "request/header",
            {"header": header.to_json(), "reason": "initial" if step == 1 else "change"},
        )
    return start.seq


def answer(session: Session, step: int, text: str) -> None:
    message = assistant_message(text, provider="p", model="m1", id=f"a{step}")
    session.append(
        "assistant/message",
        {"turn": 1, "step": step, "message": message.to_json()},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append("step/end", {"turn": 1, "step": step})


def test_the_witness_follows_a_growing_log() -> None:
    session, witness = live_session(), RequestWitness()
    s1 = open_step(session, 1)
    assert texts(witness.expected(session.events, s1, "s1")) == ["hi"]
    answer(session, 1, "one")
    s2 = open_step(session, 2, system="changed")
    second = witness.expected(session.events, s2, "s1")
    assert texts(second) == ["hi", "one"] and second.system == "changed"
    assert second == reconstruct_request(session.events, s2, session_id="s1")


def test_the_witness_refolds_for_an_earlier_step() -> None:
    session, witness = live_session(), RequestWitness()
    s1 = open_step(session, 1)
    answer(session, 1, "one")
    s2 = open_step(session, 2)
    witness.expected(session.events, s2, "s1")
    again = witness.expected(session.events, s1, "s1")
    assert texts(again) == ["hi"]


def test_the_witness_refolds_for_another_log_of_the_same_shape() -> None:
    a, b, witness = live_session(prompt="log A"), live_session(prompt="log B"), RequestWitness()
    a1, b1 = open_step(a, 1), open_step(b, 1, system="B's prompt")
    assert texts(witness.expected(a.events, a1, "s1")) == ["log A"]
    for_b = witness.expected(b.events, b1, "s1")
    assert texts(for_b) == ["log B"] and for_b.system == "B's prompt"


def test_the_witness_refolds_for_another_longer_log() -> None:
    a, b, witness = live_session(prompt="log A"), live_session(prompt="log B"), RequestWitness()
    a1 = open_step(a, 1)
    witness.expected(a.events, a1, "s1")
    open_step(b, 1)
    answer(b, 1, "b one")
    b2 = open_step(b, 2)
    assert texts(witness.expected(b.events, b2, "s1")) == ["log B", "b one"]


def test_the_witness_refolds_for_a_shorter_log() -> None:
    long, witness = live_session(prompt="long"), RequestWitness()
    open_step(long, 1)
    answer(long, 1, "one")
    long2 = open_step(long, 2)
    witness.expected(long.events, long2, "s1")
    short = live_session(prompt="short")
    s1 = open_step(short, 1, system="short's")
    request = witness.expected(short.events, s1, "s1")
    assert texts(request) == ["short"] and request.system == "short's"


def test_the_witness_needs_a_header() -> None:
    session = live_session()
    start = session.append("step/start", {"turn": 1, "step": 1})
    with pytest.raises(CorruptLogError, match=f"the request at seq {start.seq} has no request"):
        RequestWitness().expected(session.events, start.seq, "s1")
