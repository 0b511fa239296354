"""``dsh-testkit audit LOG``: rebuild every request of a session log and check the log's invariants.

The audit loads a JSONL session log (this project's or the reference harness's; event types this
build does not model are carried as opaque events), then:

1. checks the log: the session-log invariant (:class:`dsh_core._invariants.LogInvariant`, every event replayed
   through it), the surface fold, the header fold, and that every surface replace is explained by
   a compaction or a prune (an unexplained replace is a history rewrite);
2. prints the header timeline: each ``request/header`` snapshot with its reason and each
   ``request/header-delta``, with what changed against the header before it;
3. rebuilds every request (:func:`dsh_core.reconstruct_requests`) and says for each whether it is
   an append-only extension of the previous one (same header, previous messages a prefix), and
   if not, the first differing field.

The data comes first (:func:`audit_log` → :class:`AuditReport`, frozen values with ``to_json``),
rendering second (:func:`render_audit`). Exit status of :func:`run_audit`: 0 when the log has no
violation, 1 when it has any (a corrupt or truncated log included), 2 when the file cannot be
opened or is not a session log (one line on stderr: ``not a session log: <reason>``).

Normalized logs (the reference harness's snapshot fixtures) are audited with their placeholders
filled from sidecar files: those beside the log by default, ``--sidecars DIR`` to name them.

JSON document (``--json``; keys sorted, ``formatVersion`` bumps on any incompatible change)::

    {
      "formatVersion": 1,
      "kind": "dsh-testkit/audit",
      "ok": true,                       # no violations
      "session": {"id": "…" | null, "eventCount": 343,
                  "opaqueEventTypes": {"session/title": 1, …}},
      "headerTimeline": [
        {"seq": 7, "turn": 1, "event": "request/header", "reason": "initial",
         "header": "deepseek/deepseek-chat · system 12 lines · 3 tools", "changes": []}],
      "rewrites": [{"seq": 21, "kind": "compaction", "start": 4, "end": 4,
                    "explainedBy": 20, "description": "…"}],
      "requests": [
        {"index": 1, "turn": 1, "step": 1, "attempt": 0, "stepStartSeq": 3, "boundarySeq": 9,
         "firstResponseSeq": 9, "headerSeq": 7, "messageCount": 2,
         "extendsPrevious": null,       # null for the first request
         "differences": [],             # "header: system line 3 changed", "messages[1]… differs"
         "changedBy": []}],             # seqs of the header events / replaces in between
      "violations": [{"code": "history-rewrite", "seq": 21, "line": null, "message": "…"}],
      "notes": ["…"]
    }

Violation codes: ``unreadable`` (the log's body breaks at a line; the events before it are
audited), ``truncated-tail``
(an unfinished last line was dropped), ``log-invariant``, ``surface``, ``header-fold``,
``reconstruct`` (a request cannot be rebuilt), ``history-rewrite``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

from dsh_core import (
    CorruptLogError,
    DshError,
    Event,
    InvalidEventError,
    InvariantViolation,
    ReconstructedRequest,
    Session,
    reconstruct_requests,
)
from dsh_core._invariants import LogInvariant
from dsh_core._surface import fold_surface
from dsh_core.persistence import LoadedLog

from ..traces._log_compare import compare_requests
from ..traces._log_facts import (
    HeaderStep,
    changes_between,
    header_steps,
    opaque_type_counts,
    surface_rewrites,
)
from ._loading import (
    SidecarOption,
    load_log,
    readable_prefix,
)

__all__ = [
    "AUDIT_FORMAT_VERSION",
    "AuditReport",
    "HeaderTimelineEntry",
    "RequestAudit",
    "RewriteEntry",
    "Violation",
    "ViolationCode",
    "audit_file",
    "audit_loaded",
    "audit_log",
]

AUDIT_FORMAT_VERSION: Final = 1
"""Version of the ``--json`` document; bumped on any incompatible change."""

ViolationCode: TypeAlias = Literal[
    "unreadable",
    "truncated-tail",
    "log-invariant",
    "surface",
    "header-fold",
    "reconstruct",
    "history-rewrite",
]
"""What makes a log wrong, one code per kind of violation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """Something that makes the log wrong (any violation fails the audit)."""

    code: ViolationCode
    message: str
    seq: int | None = None
    """The event at fault, when known."""
    line: int | None = None
    """The 1-based line of the JSONL file, when known."""

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "seq": self.seq, "line": self.line}


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderTimelineEntry:
    """One header event: a snapshot (with its reason) or a delta, and what it changed."""

    seq: int
    turn: int | None
    event_type: str
    """``request/header`` or ``request/header-delta``."""
    reason: str | None
    """The snapshot's reason; ``None`` for a delta."""
    header: str
    """A one-line summary of the header folded through this event."""
    changes: tuple[str, ...]
    """What changed against the previous header (``()`` for the first, or when nothing did)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "turn": self.turn,
            "event": self.event_type,
            "reason": self.reason,
            "header": self.header,
            "changes": list(self.changes),
        }

    @classmethod
    def of(cls, step: HeaderStep) -> HeaderTimelineEntry:
        return cls(
            seq=step.seq,
            turn=step.turn,
            event_type=step.event_type,
            reason=step.reason,
            header=step.summary,
            changes=step.changes,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RewriteEntry:
    """A surface replace: a compaction, a tool-result prune, or an unexplained history rewrite."""

    seq: int
    kind: str
    """``compaction``, ``prune`` or ``rewrite`` (a violation)."""
    start: int
    end: int
    """The replaced range of surface nodes, by seq (inclusive; by surface position)."""
    explained_by: int | None
    """Seq of the compaction or metering event that explains it."""
    description: str

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "explainedBy": self.explained_by,
            "description": self.description,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestAudit:
    """One rebuilt request and how it relates to the request before it."""

    index: int
    """1-based position among the log's requests."""
    turn: int
    step: int
    attempt: int
    """0 for a step's first attempt, 1.. for retries."""
    step_start_seq: int
    boundary_seq: int
    """Its messages are the derivation over the events before this seq."""
    first_response_seq: int | None
    header_seq: int | None
    """The last header event folded into its header."""
    message_count: int
    extends_previous: bool | None
    """Same header and the previous messages a prefix of these; ``None`` for the first request."""
    differences: tuple[str, ...]
    """When it does not extend: header changes (``header: …``), then the first message difference."""
    changed_by: tuple[int, ...]
    """Seqs of the header events and surface replaces between the previous request and this one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "turn": self.turn,
            "step": self.step,
            "attempt": self.attempt,
            "stepStartSeq": self.step_start_seq,
            "boundarySeq": self.boundary_seq,
            "firstResponseSeq": self.first_response_seq,
            "headerSeq": self.header_seq,
            "messageCount": self.message_count,
            "extendsPrevious": self.extends_previous,
            "differences": list(self.differences),
            "changedBy": list(self.changed_by),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditReport:
    """Everything the audit found in one log."""

    session_id: str | None
    event_count: int
    opaque_types: tuple[tuple[str, int], ...]
    """Event types this build does not model (carried opaque), with counts, sorted by type."""
    header_timeline: tuple[HeaderTimelineEntry, ...]
    rewrites: tuple[RewriteEntry, ...]
    """Every surface replace, in log order."""
    requests: tuple[RequestAudit, ...]
    violations: tuple[Violation, ...]
    notes: tuple[str, ...]
    """Facts worth knowing that are not violations (a crash-interrupted last turn, …)."""

    @property
    def ok(self) -> bool:
        """No violations."""
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": AUDIT_FORMAT_VERSION,
            "kind": "dsh-testkit/audit",
            "ok": self.ok,
            "session": {
                "id": self.session_id,
                "eventCount": self.event_count,
                "opaqueEventTypes": dict(self.opaque_types),
            },
            "headerTimeline": [h.to_json() for h in self.header_timeline],
            "rewrites": [r.to_json() for r in self.rewrites],
            "requests": [r.to_json() for r in self.requests],
            "violations": [v.to_json() for v in self.violations],
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------------------------
# The checks


def _invariant_violation(events: Sequence[Event]) -> Violation | None:
    """Replay the log through :class:`LogInvariant`; the first violation, if any."""
    invariant = LogInvariant()
    host = Session.create("audit")  # the invariant's call signature wants a session; it is unused
    for event in events:
        try:
            invariant(event, host)
        except InvariantViolation as exc:
            return Violation(code="log-invariant", message=str(exc), seq=event.seq)
    return None


def _valid_prefix(events: Sequence[Event]) -> tuple[int, list[Violation]]:
    """How many leading events fold (surface and header), and the violations that cut it short."""
    found: list[Violation] = []
    end = len(events)
    try:
        fold_surface(events)
    except InvalidEventError as exc:
        found.append(Violation(code="surface", message=str(exc), seq=exc.seq))
        # The index of the refused event (its seq may be the wrong one when seqs have a gap).
        end = next((i for i, e in enumerate(events) if e.seq != i or e.seq == exc.seq), 0)
    try:
        header_steps(events[:end])
    except CorruptLogError as exc:
        found.append(Violation(code="header-fold", message=str(exc), seq=exc.seq))
        end = min(end, exc.seq if exc.seq is not None else 0)
    return end, found


def _rebuild(events: Sequence[Event]) -> tuple[list[ReconstructedRequest], list[Violation]]:
    """Every request that can be rebuilt, and one violation per distinct problem (rebuilding
    goes on past a bad event or a request with no header, so one problem hides nothing else)."""
    rebuilt: list[ReconstructedRequest] = []
    errors: list[DshError] = []
    violations: list[Violation] = []
    try:
        for request in reconstruct_requests(events, errors=errors):
            rebuilt.append(request)
    except DshError as exc:  # a fold rule broke: nothing after it can be rebuilt
        errors.append(exc)
    seen: set[str] = set()
    for error in errors:
        text = str(error)
        if text in seen:
            continue
        seen.add(text)
        seq = getattr(error, "seq", None)
        violations.append(
            Violation(
                code="reconstruct",
                message=f"a request cannot be rebuilt from the log as written: {text}",
                seq=seq if isinstance(seq, int) else None,
            )
        )
    return rebuilt, violations


def audit_log(events: Sequence[Event], *, session_id: str | None = None) -> AuditReport:
    """Audit a log given as events (pure: no I/O). See the module docstring for what is checked.

    A log whose surface or header fold breaks at some seq is audited up to that seq, so the
    report still shows everything before the break.
    """
    violations: list[Violation] = []
    invariant = _invariant_violation(events)
    if invariant is not None:
        violations.append(invariant)
    end, fold_violations = _valid_prefix(events)
    violations.extend(fold_violations)
    valid = events[:end]
    steps = header_steps(valid)
    rewrites = surface_rewrites(valid)
    violations.extend(
        Violation(
            code="history-rewrite",
            message=f"{r.description}: the model's history changed with nothing in the log to explain it",
            seq=r.seq,
        )
        for r in rewrites
        if r.kind == "rewrite"
    )
    rebuilt, failures = _rebuild(valid)
    violations.extend(failures)
    notes: list[str] = [
        f"{s.label} at seq {s.seq} changes nothing in the logged values "
        "(a normalized log may hide what changed)"
        for s in steps
        if s.event_type == "request/header" and s.reason == "change" and not s.changes
    ]
    requests: list[RequestAudit] = []
    previous: ReconstructedRequest | None = None
    for index, item in enumerate(rebuilt, start=1):
        extends: bool | None = None
        differences: tuple[str, ...] = ()
        changed_by: tuple[int, ...] = ()
        if previous is not None:
            comparison = compare_requests(previous.request, item.request)
            extends, differences = comparison.extends, comparison.differences
            changed_by = changes_between(previous, item, steps, rewrites)
        requests.append(
            RequestAudit(
                index=index,
                turn=item.turn,
                step=item.step,
                attempt=item.attempt,
                step_start_seq=item.step_start_seq,
                boundary_seq=item.boundary_seq,
                first_response_seq=item.first_response_seq,
                header_seq=item.header_seq,
                message_count=len(item.request.messages),
                extends_previous=extends,
                differences=differences,
                changed_by=changed_by,
            )
        )
        previous = item
    violations.sort(key=lambda v: (v.seq if v.seq is not None else -1, v.code))
    return AuditReport(
        session_id=session_id,
        event_count=len(events),
        opaque_types=opaque_type_counts(events),
        header_timeline=tuple(HeaderTimelineEntry.of(s) for s in steps),
        rewrites=tuple(
            RewriteEntry(
                seq=r.seq,
                kind=r.kind,
                start=r.start,
                end=r.end,
                explained_by=r.explained_by,
                description=r.description,
            )
            for r in rewrites
        ),
        requests=tuple(requests),
        violations=tuple(violations),
        notes=tuple(notes),
    )


def audit_loaded(loaded: LoadedLog) -> AuditReport:
    """Audit what :func:`dsh_core.persistence.load_session` read, including how it read."""
    report = audit_log(loaded.events, session_id=loaded.info.id)
    extra_violations: list[Violation] = []
    extra_notes: list[str] = []
    if loaded.dropped is not None:
        tail = loaded.dropped
        extra_violations.append(
            Violation(
                code="truncated-tail",
                message=(
                    f"the last line is unfinished ({tail.size} bytes from byte {tail.offset} "
                    f"do not parse: {tail.reason}); a write was cut off, the events before it "
                    "were audited"
                    if tail.size
                    else f"{tail.reason}; the events before it were audited"
                ),
                line=tail.line,
            )
        )
    if loaded.interrupted:
        extra_notes.append(
            f"the log ends inside an open turn (a crash or a live session); a resume would "
            f"close it with {len(loaded.closers)} repair event(s)"
        )
    if not extra_violations and not extra_notes:
        return report
    return AuditReport(
        session_id=report.session_id,
        event_count=report.event_count,
        opaque_types=report.opaque_types,
        header_timeline=report.header_timeline,
        rewrites=report.rewrites,
        requests=report.requests,
        violations=report.violations + tuple(extra_violations),
        notes=report.notes + tuple(extra_notes),
    )


def audit_file(path: str | os.PathLike[str], *, sidecars: SidecarOption = "auto") -> AuditReport:
    """Load and audit a JSONL session log, placeholders filled from ``sidecars`` (by default
    the sidecar files beside the log).

    A log whose body breaks at some line is a report with an ``unreadable`` violation, the
    events before that line audited as usual. Raises :class:`NotASessionLogError` for a file
    that is not a session log (no valid session header), :class:`OSError` for a file that
    cannot be opened, :class:`dsh_core.SidecarError` for sidecars that do not fit.
    """
    try:
        loaded = load_log(path, sidecars=sidecars)
    except CorruptLogError as exc:
        unreadable = Violation(code="unreadable", message=str(exc), seq=exc.seq, line=exc.line)
        prefix = readable_prefix(path, exc.line, sidecars=sidecars) if exc.line else None
        if prefix is None:
            return AuditReport(
                session_id=None,
                event_count=0,
                opaque_types=(),
                header_timeline=(),
                rewrites=(),
                requests=(),
                violations=(unreadable,),
                notes=(),
            )
        report = audit_loaded(prefix)
        return replace(
            report,
            violations=(*report.violations, unreadable),
            notes=(
                *report.notes,
                f"the log does not read from line {exc.line} on; the {report.event_count} "
                "event(s) before it were audited",
            ),
        )
    return audit_loaded(loaded)
