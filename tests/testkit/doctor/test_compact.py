"""The compact report (formatVersion 4): lossless against the full one (formatVersion 3), each
piece of evidence said once, and a clear error for a version it cannot read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.persistence import dumps_session
from dsh_testkit.doctor import (
    CAUSE_CODES,
    ConversationDiagnosis,
    DoctorReport,
    Finding,
    ReportFormatError,
    RequestDiagnosis,
    Segment,
    compact_report,
    diagnose,
    expand_report,
)
from dsh_testkit.doctor._compact import COMPACT_FORMAT_VERSION, dumps_compact
from dsh_testkit.doctor._report import DOCTOR_FORMAT_VERSION, group_findings
from dsh_testkit.doctor._text import text_diff
from dsh_testkit.prompt import CacheGranularity
from dsh_testkit.traces import loads_trace
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
