"""Reports about a session log as such: the audit of its reconstruction, and ``rebuild``.

- ``_audit``: ``dsh-testkit audit LOG`` — the log's invariants, the header timeline, every request
  rebuilt and compared with the one before;
- ``_rebuild``: ``dsh-testkit rebuild`` — every request a log rebuilds, as a summary or the exact
  wire body;
- ``_loading``: reading a log for a report (sidecars, "not a session log", the readable prefix).

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
from ._audit_render import add_audit_arguments, render_audit, run_audit
from ._loading import NotASessionLogError, add_sidecar_arguments, load_log
from ._rebuild import REBUILD_FORMAT_VERSION, add_rebuild_arguments, run_rebuild

__all__ = [
    "AUDIT_FORMAT_VERSION",
    "REBUILD_FORMAT_VERSION",
    "AuditReport",
    "HeaderTimelineEntry",
    "NotASessionLogError",
    "RequestAudit",
    "RewriteEntry",
    "Violation",
    "ViolationCode",
    "add_audit_arguments",
    "add_rebuild_arguments",
    "add_sidecar_arguments",
    "audit_file",
    "audit_loaded",
    "audit_log",
    "load_log",
    "render_audit",
    "run_audit",
    "run_rebuild",
]
