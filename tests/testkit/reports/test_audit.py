"""``dsh-testkit audit``: the data (audit_log), the wording, the command (run_audit)."""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import (
    EpochHeader,
    Event,
    LlmCallConfig,
    SurfaceReplace,
    ToolSchema,
    freeze_json,
    plan_header_event,
)
from dsh_core.persistence import dumps_session
from dsh_testkit.cli._audit import add_audit_arguments, run_audit
from dsh_testkit.reports import audit_file, audit_log
from dsh_testkit.reports._audit import AUDIT_FORMAT_VERSION
from dsh_testkit.reports._audit_render import render_audit
from dsh_testkit.traces._log_compare import header_changes, header_summary
from tests._support import REFERENCE_LOGS
from tests.testkit._report_builders import (
    GREP,
    LS,
    SYSTEM,
    SYSTEM_LINES,
    LogBuilder,
    reference_logs,
    snapshot,
    usage,
)


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dsh-testkit audit")
    add_audit_arguments(parser)
    return run_audit(parser.parse_args(argv))


def epoch(system: str | None = SYSTEM, tools=(GREP,), model: str = "deepseek-chat") -> EpochHeader:
    return EpochHeader(
        config=LlmCallConfig(provider="deepseek", model=model),
        system=system,
        tools=tuple(ToolSchema.from_json(t) for t in tools),
    )


# --------------------------------------------------------------------------------------------
# audit_log on synthetic logs


def test_a_clean_log_extends_request_by_request():
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"), tool_call="grep")
    log.step()
    log.end_turn()
    log.start_turn("second")
    log.step()
    log.end_turn()

    report = audit_log(log.events, session_id="s")

    assert report.ok and report.violations == ()
    assert [r.extends_previous for r in report.requests] == [None, True, True]
    assert [r.message_count for r in report.requests] == [1, 3, 5]
    assert [(r.turn, r.step, r.attempt) for r in report.requests] == [
        (1, 1, 0),
        (1, 2, 0),
        (2, 1, 0),
    ]
    assert all(r.differences == () and r.changed_by == () for r in report.requests)
    (entry,) = report.header_timeline
    assert (entry.reason, entry.turn, entry.changes) == ("initial", 1, ())
    assert entry.header == "deepseek/deepseek-chat · system 40 lines · 1 tool"


def test_a_change_snapshot_is_summarized_in_the_timeline_and_the_request():
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"))
    changed = "\n".join([*SYSTEM_LINES[:11], "rule 12: changed", *SYSTEM_LINES[12:]])
    seq = log.session.seq + 1  # the header event follows the next step/start
    log.step(header_event=snapshot("change", system=changed, tools=[GREP, LS]))
    log.end_turn()

    report = audit_log(log.events)

    assert report.ok
    assert report.header_timeline[1].seq == seq
    line_12 = (
        "system line 12 differs: previous: 'rule 12: answer precisely and cite the file you "
        "read', this: 'rule 12: changed'"
    )
    assert report.header_timeline[1].changes == (line_12, "tool 'ls' added")
    second = report.requests[1]
    assert second.extends_previous is False
    assert second.differences == (f"header: {line_12}", "header: tool 'ls' added")
    assert second.changed_by == (seq,)


def test_a_header_delta_is_folded_and_described():
    previous = epoch()
    new = epoch(tools=(LS, GREP), model="deepseek-reasoner")
    plan = plan_header_event(previous, new, first_of_instance=False)
    assert plan is not None and plan[0] == "request/header-delta"
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"))
    log.step(header_event=plan)
    log.end_turn()

    report = audit_log(log.events)

    assert report.ok
    delta = report.header_timeline[1]
    assert (delta.event_type, delta.reason) == ("request/header-delta", None)
    assert delta.changes == (
        "config.model differs: previous: 'deepseek-chat', this: 'deepseek-reasoner'",
        "tool 'ls' added",
    )
    assert (
        report.requests[1].differences[0]
        == "header: config.model differs: previous: 'deepseek-chat', this: 'deepseek-reasoner'"
    )


def test_a_resume_snapshot_with_the_same_header_keeps_the_extension():
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"))
    log.end_turn()
    log.start_turn("second")
    resume_seq = log.session.seq + 1
    log.step(header_event=snapshot("resume"))
    log.end_turn()

    report = audit_log(log.events)

    assert report.requests[1].extends_previous is True
    assert report.requests[1].changed_by == (resume_seq,)
    assert report.header_timeline[1].changes == ()
    assert report.notes == ()


