"""Reports about a session log as such: the audit of its reconstruction.

- ``_audit``: what ``dsh-testkit audit LOG`` reports — the log's invariants, the header
  timeline, every request rebuilt and compared with the one before (``_audit_render`` puts it
  on the terminal);
- ``_loading``: reading a log for a report (sidecars, "not a session log", the readable prefix),
  shared with ``rebuild`` and ``cache-report``.

Cache figures (of a log or any other trace) come from the cache doctor, ``dsh_testkit.doctor``.
"""

from ._audit import (
    AuditReport,
    HeaderTimelineEntry,
    RequestAudit,
    RewriteEntry,
    Violation,
    ViolationCode,
    audit_file,
    audit_log,
)
from ._loading import NotASessionLogError

__all__ = [
    "AuditReport",
    "HeaderTimelineEntry",
    "NotASessionLogError",
    "RequestAudit",
    "RewriteEntry",
    "Violation",
    "ViolationCode",
    "audit_file",
    "audit_log",
]
