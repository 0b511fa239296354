"""Where calibration's requests come from: session logs (rebuilt, with sidecars for placeholder
headers, seeds of forked logs) and traces (wire bodies as sent), each request with its live
usage and its times on the recording's clock. The simulation is in ``_calibrate.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from dsh_core import (
    DshError,
    Event,
    GenerateOptions,
    Message,
    ReconstructedRequest,
    ToolSchema,
    ToolsPlaceholder,
    reconstruct_requests,
)
from dsh_core.persistence import loads_session
from dsh_core.providers._models import Endpoint
from dsh_core.providers.deepseek import serialize_message, serialize_request

from ..traces import TraceError, load_trace
from ..traces._compression import read_recording
from ..traces._log_facts import find_usage
from ._values import (
    _CHANGE_MARK,
    _PLACEHOLDERS,
    _SAME_RUN_MS,
    _SESSION_NAME,
    CalibrationError,
)

__all__ = ["Request", "find_logs", "requests_of"]

_FOLDER_PATTERNS: Final = tuple(
    f"*{kind}{compressed}"
    for kind in (".jsonl", ".har")
    for compressed in ("", ".zstd", ".zst", ".gz")
)
"""What a folder is searched for: logs and HAR files, plain or compressed."""


def find_logs(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, str]]:
    """The files named, and the ``.jsonl`` and ``.har`` files under named folders (recursively,
    sorted; compressed ones too: ``.zstd``, ``.zst``, ``.gz`` after the name), each with its
    label: the path as given, or relative to the folder it was found under.

    Raises :class:`CalibrationError` for a path that does not exist.
    """
    found: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(
                (p, p.relative_to(path).as_posix())
                for p in sorted(p for pattern in _FOLDER_PATTERNS for p in path.rglob(pattern))
                if p.is_file()
            )
        elif path.is_file():
            found.append((path, os.fspath(path)))
        else:
            raise CalibrationError(f"no such file or folder: {os.fspath(path)}", path=str(path))
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sidecars:
    prompts: tuple[str, ...]
    tools: tuple[tuple[ToolSchema, ...], ...]


def _sidecar_names(log: Path) -> tuple[str, str]:
    match = _SESSION_NAME.match(log.name)
    suffix = f".{match['n']}" if match and match["n"] else ""
    return f"system-prompt{suffix}.expected.md", f"tool-schemas{suffix}.expected.json"


def _read_sidecars(log: Path, folders: Sequence[Path]) -> _Sidecars | None:
    prompt_name, tools_name = _sidecar_names(log)
    for folder in (log.parent, *folders, *(f / log.parent.name for f in folders)):
        prompt_path, tools_path = folder / prompt_name, folder / tools_name
        if not (prompt_path.is_file() and tools_path.is_file()):
            continue
        try:
            text = prompt_path.read_text(encoding="utf-8")
            schemas = json.loads(tools_path.read_text(encoding="utf-8"))
            lists = [schemas["initial"], *schemas["changes"]]
            tools = tuple(
                tuple(
                    ToolSchema(
                        name=t["name"],
                        description=t.get("description", ""),
                        parameters=t.get("parameters", {}),
                    )
                    for t in tool_list
                )
                for tool_list in lists
            )
        except (OSError, ValueError, KeyError, TypeError, DshError) as exc:
            raise CalibrationError(
                f"the sidecars {prompt_path} / {tools_path} do not read: {exc}",
                path=str(tools_path),
            ) from exc
        prompts = tuple(p for p in _CHANGE_MARK.split(text.removesuffix("\n")))
        return _Sidecars(prompts=prompts, tools=tools)
    return None


# -- one log's requests ----------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Request:
    """A request ready to simulate."""

    log: str
    index: int
    turn: int | None
    step: int | None
    attempt: int | None
    model: str
    read_at: float
    """Seconds: the first response event (the server has read the input)."""
    done_at: float
    """Seconds: the reply stream's last chunk on the same clock (:func:`_stream_end`)."""
    live_prompt: int
    live_hit: int
    body: dict[str, Any]
    bare_body: dict[str, Any] | None
    """The body without the sidecars' header (placeholders dropped), when sidecars gave it."""
    reply: dict[str, Any] | None
    """The reply as the chat wire carries it back, or ``None`` (no message logged)."""
    epoch: tuple[str, int]
    """(log, header epoch): requests under one header share an anchor."""
    folder: str
    header_known: bool
    seeded: bool
    """Part of the log's seed: a copy of a parent's request (a forked subagent's log starts
    with its parent's events), simulated to warm the cache but not compared."""
    session: str
    """The log's session id."""
    parent: str | None
    """The session it was forked from (its header's ``parentSession``), if any."""
    endpoint: Endpoint = "chat"
    """The wire shape of ``body`` and ``reply``."""
    unix_clock: bool = True
    """``read_at`` is Unix time (a trace may carry times relative to its start)."""
    shadow: bool = False
    """Only sizes its header's anchor: a seeded copy whose original request is simulated from
    the parent's own log in the same scope."""


