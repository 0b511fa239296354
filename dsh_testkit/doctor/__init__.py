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
build gates on — is :mod:`dsh_testkit.compare` (``dsh-testkit compare BASE NEW``).

The command is ``dsh-testkit cache-report INPUT``; the terms of the report are defined once
(:data:`TERMS`), and so is the cache unit (:func:`cache_unit`).
"""

from ._assertions import DEFAULT_ALLOWED, assert_cache_friendly, assert_prefix_stable
from ._branches import Brancher, Conversation, Link, Relation, conversations
from ._codes import CAUSE_CODES, CODES, TERMS, CauseCode, CodeInfo, Severity
from ._diagnose import diagnose
from ._engine import Doctor
from ._errors import CacheUnfriendly
from ._incremental import IncrementalReport
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
    "DEFAULT_ALLOWED",
    "DOCTOR_FORMAT_VERSION",
    "TERMS",
    "Brancher",
    "CacheUnfriendly",
    "CacheUnit",
    "CauseCode",
    "CodeInfo",
    "Conversation",
    "ConversationDiagnosis",
    "Doctor",
    "DoctorReport",
    "Finding",
    "FindingGroup",
    "IncrementalReport",
    "Link",
    "Relation",
    "RequestDiagnosis",
    "Segment",
    "Severity",
    "Totals",
    "assert_cache_friendly",
    "assert_prefix_stable",
    "cache_unit",
    "conversations",
    "diagnose",
    "render_report",
    "report_text",
]
