"""Reports over a session log: the audit and the cache report.

- ``_audit``: ``dsh-testkit audit`` — the log's invariants, the header timeline, every request
  rebuilt and compared with the one before;
- ``_cache_report``: ``dsh-testkit cache-report`` — per-request cache hits, the best possible,
  and the log event behind each drop;
- ``_rebuild``: ``dsh-testkit rebuild`` — every request a log rebuilds, as a summary or the
  exact wire body;
- ``_loading``: reading a log for a report (sidecars, "not a session log", the readable prefix);
- ``_doctor``: the cache doctor over any trace — defined figures per request and conversation;
  ``_evidence``: its cause codes and the wire-level comparison behind each finding;
  ``_doctor_render``: its terminal, JSON and HTML output and the trace dispatch of the commands;
- ``_log_facts``: what both read from a log (header steps, surface rewrites, recorded usage);
- ``_compare``: request-to-request comparison in the project's vocabulary;
- ``_console`` and ``_html``: the terminal and HTML renderers.
"""

from ._audit import (
    AUDIT_FORMAT_VERSION,
    AuditReport,
    HeaderTimelineEntry,
    RequestAudit,
    RewriteEntry,
    Violation,
    ViolationCode,
    audit_file,
    audit_loaded,
    audit_log,
)
from ._audit_render import add_audit_arguments, render_audit, run_audit
from ._cache_model import (
    CACHE_REPORT_FORMAT_VERSION,
    CHARS_PER_TOKEN,
    DEFAULT_BLOCK_TOKENS,
    ESTIMATOR_NAMES,
    CacheCause,
    CacheCauseKind,
    CacheReport,
    CacheTotals,
    RequestCache,
    TokenEstimator,
    named_estimator,
)
from ._cache_render import add_cache_report_arguments, render_cache_report, run_cache_report
from ._cache_report import (
    cache_report,
    cache_report_file,
    cache_report_loaded,
)
from ._doctor import (
    CAUSE_CODES,
    DEFAULT_PERSIST_SECONDS,
    DOCTOR_FORMAT_VERSION,
    CauseCode,
    ConversationDiagnosis,
    DoctorReport,
    Finding,
    RequestDiagnosis,
    diagnose,
)
from ._doctor_render import (
    LEGEND,
    render_doctor_html,
    render_doctor_report,
    run_trace_audit,
    run_trace_cache_report,
)
from ._loading import NotASessionLogError, add_sidecar_arguments, load_log
from ._rebuild import REBUILD_FORMAT_VERSION, add_rebuild_arguments, run_rebuild

__all__ = [
    "AUDIT_FORMAT_VERSION",
    "CACHE_REPORT_FORMAT_VERSION",
    "CAUSE_CODES",
    "CHARS_PER_TOKEN",
    "DEFAULT_BLOCK_TOKENS",
    "DEFAULT_PERSIST_SECONDS",
    "DOCTOR_FORMAT_VERSION",
    "ESTIMATOR_NAMES",
    "LEGEND",
    "REBUILD_FORMAT_VERSION",
    "AuditReport",
    "CacheCause",
    "CacheCauseKind",
    "CacheReport",
    "CacheTotals",
    "CauseCode",
    "ConversationDiagnosis",
    "DoctorReport",
    "Finding",
    "HeaderTimelineEntry",
    "NotASessionLogError",
    "RequestAudit",
    "RequestCache",
    "RequestDiagnosis",
    "RewriteEntry",
    "TokenEstimator",
    "Violation",
    "ViolationCode",
    "add_audit_arguments",
    "add_cache_report_arguments",
    "add_rebuild_arguments",
    "add_sidecar_arguments",
    "audit_file",
    "audit_loaded",
    "audit_log",
    "cache_report",
    "cache_report_file",
    "cache_report_loaded",
    "diagnose",
    "load_log",
    "named_estimator",
    "render_audit",
    "render_cache_report",
    "render_doctor_html",
    "render_doctor_report",
    "run_audit",
    "run_cache_report",
    "run_rebuild",
    "run_trace_audit",
    "run_trace_cache_report",
]
