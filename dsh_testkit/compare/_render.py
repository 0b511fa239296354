"""``compare``'s report as text (the terminal, a test failure) and as Markdown (a pull-request
comment, ``$GITHUB_STEP_SUMMARY``); the JSON document is :meth:`RunComparison.to_json`.

Both say the same things in the same order: the verdict and its counts, the thresholds and
prices, one row per scenario (every scenario in a small run; in a large one only those that are
not identical), then for each scenario that is not identical, regressions first, why the
verdict, the first changed request in the project's wording, and the cause codes that appeared,
went away or changed, with the doctor's evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..doctor._report import Totals, money, request_ranges
from ..doctor._text import one_line
from ._values import (
    CauseChange,
    ComparisonFigures,
    Rounding,
    ScenarioComparison,
    UnmatchedScenario,
)

__all__ = ["comparison_markdown", "comparison_text", "scenario_text"]

_ALL_ROWS: Final = 30
"""Up to this many scenarios every one gets a row; beyond it, only those not identical."""

_ORDER: Final = {"regression": 0, "improvement": 1, "benign": 2, "identical": 3}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def _signed(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if value == float("inf"):
        return " (from $0)"
    return f" ({value:+.1f} {unit})"


def _efficiency(base: Totals, new: Totals, change: float | None) -> str:
    if base.efficiency is None and new.efficiency is None:
        return "–"
    return f"{_pct(base.efficiency)} → {_pct(new.efficiency)}{_signed(change, 'pp')}"


def _cost(base: Totals, new: Totals, change: float | None, rounding: Rounding) -> str:
    text = f"{money(base.cost)} → {money(new.cost)}{_signed(change, '%')}"
    if rounding.cost_bound and base.cost:
        text += f" ±{rounding.cost_bound / base.cost * 100:.0f} % rounding"
    return text


def _requests(base: Totals, new: Totals) -> str:
    return f"{base.requests} → {new.requests}"


def _header(result: ComparisonFigures) -> list[str]:
    counts = result.counts()
    tally = ", ".join(_tally(counts))
    lines = [
        f"base: {result.base.path or 'trace'} ({result.base.traces} trace(s), "
        f"{result.base.scenarios} scenario(s)) → new: {result.new.path or 'trace'} "
        f"({result.new.traces} trace(s), {result.new.scenarios} scenario(s))",
        f"verdict: {result.verdict} ({tally}; {counts['added']} added, {counts['removed']} "
        "removed)",
        *(f"  {reason}" for reason in result.total_reasons),
        _rule(result),
    ]
    if result.prices:
        if result.prices == ("--price",):
            when = "as given"
        elif result.price_date:
            when = f"in force on {result.price_date}, the new run's date"
        else:
            when = "in force today"
        lines.append(f"prices: {', '.join(result.prices)} ({when}; both runs priced alike)")
    return lines


def _rule(result: ComparisonFigures) -> str:
    t = result.thresholds
    net = (
        f", or a cost net of rounding up more than {t.max_net_cost_increase:g} %"
        if t.max_net_cost_increase is not None
        else ""
    )
    missing = "" if t.allow_missing else "; a scenario missing from the new run"
    return (
        "rule: a regression is a fixable cause or a refusal that appeared or grew; volatile text "
        f"that appeared; a failed test's traffic{missing}; or an efficiency drop of more than "
        f"{t.max_efficiency_drop:g} pp or a cost increase of more than "
        f"{t.max_cost_increase:g} % beyond what the cache unit's rounding can explain{net}"
    )


def _tally(counts: dict[str, int]) -> list[str]:
    out = []
    for verdict in ("regression", "improvement", "benign", "identical"):
        n = counts[verdict]
        plural = "s" if n != 1 and verdict in ("regression", "improvement") else ""
        out.append(f"{n} {verdict}{plural}")
    return out


def _rows(result: ComparisonFigures) -> list[ScenarioComparison]:
    scenarios = list(result.scenarios)
    if len(scenarios) > _ALL_ROWS:
        scenarios = [s for s in scenarios if s.verdict != "identical"]
    return sorted(scenarios, key=lambda s: (_ORDER[s.verdict], s.name))


def _table(result: ComparisonFigures) -> list[list[str]]:
    rows = [["scenario", "verdict", "requests", "efficiency", "cost"]]
    for s in _rows(result):
        rows.append(
            [
                s.name,
                s.verdict,
                _requests(s.base, s.new),
                _efficiency(s.base, s.new, s.efficiency_change),
                _cost(s.base, s.new, s.cost_change, s.rounding),
            ]
        )
    base, new = result.base_totals, result.new_totals
    rows.append(
        [
            "total",
            result.verdict,
            _requests(base, new),
            _efficiency(base, new, result.efficiency_change),
            _cost(base, new, result.cost_change, result.rounding),
        ]
    )
    return rows


def _cause_line(c: CauseChange) -> str:
    if c.change == "appeared":
        where = f"on {request_ranges(c.new_requests)}" if c.new_requests else ""
    elif c.change == "went-away":
        where = f"was on {request_ranges(c.base_requests)}" if c.base_requests else ""
    else:
        where = (
            f"on {request_ranges(c.base_requests) or 'none'} → "
            f"{request_ranges(c.new_requests) or 'none'}"
        )
    lost = ""
    if c.base_lost_tokens or c.new_lost_tokens:
        lost = f" · tokens lost {c.base_lost_tokens:,} → {c.new_lost_tokens:,}"
    if c.risk and not (c.base_lost_tokens or c.new_lost_tokens):
        kind = "risk"
    elif c.severity == "note":
        kind = "note, cost nothing"
    elif not c.fixable:
        kind = f"{c.severity}, not the harness's doing"
    else:
        kind = c.severity
    return f"{c.code} {c.change} ({kind})" + (f" {where}" if where else "") + lost


def _cause_evidence(c: CauseChange) -> list[str]:
    f = c.finding
    lines = [f.detail]
    if f.where:
        lines.append(f"at {f.where}")
    lines.extend(one_line(e) for e in f.evidence)
    return lines


def scenario_text(
    s: ScenarioComparison,
    *,
    indent: str = "  ",
    runs: tuple[str | None, str | None] = (None, None),
) -> list[str]:
    """What changed in one scenario, as lines (the reasons, the first changed request, causes);
    ``runs``: the paths the report's header names (a scenario read from them is not named
    again)."""
    lines = [f"{s.verdict}: {s.name}"]
    lines += [indent + reason for reason in s.reasons]
    change = s.first_change
    if change is not None:
        total = max(s.base.requests, s.new.requests)
        lines.append(
            f"{indent}first changed request: #{change.request} ({change.changed_requests} of "
            f"{total} request(s) differ)"
        )
        lines += [indent * 2 + d for d in change.differences]
    for cause in s.causes:
        lines.append(indent + _cause_line(cause))
        lines += [indent * 2 + e for e in _cause_evidence(cause)]
    lines += [f"{indent}note: {n}" for n in s.notes]
    if (
        s.matched_by in ("id", "conversation")
        and s.base_path != s.new_path
        and (s.base_path, s.new_path) != runs
    ):
        lines.append(f"{indent}matched by {s.matched_by}: base {s.base_path} · new {s.new_path}")
    return lines


def _unmatched_lines(title: str, items: Sequence[UnmatchedScenario]) -> list[str]:
    if not items:
        return []
    lines = [title]
    for item in items:
        t = item.totals
        lines.append(
            f"  {item.name}: {t.requests} request(s), efficiency {_pct(t.efficiency)}, cost "
            f"{money(t.cost)}" + (" (marked failed)" if item.failed else "")
        )
    return lines


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def comparison_text(result: ComparisonFigures, *, only_changes: bool = False) -> str:
    """The plain-text report (``only_changes``: just the verdict and the scenarios that are
    not identical, for a test failure)."""
    lines = _header(result)
    if not only_changes:
        lines.append("")
        lines += _align(_table(result))
        hidden = len(result.scenarios) - len(_rows(result))
        if hidden:
            lines.append(f"({hidden} identical scenario(s) not listed)")
    for s in sorted(result.scenarios, key=lambda s: (_ORDER[s.verdict], s.name)):
        if s.verdict == "identical" or (only_changes and s.verdict != "regression"):
            continue
        lines.append("")
        lines += scenario_text(s, runs=(result.base.path, result.new.path))
    if not only_changes:
        for title, items in (
            ("added (only in the new run):", result.added),
            (
                "removed (only in the base run: missing traffic"
                + (", allowed" if result.thresholds.allow_missing else ", fails the run")
                + "):",
                result.removed,
            ),
        ):
            block = _unmatched_lines(title, items)
            if block:
                lines += ["", *block]
        if result.notes:
            lines += ["", *(f"note: {n}" for n in result.notes)]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ markdown


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """An inline code span that survives backticks in ``text``."""
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _block(lines: Sequence[str]) -> list[str]:
    body = "\n".join(lines)
    fence = "```"
    while fence in body:
        fence += "`"
    return [fence + "text", *lines, fence]


_MARK: Final = {
    "regression": "**regression**",
    "improvement": "improvement",
    "benign": "benign",
    "identical": "identical",
}


def comparison_markdown(result: ComparisonFigures) -> str:
    """The Markdown report: for a pull-request comment or ``$GITHUB_STEP_SUMMARY``."""
    counts = result.counts()
    out = [f"### Cache compare: {result.verdict}", ""]
    tally = " · ".join(_tally(counts))
    out.append(f"{tally} · {counts['added']} added · {counts['removed']} removed")
    out.append("")
    header = _header(result)
    reasons = result.total_reasons
    out += [f"- why: {_cell(line)}" for line in reasons]
    out += [f"- {_cell(line)}" for line in header[2 + len(reasons) :]]
    out.append(
        f"- base: {_code(result.base.path or 'trace')} · new: {_code(result.new.path or 'trace')}"
    )
    out.append("")
    rows = _table(result)
    out.append("| " + " | ".join(rows[0]) + " |")
    out.append("|" + "---|" * len(rows[0]))
    for row in rows[1:-1]:
        verdict = _MARK[row[1]]
        out.append(
            f"| {_cell(_code(row[0]))} | {verdict} | "
            + " | ".join(_cell(c) for c in row[2:])
            + " |"
        )
    last = rows[-1]
    out.append(f"| **total** | {_MARK[last[1]]} | " + " | ".join(_cell(c) for c in last[2:]) + " |")
    hidden = len(result.scenarios) - len(_rows(result))
    if hidden:
        out += ["", f"{hidden} identical scenario(s) not listed."]
    for s in sorted(result.scenarios, key=lambda s: (_ORDER[s.verdict], s.name)):
        if s.verdict == "identical":
            continue
        out += ["", f"<details{' open' if s.verdict == 'regression' else ''}>"]
        out.append(f"<summary>{s.verdict}: <code>{_html(s.name)}</code></summary>")
        out.append("")
        out += [f"- {_cell(r)}" for r in s.reasons]
        change = s.first_change
        if change is not None:
            total = max(s.base.requests, s.new.requests)
            out.append(
                f"- first changed request: #{change.request} ({change.changed_requests} of "
                f"{total} request(s) differ)"
            )
            out += ["", *_block(list(change.differences)), ""]
        for cause in s.causes:
            out.append(f"- {_code(cause.code)} {_cell(_cause_line(cause)[len(cause.code) + 1 :])}")
            out += ["", *_block(_cause_evidence(cause)), ""]
        out += [f"- note: {_cell(n)}" for n in s.notes]
        out += ["", "</details>"]
    for title, items in (
        ("Added (only in the new run)", result.added),
        (
            "Removed (only in the base run: missing traffic"
            + (", allowed)" if result.thresholds.allow_missing else ", fails the run)"),
            result.removed,
        ),
    ):
        if items:
            out += ["", f"**{title}**", ""]
            for item in items:
                t = item.totals
                out.append(
                    f"- {_code(item.name)}: {t.requests} request(s), efficiency "
                    f"{_pct(t.efficiency)}, cost {money(t.cost)}"
                )
    if result.notes:
        out += ["", *(f"> {_cell(n)}" for n in result.notes)]
    text = "\n".join(line for i, line in enumerate(out) if line or (i and out[i - 1]))
    return text + "\n"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
