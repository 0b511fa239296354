"""The cache report as one self-contained HTML page (``dsh-testkit cache-report --html FILE``).

Inline CSS and SVG only: no script runs and nothing loads from the network, so the page reads
the same offline, from a CI artifact, or in a mail attachment. Tooltips are SVG ``<title>``
elements. The page is deterministic: the same report gives the same bytes (no timestamps,
fixed number formatting, the embedded JSON data block with sorted keys).
"""

from __future__ import annotations

import json
from html import escape
from typing import Final

from ._cache_model import CACHE_LEGEND, CacheReport, RequestCache

__all__ = ["render_cache_report_html"]

_CSS: Final = """
:root { --hit: #2e9d5b; --miss: #e8833a; --unknown: #b9bec7; --best: #1f2a44; --drop: #c9302c;
        --fg: #1b1f24; --muted: #5b6470; --rule: #d8dce2; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       margin: 2rem auto; max-width: 980px; padding: 0 1rem; }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; }
h2 { font-size: 1.1rem; margin: 2rem 0 .5rem; }
.meta, .note { color: var(--muted); }
dl.totals { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr));
            gap: .5rem 1rem; margin: 1rem 0; }
dl.totals div { border: 1px solid var(--rule); border-radius: 6px; padding: .5rem .75rem; }
dl.totals dt { color: var(--muted); font-size: .8rem; }
dl.totals dd { margin: 0; font-size: 1.15rem; font-variant-numeric: tabular-nums; }
svg { max-width: 100%; height: auto; }
svg text { font: 12px system-ui, sans-serif; fill: var(--fg); }
.legend span { display: inline-block; margin-right: 1.25rem; }
dl.legend dt { font-weight: 600; } dl.legend dd { margin: 0 0 .4rem 1rem; color: var(--muted); }
.swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px;
          vertical-align: -1px; margin-right: .3rem; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: right; padding: .3rem .5rem; border-bottom: 1px solid var(--rule);
         vertical-align: top; }
th { font-weight: 600; }
td.cause, th.cause { text-align: left; }
tr.drop td { background: #fff4f2; }
.kind { font-size: .75rem; border-radius: 3px; padding: 0 .3rem; margin-right: .3rem;
        background: #eef0f3; color: var(--muted); }
.kind.provider-side, .kind.rewrite { background: #fbe3e1; color: var(--drop); }
ul.causes { margin: 0; padding: 0; list-style: none; }
"""

_ROW: Final = 24
_LABEL: Final = 96
_BAR: Final = 600
_RIGHT: Final = 120


def _n(value: int | None) -> str:
    return f"{value:,}" if value is not None else "–"


def _pct(value: float | None) -> str:
    return f"{value * 100:.1f}%" if value is not None else "–"


def _x(value: float) -> str:
    return f"{value:.1f}"


