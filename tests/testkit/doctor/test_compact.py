"""The compact report (formatVersion 4): lossless against the full one (formatVersion 3), each
piece of evidence said once, written in pieces exactly as it dumps whole, and a clear error for
a version it cannot read. A report's own figures come from iterating its conversations (which
may be loaded from disk one at a time), bit for bit what lists of its requests gave."""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.bench_traces import _write as write_benchmark_trace
from dsh_core.persistence import dumps_session
from dsh_testkit.doctor import (
    CAUSE_CODES,
    ConversationDiagnosis,
    DoctorReport,
    Finding,
    ReportFormatError,
    RequestDiagnosis,
    Segment,
    Totals,
    compact_report,
    diagnose,
    expand_report,
)
from dsh_testkit.doctor import _report as report_module
from dsh_testkit.doctor._compact import COMPACT_FORMAT_VERSION, dumps_compact, write_compact
from dsh_testkit.doctor._report import (
    DOCTOR_FORMAT_VERSION,
    _FloatSum,
    group_findings,
    report_head,
)
from dsh_testkit.doctor._text import text_diff
from dsh_testkit.prompt import CacheGranularity
from dsh_testkit.traces import load_trace, loads_trace
from tests.testkit._varied_logs import actions, varied_log

from ._real_wire import conversation_runs, har_document, load_runs, require_wire


def _round_trip(report: DoctorReport) -> None:
    """v4 expands to exactly the v3 document, as values and through its JSON text."""
    full = report.to_json()
    compact = compact_report(report)
    assert compact["formatVersion"] == COMPACT_FORMAT_VERSION
    assert expand_report(compact) == full
    text = dumps_compact(compact)
    assert "\n" not in text[:-1]
    assert expand_report(json.loads(text)) == json.loads(json.dumps(full))
    _written_alike(report, text)
    _figures_alike(report)


# -- written in pieces, read by iterating ----------------------------------------------------


class _OnlyIterated(Sequence[ConversationDiagnosis]):
    """Conversations as a lazily loaded sequence would hand them out: it counts the passes
    over it, tells ``on_yield`` (pass, conversations yielded in it so far) before each one and
    once a pass is done, and refuses indexing and ``len``."""

    def __init__(self, items: Iterable[ConversationDiagnosis], on_yield: Any = None) -> None:
        self._items = tuple(items)
        self._on_yield = on_yield
        self.passes = 0

    def __iter__(self) -> Iterator[ConversationDiagnosis]:
        self.passes += 1
        this = self.passes
        for n, conversation in enumerate(self._items):
            if self._on_yield is not None:
                self._on_yield(this, n)
            yield conversation
        if self._on_yield is not None:
            self._on_yield(this, len(self._items))

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError(f"conversations[{index!r}]: only iteration was expected")

    def __len__(self) -> int:
        raise AssertionError("len(conversations): only iteration was expected")


def _streamed(report: DoctorReport, on_yield: Any = None) -> tuple[DoctorReport, _OnlyIterated]:
    conversations = _OnlyIterated(report.conversations, on_yield)
    return dataclasses.replace(report, conversations=conversations), conversations


def _written_alike(report: DoctorReport, text: str) -> None:
    """``write_compact`` writes ``text`` (the whole document dumped at once) in pieces: two
    passes over the conversations, never indexed nor measured, and each conversation written
    before the next one is loaded (so the writer holds one conversation at a time)."""
    encoded = [dumps_compact(c)[:-1] for c in compact_report(report)["conversations"]]
    pieces: list[str] = []
    loaded: list[tuple[int, int, str]] = []  # (pass, yielded so far, text written by then)

    def on_yield(pass_: int, count: int) -> None:
        loaded.append((pass_, count, "".join(pieces)))

    streamed, conversations = _streamed(report, on_yield)
    write_compact(streamed, pieces.append)
    assert "".join(pieces) == text
    assert conversations.passes == 2
    writing = [(count, so_far) for pass_, count, so_far in loaded if pass_ == 2]
    assert [count for count, _ in writing] == list(range(len(encoded) + 1))
    for count, so_far in writing[1:]:  # the one before is out, written as a piece of its own
        assert pieces[_last_piece(pieces, so_far)].lstrip(",") == encoded[count - 1]