def test_a_change_snapshot_with_equal_values_is_noted():
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"))
    seq = log.session.seq + 1
    log.step(header_event=snapshot("change"))
    log.end_turn()

    report = audit_log(log.events)

    assert report.ok
    assert report.notes == (
        f"request/header change at seq {seq} changes nothing in the logged values "
        "(a normalized log may hide what changed)",
    )


def compacted_log() -> tuple[LogBuilder, int]:
    log = LogBuilder()
    prompt = log.start_turn("a long first question")
    log.step(header_event=snapshot("initial"))
    log.append("compact/start", {"turn": 1})
    summary = log.append(
        "compact/summary",
        {
            "summary": [{"type": "text", "text": "summary"}],
            "shadowedRange": {"start": prompt, "end": prompt},
            "shadowedSeqs": [prompt],
            "shadowedTokenCount": 10,
            "model": "deepseek-chat",
        },
    )
    checkpoint = {
        "id": "checkpoint",
        "role": "user",
        "content": [{"type": "text", "text": "<compacted-summary>summary</compacted-summary>"}],
        "source": {"kind": "plugin", "plugin": "compact"},
    }
    replace = log.append(
        "user/message",
        checkpoint,
        surface_op={"op": "replace", "start": prompt, "end": prompt},
        source_event_seqs=[summary, prompt],
    )
    log.append("compact/end", {"turn": 1})
    log.step()
    log.end_turn()
    return log, replace


def test_a_compaction_is_an_explained_rewrite():
    log, replace = compacted_log()

    report = audit_log(log.events)

    assert report.ok
    (rewrite,) = report.rewrites
    assert (rewrite.seq, rewrite.kind, rewrite.explained_by) == (replace, "compaction", replace - 1)
    second = report.requests[1]
    assert second.extends_previous is False
    assert second.differences == (
        "messages[0].content[0].text differs: previous: 'a long first question', "
        "this: '<compacted-summary>summary</compacted-summary>'",
    )
    assert second.changed_by == (replace,)


def test_a_replace_nothing_explains_is_a_history_rewrite():
    log = LogBuilder()
    prompt = log.start_turn("the original question")
    log.step(header_event=snapshot("initial"))
    rewritten = {
        "id": "u-1",
        "role": "user",
        "content": [{"type": "text", "text": "a different question"}],
        "source": {"kind": "user"},
    }
    seq = log.append(
        "user/message",
        rewritten,
        surface_op={"op": "replace", "start": prompt, "end": prompt},
        source_event_seqs=[prompt],
    )
    log.step()
    log.end_turn()

    report = audit_log(log.events)

    assert not report.ok
    (violation,) = report.violations
    assert (violation.code, violation.seq) == ("history-rewrite", seq)
    assert violation.message == (
        f"user/message at seq {seq} replaced seq {prompt} with no compaction or prune event "
        "before it: the model's history changed with nothing in the log to explain it"
    )
    assert report.requests[1].differences == (
        "messages[0].content[0].text differs: "
        "previous: 'the original question', this: 'a different question'",
    )


def test_a_pruned_tool_result_is_explained():
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"), tool_call="grep")
    result_seq = log.session.seq - 2  # tool/result, then step/end
    original = log.events[result_seq]
    call_id = original.data["message"]["source"]["callId"]
    prune = log.append(
        "compaction/prune",
        {
            "shadowedRange": {"start": result_seq, "end": result_seq},
            "shadowedSeqs": [result_seq],
            "shadowedTokenCount": 60,
        },
    )
    data = log.tool_result_data(call_id, "result…", message_id=original.data["message"]["id"])
    data["step"] = original.data["step"]
    log.append(
        "tool/result",
        data,
        surface_op={"op": "replace", "start": result_seq, "end": result_seq},
        source_event_seqs=[result_seq],
    )
    log.step()
    log.end_turn()

    report = audit_log(log.events)

    assert report.ok, report.violations
    (rewrite,) = report.rewrites
    assert (rewrite.kind, rewrite.explained_by) == ("prune", prune)


def with_event(events, kind: str, data) -> list[Event]:
    """``events`` plus one more, bypassing Session (which refuses what a broken log holds)."""
    return [*events, Event(type=kind, seq=len(events), time=0, data=freeze_json(data))]


DELTA = {"system": {"keepStart": 0, "keepEnd": 0, "insert": ["x"]}}


