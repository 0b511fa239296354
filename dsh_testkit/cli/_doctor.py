"""``dsh-testkit cache-report`` and the wire-level ``audit`` of any trace.

The input's kind is asked of the readers' registry once (:func:`dsh_testkit.traces._readers.identify`).
A session log is loaded with its sidecars (``--sidecars``, ``--fill``: its placeholders
filled) and turned into a trace of its rebuilt requests with the log's own facts as evidence;
any other recording is read by its reader. Both then go through the one engine.

Exit status of ``cache-report``: 0 report written; 1 the input does not read (a corrupt log, a
malformed trace); 2 a file that cannot be read, is of no known kind, or holds nothing the doctor
can use (no model request: the line says why), or a bad option. Compressed inputs (zstd, gzip)
are read as the files they hold.
Exit status of ``audit`` over a trace: 0 no finding the harness can fix (a cause of kind
``change`` or ``refusal``, outside ``--allow``) that cost hits or got a request refused, 1
otherwise. Losses the harness cannot cause — the provider's best-effort cache, its timing, a
prompt below one unit — are listed as not fixable and pass, as ``assert_cache_friendly``'s
defaults do; ``--strict`` fails them too.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from dsh_core import CorruptLogError, DshError, SidecarError
from dsh_core.providers import Prices

from .._console import output_report
from ..doctor._assertions import failing_findings
from ..doctor._codes import CAUSE_CODES, CODES
from ..doctor._compact import COMPACT_FORMAT_VERSION, compact_report, dumps_compact, write_compact
from ..doctor._diagnose import diagnose
from ..doctor._pool import default_jobs
from ..doctor._render import DETAIL_REQUESTS, TOP, render_report
from ..doctor._report import ConversationDiagnosis, DoctorReport, group_findings
from ..doctor._stream import STREAM_BYTES, allowed_lazily, diagnose_stream
from ..doctor._text import one_line
from ..explorer import render_html
from ..reports import NotASessionLogError
from ..reports._loading import load_log
from ..traces import Trace, TraceError
from ..traces._compression import (
    CompressedDataError,
    DecompressingReader,
    compression_of,
    read_recording,
)
from ..traces._readers import identify
from ..traces._readers._session_log import session_log_trace
from ._logs import add_sidecar_arguments, sidecar_option

__all__ = [
    "INPUTS",
    "add_cache_report_arguments",
    "add_granularity_argument",
    "add_trace_audit_arguments",
    "given_granularity",
    "parse_prices",
    "read_input",
    "run_cache_report",
    "run_trace_audit",
]

INPUTS: Final = (
    "INPUT is any recording of an agent's traffic: a dsh_core session log, a `dsh-testkit "
    "proxy` trace file, a saved RequestCapture, a dsh cassette, the mock's request log (GET "
    "/_dsh/requests saved as JSON, or serve --request-log), a HAR 1.2 file, or OpenTelemetry "
    "spans and log records of a GenAI instrumentation as the collector's file exporter writes "
    "them (OTLP JSON or protobuf); compressed with zstd or gzip or not."
)


def parse_prices(text: str) -> Prices:
    """``hit=0.0028,miss=0.14,output=0.28`` (US dollars per million tokens) as :class:`Prices`."""
    values: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in ("hit", "miss", "output"):
            raise ValueError(
                f"--price {text!r}: expected hit=…,miss=…,output=… (dollars per million tokens)"
            )
        try:
            values[name] = float(value)
        except ValueError:
            raise ValueError(f"--price {text!r}: {value!r} is not a number") from None
        if not math.isfinite(values[name]):
            raise ValueError(f"--price {text!r}: {value.strip()!r} is not a finite number")
    missing = [n for n in ("hit", "miss") if n not in values]
    if missing:
        raise ValueError(f"--price {text!r}: {', '.join(missing)} missing")
    return Prices(
        hit=values["hit"], miss=values["miss"], output=values.get("output", 0.0), label="--price"
    )


def add_granularity_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--granularity TOKENS``, and its old spelling ``--unit-tokens`` (hidden; see
    :func:`given_granularity`)."""
    parser.add_argument("--granularity", type=int, metavar="TOKENS", help=help)
    parser.add_argument("--unit-tokens", type=int, dest="unit_tokens", help=argparse.SUPPRESS)


