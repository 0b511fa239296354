"""``dsh-testkit cache-report`` on session logs: the cache doctor's figures and causes for what a
log records (its rebuilt wire requests, with the log's own events as evidence), and the
command's outputs. The doctor on other traces is tested in ``tests/testkit/doctor/``."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import EpochHeader, LlmCallConfig, ToolSchema, plan_header_event
from dsh_core.persistence import dumps_session
from dsh_testkit.cli._doctor import add_cache_report_arguments, run_cache_report
from dsh_testkit.doctor import (
    DoctorReport,
    RequestDiagnosis,
    diagnose,
    expand_report,
    report_text,
)
from dsh_testkit.doctor._report import DOCTOR_FORMAT_VERSION
from dsh_testkit.explorer import render_html
from dsh_testkit.traces import TraceError, loads_trace
from tests._support import REFERENCE_LOGS
from tests.testkit._report_builders import (
    GREP,
    LS,
    SYSTEM,
    SYSTEM_LINES,
    LogBuilder,
    initial_two_turns,
    reference_logs,
    snapshot,
    usage,
)


@pytest.fixture(autouse=True)
def _piped_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The printed report is laid out as for a pipe (``PIPE_WIDTH``) whatever ``COLUMNS`` the
    runner has: pytest-xdist workers run with ``COLUMNS=80``, which wraps the causes column."""
    monkeypatch.delenv("COLUMNS", raising=False)


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dsh-testkit cache-report")
    add_cache_report_arguments(parser)
    return run_cache_report(parser.parse_args(argv))


def doctor(log: LogBuilder, **options: Any) -> DoctorReport:
    """The doctor's report of ``log``, read from its bytes as ``cache-report`` reads a file."""
    return diagnose(loads_trace(dumps_session(log.session.info, log.events)), **options)


def second_step(log: LogBuilder, **step: Any) -> DoctorReport:
    """Close a one-step first turn, run a second turn with ``step``, report."""
    log.end_turn()
    log.start_turn("second question")
    log.step(**step)
    log.end_turn()
    return doctor(log)


def first_turn() -> LogBuilder:
    log = LogBuilder()
    log.start_turn("first question")
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0))
    return log


def only_finding(request: RequestDiagnosis, code: str) -> Any:
    (finding,) = [f for f in request.findings if f.code == code]
    return finding


# --------------------------------------------------------------------------------------------
# Measurement
#
# The synthetic logs report 1,000 prompt tokens and 5 completion tokens for the first request,
# 1,100 prompt tokens for the second, which resends the model's answer ("ok") as generated and
# adds a question. What the second could reuse is the first request's prompt and its answer
# (the provider persists a unit at the end of the model's output): 1,005 tokens, rounded down to
# the cache unit — 896 in 128-token units, 960 in 64-token units.


def test_a_pure_extension_with_a_full_hit_loses_nothing():
    report = doctor(initial_two_turns(hits=(0, 896)))

    assert (report.source, report.figures) == ("session-log", "reported")
    assert (report.granularity.tokens, report.granularity.origin) == (128, "usage")
    [conversation] = report.conversations
    assert conversation.key == "synthetic"  # the log's session id
    first, second = report.requests
    assert (first.parent, first.relation, first.prompt_tokens, first.hit_tokens) == (
        None,
        "first",
        1000,
        0,
    )
    assert (first.reusable_tokens, first.lost_tokens, first.findings) == (0, 0, ())
    assert (second.parent, second.relation) == (0, "extends")
    assert (second.prompt_tokens, second.hit_tokens, second.completion_tokens) == (1100, 896, 5)
    assert (second.reusable_tokens, second.shared_tokens, second.lost_tokens) == (896, 896, 0)
    assert second.findings == () and second.divergence is None
    assert second.hit_rate == pytest.approx(896 / 1100)
    assert report.totals.efficiency == 1.0
    assert report.totals.hit_rate == pytest.approx(896 / 2100)
    assert report.to_json()["efficiency"] == 1.0


def test_a_pure_extension_that_missed_is_a_provider_miss():
    report = doctor(initial_two_turns(hits=(0, 128)))

    second = report.requests[1]
    assert (second.reusable_tokens, second.hit_tokens, second.lost_tokens) == (896, 128, 768)
    [finding] = second.findings
    assert (finding.code, finding.severity, finding.lost_tokens) == ("provider-miss", "loss", 768)
    assert finding.detail == (
        "it extends request #1 unchanged as the template renders it, yet 768 of 896 reusable "
        "tokens missed"
    )
    assert report.totals.efficiency == pytest.approx(128 / 896)
    assert report.counts() == {"provider-miss": 1}


