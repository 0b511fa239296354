"""The session-log cache report's figures add up, are defined in a legend, and the HTML is honest."""

from __future__ import annotations

import io
import re

from dsh_testkit.reports import cache_report_file, render_cache_report
from dsh_testkit.reports._console import emit, make_console
from dsh_testkit.reports._html import render_cache_report_html
from tests.testkit._report_builders import reference_logs


def test_every_row_and_the_totals_add_up() -> None:
    checked = 0
    for path in reference_logs():
        report = cache_report_file(path)
        for r in report.requests:
            if r.hit_tokens is None:
                continue
            checked += 1
            counted = r.counted_hit_tokens
            assert counted is not None and counted <= r.best_possible_tokens
            assert r.best_possible_tokens <= r.potential_tokens or r.index == 1
            assert r.lost_tokens == (r.lost_to_changes or 0) + (r.lost_by_provider or 0)
            assert r.hit_tokens == counted + (r.bonus_tokens or 0)
            if r.index > 1:
                assert r.potential_tokens == counted + (r.lost_tokens or 0)
        t = report.totals
        assert t.hit_tokens == t.counted_hit_tokens + t.bonus_tokens
        assert t.lost_tokens == t.lost_to_changes + t.lost_by_provider
    assert checked > 10


def test_the_terminal_report_has_a_legend_and_explains_the_efficiency() -> None:
    report = cache_report_file(reference_logs()[-1])
    buffer = io.StringIO()
    emit(make_console(buffer), *render_cache_report(report))
    out = buffer.getvalue()
    assert "(Σ min(hit, best) / Σ best)" in out or "no request could reuse" in out
    for name in ("reusable", "best", "lost", "bonus", "session efficiency"):
        assert f"\n  {name}: " in out


def test_the_html_legend_matches_the_chart_and_labels_are_not_repeated() -> None:
    for path in reference_logs():
        report = cache_report_file(path)
        page = render_cache_report_html(report)
        legend = (
            page.split('<p class="legend">', 1)[1].split("</p>", 1)[0]
            if '<p class="legend">' in page
            else ""
        )
        has_unknown = any(r.usage_status == "no-cache-figure" for r in report.requests)
        assert ("no cache figure</span>" in legend) == has_unknown
        if len(report.requests) > 1:
            assert 'stroke-dasharray="3 2"/></svg>best possible hit' in legend
        for cause in ("compaction", "prune", "header", "rewrite"):
            assert not re.search(rf">{cause}</span>{cause}\b", page)
        assert "<h2>Legend</h2>" in page