def _last_piece(pieces: list[str], written: str) -> int:
    """The index of the last piece in ``written`` (the text of ``pieces`` up to some piece)."""
    total = 0
    for i, piece in enumerate(pieces):
        total += len(piece)
        if total == len(written):
            return i
    raise AssertionError("the text written so far does not end on a piece")


def _figures_alike(report: DoctorReport) -> None:
    """The report-level figures of the report on a sequence that is only iterated, each
    figure in one pass, equal the tuple-backed report's, and the lists of requests the older
    definitions made (floats bit for bit)."""
    streamed, conversations = _streamed(report)
    requests = [r for c in report.conversations for r in c.requests]
    for name, figure in (
        ("totals", lambda r: r.totals),
        ("side_totals", lambda r: r.side_totals),
        ("counts", lambda r: r.counts()),
        ("savings", lambda r: r.savings()),
        ("price_list", lambda r: r.price_list()),
        ("report_head", report_head),
    ):
        before = conversations.passes
        assert figure(streamed) == figure(report), name
        assert conversations.passes - before <= 1, name
    before = conversations.passes
    assert streamed.to_json() == report.to_json()
    assert conversations.passes - before == 2  # the figures, then the conversations
    for totals, chosen in (
        (report.totals, [r for r in requests if not r.side_call]),
        (report.side_totals, [r for r in requests if r.side_call]),
    ):
        expected = _totals_from_lists(chosen)
        assert totals == expected
        assert _bits(totals.cost) == _bits(expected.cost)
        assert _bits(totals.lost_cost) == _bits(expected.lost_cost)


def _totals_from_lists(items: list[RequestDiagnosis]) -> Totals:
    """``Totals.of`` as it was defined on a list of the requests: the reference."""
    measured = [r for r in items if r.measured]
    costs = [r.cost for r in items if r.cost is not None]
    lost_costs = [r.lost_cost for r in measured if r.lost_cost is not None]
    return Totals(
        requests=len(items),
        measured=len(measured),
        prompt_tokens=sum(r.prompt_tokens or 0 for r in measured),
        hit_tokens=sum(r.hit_tokens or 0 for r in measured),
        reusable_tokens=sum(r.reusable_tokens for r in measured),
        counted_hit_tokens=sum(r.counted_hit_tokens for r in measured),
        lost_tokens=sum(r.lost_tokens for r in measured),
        cost=sum(costs) if costs else None,
        lost_cost=sum(lost_costs) if lost_costs else None,
        refused=sum(1 for r in items if (r.status or 0) >= 400),
        simulated=sum(1 for r in measured if r.hit_source == "simulated"),
        unknown=sum(1 for r in items if not r.measured and (r.status or 0) < 400),
        unknown_prompt_tokens=sum(
            r.prompt_tokens or 0 for r in items if not r.measured and (r.status or 0) < 400
        ),
    )


def _bits(value: float | None) -> bytes | str | None:
    if value is None:
        return None
    return "nan" if math.isnan(value) else struct.pack("<d", value)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=True, allow_infinity=True)
        | st.floats(0, 1, allow_nan=False)
        | st.sampled_from((0.1, 1e16, -1e16, 1e308, -0.0, 5e-324))
    )
)
def test_a_running_float_sum_ends_where_sum_ends_bit_for_bit(values: list[float]) -> None:
    running = _FloatSum()
    for value in values:
        running.add(value)
    assert _bits(running.total) == _bits(sum(values) if values else None)


@pytest.mark.parametrize(
    ("compensated", "values", "expected"),
    [
        # Python 3.12's What's New: sum() of floats is compensated (Neumaier), so these come out
        # exact there and as plain left-to-right addition gives them up to 3.11
        (True, [0.1] * 10, 1.0),
        (False, [0.1] * 10, 0.9999999999999999),
        (True, [1e16, 1.0, -1e16], 1.0),
        (False, [1e16, 1.0, -1e16], 0.0),
        (True, [-0.0], 0.0),  # the first value is added to the int 0, as sum() does
        (True, [float("inf"), 1.0], float("inf")),  # a compensation that is not finite is left out
    ],
)
def test_the_running_sum_follows_either_interpreter_rule(
    monkeypatch: pytest.MonkeyPatch, compensated: bool, values: list[float], expected: float
) -> None:
    """The rule this interpreter's sum() does not use, checked on known sums (the property
    above checks the one it uses against sum() itself)."""
    monkeypatch.setattr(report_module, "_COMPENSATED", compensated)
    running = _FloatSum()
    for value in values:
        running.add(value)
    assert _bits(running.total) == _bits(expected)


