"""The main line and what branches off it: a change undone is charged against the request before
it, side calls (marked or not) are branches charged nothing and reported apart, a session id
reused by unrelated runs starts new conversations, a reset cache is cold, and a clock in the
system prompt is a risk before it costs anything."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dsh_testkit.doctor import diagnose
from dsh_testkit.traces import LogEvent

from ._bodies import (
    SYSTEM,
    TOOLS,
    Traffic,
    assistant,
    body,
    floor,
    system,
    tokens_before,
    tool_result,
    user,
)

KEY = [("x-dsh-conversation", "s-1")]


def _steps(count: int, first: str = "Fix the failing test.") -> list[list[dict[str, Any]]]:
    """The messages of ``count`` requests of a tool-using main line (answers included)."""
    out: list[list[dict[str, Any]]] = []
    messages: list[dict[str, Any]] = [system(SYSTEM), user(first)]
    for step in range(count):
        out.append(list(messages))
        answer = _answer(step)
        messages = [*messages, answer, tool_result(f"call_{step}", f"contents of f{step}.py")]
    return out


def _answer(step: int) -> dict[str, Any]:
    return assistant(
        reasoning=f"Step {step}: read it.",
        calls=[(f"call_{step}", "read_file", f'{{"path": "f{step}.py"}}')],
    )


def test_a_change_undone_is_charged_against_the_request_before_it() -> None:
    # The tool order flips on the fourth request and flips back on the fifth: both lose, and
    # what they lose adds up to what the hits fell by (the fifth starts with the third's whole
    # prompt, but could have reused the fourth's had it only appended to it).
    clean, flipped = Traffic(), Traffic()
    for step, messages in enumerate(_steps(6)):
        clean.add(body(messages), answer=_answer(step))
        tools = TOOLS[::-1] if step == 3 else TOOLS
        flipped.add(body(messages, tools=tools), answer=_answer(step))
    before, after = diagnose(clean.trace()), diagnose(flipped.trace())
    fell = sum(r.hit_tokens or 0 for r in before.requests) - sum(
        r.hit_tokens or 0 for r in after.requests
    )
    fourth, fifth = after.requests[3], after.requests[4]
    assert (fourth.parent, fourth.relation) == (2, "diverges")
    assert (fifth.parent, fifth.relation) == (3, "diverges")
    assert fourth.lost_tokens > 0 and fifth.lost_tokens > 0
    [cause] = [f for f in fifth.findings if f.severity == "loss"]
    assert cause.code == "tools-changed" and cause.lost_tokens == fifth.lost_tokens
    assert any("returns to the shape of request #3" in e for e in cause.evidence)
    assert after.totals.lost_tokens == fell


def test_an_unmarked_compaction_call_is_a_side_call_and_the_compaction_is_charged_once() -> None:
    traffic = Traffic()
    steps = _steps(4)
    for step, messages in enumerate(steps):
        traffic.add(body(messages), answer=_answer(step), headers=KEY)
    last = [*steps[-1], _answer(3), tool_result("call_3", "contents of f3.py")]
    # The harness's compaction: the history's head replayed with the instruction (no header).
    head = last[:4]
    summary = "Summary: the failing test reads f0.py; the fix is in progress. " * 12
    traffic.add(
        body([*head, user("Summarise the conversation so far.")]),
        answer=assistant(summary),
        headers=KEY,
    )
    # The main line goes on from a checkpoint (no assistant turn left in it).
    after = body([system(SYSTEM), user(f"<checkpoint>{summary}</checkpoint>"), user("Go on.")])
    traffic.add(after, answer=assistant("Done."), headers=KEY)
    report = diagnose(traffic.trace())
    [conversation] = report.conversations
    side, resumed = conversation.requests[4], conversation.requests[5]
    assert side.relation == "branch" and side.parent == 1  # it replays #2 whole, then asks
    assert side.findings == () and side.lost_tokens == 0
    assert (resumed.parent, resumed.relation) == (3, "diverges")  # never the side call
    [cause] = [f for f in resumed.findings if f.severity == "loss"]
    assert cause.code == "history-rewritten"
    assert report.totals.lost_tokens == cause.lost_tokens  # charged once
    assert conversation.side_totals.requests == 1 and conversation.totals.requests == 5


def test_unrelated_runs_reusing_one_session_id_are_conversations_of_their_own() -> None:
    traffic = Traffic()
    for first in ("Fix the failing test.", "Review the client.", "Update the docs."):
        for step, messages in enumerate(_steps(3, first)):
            traffic.add(body(messages), answer=_answer(step), headers=KEY)
    report = diagnose(traffic.trace())
    assert [c.key for c in report.conversations] == ["s-1", "s-1 · 2", "s-1 · 3"]
    assert [f for r in report.requests for f in r.findings] == []
    assert [r.relation for r in report.conversations[1].requests] == [
        "first",
        "extends",
        "extends",
    ]


def test_a_reset_cache_is_cold_not_a_provider_miss() -> None:
    traffic = Traffic()
    for run in range(2):
        for step, messages in enumerate(_steps(3)):
            request = body(messages)
            hit = 0 if step == 0 else floor(tokens_before(request, len(messages) - 1))
            exchange = traffic.add(request, answer=_answer(step), hit=hit)
            if run == 1 and step == 0:
                reset = LogEvent(seq=0, kind="reset", detail="the upstream's cache was reset")
                traffic.exchanges[-1] = type(exchange)(
                    **{
                        **{f: getattr(exchange, f) for f in exchange.__dataclass_fields__},
                        "log_events": (reset,),
                    }
                )
    report = diagnose(traffic.trace())
    assert [len(c.requests) for c in report.conversations] == [3, 3]
    second = report.conversations[1].requests[0]
    assert second.relation == "first" and second.findings == ()
    assert second.log_events == ("the upstream's cache was reset",)
    assert report.counts() == {}


def test_a_clock_in_the_system_prompt_is_a_risk_before_it_costs() -> None:
    day = datetime(2026, 12, 7, 15, 30, tzinfo=UTC).timestamp()
    for text, started, risky in (
        (f"Current time: 2026-12-07 15:30:02\n{SYSTEM}", None, True),
        (f"Today is 2026-12-07.\n{SYSTEM}", day, True),  # the request's own date
        (f"Today is 2026-12-07.\n{SYSTEM}", None, False),  # a date, maybe a fixed one
        (f"Knowledge cutoff: 2024-06-01.\n{SYSTEM}", day, False),
        (f"Office hours: 09:00-17:00.\n{SYSTEM}", day, False),
    ):
        traffic = Traffic()
        traffic.add(body([system(text), user("Hi.")]), answer=assistant("Hi."), started=started)
        [request] = diagnose(traffic.trace()).requests
        risks = [f for f in request.findings if f.code == "volatile-system-text"]
        assert bool(risks) == risky, text
        if risks:
            assert risks[0].severity == "note"
            assert "a risk, not a loss yet" in risks[0].detail
