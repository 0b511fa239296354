"""The doctor's report on a terminal: the summary and the largest losses first, then every
request when asked (or when the report is small).

First what the trace is and where its figures come from; then the totals and what fixing each
cause would save; then the largest losses (the findings that cost most, across conversations,
each said once with its evidence) and, for a large report, the conversations that lost most.
Then, with ``full`` (``cache-report --all``) or for a report of up to :data:`DETAIL_REQUESTS`
requests, a table per conversation (each request, the request it is compared with, its figures
and causes) with its findings grouped; then the legend (the terms of ``_codes.TERMS``) and the
notes. The summary is one pass over the conversations, whatever their number: a report of a
million requests prints in the time it takes to read its diagnoses once.
"""

from __future__ import annotations

import heapq
import io
from dataclasses import dataclass, field
from typing import Final

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
    report_figures,
)
from ._text import one_line

__all__ = ["DETAIL_REQUESTS", "TOP", "render_report", "report_text"]

DETAIL_REQUESTS: Final = 200
"""A report of up to this many requests shows every request's row unless told otherwise; a
larger one its summary, its largest losses and the conversations that lost most."""

TOP: Final = 10
"""How many of the largest losses, and of the conversations that lost most, are shown."""

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


@dataclass(slots=True)
class _Cause:
    """One finding (code, what it says, severity) across the conversations it was found in."""

    order: int
    group: FindingGroup
    """Its group in the first conversation it was found in (its evidence stands for all)."""
    keys: list[str]
    """The first conversations it was found in (up to :data:`_KEYS`)."""
    conversations: int = 0
    requests: int = 0
    lost_tokens: int = 0

    @property
    def rank(self) -> tuple[bool, int, int]:
        """Refusals first, then by tokens lost; ties: the first found."""
        return (self.group.severity == "refusal", self.lost_tokens, -self.order)


_KEYS: Final = 3
"""Conversations named by a cause found in several."""


@dataclass(slots=True)
class _Overview:
    """What the summary needs, from one pass over the conversations (a streamed report reads
    them back from disk): the requests counted, where their figures came from, each costly
    finding across conversations, and the conversations that lost most (a bounded heap)."""

    top: int
    requests: int = 0
    prompts: set[str | None] = field(default_factory=set)
    hits: set[str | None] = field(default_factory=set)
    causes: dict[tuple[str, str, str], _Cause] = field(default_factory=dict)
    """Each finding that cost tokens or got a request refused, by code, what it says and its
    severity (as ``group_findings`` groups them within a conversation)."""
    conversations: list[tuple[int, int, ConversationDiagnosis, list[str]]] = field(
        default_factory=list
    )
    """(lost tokens, minus the order found, conversation, its costly codes): a min-heap."""
    losing: int = 0
    """Conversations that lost tokens."""
    notes: dict[str, int] = field(default_factory=dict)
    """Requests with a note (a risk that cost nothing, an accepted cause), by code."""

    def add(self, order: int, c: ConversationDiagnosis) -> None:
        lost = 0
        for r in c.requests:
            self.requests += 1
            if r.prompt_tokens is not None:
                self.prompts.add(r.prompt_source)
            if r.hit_tokens is not None:
                self.hits.add(r.hit_source)
            lost += r.lost_tokens
            for f in r.findings:
                if f.severity == "note":
                    self.notes[f.code] = self.notes.get(f.code, 0) + 1
        codes: dict[str, int] = {}
        for group in c.groups:
            if group.severity == "note" or not (group.lost_tokens or group.severity == "refusal"):
                continue
            codes[group.code] = codes.get(group.code, 0) + group.lost_tokens
            finding = group.first
            key = (group.code, finding.signature or finding.detail, group.severity)
            cause = self.causes.get(key)
            if cause is None:
                cause = self.causes[key] = _Cause(order=len(self.causes), group=group, keys=[])
            if not cause.keys or cause.keys[-1] != c.key:
                cause.conversations += 1
                if len(cause.keys) < _KEYS:
                    cause.keys.append(c.key)
            cause.requests += len(group.requests)
            cause.lost_tokens += group.lost_tokens
        if lost or codes:
            self.losing += 1
            named = sorted(codes, key=lambda code: -codes[code])
            entry = (lost, -order, c, named)
            if len(self.conversations) < self.top:
                heapq.heappush(self.conversations, entry)
            elif self.top and entry[:2] > self.conversations[0][:2]:
                heapq.heapreplace(self.conversations, entry)

    def largest(self) -> list[_Cause]:
        """The ``top`` causes that cost most."""
        return heapq.nlargest(self.top, self.causes.values(), key=lambda cause: cause.rank)


def _overview(report: DoctorReport, top: int) -> _Overview:
    overview = _Overview(top=top)
    for order, c in enumerate(report.conversations):
        overview.add(order, c)
    return overview


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


def _conversation_rows(overview: _Overview, marked: bool) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    table.add_column("conversation", overflow="fold")
    for name in ("requests", "efficiency", "hit rate", "lost"):
        table.add_column(name, justify="right")
    table.add_column("causes", overflow="fold")
    for lost, _, c, codes in sorted(overview.conversations, key=lambda e: (-e[0], -e[1])):
        totals = c.totals
        table.add_row(
            Text(c.key),  # a key is the recording's text, never markup
            str(len(c.requests)),
            _pct(totals.efficiency),
            _pct(totals.hit_rate),
            Text(_n(lost), style="red" if lost else ""),
            Text(", ".join(codes), style="red"),
        )
    return table


