"""The wire golden: the exact DeepSeek Chat Completions body of every request a log made.

One JSON document, two-space indented, UTF-8, listing for every request the body
(:func:`dsh_core.providers.deepseek.serialize_request`) exactly as serialized — keys in wire
order, only ids and paths normalized; a retried request appears once with ``attempts``. Each
request is numbered (``request``), and the parts it repeats — the history an earlier request
showed, a long message, the tool list — are references to where they were shown in full
(:mod:`._compact`; :func:`load_wire_requests` reads the bodies back whole)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Final

from dsh_core import (
    ProviderError,
    reconstruct_requests,
)

from ._compact import compact_requests, expand_requests
from ._inputs import LogInput, SnapshotInputError, _primed, logs_of
from ._normalize import Normalizer
from ._text import _pretty

__all__ = [
    "WIRE_FORMAT",
    "WIRE_FORMAT_VERSION",
    "load_wire_requests",
    "render_wire_requests",
    "wire_document",
]

WIRE_FORMAT: Final = "dsh-testkit wire requests"
WIRE_FORMAT_VERSION: Final = 2
"""Bumped whenever the wire-requests rendering changes (2: repeated parts written once)."""


def wire_document(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The golden's document: its format, version and the requests with repeats referred to."""
    return {
        "format": WIRE_FORMAT,
        "version": WIRE_FORMAT_VERSION,
        "requests": compact_requests(entries),
    }


def load_wire_requests(text: str) -> list[dict[str, Any]]:
    """The requests of a wire golden (format 1 or 2), each body whole again: the references
    of format 2 replaced by what they refer to. Raises :class:`SnapshotInputError` for text
    that is not a wire golden."""
    import json

    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SnapshotInputError(f"not a wire golden: {exc}", value_type="str") from None
    if not isinstance(document, dict) or document.get("format") != WIRE_FORMAT:
        raise SnapshotInputError(f"not a {WIRE_FORMAT!r} document", value_type="str")
    if document.get("version") not in (1, WIRE_FORMAT_VERSION):
        raise SnapshotInputError(
            f"wire golden format {document.get('version')!r}; this build reads 1 and "
            f"{WIRE_FORMAT_VERSION}",
            value_type="str",
        )
    requests = document.get("requests")
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        raise SnapshotInputError("requests: expected a list of objects", value_type="str")
    return expand_requests(requests)


def _wire_ids(normalizer: Normalizer, body: dict[str, Any]) -> dict[str, Any]:
    """Tool-call ids where the DeepSeek body names them (it carries no other ids)."""
    for message in body["messages"]:
        if "tool_call_id" in message:
            message["tool_call_id"] = normalizer.token("call", message["tool_call_id"])
        for call in message.get("tool_calls", ()):
            call["id"] = normalizer.token("call", call["id"])
    return body


def render_wire_requests(
    logs: LogInput,
    *,
    cwd: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    cwd_aliases: Iterable[str | os.PathLike[str]] = (),
) -> str:
    """The wire-requests golden of ``logs``: every rebuilt request as its DeepSeek body.

    Raises :class:`SnapshotInputError` when a request cannot be put on the wire (a
    placeholder tool list, an unsupported reasoning effort), naming the turn and step.
    """
    from dsh_core.providers.deepseek import serialize_request

    parsed = logs_of(logs)
    normalizer = _primed(parsed, cwd, cwd_aliases)
    entries: list[dict[str, Any]] = []
    for ordinal, log in enumerate(parsed, start=1):
        session = (
            normalizer.token("session", log.info.id) if log.info is not None else f"log {ordinal}"
        )
        seed = log.seed_length
        for rebuilt in reconstruct_requests(log.events):
            if rebuilt.first_response_seq is not None and rebuilt.first_response_seq < seed:
                continue
            try:
                body = serialize_request(rebuilt.request)
            except ProviderError as exc:
                raise SnapshotInputError(
                    f"the request of turn {rebuilt.turn} step {rebuilt.step} (session "
                    f"{session}) cannot be serialized for the DeepSeek wire: {exc}",
                    value_type="request",
                ) from exc
            body = normalizer.json(_wire_ids(normalizer, body), zero_times=False)
            last = entries[-1] if entries else None
            if (
                rebuilt.attempt > 0
                and last is not None
                and (last["session"], last["turn"], last["step"])
                == (session, rebuilt.turn, rebuilt.step)
                and last["body"] == body
            ):
                last["attempts"] = last.get("attempts", 1) + 1
                last["body"] = last.pop("body")  # keep "body" last, after "attempts"
                continue
            entries.append(
                {
                    "request": len(entries) + 1,
                    "session": session,
                    "turn": rebuilt.turn,
                    "step": rebuilt.step,
                    "body": body,
                }
            )
    return _pretty(wire_document(entries)) + "\n"
