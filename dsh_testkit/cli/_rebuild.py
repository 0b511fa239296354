"""``dsh-testkit rebuild LOG``: the log-to-requests view, each request as a summary or a wire body.

When a report surprises you, this is the view to reach for: every request the log rebuilds
(:func:`dsh_core.reconstruct_requests`, one per attempt), with its reply and recorded usage, and
with ``--wire`` the exact body this project's provider would send for it
(:func:`dsh_core.request_wire_body`). A normalized log's placeholders are filled from its
sidecars (beside the log by default, ``--sidecars DIR`` to name them); a request that still holds
one prints the placeholder it lacks instead of a body.

Exit status: 0 when every request was rebuilt (and, with ``--wire``, rendered), 1 when some
request could not be, 2 when the file cannot be read or is not a session log.

JSON document (``--json``; keys sorted)::

    {"formatVersion": 1, "kind": "dsh-testkit/rebuild", "api": "deepseek",
     "session": {"id": "…", "eventCount": 24},
     "requests": [{"index": 1, "turn": 1, "step": 1, "attempt": 0, "boundarySeq": 4,
                   "firstResponseSeq": 4, "headerSeq": 3, "replySeq": 9,
                   "request": {…GenerateOptions JSON…}, "reply": {…} | null,
                   "usage": {"inputTokens": …} | null,
                   "wire": {…} | null,            # with --wire
                   "wireText": "…" | null,        # the exact bytes sent (key order kept)
                   "wireError": {"placeholder": "{{system}}", "field": "system",
                                 "message": "…"} | null}],
     "errors": ["…"]}                             # requests that could not be rebuilt
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from dsh_core import (
    CorruptLogError,
    DshError,
    ReconstructedRequest,
    SidecarError,
    UnfilledPlaceholderError,
    reconstruct_requests,
    request_wire_body,
)
from dsh_core._json_text import dumps_canonical

from .._console import dumps_report_json
from ..reports import NotASessionLogError
from ..reports._loading import load_log
from ..traces._log_compare import header_summary
from ._logs import add_sidecar_arguments, refusal, sidecar_option

__all__ = ["REBUILD_FORMAT_VERSION", "add_rebuild_arguments", "run_rebuild"]

REBUILD_FORMAT_VERSION: Final = 1
"""Version of the ``--json`` document; bumped on any incompatible change."""


def add_rebuild_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dsh-testkit rebuild``."""
    if parser.description is None:
        parser.description = (
            "Print every request a session log rebuilds (one per attempt), with its reply and "
            "recorded usage; --wire prints the exact body the provider would send. Exit status: "
            "0 all rebuilt, 1 some request could not be, 2 not a readable session log."
        )
    parser.add_argument(
        "log", help="a JSONL session log (this project's or the reference harness's)"
    )
    parser.add_argument(
        "--wire",
        action="store_true",
        help="print each request's full wire body (placeholders must be filled)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print a JSON document (formatVersion {REBUILD_FORMAT_VERSION})",
    )
    parser.add_argument(
        "--api",
        choices=("deepseek", "anthropic"),
        default="deepseek",
        help="which provider's wire body: deepseek (Chat Completions, default) or anthropic",
    )
    add_sidecar_arguments(parser)


def _summary(index: int, rebuilt: ReconstructedRequest) -> str:
    request = rebuilt.request
    from dsh_core import EpochHeader

    header = EpochHeader(
        config=request.config,
        system=request.system,
        tools=request.tools,
        message_prefix=request.message_prefix,
    )
    parts = [
        f"#{index} turn {rebuilt.turn} step {rebuilt.step} try {rebuilt.attempt}",
        f"boundary seq {rebuilt.boundary_seq}",
        header_summary(header),
    ]
    if request.message_prefix:
        parts.append(f"prefix {len(request.message_prefix)}")
    parts.append(f"{len(request.messages)} message{'s' if len(request.messages) != 1 else ''}")
    if rebuilt.reply is not None:
        text = rebuilt.reply.text or ", ".join(f"call {c.name}" for c in rebuilt.reply.tool_calls)
        parts.append(f"reply {_clip(text)!r}")
    else:
        parts.append("no reply")
    usage = rebuilt.usage
    if usage is not None:
        parts.append(
            f"usage in {usage.input_tokens} · out {usage.output_tokens} · cache read "
            f"{usage.cache_read_tokens if usage.cache_read_tokens is not None else '?'}"
        )
    return " · ".join(parts)


def _clip(text: str, limit: int = 50) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_rebuild(args: argparse.Namespace) -> int:
    """Run ``dsh-testkit rebuild`` with parsed arguments; returns the exit status."""
    try:
        loaded = load_log(args.log, sidecars=sidecar_option(args))
    except (OSError, NotASessionLogError, SidecarError) as exc:
        return refusal("rebuild", args, exc)
    except CorruptLogError as exc:
        print(
            f"dsh-testkit rebuild: the log does not read: {exc}\n"
            f"run `dsh-testkit audit {args.log}` for the events before the break",
            file=sys.stderr,
        )
        return 1
    errors: list[DshError] = []
    rebuilt = list(reconstruct_requests(loaded.events, session_id=loaded.info.id, errors=errors))
    failed = bool(errors)
    entries: list[dict[str, Any]] = []
    lines: list[str] = []
    for index, item in enumerate(rebuilt, start=1):
        entry: dict[str, Any] = {
            "index": index,
            "turn": item.turn,
            "step": item.step,
            "attempt": item.attempt,
            "boundarySeq": item.boundary_seq,
            "firstResponseSeq": item.first_response_seq,
            "headerSeq": item.header_seq,
            "replySeq": item.reply_seq,
            "request": item.request.to_json(),
            "reply": item.reply.to_json() if item.reply is not None else None,
            "usage": item.usage.to_json() if item.usage is not None else None,
            "wire": None,
            "wireText": None,
            "wireError": None,
        }
        lines.append(_summary(index, item))
        if args.wire:
            try:
                body = request_wire_body(item, api=args.api)
            except UnfilledPlaceholderError as exc:
                failed = True
                entry["wireError"] = {
                    "placeholder": exc.placeholder,
                    "field": exc.field,
                    "message": str(exc),
                }
                lines.append(f"  cannot render the wire body: {exc}")
            except DshError as exc:
                failed = True
                entry["wireError"] = {"placeholder": None, "field": None, "message": str(exc)}
                lines.append(f"  cannot render the wire body: {exc}")
            else:
                entry["wire"] = body
                entry["wireText"] = dumps_canonical(body)
                # The body's own key order, as the provider sends it (not sorted).
                lines.append(json.dumps(body, indent=2, ensure_ascii=False))
        entries.append(entry)
    messages = [str(e) for e in dict.fromkeys(str(e) for e in errors)]
    if args.json:
        document = {
            "formatVersion": REBUILD_FORMAT_VERSION,
            "kind": "dsh-testkit/rebuild",
            "api": args.api,
            "session": {"id": loaded.info.id, "eventCount": len(loaded.events)},
            "requests": entries,
            "errors": messages,
        }
        sys.stdout.write(dumps_report_json(document))
    else:
        out = [f"session {loaded.info.id} · {len(loaded.events)} events · {len(rebuilt)} requests"]
        out.extend(lines)
        out.extend(f"cannot rebuild: {m}" for m in messages)
        sys.stdout.write("\n".join(out) + "\n")
    return 1 if failed else 0