def test_a_unit_of_one_token_measures_exact_tokens():
    report = doctor(initial_two_turns(hits=(0, 1000)), granularity=1)
    assert (report.granularity.tokens, report.granularity.origin, report.granularity.detail) == (
        1,
        "given",
        "--granularity",
    )
    second = report.requests[1]
    # the first request's 1,000 prompt tokens and its 5-token answer, not rounded
    assert second.reusable_tokens == 1005
    assert second.lost_tokens == 5


def test_hits_beyond_what_was_reusable_count_only_up_to_it():
    # 640 and 1,088 are multiples of 64, not of 128: the log's own hits give the unit
    report = doctor(initial_two_turns(hits=(640, 1088)))
    assert (report.granularity.tokens, report.granularity.origin) == (64, "usage")
    first, second = report.requests
    assert (first.hit_tokens, first.counted_hit_tokens) == (640, 0)  # nothing to reuse yet
    assert (second.reusable_tokens, second.counted_hit_tokens, second.lost_tokens) == (
        960,
        960,
        0,
    )
    totals = report.totals
    assert (totals.hit_tokens, totals.counted_hit_tokens, totals.reusable_tokens) == (
        1728,
        960,
        960,
    )
    assert totals.efficiency == 1.0


def _partly_reported() -> LogBuilder:
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"))
    log.step(usage_data=usage(300))
    log.step(message=False, usage_chunk=usage(10, 320))
    log.end_turn()
    return log


def test_requests_without_usage_or_cache_figure_are_not_measured_when_reported_only():
    report = doctor(_partly_reported(), simulate=False)
    none, no_figure, from_chunk = report.requests

    assert (none.prompt_tokens, none.hit_tokens, none.hit_rate, none.measured) == (
        None,
        None,
        None,
        False,
    )
    assert (no_figure.prompt_tokens, no_figure.hit_tokens, no_figure.measured) == (300, None, False)
    assert no_figure.lost_tokens == 0 and no_figure.findings == ()
    # the usage chunk backs a step whose message carries none
    assert (from_chunk.prompt_tokens, from_chunk.hit_tokens, from_chunk.measured) == (
        330,
        320,
        True,
    )
    assert report.totals.measured == 1
    assert report.totals.to_json()["measured"] == 1
    # counted as unknown, never silently out of the rates
    assert (report.totals.unknown, report.totals.unknown_prompt_tokens) == (2, 300)
    assert report.totals.to_json()["unknownHits"] == 2
    assert "2 request(s) without a cache figure (300 prompt tokens): not in these rates" in (
        report_text(report)
    )


def test_requests_without_a_cache_figure_get_a_simulated_hit_and_say_so():
    report = doctor(_partly_reported())
    none, no_figure, from_chunk = report.requests

    assert report.figures == "mixed"
    assert (none.prompt_source, none.hit_source) == ("simulated", "simulated")
    # a reported prompt count is never replaced by the simulator's
    assert (no_figure.prompt_tokens, no_figure.prompt_source, no_figure.hit_source) == (
        300,
        "reported",
        "simulated",
    )
    assert (from_chunk.prompt_tokens, from_chunk.hit_tokens, from_chunk.hit_source) == (
        330,
        320,
        "reported",
    )
    assert report.totals.measured == 3 and report.totals.simulated == 2
    assert report.totals.unknown == 0
    assert no_figure.to_json()["figures"] == {
        "prompt": "reported",
        "hit": "simulated",
        "origin": None,
    }
    text = report_text(report)
    assert "hits marked * simulated" in text and "2 of 3 hits simulated" in text


def test_a_log_without_any_usage_is_simulated():
    log = LogBuilder()
    log.start_turn("q " * 2000)
    log.step(header_event=snapshot("initial"))
    log.step()
    log.end_turn()

    report = doctor(log)

    assert report.figures == "simulated"
    assert report.notes == ("the trace carries no cache usage: hits are simulated, prompts too",)
    assert (report.granularity.tokens, report.granularity.origin) == (128, "model-table")
    first, second = report.requests
    assert first.hit_tokens == 0 and first.prompt_tokens is not None
    # the simulator persisted the first request: the second, a pure extension, reuses it all
    assert second.relation == "extends"
    assert second.hit_tokens == second.reusable_tokens > 1000
    assert report.totals.efficiency == 1.0


def test_one_request_gives_no_efficiency():
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0))
    log.end_turn()
    report = doctor(log)
    assert report.totals.efficiency is None
    assert report.to_json()["efficiency"] is None