def _epoch_starts(events: Sequence[Event]) -> list[int]:
    """Seqs of the header events that start a header epoch: the first one, and every later one
    except a ``resume`` snapshot that restates the header in force (a resumed session sends the
    same header; sidecars count only the initial header and its changes)."""
    starts: list[int] = []
    previous: Any = None
    for event in events:
        if event.type not in ("request/header", "request/header-delta"):
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        header = data.get("header")
        restated = data.get("reason") == "resume" and header == previous
        if not starts or not restated:
            starts.append(event.seq)
        if header is not None:
            previous = header
    return starts


def _epoch_index(rebuilt: ReconstructedRequest, header_seqs: Sequence[int]) -> int:
    seq = rebuilt.header_seq
    return max(0, sum(1 for s in header_seqs if seq is not None and s <= seq) - 1)


def _without_placeholders(options: GenerateOptions) -> GenerateOptions:
    system = None if options.system in _PLACEHOLDERS else options.system
    tools = None if isinstance(options.tools, ToolsPlaceholder) else options.tools
    prefix = tuple(m for m in options.message_prefix if not isinstance(m, str))
    return replace(options, system=system, tools=tools, message_prefix=prefix)


def _with_header(
    options: GenerateOptions, sidecars: _Sidecars | None, epoch: int
) -> tuple[GenerateOptions, bool, bool]:
    """The request with its real header when known (placeholders dropped otherwise, to be
    anchored); whether the header is known, and whether sidecars supplied it."""
    system, tools = options.system, options.tools
    used = False
    if sidecars is not None and epoch < len(sidecars.prompts) and epoch < len(sidecars.tools):
        if system == "{{system}}":
            system, used = sidecars.prompts[epoch], True
        if isinstance(tools, ToolsPlaceholder):
            tools, used = sidecars.tools[epoch], True
    known = system not in _PLACEHOLDERS and not isinstance(tools, ToolsPlaceholder)
    return _without_placeholders(replace(options, system=system, tools=tools)), known, used


def requests_of(
    path: Path, label: str, sidecar_folders: Sequence[Path]
) -> tuple[list[Request], str | None]:
    """The log's requests with live cache figures, or a reason to skip it."""
    try:
        loaded = loads_session(read_recording(path).data, audit=True, path=os.fspath(path))
    except (DshError, OSError, ValueError) as exc:
        if _starts_as_session_log(path):
            return [], f"a session log that does not read: {exc}"
        return _trace_requests(path, label)
    events = loaded.events
    try:
        rebuilt = list(reconstruct_requests(events, session_id=loaded.info.id))
    except DshError as exc:
        return [], f"its requests cannot be rebuilt (dsh-testkit audit says why): {exc}"
    header_seqs = _epoch_starts(events)
    seed_length = loaded.info.seed_length or 0
    sidecars = _read_sidecars(path, sidecar_folders)
    out: list[Request] = []
    with_usage = 0
    for index, request in enumerate(rebuilt):
        found = find_usage(events, request, len(events))
        if found is None or found.usage.cache_read_tokens is None:
            continue
        with_usage += 1
        epoch = _epoch_index(request, header_seqs)
        options, known, from_sidecars = _with_header(request.request, sidecars, epoch)
        try:
            body = serialize_request(options)
            bare = (
                serialize_request(_without_placeholders(request.request)) if from_sidecars else None
            )
        except DshError as exc:
            return [], f"request {index} does not render to the wire: {exc}"
        assert request.first_response_seq is not None  # a request with usage has a response
        read_at = events[request.first_response_seq].time
        out.append(
            Request(
                log=label,
                index=index,
                turn=request.turn,
                step=request.step,
                attempt=request.attempt,
                model=request.request.model,
                read_at=read_at / 1000,
                done_at=_stream_end(events, request.first_response_seq, found.seq) / 1000,
                live_prompt=found.usage.prompt_tokens,
                live_hit=found.usage.cache_read_tokens or 0,
                body=body,
                bare_body=bare,
                reply=_reply_wire(
                    events[found.seq],
                    thinking="thinking" not in body or body["thinking"] != {"type": "disabled"},
                ),
                epoch=(label, epoch),
                folder=os.fspath(path.parent),
                header_known=known,
                seeded=request.first_response_seq < seed_length,
                session=loaded.info.id,
                parent=loaded.info.parent_session,
            )
        )
    if not with_usage:
        return [], "no request with live cache figures (cacheReadTokens)"
    if all(r.seeded for r in out):
        return [], "only its seed (its parent's requests) carries live cache figures"
    return out, None