def test_a_header_delta_before_any_snapshot_breaks_the_fold():
    log = LogBuilder()
    log.start_turn("first")

    report = audit_log(with_event(log.events, "request/header-delta", DELTA))

    (violation,) = report.violations
    assert violation.code == "header-fold"
    assert violation.seq == 2
    assert "before any request/header snapshot" in violation.message
    assert report.header_timeline == ()


def test_a_request_without_a_header_cannot_be_rebuilt():
    log = LogBuilder()
    log.start_turn("first")
    log.step()

    report = audit_log(log.events)

    (violation,) = report.violations
    assert violation.code == "reconstruct"
    assert violation.message.startswith("a request cannot be rebuilt from the log as written: ")
    assert "no request header" in violation.message
    assert report.requests == ()


def test_log_invariant_violations_are_reported():
    log = LogBuilder()
    log.append("step/start", {"turn": 1, "step": 1})

    report = audit_log(log.events)

    (violation,) = report.violations
    assert violation.code == "log-invariant"
    assert violation.seq == 0
    assert "a step must open inside its open turn" in violation.message


def test_a_surface_violation_cuts_the_audit_at_the_broken_event():
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"))
    events = list(log.events)
    bad = Event(
        type="user/message",
        seq=len(events),
        time=0,
        data=events[1].data,
        surface_op=SurfaceReplace(start=999, end=999),
        source_event_seqs=(len(events) - 1,),
    )
    report = audit_log([*events, bad])

    (violation,) = report.violations
    assert (violation.code, violation.seq) == ("surface", bad.seq)
    assert "replace start seq 999 not found in surface" in violation.message
    assert len(report.requests) == 1
    assert report.event_count == len(events) + 1


def test_opaque_event_types_are_counted():
    log = LogBuilder()
    log.append("session/title", {"title": "x"})
    log.append("session/title", {"title": "y"})
    log.append("plan/mode", {})
    assert audit_log(log.events).opaque_types == (("plan/mode", 1), ("session/title", 2))


# --------------------------------------------------------------------------------------------
# Wording


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("a\nb\nc", "a\nB\nc", ("system line 2 differs: previous: 'b', this: 'B'",)),
        ("a\nb\nc", "a\nc", ("system line 2 removed",)),
        ("a\nb\nc\nd", "a\nd", ("system lines 2–3 removed",)),
        ("a\nc", "a\nb\nc", ("system: 1 line inserted after line 1",)),
        ("b", "a\nb", ("system: 1 line inserted at the start",)),
        (
            "a\nb\nc",
            "a\nx\ny\nz\nc",
            (
                "system line 2 replaced by 3 lines "
                "(first difference: system line 2 differs: previous: 'b', this: 'x')",
            ),
        ),
        (None, "a\nb", ("system: 2 lines inserted at the start",)),
    ],
)
def test_system_changes_are_named_by_line(old, new, expected):
    assert header_changes(epoch(system=old), epoch(system=new)) == expected


def test_tool_and_config_changes_are_named():
    grep2 = {**GREP, "description": "search files fast"}
    assert header_changes(epoch(tools=(GREP, LS)), epoch(tools=(LS,))) == ("tool 'grep' removed",)
    assert header_changes(epoch(tools=(GREP,)), epoch(tools=(grep2,))) == (
        "tool 'grep'.description differs: previous: 'search files', this: 'search files fast'",
    )
    assert header_changes(epoch(tools=(GREP, LS)), epoch(tools=(LS, GREP))) == (
        "tools reordered (ls, grep)",
    )
    cold = EpochHeader(config=LlmCallConfig(provider="deepseek", model="m", temperature=0.5))
    warm = EpochHeader(config=LlmCallConfig(provider="deepseek", model="m", max_tokens=9))
    assert header_changes(cold, warm) == (
        "config.temperature: only in previous (0.5)",
        "config.maxTokens: only in this (9)",
    )
    assert header_changes(None, warm) == ()
    assert header_changes(warm, warm) == ()


def test_placeholders_are_compared_as_values():
    a = EpochHeader(
        config=LlmCallConfig(provider="p", model="m"),
        system="{{system}}",
        tools="{{tools}}",  # type: ignore[arg-type]
    )
    b = EpochHeader(
        config=LlmCallConfig(provider="p", model="m"),
        system="{{system}}",
        tools="{{tools2}}",  # type: ignore[arg-type]
    )
    assert header_changes(a, b) == (
        "tools differ: previous: the placeholder '{{tools}}', this: the placeholder '{{tools2}}'",
    )
    assert header_summary(a) == "p/m · system {{system}} · tools {{tools}}"
    bare = EpochHeader(config=LlmCallConfig(provider="p", model="m", temperature=0.2))
    assert header_summary(bare) == "p/m · temperature=0.2 · no system · no tools"