def _bar_row(r: RequestCache, y: int, scale: float) -> list[str]:
    label = f"#{r.index} · {r.turn}.{r.step}" + (f"/{r.attempt}" if r.attempt else "")
    out = [f'<text x="0" y="{y + 16}">{escape(label)}</text>']
    left = float(_LABEL)
    if r.usage_status == "none":
        out.append(f'<text x="{_x(left)}" y="{y + 16}" fill="#5b6470">no usage reported</text>')
    elif r.usage_status == "no-cache-figure":
        width = (r.prompt_tokens or 0) * scale
        out.append(
            f'<rect x="{_x(left)}" y="{y + 4}" width="{_x(width)}" height="16" fill="#b9bec7">'
            f"<title>{escape(f'#{r.index}: {_n(r.prompt_tokens)} prompt tokens, no cache figure')}</title></rect>"
        )
    else:
        hit_w = (r.hit_tokens or 0) * scale
        miss_w = (r.miss_tokens or 0) * scale
        tip = (
            f"#{r.index}: hit {_n(r.hit_tokens)}, miss {_n(r.miss_tokens)} of "
            f"{_n(r.prompt_tokens)} prompt tokens ({_pct(r.hit_ratio)})"
        )
        out.append(
            f'<rect x="{_x(left)}" y="{y + 4}" width="{_x(hit_w)}" height="16" fill="#2e9d5b">'
            f"<title>{escape(tip)}</title></rect>"
        )
        out.append(
            f'<rect x="{_x(left + hit_w)}" y="{y + 4}" width="{_x(miss_w)}" height="16" '
            f'fill="#e8833a"><title>{escape(tip)}</title></rect>'
        )
    if r.index > 1:
        bx = left + r.best_possible_tokens * scale
        out.append(
            f'<line x1="{_x(bx)}" x2="{_x(bx)}" y1="{y + 1}" y2="{y + 23}" stroke="#1f2a44" '
            f'stroke-width="2" stroke-dasharray="3 2"><title>'
            f"{escape(f'best possible hit: {_n(r.best_possible_tokens)} tokens')}</title></line>"
        )
    right = _LABEL + _BAR + 8
    if r.drop:
        out.append(
            f'<text x="{right}" y="{y + 16}" fill="#c9302c">▼ lost {_n(r.lost_tokens)}</text>'
        )
    elif r.hit_ratio is not None:
        out.append(f'<text x="{right}" y="{y + 16}">{_pct(r.hit_ratio)}</text>')
    return out


def _chart(report: CacheReport) -> str:
    requests = report.requests
    biggest = max([max(r.prompt_tokens or 0, r.best_possible_tokens) for r in requests] or [0])
    scale = _BAR / biggest if biggest else 0.0
    height = max(1, len(requests)) * _ROW + 8
    width = _LABEL + _BAR + _RIGHT
    rows: list[str] = []
    for i, r in enumerate(requests):
        rows.extend(_bar_row(r, 4 + i * _ROW, scale))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" '
        f'aria-label="cache hit and miss per request">\n' + "\n".join(rows) + "\n</svg>"
    )


def _detail_without_kind(kind: str, detail: str) -> str:
    """The detail, without a leading ``kind:`` that the kind label already shows."""
    for prefix in (f"{kind}: ", f"{kind} "):
        if detail.startswith(prefix):
            return detail[len(prefix) :]
    return detail


def _causes(r: RequestCache) -> str:
    if not r.causes:
        text = "first request" if r.index == 1 else "extends the previous request"
        return f'<span class="note">{text}</span>'
    items = "".join(
        f'<li><span class="kind {escape(c.kind)}">{escape(c.kind)}</span>'
        f"{escape(_detail_without_kind(c.kind, c.detail))}</li>"
        for c in r.causes
    )
    return f'<ul class="causes">{items}</ul>'


def _table(report: CacheReport) -> str:
    head = (
        "<tr><th>#</th><th>turn.step</th><th>prompt</th><th>hit</th><th>miss</th>"
        "<th>ratio</th><th>reusable</th><th>best possible</th><th>lost</th><th>bonus</th>"
        '<th class="cause">attribution</th></tr>'
    )
    rows = []
    for r in report.requests:
        if r.usage_status == "none":
            numbers = '<td colspan="4" class="note">no usage reported</td>'
        elif r.usage_status == "no-cache-figure":
            numbers = (
                f'<td>{_n(r.prompt_tokens)}</td><td class="note">no cache figure</td>'
                f"<td>{_n(r.miss_tokens)}</td><td>–</td>"
            )
        else:
            numbers = (
                f"<td>{_n(r.prompt_tokens)}</td><td>{_n(r.hit_tokens)}</td>"
                f"<td>{_n(r.miss_tokens)}</td><td>{_pct(r.hit_ratio)}</td>"
            )
        step = f"{r.turn}.{r.step}" + (f"/{r.attempt}" if r.attempt else "")
        row_class = ' class="drop"' if r.drop else ""
        rows.append(
            f"<tr{row_class}><td>{r.index}</td><td>{step}</td>{numbers}"
            f"<td>{_n(r.potential_tokens) if r.index > 1 else '–'}</td>"
            f"<td>{_n(r.best_possible_tokens) if r.index > 1 else '–'}</td>"
            f"<td>{_n(r.lost_tokens) if r.lost_tokens else ''}</td>"
            f"<td>{_n(r.bonus_tokens) if r.bonus_tokens else ''}</td>"
            f'<td class="cause">{_causes(r)}</td></tr>'
        )
    return "<table>\n" + head + "\n" + "\n".join(rows) + "\n</table>"


