"""The doctor's verdicts on traffic built request by request, with the figures a provider
would report: every loss of a unit or more has a cause, no cause claims a loss the figures do
not show, and the words fit the change."""

from __future__ import annotations

import json
from typing import Any

from dsh_testkit.doctor import diagnose, report_text

from ._bodies import (
    SYSTEM,
    Traffic,
    assistant,
    body,
    floor,
    system,
    tokens_before,
    tool_result,
    user,
)

CALL = ("call_1", "read_file", '{"path": "README.md"}')


def _turn(
    sys_text: str = SYSTEM, **params: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A first request, the model's tool call, and the next request that resends it."""
    first = body([system(sys_text), user("What does the README say?")], **params)
    answer = assistant(reasoning="I should read it.", calls=[CALL])
    second = body(
        [
            system(sys_text),
            user("What does the README say?"),
            answer,
            tool_result("call_1", "# Project\nA tool for testing agents."),
        ],
        **params,
    )
    return first, answer, second


def test_a_pure_extension_that_hit_everything_lost_nothing() -> None:
    first, answer, second = _turn()
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    reusable = floor(tokens_before(second, 3))  # through the model's answer
    traffic.add(second, answer=assistant("It says hello."), hit=reusable)
    report = diagnose(traffic.trace())
    [conversation] = report.conversations
    second_diagnosis = conversation.requests[1]
    assert second_diagnosis.parent == 0 and second_diagnosis.relation == "extends"
    assert second_diagnosis.reusable_tokens == reusable
    assert second_diagnosis.lost_tokens == 0
    assert second_diagnosis.findings == ()
    assert conversation.totals.efficiency == 1.0


def test_a_miss_of_exactly_one_unit_is_explained() -> None:
    first, answer, second = _turn()
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    reusable = floor(tokens_before(second, 3))
    traffic.add(second, hit=reusable - 128)
    diagnosis = diagnose(traffic.trace()).requests[1]
    assert diagnosis.lost_tokens == 128
    [finding] = diagnosis.findings
    assert finding.code == "provider-miss"
    assert finding.severity == "loss" and finding.lost_tokens == 128


def test_a_timestamp_in_the_system_prompt_is_volatile_and_names_the_characters() -> None:
    first, answer, _second = _turn(sys_text=SYSTEM + "Now: 2026-12-03T10:00:00Z")
    _, _, changed = _turn(sys_text=SYSTEM + "Now: 2026-12-03T10:00:07Z")
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(changed, hit=floor(tokens_before(changed, 0)))
    diagnosis = diagnose(traffic.trace()).requests[1]
    [finding] = diagnosis.findings
    assert finding.code == "volatile-system-text"
    assert finding.severity == "loss" and finding.lost_tokens == diagnosis.lost_tokens > 0
    assert "'2026-12-03T10:00:00Z' → '2026-12-03T10:00:07Z'" in finding.detail
    assert finding.diff is not None and finding.diff.spans == ("0", "7")


def test_a_deliberate_code_word_change_is_an_edit_not_volatile() -> None:
    first, answer, _ = _turn(sys_text=SYSTEM + "The code word is XKCD7392.")
    _, _, changed = _turn(sys_text=SYSTEM + "The code word is PURPLE-ELEPHANT-42.")
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(changed, hit=floor(tokens_before(changed, 0)))
    [finding] = diagnose(traffic.trace()).requests[1].findings
    assert finding.code == "system-changed"
    assert "XKCD7392" in finding.detail and "PURPLE-ELEPHANT-42" in finding.detail


def test_a_system_message_moved_after_the_history_is_named_as_moved() -> None:
    first, answer, _ = _turn()
    moved = body(
        [
            user("What does the README say?"),
            answer,
            tool_result("call_1", "# Project"),
            system(SYSTEM),
        ]
    )
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(moved, hit=0)
    [finding] = diagnose(traffic.trace()).requests[1].findings
    assert finding.code == "system-moved"
    assert "messages[3]" in finding.detail
    assert finding.severity == "loss"


def test_strict_false_on_a_tool_is_not_rendered_and_is_no_finding() -> None:
    first, answer, second = _turn()
    strict = {
        **second,
        "tools": [{**t, "function": {**t["function"], "strict": False}} for t in second["tools"]],
    }
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(strict, hit=floor(tokens_before(strict, 3)))
    diagnosis = diagnose(traffic.trace()).requests[1]
    assert diagnosis.findings == ()
    assert diagnosis.lost_tokens == 0


def test_a_parameter_outside_the_cache_key_claims_nothing() -> None:
    first, answer, _second = _turn(reasoning_effort="high")
    _, _, changed = _turn(reasoning_effort="max")
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(changed, hit=floor(tokens_before(changed, 3)))
    assert diagnose(traffic.trace()).requests[1].findings == ()


def test_a_model_change_is_params_changed_with_the_loss() -> None:
    first, answer, _ = _turn()
    _, _, changed = _turn(model="deepseek-v4-pro")
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(changed, hit=0)
    diagnosis = diagnose(traffic.trace()).requests[1]
    [finding] = diagnosis.findings
    assert finding.code == "params-changed" and finding.where == "model"
    assert finding.lost_tokens == diagnosis.lost_tokens > 0


def test_empty_arguments_resent_as_an_object_are_reserialized_and_rendered() -> None:
    first = body([system(SYSTEM), user("Run the tests.")])
    answer = assistant(reasoning="Run them.", calls=[("call_9", "run_tests", "")])
    resent = assistant(reasoning="Run them.", calls=[("call_9", "run_tests", "{}")])
    second = body([system(SYSTEM), user("Run the tests."), resent, tool_result("call_9", "ok")])
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(second, hit=floor(tokens_before(second, 2)))
    diagnosis = diagnose(traffic.trace()).requests[1]
    [finding] = diagnosis.findings
    assert finding.code == "tool-args-reserialized" and finding.rendered
    assert finding.evidence == ("produced: ", "sent:     {}")


def test_spacing_only_reserialization_costs_nothing_under_the_v4_template() -> None:
    first, answer, second = _turn()
    compact = assistant(
        reasoning="I should read it.", calls=[("call_1", "read_file", '{"path":"README.md"}')]
    )
    second["messages"][2] = compact
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(second, hit=floor(tokens_before(second, 3)))
    diagnosis = diagnose(traffic.trace()).requests[1]
    [finding] = diagnosis.findings
    assert finding.code == "tool-args-reserialized"
    assert finding.severity == "note" and not finding.rendered
    assert "cost nothing" in finding.detail
    assert diagnosis.lost_tokens == 0


def test_spacing_reserialization_where_the_hit_stopped_is_the_cause() -> None:
    # An older template rendered the arguments' text: the hit stopped at the resent turn.
    first, _, second = _turn()
    thought = "I should read the file first, then summarise it in two sentences. " * 12
    answer = assistant(reasoning=thought, calls=[CALL])
    second["messages"][2] = assistant(
        reasoning=thought, calls=[("call_1", "read_file", '{"path":"README.md"}')]
    )
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(second, hit=floor(tokens_before(second, 2)))
    diagnosis = diagnose(traffic.trace()).requests[1]
    [finding] = diagnosis.findings
    assert finding.code == "tool-args-reserialized" and finding.severity == "loss"
    assert "rendered this difference" in finding.detail
    assert diagnosis.lost_tokens == finding.lost_tokens > 0


def test_a_refused_request_shows_the_status_the_error_and_the_rule() -> None:
    first, answer, second = _turn()
    del second["messages"][2]["reasoning_content"]
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    message = "The `reasoning_content` in the thinking mode must be passed back to the API."
    traffic.add(second, status=400, error=message)
    diagnosis = diagnose(traffic.trace()).requests[1]
    codes = {f.code: f for f in diagnosis.findings}
    assert set(codes) == {"reasoning-dropped", "request-refused"}
    assert codes["reasoning-dropped"].severity == "refusal"
    refused = codes["request-refused"]
    assert refused.severity == "refusal" and "status 400" in refused.detail
    assert message in refused.detail and "messages[2]" in refused.detail
    assert diagnosis.hit_tokens is None and not diagnosis.measured


def test_when_two_changes_apply_the_first_divergence_limits_the_hit() -> None:
    first, answer, second = _turn(sys_text=SYSTEM + "Today is Monday.")
    second["messages"][0] = system(SYSTEM + "Today is Tuesday.")
    second["tools"] = list(reversed(second["tools"]))
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(second, hit=floor(tokens_before(second, 0)))
    findings = diagnose(traffic.trace()).requests[1].findings
    assert [f.code for f in findings] == ["volatile-system-text", "tools-changed"]
    assert findings[0].severity == "loss" and findings[0].lost_tokens > 0
    assert findings[1].severity == "note"
    assert "already limited by volatile-system-text" in findings[1].detail


def test_a_change_repeated_over_requests_is_one_group() -> None:
    traffic = Traffic()
    history: list[dict[str, Any]] = [user("Start.")]
    previous_answer = None
    for minute in range(6):
        sys_text = SYSTEM + f"Time: 10:0{minute}"
        if previous_answer is not None:
            history += [previous_answer, user(f"Step {minute}.")]
        request = body([system(sys_text), *history], tools=None)
        previous_answer = assistant(f"Done {minute}.")
        traffic.add(request, answer=previous_answer, hit=0)
    conversation = diagnose(traffic.trace()).conversations[0]
    [group] = conversation.groups
    assert group.code == "volatile-system-text"
    assert group.label == "#2–#6" and len(group.requests) == 5


def test_below_cache_unit_is_noted_once_and_never_beside_a_hit() -> None:
    traffic = Traffic()
    short = body([user("hi")], tools=None)
    answer = assistant("hello")
    long_question = "Now explain, step by step, how a prefix cache decides what to reuse. " * 8
    traffic.add(short, answer=answer, hit=0)
    second = body([user("hi"), answer, user(long_question)], tools=None)
    traffic.add(second, answer=answer, hit=0)
    third = body([user("hi"), answer, user(long_question), answer, user("more")], tools=None)
    traffic.add(third, hit=0)
    requests = diagnose(traffic.trace()).requests
    assert [r.codes for r in requests] == [(), ("below-cache-unit",), ("provider-miss",)]
    assert requests[1].findings[0].severity == "note"
    assert "below one 128-token unit" in requests[1].findings[0].detail


def test_below_cache_unit_is_not_noted_on_a_prompt_shorter_than_a_unit() -> None:
    traffic = Traffic()
    short = body([user("hi")], tools=None)
    traffic.add(short, answer=assistant("hello"), hit=0)
    traffic.add(body([user("hi"), assistant("hello"), user("again")], tools=None), hit=0)
    assert [r.codes for r in diagnose(traffic.trace()).requests] == [(), ()]


def test_a_lone_surrogate_in_a_request_is_diagnosed() -> None:
    traffic = Traffic()
    first = body([system(SYSTEM), user("broken \ud800 text")])
    traffic.add(first, answer=assistant("ok"), hit=0)
    traffic.add(
        body([system(SYSTEM), user("broken \ud800 text"), assistant("ok"), user("go")]), hit=0
    )
    report = diagnose(traffic.trace())
    assert [r.relation for r in report.requests] == ["first", "extends"]


def test_a_running_clock_is_one_finding_wherever_its_first_changed_digit_falls() -> None:
    # 10:09:58.306277 → .309780 → .313990 → .320104: the first changed digit moves.
    traffic = Traffic()
    history: list[dict[str, Any]] = [user("Start.")]
    previous_answer = None
    for step, stamp in enumerate(["58.306277", "58.309780", "58.313990", "58.320104"]):
        if previous_answer is not None:
            history += [previous_answer, user(f"Step {step}.")]
        request = body([system(SYSTEM + f"Now: 2026-12-03T10:09:{stamp}"), *history], tools=None)
        previous_answer = assistant(f"Done {step}.")
        traffic.add(request, answer=previous_answer, hit=0)
    conversation = diagnose(traffic.trace()).conversations[0]
    risk, group = conversation.groups
    assert group.code == "volatile-system-text"
    assert group.label == "#2–#4" and group.noun == "requests"
    # The first request is named a risk: its system prompt already holds the clock.
    assert (risk.code, risk.severity, risk.label) == ("volatile-system-text", "note", "#1")
    assert "holds the request's own time ('2026-12-03T10:09:58.306277'" in risk.first.detail


def test_a_costly_and_a_free_reserialization_in_one_request_are_said_apart() -> None:
    # Two calls resent: the first with its spacing changed (the V4 template does not render
    # it), the second with its keys reordered (rendered: the hit stops there).
    # The second call's text is long enough that its reordering costs whole units.
    line = json.dumps("Append these lines to the changelog. " * 40)
    made, reordered = f'{{"a":1,"note":{line}}}', f'{{"note":{line},"a":1}}'
    first = body([system(SYSTEM), user("Read it and log.")])
    calls = [("call_1", "read_file", '{"path": "README.md"}'), ("call_2", "log", made)]
    answer = assistant(reasoning="Both.", calls=calls)
    resent = assistant(
        reasoning="Both.",
        calls=[("call_1", "read_file", '{"path":"README.md"}'), ("call_2", "log", reordered)],
    )
    second = body(
        [system(SYSTEM), user("Read it and log."), resent, tool_result("call_1", "# Project")]
    )
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(second, hit=floor(tokens_before(second, 2)))
    report = diagnose(traffic.trace())
    groups = {g.severity: g for g in report.conversations[0].groups}
    assert set(groups) == {"note", "loss"}
    loss, note = groups["loss"], groups["note"]
    assert "tool_calls[1] ('log')" in loss.first.detail and loss.lost_tokens > 0
    assert loss.first.evidence == (f"produced: {made}", f"sent:     {reordered}")
    assert "tool_calls[0] ('read_file')" in note.first.detail and note.lost_tokens == 0
    assert loss.label == note.label == "#2" and loss.noun == note.noun == "request"


def test_multi_line_evidence_stays_on_its_line_in_the_text_report() -> None:
    first, answer, second = _turn()
    second["messages"][2] = assistant(
        reasoning="I should read it.", calls=[("call_1", "read_file", '{\n "path": "README.md"\n}')]
    )
    traffic = Traffic()
    traffic.add(first, answer=answer, hit=0)
    traffic.add(second, hit=floor(tokens_before(second, 3)))
    text = report_text(diagnose(traffic.trace()))
    assert '          sent:     {\\n "path": "README.md"\\n}\n' in text