def test_a_timestamp_appended_to_a_long_system_line_shows_in_the_header_change():
    line = ("Answer briefly and cite the file you read. " * 5)[:200]
    stamp = " 2026-12-02T17:00:01Z"
    assert header_changes(epoch(system=line), epoch(system=line + stamp)) == (
        "system line 1 differs at column 201: "
        f"previous: …{line[-32:]!r} (the text ends here), this: …{line[-32:] + stamp!r}",
    )


def test_a_request_that_lost_messages_says_so():
    from dsh_core import GenerateOptions, user_message
    from dsh_testkit.traces._log_compare import compare_requests

    a, b = user_message("a", id="1"), user_message("b", id="2")
    old = GenerateOptions(provider="p", model="m", messages=(a, b))
    new = GenerateOptions(provider="p", model="m", messages=(a,))
    comparison = compare_requests(old, new)
    assert comparison.extends is False
    assert comparison.differences == ("messages: 1 of the previous request's 2 are gone",)
    assert comparison.shared_messages == 1


# --------------------------------------------------------------------------------------------
# Property: a log of appends under one header always extends


@settings(max_examples=40)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([None, "grep"])), min_size=1, max_size=8))
def test_appends_under_one_header_always_extend(plan):
    log = LogBuilder()
    log.start_turn("q0")
    log.step(header_event=snapshot("initial"))
    for new_turn, tool in plan:
        if new_turn:
            log.end_turn()
            log.start_turn(f"q{log.turn_no}")
        log.step(tool_call=tool)
    log.end_turn()

    report = audit_log(log.events)

    assert report.ok
    assert len(report.requests) == len(plan) + 1
    assert all(r.extends_previous for r in report.requests[1:])
    counts = [r.message_count for r in report.requests]
    assert counts == sorted(counts)


# --------------------------------------------------------------------------------------------
# The O(1) answers for requests of one fold, and the law that they change nothing


def test_same_header_is_identity_of_the_folded_header():
    from dsh_core import GenerateOptions
    from dsh_testkit.traces._log_compare import same_header

    tools = (ToolSchema.from_json(GREP),)
    system = "".join(["You are", " helpful."])
    base = GenerateOptions(provider="p", model="m", messages=(), system=system, tools=tools)
    same = GenerateOptions(provider="p", model="m", messages=(), system=system, tools=tools)
    assert same_header(base, same)
    # equal but not the same objects: "not sure" (the caller diffs the headers)
    copy = "".join(["You are", " helpful."])
    assert copy == system and copy is not system
    assert not same_header(
        base, GenerateOptions(provider="p", model="m", messages=(), system=copy, tools=tools)
    )
    assert not same_header(
        base,
        GenerateOptions(
            provider="p", model="m", messages=(), system=system, tools=tuple(t for t in tools)
        ),
    )
    assert not same_header(
        base, GenerateOptions(provider="p", model="m2", messages=(), system=system, tools=tools)
    )
    # 0.0 == -0.0, yet the JSON differs: floats count only when identical
    cold = GenerateOptions(provider="p", model="m", messages=(), temperature=0.0)
    assert not same_header(
        cold, GenerateOptions(provider="p", model="m", messages=(), temperature=-0.0)
    )
    assert same_header(
        cold, GenerateOptions(provider="p", model="m", messages=(), temperature=cold.temperature)
    )
    # 1 == 1.0 == True, yet they are different JSON
    capped = GenerateOptions(provider="p", model="m", messages=(), max_tokens=1)
    assert not same_header(
        capped, GenerateOptions(provider="p", model="m", messages=(), max_tokens=True)
    )


def test_shared_history_of_views_over_one_list():
    from dsh_core import MessageView, user_message
    from dsh_testkit.traces._log_compare import message_history, shared_history

    items = [user_message(str(i), id=str(i)) for i in range(4)]
    short, long = MessageView(items, 2), MessageView(items, 4)
    assert message_history(short) is items
    assert message_history(tuple(items)) is None
    assert shared_history(short, long) == 2
    assert shared_history(long, short) == 2
    assert shared_history(short, MessageView(list(items), 4)) is None  # another list: unknown
    assert shared_history(tuple(items[:2]), long) is None