def given_granularity(args: argparse.Namespace, *, say: str) -> int | None:
    """The ``--granularity`` given (``None``: none), or its old spelling ``--unit-tokens``, which
    still works with a note on stderr (``say`` starts the note: ``dsh-testkit cache-report``).
    Raises ``ValueError`` for one below 1 token."""
    value: int | None = getattr(args, "granularity", None)
    old: int | None = getattr(args, "unit_tokens", None)
    if old is not None:
        print(f"{say}: --unit-tokens is now spelled --granularity", file=sys.stderr)
        if value is None:
            value = old
    if value is not None and value < 1:
        raise ValueError(f"--granularity must be at least 1, got {value}")
    return value


def _judging_arguments(parser: argparse.ArgumentParser, *, prefix: str) -> None:
    """``--granularity`` and ``--allow``: what both commands judge a trace with."""
    add_granularity_argument(
        parser,
        help=f"{prefix}tokens per cache unit (default: from the trace's own hits, else the model "
        "table by model and date; the report says which)",
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="CODE",
        choices=sorted(CAUSE_CODES),
        help=f"{prefix}a cause code this agent accepts (repeatable), as "
        "assert_cache_friendly's allow=",
    )


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", metavar="INPUT", help="the recording to read (see below)")
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="figures from the mock's prefix-cache simulator run over the trace, not the "
        "reported usage (the default when the trace has no usage)",
    )
    parser.add_argument(
        "--conversation",
        metavar="K",
        help="report only conversation K (an explicit key, or #1, #2, … as found)",
    )
    _judging_arguments(parser, prefix="")
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="processes that diagnose a large trace's conversations (2,000 requests or more; "
        "the report is the same as one process's; simulated figures use one); default: every "
        "core this process may use",
    )
    parser.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="read a dsh-trace file (what proxy writes, compressed with zstd or gzip or not) as "
        "a stream, twice, keeping the open conversations only: memory for the longest "
        "conversations, not the file (the same report); default: for such files of "
        f"{STREAM_BYTES // 2**20} MiB or more (decompressed)",
    )
    parser.add_argument(
        "--price",
        metavar="hit=H,miss=M[,output=O]",
        help="list prices in dollars per million tokens (default: the model table's, dated)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=(
            f"print the compact JSON document (formatVersion {COMPACT_FORMAT_VERSION}; "
            "dsh_testkit.doctor.expand_report gives the full one) instead of tables"
        ),
    )
    add_sidecar_arguments(parser)


def add_cache_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dsh-testkit cache-report``."""
    parser.description = (
        "Per request: prompt tokens, cache hit, what it could have reused from the request it "
        "extends, what it lost and why (a cause code with its evidence), per conversation and "
        "in total, with the estimated cost. Exit status: 0 report written, 1 the input does not "
        "read, 2 not readable, of no known kind, or nothing in it the doctor can use."
    )
    _common_arguments(parser)
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write the Cache Explorer: one self-contained HTML page (no network)",
    )
    parser.add_argument(
        "--all",
        "--full",  # report_text's name for it
        action=argparse.BooleanOptionalAction,
        default=None,
        dest="full",
        help="the text report: after the summary and the largest losses, every conversation's "
        f"table of requests with all its findings (default: for reports of up to "
        f"{DETAIL_REQUESTS} requests; --no-all: the summary only)",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=TOP,
        metavar="N",
        help=f"the text report: how many of the largest losses, and of the conversations that "
        f"lost most, it lists (default {TOP})",
    )
    parser.epilog = INPUTS


def add_trace_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``dsh-testkit audit`` adds for traces (its session-log audit has its own)."""
    _judging_arguments(parser, prefix="for a trace: ")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="for a trace: also fail on losses the harness cannot fix (provider-miss, "
        "not-yet-persisted, below-cache-unit), which otherwise are listed and pass",
    )


_FIXABLE: Final = ("change", "refusal")
"""Cause kinds a harness can fix (``_codes.CodeInfo.kind``): only these fail ``audit``."""