def _chart_legend(report: CacheReport) -> str:
    """Swatches for what the chart draws, and only for that (no entry without data)."""
    requests = report.requests
    entries: list[str] = []
    if any(r.usage_status == "reported" for r in requests):
        entries.append('<span><i class="swatch" style="background:var(--hit)"></i>cache hit</span>')
        entries.append('<span><i class="swatch" style="background:var(--miss)"></i>miss</span>')
    if any(r.usage_status == "no-cache-figure" for r in requests):
        entries.append(
            '<span><i class="swatch" style="background:var(--unknown)"></i>no cache figure</span>'
        )
    if len(requests) > 1:
        # The same dashed stroke as the chart's best-possible marker.
        entries.append(
            '<span><svg class="swatch" width="12" height="14" viewBox="0 0 12 14" '
            'aria-hidden="true"><line x1="6" x2="6" y1="0" y2="14" stroke="#1f2a44" '
            'stroke-width="2" stroke-dasharray="3 2"/></svg>best possible hit</span>'
        )
    return f'<p class="legend">{"".join(entries)}</p>' if entries else ""


def render_cache_report_html(report: CacheReport) -> str:
    """The report as a standalone HTML document (deterministic text)."""
    t = report.totals
    session = report.session_id or "(unknown session)"
    totals = [
        ("session efficiency", _pct(t.efficiency)),
        (
            "hits counted / best possible",
            f"{_n(t.counted_hit_tokens)} / {_n(t.best_possible_tokens)}",
        ),
        ("hit / prompt tokens", f"{_n(t.hit_tokens)} / {_n(t.prompt_tokens)}"),
        ("drops", str(t.drops)),
        (
            "lost of reusable",
            f"{_n(t.lost_tokens)} / {_n(t.potential_tokens)} ({_n(t.lost_to_changes)} to "
            f"changes, {_n(t.lost_by_provider)} by the provider)",
        ),
        ("bonus hits (not counted)", _n(t.bonus_tokens)),
        ("requests with a cache figure", f"{t.with_usage} of {t.requests}"),
    ]
    totals_html = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in totals)
    notes = "".join(f'<p class="note">note: {escape(n)}</p>' for n in report.notes)
    data = json.dumps(report.to_json(), sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    # Inside <script> only "</" could end the block; escaping <, > and & keeps any text inert.
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    legend = _chart_legend(report)
    definitions = "".join(
        f"<dt>{escape(name)}</dt><dd>{escape(meaning)}</dd>" for name, meaning in CACHE_LEGEND
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>Cache report · {escape(session)}</title>\n"
        f"<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>Cache report</h1>\n"
        f'<p class="meta">session {escape(session)} · estimator {escape(report.estimator)} · '
        f"{report.block_tokens}-token cache blocks</p>\n"
        f'<dl class="totals">{totals_html}</dl>\n{notes}\n'
        f"<h2>Hit and miss per request</h2>\n{_chart(report)}\n{legend}\n"
        f"<h2>Requests</h2>\n{_table(report)}\n"
        f'<h2>Legend</h2>\n<dl class="legend">{definitions}</dl>\n'
        '<script type="application/json" id="dsh-cache-report">'
        f"{data}</script>\n"
        "</body>\n</html>\n"
    )
