"""The cache doctor: every lost prompt-cache hit of any agent's traffic, explained.

One engine for every input (a ``dsh_core`` session log, a proxy trace, a saved capture, a
cassette, the mock's request log, a HAR export, OpenTelemetry spans): each request is compared
with the earlier request it extends (:func:`conversations`: branches, not a chain), both as
DeepSeek's chat template renders them; what it could have reused, what it did, and the cause of
every loss of one unit or more, as a stable cause code (:data:`CAUSE_CODES`) with evidence::

    report = diagnose("agent.har")
    print(report.totals.efficiency)
    assert_cache_friendly(capture, allow=["history-rewritten"])

Two runs side by side — what a harness change did to the cache and the bill, with a verdict a
build gates on — is :func:`compare_runs` (``dsh-testkit compare BASE NEW``).

The command is ``dsh-testkit cache-report INPUT``; the terms of the report are defined once
(:data:`TERMS`), and so is the cache unit (:func:`cache_unit`).
"""

from ._assertions import DEFAULT_ALLOWED, assert_cache_friendly, assert_prefix_stable
from ._branches import Brancher, Conversation, Link, Relation, conversations
from ._codes import CAUSE_CODES, CODES, TERMS, CauseCode, CodeInfo, Severity
from ._compare import (
    COMPARE_FORMAT_VERSION,
    CacheRegression,
    CauseChange,
    RequestChange,
    RequestPair,
    RunComparison,
    RunSummary,
    ScenarioComparison,
    Thresholds,
    UnmatchedScenario,
    Verdict,
    compare_runs,
)
from ._compare_render import comparison_markdown, comparison_text
from ._diagnose import diagnose
from ._engine import Doctor
from ._errors import CacheUnfriendly
from ._render import render_report, report_text
from ._report import (
    DOCTOR_FORMAT_VERSION,
    ConversationDiagnosis,
    DoctorReport,
    Finding,
    FindingGroup,
    RequestDiagnosis,
    Segment,
    Totals,
)
from ._unit import CacheUnit, cache_unit

__all__ = [
    "CAUSE_CODES",
    "CODES",
    "COMPARE_FORMAT_VERSION",
    "DEFAULT_ALLOWED",
    "DOCTOR_FORMAT_VERSION",
    "TERMS",
    "Brancher",
    "CacheRegression",
    "CacheUnfriendly",
    "CacheUnit",
    "CauseChange",
    "CauseCode",
    "CodeInfo",
    "Conversation",
    "ConversationDiagnosis",
    "Doctor",
    "DoctorReport",
    "Finding",
    "FindingGroup",
    "Link",
    "Relation",
    "RequestChange",
    "RequestDiagnosis",
    "RequestPair",
    "RunComparison",
    "RunSummary",
    "ScenarioComparison",
    "Segment",
    "Severity",
    "Thresholds",
    "Totals",
    "UnmatchedScenario",
    "Verdict",
    "assert_cache_friendly",
    "assert_prefix_stable",
    "cache_unit",
    "compare_runs",
    "comparison_markdown",
    "comparison_text",
    "conversations",
    "diagnose",
    "render_report",
    "report_text",
]