def _assert_fast_equals_slow(events) -> None:
    from unittest import mock

    from dsh_core import reconstruct_requests
    from dsh_testkit.traces._log_compare import compare_requests
    from tests.testkit._varied_logs import detached, detached_requests

    requests = [r.request for r in reconstruct_requests(events)]
    for old, new in itertools.pairwise(requests):
        assert compare_requests(old, new) == compare_requests(detached(old), detached(new))
    with mock.patch("dsh_testkit.reports._audit.reconstruct_requests", detached_requests):
        slow = audit_log(events).to_json()
    assert audit_log(events).to_json() == slow


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fast_comparison_equals_the_element_wise_one(data):
    from tests.testkit._varied_logs import actions, varied_log

    _assert_fast_equals_slow(varied_log(data.draw(actions)).events)


def test_fast_comparison_equals_the_element_wise_one_on_reference_logs():
    from dsh_core.persistence import load_session

    for path in reference_logs():
        _assert_fast_equals_slow(load_session(path, audit=True).events)


# --------------------------------------------------------------------------------------------
# The command


def test_run_audit_prints_tables_without_colour_or_trailing_blanks(tmp_path, capsys):
    log, _ = compacted_log()
    path = log.write(tmp_path / "session.jsonl")

    assert run([str(path)]) == 0

    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert all(line == line.rstrip() for line in out.split("\n"))
    assert out.startswith("Session synthetic · ")
    assert "Header timeline" in out and "snapshot · initial" in out
    assert "compaction at seq" in out
    assert out.rstrip("\n").endswith("audit: OK, no violations")


def test_run_audit_json_is_a_stable_versioned_document(tmp_path, capsys):
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"), usage_data=usage(10, 0))
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")

    assert run([str(path), "--json"]) == 0
    first = capsys.readouterr().out
    assert run([str(path), "--json"]) == 0
    assert capsys.readouterr().out == first

    document = json.loads(first)
    assert document["formatVersion"] == AUDIT_FORMAT_VERSION == 1
    assert document["kind"] == "dsh-testkit/audit"
    assert document["ok"] is True
    assert document["session"] == {"id": "synthetic", "eventCount": 9, "opaqueEventTypes": {}}
    assert document["requests"][0]["extendsPrevious"] is None
    assert list(document) == sorted(document)
    assert first.endswith("}\n")