def read_input(command: str, args: argparse.Namespace) -> Trace | int:
    """The trace of ``args.log`` (any kind), or the exit status after saying why not."""
    path = args.log
    try:
        found = read_recording(path)
    except OSError as exc:
        print(f"dsh-testkit {command}: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except CompressedDataError as exc:
        print(f"dsh-testkit {command}: {exc}", file=sys.stderr)
        return 2
    reader = identify(found.data[:65536])
    if reader is None:
        print(
            f"dsh-testkit {command}: {path}: not a session log or any recognized trace. {INPUTS}",
            file=sys.stderr,
        )
        return 2
    try:
        if reader.name == "session-log":
            loaded = load_log(path, sidecars=sidecar_option(args))
            return session_log_trace(loaded, path=path)
        trace = reader.read(found.data, path)
        if found.note is not None:
            trace = replace(trace, notes=(found.note, *trace.notes))
        return trace
    except (NotASessionLogError, SidecarError) as exc:
        print(f"dsh-testkit {command}: {path}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dsh-testkit {command}: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except (CorruptLogError, TraceError, DshError) as exc:
        print(f"dsh-testkit {command}: {exc}", file=sys.stderr)
        if reader.name == "session-log":
            print(f"run `dsh-testkit audit {path}` for details", file=sys.stderr)
        return 1


def _report(command: str, args: argparse.Namespace) -> DoctorReport | int:
    try:
        granularity = given_granularity(args, say=f"dsh-testkit {command}")
    except ValueError as exc:
        print(f"dsh-testkit {command}: {exc}", file=sys.stderr)
        return 2
    jobs = getattr(args, "jobs", None)
    if jobs is None:
        jobs = default_jobs()
    elif jobs < 1:
        print(f"dsh-testkit {command}: --jobs must be at least 1, got {jobs}", file=sys.stderr)
        return 2
    prices = None
    if getattr(args, "price", None):
        try:
            prices = parse_prices(args.price)
        except ValueError as exc:
            print(f"dsh-testkit {command}: {exc}", file=sys.stderr)
            return 2
    if _streamed(args):
        return _stream_report(command, args, granularity, prices)
    trace = read_input(command, args)
    if isinstance(trace, int):
        return trace
    if not len(trace):
        # Nothing the doctor can use: an error saying why, not an empty report.
        why = trace.notes[0] if trace.notes else "it holds no model requests"
        print(f"dsh-testkit {command}: {args.log}: nothing to report: {why}", file=sys.stderr)
        return 2
    try:
        return diagnose(
            trace,
            simulate=True if getattr(args, "simulate", False) else None,
            conversation=getattr(args, "conversation", None),
            granularity=granularity,
            prices=prices,
            jobs=jobs,
        )
    except KeyError as exc:
        print(f"dsh-testkit {command}: {exc.args[0]}", file=sys.stderr)
        return 2


def _streamed(args: argparse.Namespace) -> bool:
    """Whether ``args.log`` is read as a stream (``--stream``, or a large trace file)."""
    asked = getattr(args, "stream", None)
    if asked is False:
        return False
    if not os.path.isfile(args.log):
        return False  # read_input says why (or reads the pipe whole)
    try:
        with open(args.log, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            compression = compression_of(file.peek(8)[:8])
            if compression is None:
                head = file.read(65536)
            else:
                plain = io.BufferedReader(
                    DecompressingReader(file, compression, path=args.log, chunk=65536), 65536
                )
                head = plain.read(65536)
                size = len(head)
                # its plain size decides, as a plain file's does (a trace compresses 40 to
                # 120 times): decompressed until the threshold or the end, nothing kept
                if asked is None and identify(head) is not None:
                    while size < STREAM_BYTES and (piece := plain.read(1 << 20)):
                        size += len(piece)
    except (OSError, CompressedDataError):
        return False  # read_input says why
    reader = identify(head)
    if reader is None or reader.name != "dsh-trace":
        if asked:
            print(
                f"dsh-testkit: --stream reads dsh-trace files (what proxy writes, compressed or "
                f"not); {args.log} is read whole",
                file=sys.stderr,
            )
        return False
    return bool(asked) or size >= STREAM_BYTES


def _stream_report(
    command: str, args: argparse.Namespace, granularity: int | None, prices: Prices | None
) -> DoctorReport | int:
    path = args.log
    jobs = getattr(args, "jobs", None)
    if jobs is not None and jobs > 1:
        print(
            f"dsh-testkit {command}: --jobs: a streamed trace is diagnosed in one process",
            file=sys.stderr,
        )
    try:
        report = diagnose_stream(
            path,
            simulate=True if getattr(args, "simulate", False) else None,
            conversation=getattr(args, "conversation", None),
            granularity=granularity,
            prices=prices,
        )
    except OSError as exc:
        print(f"dsh-testkit {command}: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except CompressedDataError as exc:  # as read_input says it
        print(f"dsh-testkit {command}: {exc}", file=sys.stderr)
        return 2
    except (TraceError, DshError) as exc:
        print(f"dsh-testkit {command}: {exc}", file=sys.stderr)
        return 1
    except KeyError as exc:
        print(f"dsh-testkit {command}: {exc.args[0]}", file=sys.stderr)
        return 2
    if not len(report.conversations):
        # as the whole-file reading says it: the reader's first note, else that it is empty
        said = [n for n in report.notes if not n.startswith("the trace is empty")]
        why = said[0] if said else "it holds no model requests"
        print(f"dsh-testkit {command}: {path}: nothing to report: {why}", file=sys.stderr)
        return 2
    return report


def _allowed(report: DoctorReport, allow: list[str]) -> DoctorReport:
    """The report with ``allow``'s findings shown as accepted notes."""
    if not allow:
        return report

    def allowed(c: ConversationDiagnosis) -> ConversationDiagnosis:
        requests = tuple(
            replace(
                r,
                findings=tuple(
                    replace(f, severity="note", detail=f"{f.detail} [allowed]")
                    if f.code in allow and f.severity != "note"
                    else f
                    for f in r.findings
                ),
            )
            for r in c.requests
        )
        return ConversationDiagnosis(key=c.key, requests=requests, groups=group_findings(requests))

    lazily = allowed_lazily(report, allowed)
    if lazily is not None:
        return lazily
    return replace(report, conversations=tuple(allowed(c) for c in report.conversations))


def run_cache_report(args: argparse.Namespace) -> int:
    """``dsh-testkit cache-report`` over any input; returns the exit status."""
    if args.top < 0:
        print(f"dsh-testkit cache-report: --top must be 0 or more, got {args.top}", file=sys.stderr)
        return 2
    report = _report("cache-report", args)
    if isinstance(report, int):
        return report
    report = _allowed(report, list(args.allow or ()))
    return output_report(
        "cache-report",
        document=lambda: compact_report(report),
        renderables=lambda: render_report(report, full=args.full, top=args.top),
        html=lambda: render_html(report),
        html_path=args.html,
        as_json=args.json,
        inputs=[args.log],
        dumps=dumps_compact,
        write_document=lambda write: write_compact(report, write),
    )


_CHECKS: Final[Mapping[str, tuple[str, ...]]] = {
    "prefix stability": (
        "volatile-system-text",
        "system-changed",
        "system-moved",
        "tools-changed",
        "history-rewritten",
        "params-changed",
    ),
    "reasoning pass-back": ("reasoning-dropped", "reasoning-altered", "request-refused"),
    "argument echo": ("tool-args-reserialized",),
    "provider": ("below-cache-unit", "not-yet-persisted", "provider-miss"),
}


def run_trace_audit(args: argparse.Namespace) -> int:
    """``dsh-testkit audit`` over a trace: the wire-level checks; 1 when one fails."""
    report = _report("audit", args)
    if isinstance(report, int):
        return report
    allow = list(getattr(args, "allow", None) or ())
    strict = bool(getattr(args, "strict", False))
    costly = failing_findings(report, allow)
    failing = [x for x in costly if strict or CODES[x[2].code].kind in _FIXABLE]
    unfixable = [x for x in costly if x not in failing]
    lines: list[str] = []
    for check, codes in _CHECKS.items():
        found = [(key, r, f) for key, r, f in failing if f.code in codes]
        passed = [(key, r, f) for key, r, f in unfixable if f.code in codes]
        notes = sum(
            1
            for c in report.conversations
            for _, f in c.findings()
            if f.code in codes and (f.severity == "note" or f.code in allow)
        )
        status = "FAIL" if found else "ok"
        lines.append(
            f"{check}: {status} ({len(found)} finding(s) that cost hits or a refusal"
            + (f", {len(passed)} the harness cannot fix" if passed else "")
            + (f", {notes} note(s) that cost nothing" if notes else "")
            + ")"
        )
        for key, r, f in found:
            lines.append(f"  conversation {key} request #{r.index + 1}: {f.code}: {f.detail}")
            lines += [f"      {one_line(ev)}" for ev in f.evidence]
        for key, r, f in passed:
            lines.append(
                f"  conversation {key} request #{r.index + 1}: {f.code} (not fixable: "
                f"{CODES[f.code].advice.rstrip('.').lower()}): {f.detail}"
            )
    if report.empty:
        lines.append("the trace is empty: it holds no model requests")
    if getattr(args, "json", False):
        sys.stdout.write(
            dumps_compact(
                {
                    **compact_report(report),
                    "ok": not failing,
                    "allowed": sorted(allow),
                    "strict": strict,
                    "failing": [
                        {"conversation": key, "index": r.index, "code": f.code}
                        for key, r, f in failing
                    ],
                    "notFixable": [
                        {"conversation": key, "index": r.index, "code": f.code}
                        for key, r, f in unfixable
                    ],
                }
            )
        )
    else:
        sys.stdout.write("\n".join(lines) + "\n")
    return 1 if failing else 0
