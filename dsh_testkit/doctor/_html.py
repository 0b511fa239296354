"""The report as one self-contained HTML page (inline CSS, no network, opens from ``file://``)."""

from __future__ import annotations

import html

from ._codes import CODES, TERMS
from ._report import DoctorReport, RequestDiagnosis

__all__ = ["render_html"]

_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
    "td,th{padding:2px 8px;text-align:right}td.c,th.c{text-align:left}"
    ".ev{font-family:monospace;white-space:pre-wrap;color:#444}.loss{color:#b00}"
    ".refusal{color:#b00;font-weight:bold}.note{color:#777}"
)


def _n(value: int | None) -> str:
    return f"{value:,}" if value is not None else "–"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def _row(r: RequestDiagnosis) -> str:
    e = html.escape
    compared = "first" if r.parent is None else f"{r.relation} #{r.parent + 1}"
    codes = ", ".join(
        f"<a class='{f.severity}' href='#code-{f.code}'>{e(f.code)}</a>" for f in r.findings
    )
    cells = [
        str(r.index + 1),
        compared,
        _n(r.prompt_tokens),
        _n(r.hit_tokens),
        _pct(r.hit_rate),
        "" if r.parent is None else _n(r.reusable_tokens),
        "" if r.parent is None or not r.measured else _n(r.lost_tokens),
    ]
    return "<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + f"<td class='c'>{codes}</td></tr>"


def render_html(report: DoctorReport) -> str:
    """The report as a self-contained page."""
    e = html.escape
    totals = report.totals
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Cache doctor: {e(report.path or report.source)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Cache doctor: {e(report.path or report.source)}</h1>",
        f"<p>{e(report.source)} · figures {e(report.figures)} · cache unit "
        f"{e(report.unit.describe())}</p>",
        f"<p><b>efficiency {_pct(totals.efficiency)}</b> · hit rate {_pct(totals.hit_rate)} · "
        f"lost {_n(totals.lost_tokens)} tokens</p>",
    ]
    if report.empty:
        parts.append("<p>The trace is empty: it holds no model requests.</p>")
    for c in report.conversations:
        parts.append(f"<h2>conversation {e(c.key)}</h2><table><tr>")
        for head in ("#", "compared with", "prompt", "hit", "hit %", "reusable", "lost"):
            parts.append(f"<th>{e(head)}</th>")
        parts.append("<th class='c'>causes</th></tr>")
        parts += [_row(r) for r in c.requests]
        parts.append("</table><ul>")
        for group in c.groups:
            finding = group.first
            parts.append(
                f"<li><span class='{group.severity}'>{group.severity}</span> "
                f"<a href='#code-{group.code}'>{e(group.code)}</a> · requests {e(group.label)}"
                f"{f' · {group.lost_tokens:,} tokens lost' if group.lost_tokens else ''}<br>"
                f"{e(finding.detail)}<div class='ev'>{e(chr(10).join(finding.evidence))}</div>"
                "</li>"
            )
        parts.append(
            f"</ul><p>efficiency {_pct(c.efficiency)} · hit rate {_pct(c.totals.hit_rate)}</p>"
        )
    parts.append("<h2>legend</h2><dl>")
    for name, meaning in TERMS:
        parts.append(f"<dt>{e(name)}</dt><dd>{e(meaning)}</dd>")
    parts.append("</dl><h2>cause codes</h2><dl>")
    for code, info in CODES.items():
        parts.append(
            f"<dt id='code-{code}'>{e(code)}</dt><dd>{e(info.sentence)} "
            f"<i>{e(info.advice)}</i></dd>"
        )
    parts.append("</dl>")
    for note in report.notes:
        parts.append(f"<p class='note'>note: {e(note)}</p>")
    parts.append("</body></html>\n")
    return "".join(parts)