def test_run_audit_fails_on_a_history_rewrite(tmp_path, capsys):
    log = LogBuilder()
    prompt = log.start_turn("q")
    log.step(header_event=snapshot("initial"))
    log.user("again")
    log.append(
        "user/message",
        {"id": "x", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op={"op": "replace", "start": prompt, "end": prompt},
        source_event_seqs=[prompt],
    )
    log.step()
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")

    assert run([str(path)]) == 1
    out = capsys.readouterr().out
    assert "✗ history-rewrite (seq " in out
    assert out.rstrip("\n").endswith("audit: FAILED, 1 violation")


def test_run_audit_fails_on_a_truncated_file_and_audits_what_was_read(tmp_path, capsys):
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"))
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")
    with path.open("ab") as file:
        file.write(b'{"type":"turn/st')

    assert run([str(path), "--json"]) == 1

    document = json.loads(capsys.readouterr().out)
    (violation,) = document["violations"]
    assert violation["code"] == "truncated-tail"
    assert violation["line"] == len(log.events) + 2
    assert violation["message"].startswith("the last line is unfinished (16 bytes from byte ")
    assert len(document["requests"]) == 1


def test_run_audit_fails_on_a_corrupt_file(tmp_path, capsys):
    log = LogBuilder()
    log.start_turn("first")
    path = tmp_path / "session.jsonl"
    path.write_bytes(
        dumps_session(log.session.info, with_event(log.events, "request/header-delta", DELTA))
    )

    assert run([str(path)]) == 1

    out = capsys.readouterr().out
    assert "✗ unreadable (seq 2, line 4): " in out
    assert "before any request/header snapshot" in out


def test_run_audit_says_when_the_log_ends_inside_a_turn(tmp_path, capsys):
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial"))
    path = log.write(tmp_path / "session.jsonl")

    report = audit_file(path)

    assert report.ok
    assert report.notes == (
        "the log ends inside an open turn (a crash or a live session); a resume would close it "
        "with 1 repair event(s)",
    )


def test_run_audit_exits_2_when_the_file_cannot_be_read(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    assert run([str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"dsh-testkit audit: cannot read {missing}: No such file or directory\n"


def test_add_audit_arguments_keeps_a_given_description():
    parser = argparse.ArgumentParser(description="mine")
    add_audit_arguments(parser)
    assert parser.description == "mine"
    args = parser.parse_args(["x.jsonl"])
    assert (args.log, args.json) == ("x.jsonl", False)


def test_render_lists_violations_with_where():
    log = LogBuilder()
    log.append("step/start", {"turn": 1, "step": 1})
    texts = [str(getattr(r, "plain", "")) for r in render_audit(audit_log(log.events))]
    assert any(t.startswith("  ✗ log-invariant (seq 0): session log invariant") for t in texts)


# --------------------------------------------------------------------------------------------
# The reference harness's logs


def test_every_reference_log_audits_clean(capsys):
    for path in reference_logs():
        assert run([str(path)]) == 0, path
        out = capsys.readouterr().out
        assert "audit: OK, no violations" in out
        assert not re.search(r"[ \t]$", out, re.MULTILINE)


def test_reference_compaction_and_change_are_shown():
    reference_logs()
    compaction = audit_file(REFERENCE_LOGS / "compaction-recovery" / "session.jsonl")
    (rewrite,) = compaction.rewrites
    assert (rewrite.seq, rewrite.kind, rewrite.explained_by) == (21, "compaction", 20)
    assert [r.attempt for r in compaction.requests] == [0, 0, 1]
    assert compaction.requests[2].changed_by == (21,)
    assert compaction.requests[2].extends_previous is False

    plan = audit_file(REFERENCE_LOGS / "plan-review" / "session.jsonl")
    assert [(h.seq, h.reason) for h in plan.header_timeline] == [(7, "initial"), (291, "change")]
    assert plan.requests[1].changed_by == (291,)
    assert plan.opaque_types == (
        ("command/done", 1),
        ("command/run", 1),
        ("plan/mode", 2),
        ("session/title", 1),
    )


def test_a_resume_log_renders_its_timeline_and_rewrites_in_json(tmp_path, capsys):
    log, replace = compacted_log()
    log.start_turn("next")
    log.step(header_event=snapshot("resume"))
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")

    assert run([str(path)]) == 0
    out = capsys.readouterr().out
    assert "snapshot · resume   no change in the logged values" in out
    assert run([str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["rewrites"] == [
        {
            "seq": replace,
            "kind": "compaction",
            "start": 1,
            "end": 1,
            "explainedBy": replace - 1,
            "description": f"compaction: user/message at seq {replace} replaced seq 1",
        }
    ]


def test_public_names_are_exported():
    import dsh_testkit.reports._audit as module

    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, type) or inspect.isfunction(value):
            assert value.__module__ == module.__name__, name


def test_an_id_only_difference_is_still_an_extension() -> None:
    """Message ids and sources never reach the wire: they cannot break a prefix."""
    from dsh_core import GenerateOptions, user_message
    from dsh_testkit.traces._log_compare import compare_requests

    first = GenerateOptions(
        provider="deepseek", model="m", messages=(user_message("hello", id="a1"),)
    )
    second = GenerateOptions(
        provider="deepseek",
        model="m",
        messages=(
            user_message("hello", id="b2", source={"kind": "plugin", "plugin": "x"}),
            user_message("more", id="b3"),
        ),
    )
    comparison = compare_requests(first, second)
    assert comparison.extends and comparison.differences == ()
    assert comparison.shared_messages == 1
    changed = GenerateOptions(
        provider="deepseek", model="m", messages=(user_message("hullo", id="a1"),)
    )
    assert compare_requests(first, changed).differences == (
        "messages[0].content[0].text differs: previous: 'hello', this: 'hullo'",
    )


def test_the_audit_command_shows_a_timestamp_appended_to_a_long_system_line(tmp_path, capsys):
    """``dsh-testkit audit`` of a log whose 200-character system line gains a timestamp."""
    line = ("Answer briefly and cite the file you read. " * 5)[:200]
    stamp = " 2026-12-02T17:00:01Z"
    log = LogBuilder()
    log.start_turn("first")
    log.step(header_event=snapshot("initial", system=line))
    log.step(header_event=snapshot("change", system=line + stamp))
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")

    assert run([str(path)]) == 0

    out = capsys.readouterr().out
    assert "system line 1 differs at column 201" in out
    assert "2026-12-02T17:00:01Z" in out