def test_the_unit_must_be_sane():
    with pytest.raises(ValueError, match="the cache granularity must be at least 1 token, got 0"):
        doctor(initial_two_turns(), granularity=0)


# --------------------------------------------------------------------------------------------
# Attribution: the cause of each loss, with the log's event beside it as evidence


def test_a_change_snapshot_is_named_with_what_changed():
    log = first_turn()
    changed = "\n".join([*SYSTEM_LINES[:-1], "rule 40: changed"])
    seq = log.session.seq + 4  # turn/end, turn/start, prompt, step/start
    report = second_step(
        log, header_event=snapshot("change", system=changed), usage_data=usage(1060, 40)
    )

    second = report.requests[1]
    assert (second.relation, second.divergence) == ("diverges", "system")
    # shared: the 39 unchanged lines; reusable: all of request 1 and its answer
    assert 0 < second.shared_tokens < second.reusable_tokens == 896
    [finding] = second.findings
    assert (finding.code, finding.severity) == ("system-changed", "loss")
    assert finding.lost_tokens == second.lost_tokens == 896 - 40
    assert finding.where == "system line 40 column 10"
    assert finding.evidence == (
        "request #1: 'rule 40: answer precisely and cite the file you read'",
        "request #2: 'rule 40: changed'",
        f"log: request/header change at seq {seq}: system line 40 differs: previous: "
        "'rule 40: answer precisely and cite the file you read', this: 'rule 40: changed'",
    )
    assert second.log_events == ()  # the log's event went to the finding it explains


def test_a_header_delta_is_named():
    log = first_turn()
    tools = (ToolSchema.from_json(GREP),)
    old = EpochHeader(
        config=LlmCallConfig(provider="deepseek", model="deepseek-chat"), system=SYSTEM, tools=tools
    )
    new = EpochHeader(config=old.config, system=SYSTEM, tools=(*tools, ToolSchema.from_json(LS)))
    plan = plan_header_event(old, new, first_of_instance=False)
    assert plan is not None and plan[0] == "request/header-delta"
    seq = log.session.seq + 4
    report = second_step(log, header_event=plan, usage_data=usage(1100, 0))

    second = report.requests[1]
    [finding] = second.findings
    assert (finding.code, finding.severity, finding.where) == ("tools-changed", "loss", "tools[1]")
    assert finding.detail == "tool 'ls' appended at the end"
    assert finding.evidence[-1] == f"log: request/header-delta at seq {seq}: tool 'ls' added"
    assert finding.lost_tokens == second.lost_tokens == second.reusable_tokens > 0


@pytest.mark.parametrize(
    ("reason", "suffix"),
    [
        ("resume", " (header unchanged)"),
        ("fallback", " (header unchanged)"),
    ],
)
def test_a_miss_after_an_unchanged_header_snapshot_is_the_providers(reason, suffix):
    """The snapshot changed nothing that was sent, so it explains nothing: the miss is the
    provider's, and the log's event stays on the request for the reader."""
    log = first_turn()
    seq = log.session.seq + 4
    report = second_step(log, header_event=snapshot(reason), usage_data=usage(1100, 0))

    second = report.requests[1]
    assert second.relation == "extends"  # the values did not change
    assert second.reusable_tokens == second.lost_tokens == 896
    assert second.codes == ("provider-miss",)
    assert second.log_events == (f"request/header {reason} at seq {seq}{suffix}",)


def test_a_switch_to_another_serving_model_shares_nothing():
    log = first_turn()
    seq = log.session.seq + 4
    report = second_step(
        log, header_event=snapshot("change", model="deepseek-v4-pro"), usage_data=usage(1100, 0)
    )
    second = report.requests[1]
    assert (second.shared_tokens, second.reusable_tokens) == (0, 896)
    finding = [f for f in second.findings if f.severity == "loss"]
    assert [(f.code, f.where) for f in finding] == [("params-changed", "model")]
    assert finding[0].detail.startswith("model: 'deepseek-chat' → 'deepseek-v4-pro'")
    assert finding[0].lost_tokens == 896
    assert second.log_events == (
        f"request/header change at seq {seq}: config.model differs: previous: "
        "'deepseek-chat', this: 'deepseek-v4-pro'",
    )


def test_aliases_of_one_model_share_its_cache():
    """deepseek-chat and deepseek-reasoner are one model (thinking off and on): the switch
    keeps the cache key, and thinking changes only the generation prefix, so a miss is the
    provider's (docs/fidelity.md, "Cache key"; the mock keys its cache the same way)."""
    log = first_turn()
    report = second_step(
        log, header_event=snapshot("change", model="deepseek-reasoner"), usage_data=usage(1100, 0)
    )
    second = report.requests[1]
    assert second.shared_tokens == second.reusable_tokens == 896
    assert [(f.code, f.severity, f.where) for f in second.findings] == [
        ("params-changed", "note", "thinking"),
        ("provider-miss", "loss", None),
    ]


