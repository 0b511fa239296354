"""``dsh-testkit cache-report TRACE``: the cache doctor's report on a terminal, as JSON and HTML.

One table per conversation (figures defined in the legend printed under it), then every finding
with its cause code, sentence and evidence, then the totals with what the efficiency divides by.
"""

from __future__ import annotations

import argparse
import html
import sys
from typing import Final

from rich.table import Table
from rich.text import Text

from ._console import dumps_report_json, output_report
from ._doctor import CAUSE_CODES, ConversationDiagnosis, DoctorReport, diagnose

__all__ = [
    "LEGEND",
    "render_doctor_html",
    "render_doctor_report",
    "run_trace_audit",
    "run_trace_cache_report",
]

LEGEND: Final = (
    ("prompt", "the request's prompt tokens"),
    ("hit", "prompt tokens served from the provider's cache"),
    (
        "reusable",
        "the previous request's prompt (rounded down to the cache unit): what a request "
        "that extends it can reuse at least",
    ),
    ("shared", "best possible: the prefix this request shares with the previous one (≤ reusable)"),
    ("lost·change", "reusable − shared: lost to the client's changes (see the cause codes)"),
    ("lost·provider", "shared − min(hit, shared): shared but not served"),
    (
        "extra",
        "hit − min(hit, shared): hit beyond the shared prefix (the previous answer, or a "
        "prefix cached by an earlier request)",
    ),
    (
        "efficiency",
        "Σ min(hit, shared) / Σ reusable over the requests after each conversation's first",
    ),
)
"""Every figure's definition, shown under the terminal table and in the HTML page."""


def _n(value: int | None) -> str:
    return f"{value:,}" if value is not None else "–"


def _conversation_table(report: DoctorReport, c: ConversationDiagnosis) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name in (
        "#",
        "prompt",
        "hit",
        "reusable",
        "shared",
        "lost·change",
        "lost·provider",
        "extra",
    ):
        table.add_column(name, justify="right")
    table.add_column("cause", overflow="fold")
    for r in c.requests:
        first = r.position == 1
        codes = ", ".join(dict.fromkeys(r.codes)) or (
            "first request" if first else "extends the previous request"
        )
        table.add_row(
            str(r.index + 1),
            _n(r.prompt_tokens),
            Text(_n(r.hit_tokens), style="green" if r.hit_tokens else ""),
            "" if first else _n(r.reusable_tokens),
            "" if first else _n(r.shared_tokens),
            Text("" if first else _n(r.lost_to_changes), style="red" if r.lost_to_changes else ""),
            "" if first else _n(r.lost_by_provider),
            "" if first else _n(r.extra_tokens),
            Text(codes, style="yellow" if r.findings else "dim"),
        )
    return table


def render_doctor_report(report: DoctorReport) -> list[Text | Table]:
    """The report as rich renderables."""
    out: list[Text | Table] = []
    head = Text()
    head.append("Cache doctor ", style="bold")
    head.append(report.path or f"({report.source} trace)")
    head.append(
        (f" · {report.source} trace" if report.path else "")
        + f" · {len(report.conversations)} conversation(s) · figures "
        f"{report.figures}"
        + (
            " by the mock's prefix-cache simulator"
            if report.figures == "simulated"
            else " by the provider"
        )
        + f" · {report.unit_tokens}-token cache units",
        style="dim",
    )
    out.append(head)
    for c in report.conversations:
        title = Text(f"\nconversation {c.key}", style="bold")
        title.append(f" · {len(c.requests)} request(s)", style="dim")
        out.append(title)
        out.append(_conversation_table(report, c))
        for r, finding in c.findings():
            line = Text()
            line.append(f"  #{r.index + 1} ", style="bold")
            line.append(finding.code, style="yellow")
            line.append(f": {finding.detail}")
            out.append(line)
            out.append(Text(f"      {finding.sentence}", style="dim"))
            for evidence in finding.evidence:
                out.append(Text(f"      {evidence}"))
        t = c.totals()
        summary = Text()
        efficiency = c.efficiency
        summary.append("  efficiency ", style="bold")
        summary.append(
            "–" if efficiency is None else f"{efficiency * 100:.1f}%",
            style="bold green" if efficiency is not None and efficiency >= 0.9 else "bold yellow",
        )
        summary.append(
            f" = {_n(t['countedHitTokens'])} counted hit / {_n(t['reusableTokens'])} reusable"
            f" ({report.figures}) · lost {_n(t['lostToChangesTokens'])} to changes, "
            f"{_n(t['lostByProviderTokens'])} by the provider · extra {_n(t['extraTokens'])}"
            f" · {_n(t['hitTokens'])} hit of {_n(t['promptTokens'])} prompt tokens in all"
        )
        out.append(summary)
    legend = Text("\nlegend", style="bold")
    out.append(legend)
    for name, meaning in LEGEND:
        out.append(Text(f"  {name}: {meaning}", style="dim"))
    for note in report.notes:
        out.append(Text(f"note: {note}", style="dim"))
    return out


