"""The doctor's report on a terminal: a table per conversation, findings said once, totals.

One table per conversation (each request, the request it is compared with, its figures and
causes), then its findings grouped (the same change on several requests is one entry naming
them), then the totals and what fixing each cause would save, then the legend (the terms of
``_codes.TERMS``) and the notes.
"""

from __future__ import annotations

import io

from rich.table import Table
from rich.text import Text

from .._console import emit, make_console
from ._codes import TERMS
from ._report import (
    ConversationDiagnosis,
    DoctorReport,
    FindingGroup,
    RequestDiagnosis,
    Totals,
    money,
)
from ._text import one_line

__all__ = ["render_report", "report_text"]

_SEVERITY_STYLE = {"loss": "red", "refusal": "bold red", "note": "dim"}


def _n(value: int | None) -> str:
    return f"{value:,}" if value is not None else "–"


SIMULATED_MARK = "*"
"""Marks a figure the mock's prefix cache simulated on a report whose others are reported."""


def _figure(value: int | None, source: str | None, marked: bool) -> str:
    text = _n(value)
    return (
        f"{text}{SIMULATED_MARK}"
        if marked and value is not None and source == "simulated"
        else text
    )


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def _compared(r: RequestDiagnosis) -> str:
    if r.parent is None:
        return "first"
    verb = {
        "extends": "extends",
        "repeats": "repeats",
        "diverges": "departs from",
        "branch": "side call off",
    }.get(r.relation, r.relation)
    return f"{verb} #{r.parent + 1}"


def _causes(r: RequestDiagnosis) -> Text:
    if (r.status or 0) >= 400:
        return Text(f"refused ({r.status})", style="bold red")
    losing = [f.code for f in r.findings if f.severity != "note"]
    notes = [f.code for f in r.findings if f.severity == "note"]
    text = Text()
    if losing:
        text.append(", ".join(dict.fromkeys(losing)), style="red")
    if notes:
        if losing:
            text.append(" · ")
        text.append("notes: " + ", ".join(dict.fromkeys(notes)), style="dim")
    if not losing and not notes:
        text.append("—" if r.parent is None else "lost nothing", style="dim")
    return text


def _table(c: ConversationDiagnosis, marked: bool) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("compared with")
    for name in ("prompt", "hit", "hit %", "reusable", "lost"):
        table.add_column(name, justify="right")
    table.add_column("causes", overflow="fold")
    for r in c.requests:
        first = r.parent is None
        table.add_row(
            str(r.index + 1),
            _compared(r),
            _figure(r.prompt_tokens, r.prompt_source, marked),
            Text(
                _figure(r.hit_tokens, r.hit_source, marked), style="green" if r.hit_tokens else ""
            ),
            _pct(r.hit_rate),
            "" if first else _n(r.reusable_tokens),
            Text(
                "" if first or not r.measured else _n(r.lost_tokens),
                style="red" if r.lost_tokens else "",
            ),
            _causes(r),
        )
    return table


def _group(group: FindingGroup) -> list[Text]:
    finding = group.first
    head = Text("  ")
    head.append(f"{group.severity:<7} ", style=_SEVERITY_STYLE[group.severity])
    head.append(group.code, style="bold")
    head.append(f" · {group.noun} {group.label}")
    if group.lost_tokens:
        head.append(f" · {group.lost_tokens:,} tokens lost", style="red")
    out = [head, Text(f"          {finding.detail}")]
    if finding.where:
        out.append(Text(f"          at {finding.where}", style="dim"))
    out += [Text(f"          {one_line(line)}") for line in finding.evidence]
    out.append(Text(f"          {finding.sentence}", style="dim"))
    if group.severity != "note":
        out.append(Text(f"          advice: {finding.advice}", style="dim"))
    return out