def test_the_benchmark_trace_is_written_in_pieces_exactly_as_it_dumps(tmp_path: Path) -> None:
    path = tmp_path / "bench.dsh-trace"
    write_benchmark_trace(path, 2000)
    report = diagnose(load_trace(path))
    assert len(report.requests) == 2000 and len(report.conversations) == 100
    _round_trip(report)


# -- generated reports: every field, every default and none ----------------------------------

_texts = st.text(alphabet="ab \n{}é\u2028", max_size=12)
_opt_texts = st.none() | _texts


@st.composite
def _diffs(draw: Any) -> Any:
    return text_diff(draw(_texts), draw(_texts))


_findings = st.builds(
    Finding,
    code=st.sampled_from(sorted(CAUSE_CODES)),
    severity=st.sampled_from(("loss", "refusal", "note")),
    detail=_texts,
    evidence=st.lists(_texts, max_size=2).map(tuple),
    where=_opt_texts,
    lost_tokens=st.integers(0, 500),
    rejected=st.booleans(),
    rendered=st.booleans(),
    diff=_diffs(),
    signature=_texts,
)

_opt_ints = st.none() | st.integers(0, 5000)
_sources = st.sampled_from((None, "reported", "simulated"))


@st.composite
def _reports(draw: Any) -> DoctorReport:
    pool = draw(st.lists(_findings, min_size=1, max_size=4))  # repeats exercise the said-once
    labels = draw(st.lists(_texts, min_size=1, max_size=4))
    conversations = []
    index = 0
    for key in draw(st.lists(st.sampled_from(("#1", "#2", "k")), max_size=3, unique=True)):
        requests = []
        for position in range(1, draw(st.integers(1, 4)) + 1):
            parent = None if position == 1 else index - 1
            requests.append(
                RequestDiagnosis(
                    index=index,
                    position=position,
                    conversation=key,
                    parent=parent,
                    relation="first"
                    if parent is None
                    else draw(st.sampled_from(("extends", "repeats", "diverges", "branch"))),
                    model=draw(st.none() | st.just("deepseek-chat")),
                    status=draw(st.none() | st.sampled_from((200, 400, 500))),
                    error=draw(_opt_texts),
                    outcome=draw(_opt_texts),
                    prompt_tokens=draw(_opt_ints),
                    hit_tokens=draw(_opt_ints),
                    completion_tokens=draw(_opt_ints),
                    prompt_source=draw(_sources),
                    hit_source=draw(_sources),
                    usage_origin=draw(st.none() | st.just("gen_ai.usage")),
                    reusable_tokens=draw(st.integers(0, 5000)),
                    shared_tokens=draw(st.integers(0, 5000)),
                    rounded_off_tokens=draw(st.integers(0, 127)),
                    divergence=draw(_opt_texts),
                    findings=tuple(draw(st.lists(st.sampled_from(pool), max_size=3))),
                    log_events=tuple(draw(st.lists(_texts, max_size=2))),
                    notes=tuple(draw(st.lists(_texts, max_size=2))),
                    segments=tuple(
                        Segment(label=draw(st.sampled_from(labels)), tokens=t)
                        for t in draw(st.lists(st.integers(0, 900), max_size=4))
                    ),
                    started=draw(st.none() | st.floats(0, 2e9, allow_nan=False)),
                    cost=draw(st.none() | st.floats(0, 1, allow_nan=False)),
                    lost_cost=draw(st.none() | st.floats(0, 1, allow_nan=False)),
                )
            )
            index += 1
        conversations.append(
            ConversationDiagnosis(
                key=key, requests=tuple(requests), groups=group_findings(requests)
            )
        )
    return DoctorReport(
        source="proxy",
        path=draw(_opt_texts),
        figures=draw(st.sampled_from(("reported", "simulated", "mixed"))),
        granularity=CacheGranularity.given(128),
        conversations=tuple(conversations),
        notes=tuple(draw(st.lists(_texts, max_size=2))),
        time_resolution=draw(st.none() | st.just(1e-6)),
    )