def _cause_head(cause: _Cause) -> Text:
    group = cause.group
    head = Text("  ")
    head.append(f"{group.severity:<7} ", style=_SEVERITY_STYLE[group.severity])
    head.append(group.code, style="bold")
    if cause.conversations == 1:
        head.append(f" · conversation {cause.keys[0]}, {group.noun} {group.label}")
    else:
        named = ", ".join(cause.keys) + (", …" if cause.conversations > len(cause.keys) else "")
        head.append(
            f" · {cause.requests:,} requests in {cause.conversations:,} conversations ({named})"
        )
    if cause.lost_tokens:
        head.append(f" · {cause.lost_tokens:,} tokens lost", style="red")
    return head


def _largest_losses(causes: list[_Cause], full: bool) -> list[Text]:
    out: list[Text] = []
    for cause in causes:
        out.append(_cause_head(cause))
        if not full:  # else every conversation's findings follow, each said there
            said = _group(cause.group)[1:]
            if cause.conversations > 1:
                said[0].append(f" (in conversation {cause.keys[0]})", style="dim")
            out += said
    return out


def render_report(
    report: DoctorReport, *, full: bool | None = None, top: int = TOP
) -> list[Text | Table]:
    """The report as rich renderables: the summary and the ``top`` largest losses first, then
    every request's table when ``full`` (default: when the report has no more than
    :data:`DETAIL_REQUESTS` requests), the legend and the notes."""
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
    overview = _overview(report, max(top, 0))
    count = overview.requests
    if full is None:
        full = count <= DETAIL_REQUESTS
    figures = _figures_text(report, overview.prompts, overview.hits)
    # a request's hit source is set only with its hit (so the hits' sources are every one's)
    marked = "simulated" in overview.hits and report.figures != "simulated"
    conversations = len(report.conversations)
    out.append(
        Text(
            f"{report.source} · {conversations} conversation(s) · "
            f"{count} request(s) · figures {figures} · cache "
            f"granularity {report.granularity.describe()}",
            style="dim",
        )
    )
    figures_of = report_figures(report)
    out.append(Text(""))
    out.append(_summary("all", figures_of.totals))
    side = figures_of.side_totals
    if side.requests:
        out.append(_summary(f"side calls ({side.requests})", side))
    if figures_of.savings:
        out.append(Text("\nwhat fixing each cause would save", style="bold"))
        by_tokens = sorted(figures_of.savings.items(), key=lambda item: -item[1]["lostTokens"])
        for code, entry in by_tokens:
            line = f"  {code}: {entry['lostTokens']:,} tokens on {entry['requests']} request(s)"
            if entry["savings"]:
                line += f" · {money(entry['savings'])}"
            out.append(Text(line))
    # every request's findings follow when full: with one conversation, a ranking would only
    # say them twice
    largest = overview.largest() if not full or conversations > 1 else []
    if largest:
        title = Text("\nlargest losses", style="bold")
        if len(largest) < len(overview.causes):
            title.append(f" ({len(largest)} of {len(overview.causes)} causes)", style="dim")
        out.append(title)
        out += _largest_losses(largest, full)
    elif overview.top and not overview.causes:
        out.append(Text("\nno finding cost a cache hit or got a request refused", style="green"))
    if not full and overview.conversations and conversations > 1:
        title = Text("\nconversations that lost most", style="bold")
        if len(overview.conversations) < overview.losing:
            title.append(f" ({len(overview.conversations)} of {overview.losing})", style="dim")
        out.append(title)
        out.append(_conversation_rows(overview, marked))
    if full:
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
                out.append(
                    _summary(f"side calls ({side.requests}, apart from the main line)", side)
                )
    else:
        if overview.notes:
            named = ", ".join(
                f"{code} on {n:,}"
                for code, n in sorted(overview.notes.items(), key=lambda item: -item[1])
            )
            out.append(Text(f"\nnotes (no tokens lost): {named} request(s)", style="dim"))
        out.append(
            Text(
                f"\n{count:,} requests in {conversations:,} conversation(s): each request's row "
                "and every finding with `cache-report --all`, report_text(report, full=True) "
                "or /_dsh/report?all=1",
                style="dim",
            )
        )
    out.append(Text("\nlegend", style="bold"))
    for name, meaning in TERMS:
        out.append(Text(f"  {name}: {meaning}", style="dim"))
    for note in report.notes:
        out.append(Text(f"note: {note}", style="dim"))
    return out


def report_text(report: DoctorReport, *, full: bool | None = None, top: int = TOP) -> str:
    """The report as plain text (no colours): the totals, what fixing each cause would save (most
    tokens first), the ``top`` largest losses (each cause once, across conversations); then
    every conversation's table of requests when ``full`` (default: for a report of up to
    :data:`DETAIL_REQUESTS` requests), else the ``top`` conversations that lost most (of
    several) and how many requests carry each note; the legend and the trace's notes."""
    buffer = io.StringIO()
    emit(make_console(buffer), *render_report(report, full=full, top=top))
    return buffer.getvalue()