def _summary(label: str, totals: Totals) -> Text:
    line = Text(f"  {label} ", style="bold")
    efficiency = totals.efficiency
    line.append(
        f"efficiency {_pct(efficiency)}",
        style="bold green" if efficiency is not None and efficiency >= 0.9 else "bold yellow",
    )
    line.append(
        f" ({_n(totals.counted_hit_tokens)} of {_n(totals.reusable_tokens)} reusable) · hit rate "
        f"{_pct(totals.hit_rate)} ({_n(totals.hit_tokens)} of {_n(totals.prompt_tokens)} prompt "
        f"tokens) · lost {_n(totals.lost_tokens)}"
    )
    if totals.cost is not None:
        line.append(f" · cost {money(totals.cost)}")
        if totals.lost_cost:
            line.append(f" (lost hits {money(totals.lost_cost)})")
    if totals.refused:
        line.append(f" · {totals.refused} refused", style="red")
    if totals.simulated and totals.simulated < totals.measured:
        line.append(f" · {totals.simulated} of {totals.measured} hits simulated")
    if totals.unknown:
        line.append(
            f" · {totals.unknown} request(s) without a cache figure"
            + (
                f" ({totals.unknown_prompt_tokens:,} prompt tokens)"
                if totals.unknown_prompt_tokens
                else ""
            )
            + ": not in these rates",
            style="yellow",
        )
    return line


def _sources(report: DoctorReport) -> tuple[int, set[str | None], set[str | None]]:
    """The report's requests counted, and where their prompts and hits came from (one pass
    over the conversations: a streamed report reads them back from disk)."""
    count = 0
    prompts: set[str | None] = set()
    hits: set[str | None] = set()
    for c in report.conversations:
        for r in c.requests:
            count += 1
            if r.prompt_tokens is not None:
                prompts.add(r.prompt_source)
            if r.hit_tokens is not None:
                hits.add(r.hit_source)
    return count, prompts, hits


def _figures_text(report: DoctorReport, prompts: set[str | None], hits: set[str | None]) -> str:
    """Where the figures come from, as the requests say."""
    if hits == {"simulated"} and prompts == {"reported"}:
        return "prompts reported by the provider, hits simulated by the mock's prefix cache"
    if report.figures == "simulated" or hits == {"simulated"}:
        return "simulated by the mock's prefix cache"
    if "simulated" in hits:
        return (
            f"reported by the provider, hits marked {SIMULATED_MARK} simulated by the mock's "
            "prefix cache (no cache figure recorded)"
        )
    return "reported by the provider"


def render_report(report: DoctorReport) -> list[Text | Table]:
    """The report as rich renderables."""
    out: list[Text | Table] = []
    head = Text()
    head.append("Cache doctor ", style="bold")
    head.append(report.path or f"({report.source} trace)")
    out.append(head)
    if report.empty:
        out.append(
            Text(
                "the trace is empty: it holds no model requests, so there is nothing to report",
                style="yellow",
            )
        )
        for note in report.notes:
            if not note.startswith("the trace is empty"):
                out.append(Text(f"note: {note}", style="dim"))
        return out
    count, prompts, hits = _sources(report)
    figures = _figures_text(report, prompts, hits)
    # a request's hit source is set only with its hit (so the hits' sources are every one's)
    marked = "simulated" in hits and report.figures != "simulated"
    out.append(
        Text(
            f"{report.source} · {len(report.conversations)} conversation(s) · "
            f"{count} request(s) · figures {figures} · cache "
            f"granularity {report.granularity.describe()}",
            style="dim",
        )
    )
    for c in report.conversations:
        title = Text(f"\nconversation {c.key}", style="bold")
        title.append(f" · {len(c.requests)} request(s)", style="dim")
        out.append(title)
        out.append(_table(c, marked))
        for group in c.groups:
            out += _group(group)
        out.append(_summary("conversation", c.totals))
        side = c.side_totals
        if side.requests:
            out.append(_summary(f"side calls ({side.requests}, apart from the main line)", side))
    out.append(Text(""))
    out.append(_summary("all", report.totals))
    side = report.side_totals
    if side.requests:
        out.append(_summary(f"side calls ({side.requests})", side))
    savings = report.savings()
    if savings:
        out.append(Text("\nwhat fixing each cause would save", style="bold"))
        for code, entry in savings.items():
            line = f"  {code}: {entry['lostTokens']:,} tokens on {entry['requests']} request(s)"
            if entry["savings"]:
                line += f" · {money(entry['savings'])}"
            out.append(Text(line))
    out.append(Text("\nlegend", style="bold"))
    for name, meaning in TERMS:
        out.append(Text(f"  {name}: {meaning}", style="dim"))
    for note in report.notes:
        out.append(Text(f"note: {note}", style="dim"))
    return out


def report_text(report: DoctorReport) -> str:
    """The report as plain text (no colours)."""
    buffer = io.StringIO()
    emit(make_console(buffer), *render_report(report))
    return buffer.getvalue()
