"""The audit on the terminal: the header timeline and the requests table."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ._audit import AuditReport

__all__ = ["render_audit"]

# --------------------------------------------------------------------------------------------
# Rendering


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _timeline_table(report: AuditReport) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    table.add_column("seq", justify="right")
    table.add_column("turn", justify="right")
    table.add_column("event")
    table.add_column("header / changes", overflow="fold")
    for entry in report.header_timeline:
        kind = f"snapshot · {entry.reason}" if entry.reason else "delta"
        if entry.changes:
            detail = Text("; ".join(entry.changes), style="yellow")
        elif entry is report.header_timeline[0]:
            detail = Text(entry.header)
        else:
            detail = Text("no change in the logged values", style="dim")
        table.add_row(str(entry.seq), str(entry.turn or "–"), kind, detail)
    return table


def _requests_table(report: AuditReport) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("turn.step", justify="right")
    table.add_column("try", justify="right")
    table.add_column("boundary", justify="right")
    table.add_column("msgs", justify="right")
    table.add_column("relation to the previous request", overflow="fold")
    what = {
        h.seq: f"{h.event_type} {h.reason or ''}".strip() + f" at seq {h.seq}"
        for h in report.header_timeline
    }
    what.update({r.seq: f"{r.kind} at seq {r.seq}" for r in report.rewrites})
    previous_count = 0
    for request in report.requests:
        if request.extends_previous is None:
            relation = Text("first request")
        elif request.extends_previous:
            added = request.message_count - previous_count
            relation = Text(f"extends #{request.index - 1} (+{added} messages)", style="green")
        else:
            relation = Text(request.differences[0], style="yellow")
            if len(request.differences) > 1:
                relation.append(f" (+{len(request.differences) - 1} more)", style="dim")
            if request.changed_by:
                causes = ", ".join(what.get(seq, f"seq {seq}") for seq in request.changed_by)
                relation.append(f" · {causes}", style="dim")
        table.add_row(
            str(request.index),
            f"{request.turn}.{request.step}",
            str(request.attempt),
            str(request.boundary_seq),
            str(request.message_count),
            relation,
        )
        previous_count = request.message_count
    return table


def render_audit(report: AuditReport) -> list[Text | Table]:
    """The audit as rich renderables: summary, header timeline, requests, violations, verdict."""
    out: list[Text | Table] = []
    head = Text()
    head.append("Session ", style="bold")
    head.append(report.session_id or "(unknown)")
    head.append(
        f" · {_plural(report.event_count, 'event')} · {_plural(len(report.requests), 'request')}"
        f" · {_plural(len(report.header_timeline), 'header event')}"
    )
    out.append(head)
    if report.opaque_types:
        opaque = ", ".join(f"{t} ×{n}" for t, n in report.opaque_types)
        out.append(Text(f"Carried as opaque (not modelled here): {opaque}", style="dim"))
    if report.header_timeline:
        out.extend([Text("\nHeader timeline", style="bold"), _timeline_table(report)])
    if report.requests:
        out.extend([Text("\nRequests", style="bold"), _requests_table(report)])
    if report.notes:
        out.append(Text("\nNotes", style="bold"))
        out.extend(Text(f"  • {note}") for note in report.notes)
    if report.violations:
        out.append(Text("\nViolations", style="bold red"))
        for violation in report.violations:
            where = []
            if violation.seq is not None:
                where.append(f"seq {violation.seq}")
            if violation.line is not None:
                where.append(f"line {violation.line}")
            line = Text("  ✗ ", style="red")
            line.append(violation.code, style="bold red")
            if where:
                line.append(f" ({', '.join(where)})")
            line.append(f": {violation.message}")
            out.append(line)
    verdict = (
        Text("\naudit: OK, no violations", style="bold green")
        if report.ok
        else Text(
            f"\naudit: FAILED, {_plural(len(report.violations), 'violation')}",
            style="bold red",
        )
    )
    out.append(verdict)
    return out