_UNIX_2001: float = 1e9
"""Seconds: times below this in a trace are relative to its start, not Unix times."""


def _starts_as_session_log(path: Path) -> bool:
    """The file's first line is a session header (``{"type": "session", …}``)."""
    try:
        first = read_recording(path).data.split(b"\n", 1)[0][: 1 << 20]
        record = json.loads(first)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(record, dict) and record.get("type") == "session"


def _trace_requests(path: Path, label: str) -> tuple[list[Request], str | None]:
    """The exchanges with live cache figures of a trace that is not a session log (a proxy trace
    file, a HAR file, a cassette, the mock's request log), or a reason to skip it.

    A trace carries each request's wire body and its answer as sent, so the header is known and
    nothing is rebuilt; the clock is the exchange's first byte (the server has read the input;
    its start when the first byte is not recorded) and its end.
    """
    try:
        trace = load_trace(path)
    except (TraceError, OSError, UnicodeDecodeError) as exc:
        return [], f"neither a session log nor a trace this build reads: {exc}"
    out: list[Request] = []
    for exchange in trace.exchanges:
        usage = exchange.usage
        if usage is None or usage.hit_tokens is None or usage.prompt_tokens <= 0:
            continue
        read_at = exchange.first_byte if exchange.first_byte is not None else exchange.started
        start = read_at if read_at is not None else 0.0
        end = exchange.finished if read_at is not None and exchange.finished is not None else start
        out.append(
            Request(
                log=label,
                index=exchange.index,
                turn=None,
                step=None,
                attempt=None,
                model=exchange.model or "",
                read_at=start,
                done_at=end,
                live_prompt=usage.prompt_tokens,
                live_hit=usage.hit_tokens,
                body=dict(exchange.body),
                bare_body=None,
                reply=dict(exchange.response) if exchange.response is not None else None,
                epoch=(label, 0),
                folder=os.fspath(path.parent),
                header_known=True,
                seeded=False,
                session=label,
                parent=None,
                endpoint=exchange.endpoint,
                unix_clock=read_at is not None and read_at >= _UNIX_2001,
            )
        )
    if not out:
        return [], f"a {trace.source} trace with no exchange carrying live cache figures"
    return out, None


def _stream_end(events: Sequence[Event], first: int, last: int) -> int:
    """When the reply's stream ended, in ms on the clock of its first response event: the latest
    ``assistant/chunk`` from ``first`` to ``last`` (seqs) within :data:`_SAME_RUN_MS` after it.

    Stored logs mix recording runs, so the chunks of one stream can carry times of several runs
    (days apart); those of another run are left out, and the first response stands for the end
    when no chunk is on its clock.
    """
    start = events[first].time
    end = start
    for event in events[first : last + 1]:
        if event.type == "assistant/chunk" and start <= event.time <= start + _SAME_RUN_MS:
            end = max(end, event.time)
    return end


def _reply_wire(event: Event, *, thinking: bool) -> dict[str, Any] | None:
    if event.type != "assistant/message" or not isinstance(event.data, Mapping):
        return None
    try:
        message = Message.from_json(event.data.get("message"))
        wire = serialize_message(message, thinking=thinking)
    except DshError:
        return None
    return wire[0] if wire else None