def test_a_compaction_is_the_cause():
    log = LogBuilder()
    prompt = log.start_turn("a long first question " * 50)
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0))
    log.append("compaction/start", {"compactionId": "c1", "turn": 1})
    summary = log.append(
        "compaction/summary",
        {"compactionId": "c1", "shadowedRange": {"start": prompt, "end": prompt}},
    )
    checkpoint = {
        "id": "checkpoint",
        "role": "user",
        "content": [{"type": "text", "text": "<compacted-summary>short</compacted-summary>"}],
        "source": {"kind": "plugin", "plugin": "compact"},
    }
    replace = log.append(
        "user/message",
        checkpoint,
        surface_op={"op": "replace", "start": prompt, "end": prompt},
        source_event_seqs=[summary, prompt],
    )
    log.append("compaction/end", {"compactionId": "c1", "turn": 1})
    log.step(usage_data=usage(900, 0))
    log.end_turn()

    second = doctor(log).requests[1]

    # system and tools are still shared; the replaced prompt and what follows are not
    assert (second.relation, second.divergence) == ("diverges", "messages[1] user")
    assert 0 < second.shared_tokens < second.reusable_tokens == second.lost_tokens == 896
    [finding] = second.findings
    assert (finding.code, finding.severity, finding.lost_tokens) == (
        "history-rewritten",
        "loss",
        896,
    )
    assert finding.where == "messages[1].content line 1 column 1"
    assert (
        finding.evidence[-1]
        == f"log: compaction: user/message at seq {replace} replaced seq {prompt}"
    )


def test_a_prune_before_the_result_was_ever_sent_changes_nothing_sent():
    """The tool result is pruned before the request that first carries it: the provider never
    saw the original, so the next request extends the first one unchanged and its miss is the
    provider's. The prune stays on the request as the log's evidence."""
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"), tool_call="grep", usage_data=usage(1000, 0))
    result_seq = log.session.seq - 2
    original = log.events[result_seq]
    log.append("compaction/prune", {"shadowedSeqs": [result_seq]})
    data = log.tool_result_data(
        original.data["message"]["source"]["callId"],
        "pruned",
        message_id=original.data["message"]["id"],
    )
    data["step"] = original.data["step"]
    seq = log.append(
        "tool/result",
        data,
        surface_op={"op": "replace", "start": result_seq, "end": result_seq},
        source_event_seqs=[result_seq],
    )
    log.step(usage_data=usage(1000, 0))
    log.end_turn()

    second = doctor(log).requests[1]
    assert second.relation == "extends" and second.codes == ("provider-miss",)
    assert second.log_events == (
        f"tool-result prune: tool/result at seq {seq} replaced seq {result_seq}",
    )


def _pruned_after_it_was_sent() -> tuple[LogBuilder, int, int]:
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"), tool_call="grep", usage_data=usage(1000, 0))
    result_seq = log.session.seq - 2
    original = log.events[result_seq]
    log.step(usage_data=usage(100, 1024))  # this request carries the whole result
    log.append("compaction/prune", {"shadowedSeqs": [result_seq]})
    data = log.tool_result_data(
        original.data["message"]["source"]["callId"],
        "pruned",
        message_id=original.data["message"]["id"],
    )
    data["step"] = original.data["step"]
    seq = log.append(
        "tool/result",
        data,
        surface_op={"op": "replace", "start": result_seq, "end": result_seq},
        source_event_seqs=[result_seq],
    )
    log.step(usage_data=usage(1000, 0))
    log.end_turn()
    return log, seq, result_seq


def test_a_prune_of_a_result_already_sent_is_named_on_the_request_that_resends_it():
    log, seq, result_seq = _pruned_after_it_was_sent()
    third = doctor(log).requests[2]
    # compared with request #2, which sent the whole result, not with #1 (whose whole prompt
    # it still starts with)
    assert (third.parent, third.relation) == (1, "diverges")
    finding = only_finding(third, "history-rewritten")
    assert finding.evidence[-1] == (
        f"log: tool-result prune: tool/result at seq {seq} replaced seq {result_seq}"
    )
    # hit 0: the provider missed even the part before the prune; each part is counted once
    losses = [f for f in third.findings if f.severity == "loss"]
    assert sum(f.lost_tokens for f in losses) == third.lost_tokens > 0
    assert "provider-miss" in [f.code for f in losses]


