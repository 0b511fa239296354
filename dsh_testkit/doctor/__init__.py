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
(:data:`TERMS`), and so is the cache granularity (:func:`cache_granularity`, a
:class:`~dsh_testkit.prompt.CacheGranularity`). ``cache-report --json`` writes the compact
document (:func:`compact_report`, formatVersion 4: each piece of evidence once);
:func:`expand_report` gives back the full one (:meth:`DoctorReport.to_json`, formatVersion 3).
"""

from .._errors import PrefixInstability
from ._assertions import DEFAULT_ALLOWED, assert_cache_friendly, assert_prefix_stable
from ._branches import Conversation, Link, conversations
from ._codes import CAUSE_CODES, TERMS, CauseCode, Severity
from ._compact import compact_report, expand_report
from ._diagnose import diagnose
from ._errors import CacheUnfriendly, ReportFormatError
from ._model_facts import cache_granularity
from ._render import report_text
from ._report import (
    ConversationDiagnosis,
    DoctorReport,
    Finding,
    FindingGroup,
    RequestDiagnosis,
    Segment,
    Totals,
)

__all__ = [
    "CAUSE_CODES",
    "DEFAULT_ALLOWED",
    "TERMS",
    "CacheUnfriendly",
    "CauseCode",
    "Conversation",
    "ConversationDiagnosis",
    "DoctorReport",
    "Finding",
    "FindingGroup",
    "Link",
    "PrefixInstability",
    "ReportFormatError",
    "RequestDiagnosis",
    "Segment",
    "Severity",
    "Totals",
    "assert_cache_friendly",
    "assert_prefix_stable",
    "cache_granularity",
    "compact_report",
    "conversations",
    "diagnose",
    "expand_report",
    "report_text",
]
