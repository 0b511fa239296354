"""Conversations as branches: each request is compared with the request it extends, so side
calls never make the main line look rewritten, unrelated one-shot requests never merge, and a
run that starts over is a new conversation."""

from __future__ import annotations

from dsh_testkit.doctor import conversations, diagnose

from ._bodies import (
    SYSTEM,
    Traffic,
    assistant,
    body,
    floor,
    prompt_tokens,
    system,
    tokens_before,
    tool_result,
    user,
)

SESSION = [("x-deepseek-harness-session-id", "s-1")]


def _main_line(traffic: Traffic, *, side_calls: bool, headers=(), warm: bool = False) -> None:
    """A tool-using main line; with ``side_calls``, a compaction call after each step."""
    messages = [system(SYSTEM), user("Fix the failing test.")]
    for step in range(4):
        request = body(messages)
        answer = assistant(
            reasoning=f"Step {step}: look closer.",
            calls=[(f"call_{step}", "read_file", f'{{"path": "f{step}.py"}}')],
        )
        if step == 0:  # a warm cache (a run started over) hits the first request's input
            hit = floor(prompt_tokens(request) - 2) if warm else 0
        else:
            hit = floor(tokens_before(request, len(messages) - 1))
        traffic.add(request, answer=answer, hit=hit, headers=headers)
        messages = [*messages, answer, tool_result(f"call_{step}", f"contents of f{step}.py")]
        if side_calls:
            compact = body([*messages, user("Summarise the conversation so far.")])
            traffic.add(
                compact,
                answer=assistant("Summary."),
                hit=floor(tokens_before(compact, len(messages))),
                headers=[*headers, ("x-deepseek-harness-compact", "1")],
            )


def test_compaction_side_calls_branch_off_and_the_main_line_still_extends() -> None:
    traffic = Traffic()
    _main_line(traffic, side_calls=True, headers=SESSION)
    report = diagnose(traffic.trace())
    [conversation] = report.conversations
    assert conversation.key == "s-1"
    main = [r for r in conversation.requests if r.index % 2 == 0]
    side = [r for r in conversation.requests if r.index % 2 == 1]
    assert [r.parent for r in main] == [None, 0, 2, 4]  # never a side call
    assert all(r.relation == "extends" for r in main[1:])
    assert all(r.relation == "branch" and r.parent == r.index - 1 for r in side)
    assert all(r.findings == () for r in conversation.requests)
    assert conversation.totals.efficiency == 1.0
    # The side calls are reported apart, with their own figures.
    assert conversation.totals.requests == 4 and conversation.side_totals.requests == 4
    assert conversation.side_totals.efficiency == 1.0


def test_the_same_run_reports_the_same_efficiency_with_or_without_its_side_calls() -> None:
    with_side, without = Traffic(), Traffic()
    _main_line(with_side, side_calls=True, headers=SESSION)
    _main_line(without, side_calls=False, headers=SESSION)
    assert diagnose(with_side.trace()).totals.efficiency == 1.0
    assert diagnose(without.trace()).totals.efficiency == 1.0


def test_unrelated_one_shot_requests_do_not_merge() -> None:
    traffic = Traffic()
    for question in ("What is 2 + 2?", "Name a prime.", "Spell 'cache'."):
        traffic.add(body([system(SYSTEM), user(question)]), answer=assistant("ok"), hit=0)
    found = conversations(traffic.trace())
    assert [len(c) for c in found] == [1, 1, 1]
    assert diagnose(traffic.trace()).counts() == {}


def test_a_run_started_again_from_its_first_message_is_a_new_conversation() -> None:
    traffic = Traffic()
    _main_line(traffic, side_calls=False)
    _main_line(traffic, side_calls=False, warm=True)
    report = diagnose(traffic.trace())
    assert [len(c.requests) for c in report.conversations] == [4, 4]
    second_run_first = report.conversations[1].requests[0]
    assert second_run_first.parent == 0 and second_run_first.relation == "repeats"
    assert report.counts() == {}


def test_an_explicit_key_splits_runs_that_share_every_prefix() -> None:
    traffic = Traffic()
    _main_line(traffic, side_calls=False, headers=[("x-dsh-conversation", "run-a")])
    _main_line(traffic, side_calls=False, headers=[("x-dsh-conversation", "run-b")])
    assert [c.key for c in conversations(traffic.trace())] == ["run-a", "run-b"]


def test_a_truncated_history_is_compared_with_the_request_it_cuts() -> None:
    traffic = Traffic()
    _main_line(traffic, side_calls=False)
    last = traffic.exchanges[-1].body
    cut = body([last["messages"][0], *last["messages"][3:]])
    traffic.add(cut, hit=floor(tokens_before(cut, 1)))
    diagnosis = diagnose(traffic.trace()).requests[-1]
    assert diagnosis.relation == "diverges" and diagnosis.parent is not None
    [finding] = diagnosis.findings
    assert finding.code == "history-rewritten"
    assert finding.severity == "loss" and finding.lost_tokens == diagnosis.lost_tokens > 0


def test_a_truncation_shows_every_message_it_says_was_removed() -> None:
    for removed in (2, 6):
        traffic = Traffic()
        messages = [system(SYSTEM)]
        for turn in range(1, 5):
            messages.append(user(f"Question {turn}: what does f{turn}.py do?"))
            request = body(messages)
            answer = assistant(f"Answer {turn}.")
            traffic.add(
                request, answer=answer, hit=floor(tokens_before(request, len(messages) - 1))
            )
            messages.append(answer)
        cut = body([messages[0], *messages[1 + removed :], user("And now?")])
        traffic.add(cut, hit=floor(tokens_before(cut, 1)))
        [finding] = diagnose(traffic.trace()).requests[-1].findings
        assert finding.code == "history-rewritten"
        assert finding.detail.startswith(
            f"{removed} messages were removed from messages[1] on (truncation): the previous "
            "request had 8 messages"
        )
        listed = [line for line in finding.evidence if line.startswith("removed messages[")]
        assert listed[:2] == [
            "removed messages[1] (user): 'Question 1: what does f1.py do?'",
            "removed messages[2] (assistant): 'Answer 1.'",
        ]
        assert len(listed) == min(removed, 4)
        more = [line for line in finding.evidence if line.startswith("… and ")]
        assert more == ([f"… and {removed - 4} more"] if removed > 4 else [])


def test_a_refused_request_is_never_a_parent() -> None:
    traffic = Traffic()
    first = body([system(SYSTEM), user("Go.")], tools=None)
    traffic.add(first, answer=assistant("ok"), hit=0)
    second = body([system(SYSTEM), user("Go."), assistant("ok"), user("More.")], tools=None)
    traffic.add(second, status=400, error="bad request")
    traffic.add(second, answer=assistant("done"), hit=floor(tokens_before(second, 2)))
    requests = diagnose(traffic.trace()).requests
    assert requests[2].parent == 0
    assert requests[1].codes == ("request-refused",)
