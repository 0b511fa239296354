"""``dsh-testkit audit LOG``: a session log's reconstruction audited (``--json`` the document)."""

from __future__ import annotations

import argparse
import sys

from dsh_core import SidecarError

from .._console import dumps_report_json, emit, make_console
from ..reports import NotASessionLogError, audit_file
from ..reports._audit import AUDIT_FORMAT_VERSION
from ..reports._audit_render import render_audit
from ._logs import add_sidecar_arguments, refusal, sidecar_option

__all__ = ["add_audit_arguments", "run_audit"]


def add_audit_arguments(
    parser: argparse.ArgumentParser,
    *,
    log_help: str = "a JSONL session log (this project's or the reference harness's)",
) -> None:
    """Arguments of ``dsh-testkit audit`` (``log_help``: what its input may be)."""
    if parser.description is None:
        parser.description = (
            "Rebuild every request of a session log, check the log's invariants, print the "
            "header timeline and whether each request extends the previous one. Exit status: "
            "0 clean, 1 violations (corrupt or truncated log included), 2 file not readable."
        )
    parser.add_argument("log", metavar="INPUT", help=log_help)
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print a JSON document (formatVersion {AUDIT_FORMAT_VERSION}) instead of tables",
    )
    add_sidecar_arguments(parser)


def run_audit(args: argparse.Namespace) -> int:
    """Run ``dsh-testkit audit`` with parsed arguments; returns the exit status."""
    try:
        report = audit_file(args.log, sidecars=sidecar_option(args))
    except (OSError, NotASessionLogError, SidecarError) as exc:
        return refusal("audit", args, exc)
    if args.json:
        sys.stdout.write(dumps_report_json(report.to_json()))
    else:
        emit(make_console(), *render_audit(report))
    return 0 if report.ok else 1
