"""Reports about a session log as such: the audit of its reconstruction.

- ``_audit``: what ``dsh-testkit audit LOG`` reports — the log's invariants, the header
  timeline, every request rebuilt and compared with the one before (``_audit_render`` puts it
  on the terminal);
- ``_loading``: reading a log for a report (sidecars, "not a session log", the readable prefix),
  shared with ``rebuild`` and ``cache-report``.

Cache figures (of a log or any other trace) come from the cache doctor, ``dsh_testkit.doctor``.
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
from ._audit_render import render_audit
from ._loading import NotASessionLogError, SidecarOption, load_log

__all__ = [
    "AUDIT_FORMAT_VERSION",
    "AuditReport",
    "HeaderTimelineEntry",
    "NotASessionLogError",
    "RequestAudit",
    "RewriteEntry",
    "SidecarOption",
    "Violation",
    "ViolationCode",
    "audit_file",
    "audit_loaded",
    "audit_log",
    "load_log",
    "render_audit",
]