def test_a_history_rewrite_names_the_first_differing_field():
    log = LogBuilder()
    prompt = log.start_turn("the original question")
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0))
    seq = log.append(
        "user/message",
        {
            "id": "u-1",
            "role": "user",
            "content": [{"type": "text", "text": "a rewritten question"}],
            "source": {"kind": "user"},
        },
        surface_op={"op": "replace", "start": prompt, "end": prompt},
        source_event_seqs=[prompt],
    )
    log.step(usage_data=usage(1000, 0))
    log.end_turn()

    [finding] = doctor(log).requests[1].findings
    assert (finding.code, finding.severity) == ("history-rewritten", "loss")
    assert (finding.where, finding.detail) == (
        "messages[1].content line 1 column 1",
        "messages[1] was edited",
    )
    assert finding.evidence == (
        "before: 'the original question'",
        "after:  'a rewritten question'",
        f"log: user/message at seq {seq} replaced seq {prompt} with no compaction or prune "
        "event before it",
    )


def test_a_retry_is_a_request_of_its_own():
    log = LogBuilder()
    log.start_turn("q")
    log.append("step/start", {"turn": 1, "step": 1})
    log.append(*snapshot("initial"))

    def chunk(body):
        return log.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": body})

    chunk({"type": "usage", "usage": usage(1000, 0)})
    chunk(
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "x", "code": "SERVER"}},
        }
    )
    log.append("llm/retry", {"turn": 1, "step": 1})
    text = chunk({"type": "text-delta", "index": 0, "text": "ok"})
    finish = chunk({"type": "finish", "reason": {"kind": "stop"}})
    log.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "a",
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
            },
            "usage": usage(40, 960),
        },
        surface_op="append",
        source_event_seqs=[text, finish],
    )
    log.append("step/end", {"turn": 1, "step": 1})
    log.end_turn()

    failed, retry = doctor(log).requests

    assert (failed.status, failed.prompt_tokens, failed.hit_tokens) == (None, 1000, 0)
    assert (retry.status, retry.parent, retry.relation) == (200, 0, "repeats")
    assert (retry.hit_tokens, retry.reusable_tokens, retry.lost_tokens) == (960, 960, 0)
    assert retry.findings == ()


def test_several_causes_are_all_listed():
    log = LogBuilder()
    prompt = log.start_turn("q")
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0))
    log.append("compact/start", {"turn": 1})
    log.append("request/context", {"provider": "deepseek", "model": "deepseek-chat"})
    replace = log.append(
        "user/message",
        {"id": "c", "role": "user", "content": [], "source": {"kind": "plugin", "plugin": "x"}},
        surface_op={"op": "replace", "start": prompt, "end": prompt},
        source_event_seqs=[prompt],
    )
    log.append("compact/end", {"turn": 1})
    log.step(header_event=snapshot("change", model="other"), usage_data=usage(900, 0))
    log.end_turn()

    second = doctor(log).requests[1]
    # another cache key shares nothing: the model change limits the hit, the rest is noted
    assert [(f.code, f.severity, f.where) for f in second.findings] == [
        ("params-changed", "loss", "model"),
        ("params-changed", "note", "thinking"),
        ("history-rewritten", "note", "messages[1].content line 1 column 1"),
    ]
    rewrite = second.findings[2]
    assert rewrite.detail.endswith(
        "(no further cost: the hit was already limited by params-changed at model)"
    )
    # a replace inside a compaction bracket is explained even without a metering event
    assert (
        rewrite.evidence[-1]
        == f"log: compaction: user/message at seq {replace} replaced seq {prompt}"
    )


def test_unreadable_usage_counts_as_none_and_chunk_usage_backs_a_bare_message():
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"), usage_data={"inputTokens": -1, "outputTokens": 0})
    log.step(usage_chunk=usage(10, 0))
    log.end_turn()
    bad, chunk_backed = doctor(log, simulate=False).requests
    assert (bad.prompt_tokens, bad.hit_tokens, bad.measured) == (None, None, False)
    assert (chunk_backed.prompt_tokens, chunk_backed.hit_tokens) == (10, 0)


# --------------------------------------------------------------------------------------------
# Laws