@settings(max_examples=150, deadline=None)
@given(_reports())
def test_the_compact_document_expands_to_exactly_the_full_one(report: DoctorReport) -> None:
    _round_trip(report)


@settings(max_examples=25, deadline=None)
@given(actions, st.booleans())
def test_diagnosed_logs_expand_to_exactly_the_full_report(plan: Any, with_usage: bool) -> None:
    log = varied_log(plan, with_usage=with_usage)
    _round_trip(diagnose(loads_trace(dumps_session(log.session.info, log.events))))


@pytest.mark.slow
def test_real_traffic_expands_to_exactly_the_full_report() -> None:
    require_wire()
    runs = conversation_runs(load_runs())
    assert len(runs) > 100
    for run in runs:
        _round_trip(diagnose(loads_trace(json.dumps(har_document(run)))))


# -- said once -------------------------------------------------------------------------------


def test_each_piece_of_evidence_is_written_once() -> None:
    evidence = "request #1: Current time: 2026-12-02T17:00:00Z … request #2: …17:01:00Z"
    finding = Finding(
        code="volatile-system-text",
        severity="loss",
        detail="the system prompt changes in a timestamp",
        evidence=(evidence,),
        where="system line 3 column 15",
        lost_tokens=256,
        diff=text_diff("Current time: 17:00", "Current time: 17:01"),
        signature="volatile-system-text line 3",
    )
    requests = tuple(
        RequestDiagnosis(
            index=i,
            position=i + 1,
            conversation="#1",
            parent=None if i == 0 else i - 1,
            relation="first" if i == 0 else "diverges",
            prompt_tokens=400,
            hit_tokens=0,
            reusable_tokens=256 if i else 0,
            findings=(finding,) if i else (),
            segments=(Segment(label="system", tokens=300), Segment(label="tools", tokens=100)),
        )
        for i in range(6)
    )
    report = DoctorReport(
        source="proxy",
        path=None,
        figures="reported",
        granularity=CacheGranularity.given(128),
        conversations=(
            ConversationDiagnosis(key="#1", requests=requests, groups=group_findings(requests)),
        ),
    )
    full = json.dumps(report.to_json(), ensure_ascii=False)
    text = dumps_compact(compact_report(report))
    sentence = finding.sentence
    # the full document says it on five requests and again in the group; the compact one once
    assert full.count(evidence) == 6 and text.count(evidence) == 1
    assert full.count(sentence) == 6 and text.count(sentence) == 1
    assert full.count('"tools"') == 6 and text.count('"tools"') == 1
    assert text.count("Current time: 17:0") == 1
    assert len(text) < len(full) / 3
    _round_trip(report)


# -- versions ----------------------------------------------------------------------------------


def _small() -> DoctorReport:
    return diagnose(loads_trace(dumps_session(*_log())))


def _log() -> Any:
    log = varied_log([("step", 100, 0), ("tool", 200, 128)])
    return log.session.info, log.events


def test_a_full_document_reads_as_it_is_and_another_version_is_a_clear_error() -> None:
    report = _small()
    full = report.to_json()
    assert full["formatVersion"] == DOCTOR_FORMAT_VERSION
    assert expand_report(full) == full
    with pytest.raises(ReportFormatError, match="formatVersion 2 is not read here"):
        expand_report({**full, "formatVersion": 2})
    with pytest.raises(ReportFormatError, match="formatVersion 5 is not read here"):
        expand_report({**compact_report(report), "formatVersion": 5})
    with pytest.raises(ReportFormatError, match="not a cache report"):
        expand_report({"formatVersion": 4, "kind": "dsh-testkit/comparison"})
    with pytest.raises(ReportFormatError, match="not a cache report"):
        expand_report([])  # type: ignore[arg-type]


def test_a_compact_document_that_refers_to_what_it_lacks_is_a_clear_error() -> None:
    compact = compact_report(_small())
    broken = {**compact, "figureSources": []}
    with pytest.raises(ReportFormatError, match="formatVersion 4 is malformed: IndexError"):
        expand_report(broken)
    del broken["figureSources"]
    with pytest.raises(ReportFormatError, match="malformed: KeyError"):
        expand_report(broken)