def render_doctor_html(report: DoctorReport) -> str:
    """A self-contained HTML page of the report (inline CSS, no network)."""
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Cache doctor</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{padding:2px 8px;text-align:right}td.c{text-align:left}"
        ".ev{font-family:monospace;white-space:pre-wrap;color:#444}.code{color:#b8860b}"
        "</style></head><body>",
        f"<h1>Cache doctor: {e(report.path or report.source)}</h1>",
        f"<p>figures: <b>{e(report.figures)}</b> · {report.unit_tokens}-token cache units</p>",
    ]
    for c in report.conversations:
        parts.append(f"<h2>conversation {e(c.key)}</h2><table><tr>")
        parts += [
            f"<th>{e(h)}</th>"
            for h in (
                "#",
                "prompt",
                "hit",
                "reusable",
                "shared",
                "lost·change",
                "lost·provider",
                "extra",
                "cause",
            )
        ]
        parts.append("</tr>")
        for r in c.requests:
            first = r.position == 1
            cells = [
                str(r.index + 1),
                _n(r.prompt_tokens),
                _n(r.hit_tokens),
                *(
                    ["", "", "", "", ""]
                    if first
                    else [
                        _n(r.reusable_tokens),
                        _n(r.shared_tokens),
                        _n(r.lost_to_changes),
                        _n(r.lost_by_provider),
                        _n(r.extra_tokens),
                    ]
                ),
            ]
            codes = ", ".join(dict.fromkeys(r.codes))
            parts.append(
                "<tr>"
                + "".join(f"<td>{e(x)}</td>" for x in cells)
                + f"<td class='c code'>{e(codes)}</td></tr>"
            )
        parts.append("</table><ul>")
        for r, finding in c.findings():
            evidence = "\n".join(finding.evidence)
            parts.append(
                f"<li>#{r.index + 1} <span class='code'>{e(finding.code)}</span>: "
                f"{e(finding.detail)}<br><small>{e(finding.sentence)}</small>"
                f"<div class='ev'>{e(evidence)}</div></li>"
            )
        efficiency = c.efficiency
        t = c.totals()
        parts.append(
            "</ul><p><b>efficiency "
            + ("–" if efficiency is None else f"{efficiency * 100:.1f}%")
            + f"</b> = {_n(t['countedHitTokens'])} counted hit / {_n(t['reusableTokens'])} "
            "reusable</p>"
        )
    parts.append("<h2>legend</h2><dl>")
    for name, meaning in LEGEND:
        parts.append(f"<dt>{e(name)}</dt><dd>{e(meaning)}</dd>")
    parts.append("</dl><h2>cause codes</h2><dl>")
    for code, sentence in CAUSE_CODES.items():
        parts.append(f"<dt class='code'>{e(code)}</dt><dd>{e(sentence)}</dd>")
    parts.append("</dl></body></html>\n")
    return "".join(parts)


def _load(args: argparse.Namespace, command: str) -> DoctorReport | int:
    from ..traces import TraceError, load_trace

    try:
        trace = load_trace(args.log)
    except OSError as exc:
        print(
            f"dsh-testkit {command}: cannot read {args.log}: {exc.strerror or exc}", file=sys.stderr
        )
        return 2
    except (TraceError, UnicodeDecodeError) as exc:
        print(f"dsh-testkit {command}: {exc}", file=sys.stderr)
        return 1
    unit = getattr(args, "block_tokens", None)
    if unit is not None and unit < 1:
        print(
            f"dsh-testkit {command}: --block-tokens must be at least 1, got {unit}", file=sys.stderr
        )
        return 2
    try:
        return diagnose(
            trace,
            simulate=True if getattr(args, "simulate", False) else None,
            conversation=getattr(args, "conversation", None),
            **({"unit_tokens": unit} if unit is not None else {}),
        )
    except KeyError as exc:
        print(f"dsh-testkit {command}: {exc.args[0]}", file=sys.stderr)
        return 2


def run_trace_cache_report(args: argparse.Namespace) -> int:
    """``dsh-testkit cache-report`` over any trace; returns the exit status."""
    report = _load(args, "cache-report")
    if isinstance(report, int):
        return report
    return output_report(
        "cache-report",
        document=report.to_json,
        renderables=lambda: render_doctor_report(report),
        html=lambda: render_doctor_html(report),
        html_path=args.html,
        as_json=args.json,
    )


_AUDIT_CODES: Final = {
    "prefix stability": (
        "volatile-system-text",
        "system-changed",
        "tools-changed",
        "history-rewritten",
        "params-changed",
    ),
    "reasoning pass-back": ("reasoning-dropped", "reasoning-altered"),
    "argument echo": ("tool-args-reserialized",),
}


def run_trace_audit(args: argparse.Namespace) -> int:
    """``dsh-testkit audit`` over a trace: the wire-level checks; 1 when one fails."""
    report = _load(args, "audit")
    if isinstance(report, int):
        return report
    failed = False
    lines: list[str] = []
    for check, codes in _AUDIT_CODES.items():
        found = [
            (c.key, r, f) for c in report.conversations for r, f in c.findings() if f.code in codes
        ]
        failed = failed or bool(found)
        lines.append(f"{check}: {'FAIL' if found else 'ok'} ({len(found)} finding(s))")
        for key, r, f in found:
            lines.append(f"  conversation {key} request #{r.index + 1}: {f.code}: {f.detail}")
            lines += [f"      {ev}" for ev in f.evidence]
    if getattr(args, "json", False):
        sys.stdout.write(dumps_report_json({**report.to_json(), "ok": not failed}))
    else:
        sys.stdout.write("\n".join(lines) + "\n")
    return 1 if failed else 0