def _loss_laws(report: DoctorReport) -> None:
    unit = report.granularity.tokens
    for r in report.requests:
        assert 0 <= r.shared_tokens <= r.reusable_tokens
        assert r.reusable_tokens % unit == 0 and r.shared_tokens % unit == 0
        assert r.lost_tokens == (
            r.reusable_tokens - min(r.hit_tokens or 0, r.reusable_tokens) if r.measured else 0
        )
        losses = [f for f in r.findings if f.severity == "loss"]
        if r.lost_tokens >= unit:
            # every loss of a unit or more has a cause; the causes' parts add up to it (the
            # provider's part and a change's part are counted apart)
            assert losses and sum(f.lost_tokens for f in losses) == r.lost_tokens, r
            assert len(losses) <= 2 and all(f.lost_tokens >= unit for f in losses), r
        else:
            assert losses == [], r
    efficiency = report.totals.efficiency
    assert efficiency is None or 0.0 <= efficiency <= 1.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 3000), st.integers(0, 3000)),
        min_size=1,
        max_size=6,
    )
)
def test_report_laws(steps):
    log = LogBuilder()
    log.start_turn("q0")
    log.step(header_event=snapshot("initial"), usage_data=usage(500, 0))
    for new_turn, miss, hit in steps:
        if new_turn:
            log.end_turn()
            log.start_turn(f"q{log.turn_no}")
        log.step(usage_data=usage(miss, hit))
    log.end_turn()

    report = doctor(log)
    _loss_laws(report)
    assert render_html(report) == render_html(doctor(log))


def _assert_detached_equals_shared(events) -> None:
    """The report does not depend on requests sharing their fold's objects (the log readers'
    fast paths): requests rebuilt with fresh objects give the same document."""
    from unittest import mock

    from dsh_core import SessionInfo
    from dsh_core.persistence import dumps_session as dumps
    from tests.testkit._varied_logs import detached_requests

    data = dumps(SessionInfo(id="varied", created_at=0), events)
    fast = diagnose(loads_trace(data))
    with mock.patch(
        "dsh_testkit.traces._readers._session_log.reconstruct_requests", detached_requests
    ):
        slow = diagnose(loads_trace(data))
    assert fast.to_json() == slow.to_json()
    _loss_laws(fast)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_varied_logs_obey_the_laws_and_do_not_depend_on_shared_objects(data):
    from tests.testkit._varied_logs import actions, varied_log

    plan = data.draw(actions)
    _assert_detached_equals_shared(varied_log(plan).events)
    _assert_detached_equals_shared(varied_log(plan, with_usage=False).events)


def test_reference_logs_do_not_depend_on_shared_objects():
    from dsh_core.persistence import load_session

    for path in reference_logs():
        _assert_detached_equals_shared(load_session(path, audit=True).events)


# --------------------------------------------------------------------------------------------
# The command and its outputs


def test_run_prints_a_plain_table_when_piped(tmp_path, capsys):
    path = initial_two_turns(hits=(0, 128)).write(tmp_path / "session.jsonl")

    assert run([str(path)]) == 0

    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert all(line == line.rstrip() for line in out.split("\n"))
    assert out.startswith(f"Cache doctor {path}\nsession-log · 1 conversation(s) · 2 request(s)")
    flat = " ".join(out.split())
    assert (
        "it extends request #1 unchanged as the template renders it, yet 768 of 896 reusable "
        "tokens missed" in flat
    )
    assert "efficiency 14.3 % (128 of 896 reusable)" in flat


def test_run_json_is_versioned_and_sorted(tmp_path, capsys):
    path = initial_two_turns(hits=(0, 896)).write(tmp_path / "session.jsonl")

    assert run([str(path), "--json"]) == 0

    text = capsys.readouterr().out
    assert json.loads(text)["formatVersion"] == 4
    document = expand_report(json.loads(text))
    assert document["formatVersion"] == DOCTOR_FORMAT_VERSION == 3
    assert (document["kind"], document["source"], document["figures"]) == (
        "dsh-testkit/cache-report",
        "session-log",
        "reported",
    )
    assert document["granularity"]["tokens"] == 128 and document["granularity"]["origin"] == "usage"
    second = document["conversations"][0]["requests"][1]
    assert (second["promptTokens"], second["hitTokens"], second["reusableTokens"]) == (
        1100,
        896,
        896,
    )
    assert (second["parent"], second["relation"], second["hitRate"]) == (0, "extends", 0.8145)
    written = json.loads(text)["conversations"][0]["requests"][1]  # as written: keys sorted
    assert list(written) == sorted(written) and len(written) < len(second)
    assert text.endswith("}\n") and text.count("\n") == 1


def embedded_report(page: str) -> Any:
    """The report the Cache Explorer page embeds (its ``dsh-report`` JSON block)."""
    found = re.search(r"<script type='application/json' id='dsh-report'>(.*?)</script>", page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_html_is_self_contained_byte_stable_and_holds_the_json_report(tmp_path, capsys):
    path = initial_two_turns(hits=(0, 128)).write(tmp_path / "session.jsonl")
    first, second = tmp_path / "a.html", tmp_path / "b.html"

    assert run([str(path), "--html", str(first), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["totals"]["lostTokens"] == 768
    assert run([str(path), "--html", str(second)]) == 0

    page = first.read_bytes()
    assert page == second.read_bytes()
    html = page.decode("utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(?:link|img|iframe)\b|<script[^>]*\bsrc=", html, re.I)
    assert not re.search(r"\b(?:src|href)=['\"]?(?:https?:)?//", html, re.I)
    assert embedded_report(html) == document  # the page shows the report --json prints


def test_html_keeps_what_the_log_holds_inert():
    log = LogBuilder(session_id="s&<1></script>")
    log.start_turn("q <b>")
    log.step(header_event=snapshot("initial"))
    log.step(usage_data=usage(300, 0))
    log.end_turn()
    html = render_html(doctor(log))
    assert "s&<1></script>" not in html
    assert embedded_report(html)["conversations"][0]["key"] == "s&<1></script>"


def test_run_errors_have_exit_codes_and_messages(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert run([str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"dsh-testkit cache-report: cannot read {missing}: No such file or directory\n"
    )

    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(
        '{"type":"session","version":0,"id":"x","createdAt":0}\nnot json\n{}\n', encoding="utf-8"
    )
    assert run([str(corrupt)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"dsh-testkit cache-report: {corrupt}:line 2: ")
    assert err.endswith(f"run `dsh-testkit audit {corrupt}` for details\n")

    good = initial_two_turns().write(tmp_path / "good.jsonl")
    assert run([str(good), "--granularity", "0"]) == 2
    assert "--granularity must be at least 1, got 0" in capsys.readouterr().err
    assert run([str(good), "--price", "hit=x"]) == 2
    assert "--price 'hit=x': 'x' is not a number" in capsys.readouterr().err
    assert run([str(good), "--conversation", "nope"]) == 2
    assert capsys.readouterr().err == (
        "dsh-testkit cache-report: no conversation 'nope' in the trace; it has: synthetic "
        "(or #1 … #1, as found)\n"
    )
    assert run([str(good), "--conversation", "#1"]) == 0  # a named conversation, by number too
    assert "synthetic" in capsys.readouterr().out
    assert run([str(good), "--html", str(tmp_path / "no-such-dir" / "r.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
    # the page never replaces the recording it was made from, under any of its names
    before = good.read_bytes()
    (tmp_path / "alias.jsonl").symlink_to(good)
    for target in (good, tmp_path / "alias.jsonl", tmp_path / "." / "good.jsonl"):
        assert run([str(good), "--html", str(target)]) == 2
        assert capsys.readouterr().err.startswith(
            f"dsh-testkit cache-report: refusing to write the report to {target}: it is the input "
        )
    assert good.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "alias.jsonl",
        "corrupt.jsonl",
        "good.jsonl",
    ]


def test_run_refuses_a_log_whose_requests_cannot_be_rebuilt(tmp_path, capsys):
    log = LogBuilder()
    log.start_turn("q")
    log.step()  # no header before the request
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")
    assert run([str(path)]) == 1
    assert capsys.readouterr().err.startswith(
        f"dsh-testkit cache-report: {path}: the session log does not fold: "
    )


def test_a_truncated_tail_is_noted(tmp_path):
    path = initial_two_turns().write(tmp_path / "session.jsonl")
    with path.open("ab") as file:
        file.write(b'{"type":')
    report = diagnose(path)
    assert len(report.requests) == 2
    (note,) = report.notes
    assert note.startswith("an unfinished last line (line ")
    assert report_text(report).rstrip("\n").endswith(f"note: {note}")


def test_a_file_that_is_not_a_session_log_is_a_trace_error(tmp_path):
    broken = tmp_path / "session.jsonl"
    broken.write_text("{}\n", encoding="utf-8")
    with pytest.raises(TraceError) as caught:
        diagnose(broken)
    assert caught.value.path == str(broken)
    assert caught.value.reason.startswith("not a recognized trace: expected one of: ")


# --------------------------------------------------------------------------------------------
# The reference harness's logs (real usage from the live API)


def test_every_reference_log_gives_a_report(capsys):
    for path in reference_logs():
        assert run([str(path), "--json"]) == 0, path
        document = json.loads(capsys.readouterr().out)
        assert document["totals"]["requests"] >= 1
        efficiency = document["totals"]["efficiency"]
        assert efficiency is None or 0 <= efficiency <= 1
        _loss_laws(diagnose(path))
        assert run([str(path)]) == 0
        assert "efficiency" in capsys.readouterr().out


def test_reference_figures_and_the_header_change_beside_them():
    reference_logs()
    report = diagnose(REFERENCE_LOGS / "plan-review" / "session.jsonl")
    first, second = report.requests
    # live figures: 640 of 5,169 hit (a warm cache), then 4,608 of 5,049 after the change
    assert (first.prompt_tokens, first.hit_tokens) == (5169, 640)
    assert (second.prompt_tokens, second.hit_tokens) == (5049, 4608)
    assert second.lost_tokens > 0
    [finding] = [f for f in second.findings if f.severity == "loss"]
    assert finding.evidence[-1] == (
        "log: request/header change at seq 291 (the header holds placeholders: what changed "
        "is not visible in the log)"
    )


def test_reference_change_snapshot_explains_the_miss():
    reference_logs()
    second = diagnose(REFERENCE_LOGS / "plan-review" / "session.jsonl").requests[1]
    [finding] = [f for f in second.findings if f.severity == "loss"]
    assert finding.code in ("system-changed", "tools-changed")
    assert "log: request/header change at seq 291" in finding.evidence[-1]


def test_reference_pure_extension_resume_and_compaction():
    reference_logs()
    multi = diagnose(REFERENCE_LOGS / "multi-turn" / "session.jsonl")
    assert multi.requests[1].relation == "extends"
    assert multi.requests[1].findings == ()
    assert multi.totals.efficiency == 1.0

    fork = diagnose(REFERENCE_LOGS / "subagent-fork-in-process" / "session.1.jsonl")
    resumed = fork.requests[1]
    assert resumed.findings == () and resumed.lost_tokens == 0
    assert resumed.log_events == ("request/header resume at seq 51 (header unchanged)",)

    compaction = diagnose(REFERENCE_LOGS / "compaction-recovery" / "session.jsonl")
    assert compaction.figures == "simulated"  # the log's usage has no cache figures
    third = compaction.requests[2]
    finding = only_finding(third, "history-rewritten")
    assert finding.evidence[-1].startswith("log: compaction: user/message at seq 21 replaced seq 4")


# --------------------------------------------------------------------------------------------
# A log written by this project's own loop: the audit and the doctor on it


async def test_a_log_written_by_our_own_loop_audits_and_reports(tmp_path):
    from dsh_core import Agent, AgentOptions, Session, TokenUsage, tool
    from dsh_core.persistence import write_session
    from dsh_core.scripted import ScriptedProvider, text_response, tool_call, tool_call_response
    from dsh_testkit.reports import audit_file

    @tool(description="read a file")
    async def read(args, ctx):
        return "contents " * 50

    def used(miss: int, hit: int) -> TokenUsage:
        return TokenUsage(input_tokens=miss, output_tokens=5, cache_read_tokens=hit)

    counter = iter(range(1000))
    session = Session.create("own", clock=lambda: 0)
    provider = ScriptedProvider(
        tool_call_response(tool_call("c1", "read", {"path": "a"}), usage=used(1000, 0)),
        text_response("done", usage=used(100, 960)),
        text_response("again", usage=used(1200, 0)),
    )

    def agent(system: str) -> Agent:
        opts = AgentOptions(
            provider="scripted",
            model="m1",
            system=system,
            invariants=True,
            id_factory=lambda: f"id{next(counter)}",
        )
        return Agent(session, provider, opts, tools=[read])

    await agent("You are helpful.\nBe brief.").run("read a")
    await agent("You are helpful.\nBe very brief.").run("again")
    path = tmp_path / "own.jsonl"
    write_session(path, session).close()

    audit = audit_file(path)
    assert audit.ok
    assert [r.extends_previous for r in audit.requests] == [None, True, False]
    line_2 = "system line 2 differs: previous: 'Be brief.', this: 'Be very brief.'"
    assert audit.requests[2].differences == (f"header: {line_2}",)

    report = diagnose(path)
    second, third = report.requests[1:]
    assert (second.reusable_tokens, second.hit_tokens, second.findings) == (960, 960, ())
    assert third.hit_tokens == 0 and 0 == third.shared_tokens < third.reusable_tokens
    [finding] = third.findings
    assert (finding.code, finding.severity, finding.where) == (
        "system-changed",
        "loss",
        "system line 2 column 4",
    )
    assert finding.lost_tokens == third.lost_tokens == third.reusable_tokens
    assert finding.evidence[-1].endswith(f": {line_2}")
