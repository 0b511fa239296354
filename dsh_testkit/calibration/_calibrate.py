"""How far the mock's prefix-cache simulator agrees with the live API on recorded traffic.

For every session log that carries live usage (``cacheReadTokens``), each request is rebuilt
with :func:`dsh_core.reconstruct_requests`, rendered to its wire body by the DeepSeek provider
(:func:`dsh_core.providers.deepseek.serialize_request`), tokenized by the mock's
:class:`~dsh_testkit.mock.PromptRenderer` and run, in order, through a fresh
:class:`~dsh_testkit.mock.PrefixCacheSimulator`: one per log (scope ``log``) or one per folder
(scope ``folder``, so a parent and its subagents share the cache as they share an account). Each
request's reply (the step's ``assistant/message``) is committed, so its output-end unit exists.

The simulator runs on the log's clock: a request is looked up at its first response event (the
server has read its input) and its reply ends at its stream's last chunk. Stored logs mix
recording runs (one stream's chunks can be stamped days apart), so a reply's end is its latest
chunk on the clock of its first one, and a gap is measured only between events of one run (less
than an hour apart, never backwards); elsewhere it is ``unknown_gap`` (default: long enough for
every unit to be visible). With ``visibility="live"`` each scope follows the service's rule as of
its first request's time (the model table's ``CacheFacts.visibility_at``).

Forked logs: a subagent's log starts with a copy of its parent's events (``seedLength``). Those
requests are simulated (they warm its cache, as the parent's warmed the live one) but not
compared; in scope ``folder`` with the parent's own log present, they only size the log's header
anchor. A log whose only live figures are its seed's is skipped.

Header placeholders: logs normalized for storage carry ``"{{system}}"`` / ``"{{tools}}"``. The
real values come from sidecars (``system-prompt[.N].expected.md`` and
``tool-schemas[.N].expected.json`` beside ``session[.N].jsonl`` or in ``--sidecars DIR``). Without
them the header's size is unknown: it is *anchored*, i.e. taken as the live prompt tokens minus
the rendered rest at the first request of each header epoch (the initial header and each change;
a ``resume`` snapshot restating the header keeps the epoch), and stands in the prompt as opaque
tokens: one sequence per folder, cut to each epoch's size (see :func:`_anchor_tokens`). Anchored
requests still count for every cache metric; for prompt sizes, the request that sized an anchor
is left out (its size is the live one by construction), later ones count. Sidecars whose system prompt and tools alone render to
at least the live prompt cannot be that recording's header: they are anchored instead, and the
report's ``notes`` say so.

Per request, the *simulated unit* is the kind of unit the simulator hit; the *live unit* is the
unit, among those the simulator holds that the prompt matches in full (visible or not yet), whose
reported size is nearest the live hit (``none`` for a zero hit). ``unit_agreement`` compares them
on later requests (not the first of a scope).

Metrics (fractions over compared requests unless said):

- ``classification_agreement``: hit vs miss (hit tokens > 0) agree;
- ``exact_hit_match``: simulated hit tokens equal the live ones;
- ``within_one_unit``: they differ by at most one granularity;
- ``unit_agreement``: simulated and live unit agree, over later requests;
- ``hit_tokens_mae``: mean absolute difference of hit tokens;
- ``prompt_tokens_error``: mean absolute relative error of prompt tokens, over requests whose
  size is predicted (``None`` when there are none): those with a known header, and anchored ones
  after the one that sized their anchor;
- ``known_header_prompt_tokens_error`` / ``anchored_prompt_tokens_error``: the same over each
  of the two kinds (an anchored header's size is measured, the rest of the prompt predicted).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

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
from dsh_core.persistence import load_session
from dsh_core.providers.deepseek import serialize_message, serialize_request

from ..mock._cache import (
    CacheKey,
    CacheLookup,
    CacheUnit,
    cache_model,
)
from ..mock._template import PromptRenderer, RenderedPrompt
from ..reports._log_facts import find_usage
from ..traces import Endpoint, TraceError, load_trace
from ._values import (
    _ANCHOR_BASE,
    _CHANGE_MARK,
    _PLACEHOLDERS,
    _SAME_RUN_MS,
    _SESSION_NAME,
    CALIBRATION_FORMAT_VERSION,
    CalibrationError,
    CalibrationReport,
    CalibrationSettings,
    CalibrationSummary,
    RequestCalibration,
    Scope,
    SkippedLog,
    _Clock,
    make_tokenizer,
)

__all__ = [
    "CALIBRATION_FORMAT_VERSION",
    "CalibrationError",
    "CalibrationReport",
    "CalibrationSettings",
    "CalibrationSummary",
    "RequestCalibration",
    "Scope",
    "SkippedLog",
    "calibrate",
    "find_logs",
    "make_tokenizer",
]


def find_logs(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, str]]:
    """The files named, and the ``.jsonl`` and ``.har`` files under named folders (recursively,
    sorted), each with its label: the path as given, or relative to the folder it was found
    under.

    Raises :class:`CalibrationError` for a path that does not exist.
    """
    found: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(
                (p, p.relative_to(path).as_posix())
                for p in sorted([*path.rglob("*.jsonl"), *path.rglob("*.har")])
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
class _Request:
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


def _requests_of(
    path: Path, label: str, sidecar_folders: Sequence[Path]
) -> tuple[list[_Request], str | None]:
    """The log's requests with live cache figures, or a reason to skip it."""
    try:
        loaded = load_session(path, audit=True)
    except (DshError, OSError, ValueError) as exc:
        return _trace_requests(path, label, f"not a session log this build reads: {exc}")
    events = loaded.events
    try:
        rebuilt = list(reconstruct_requests(events, session_id=loaded.info.id))
    except DshError as exc:
        return [], f"its requests cannot be rebuilt (dsh-testkit audit says why): {exc}"
    header_seqs = _epoch_starts(events)
    seed_length = loaded.info.seed_length or 0
    sidecars = _read_sidecars(path, sidecar_folders)
    out: list[_Request] = []
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
            _Request(
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


def _trace_requests(path: Path, label: str, not_a_log: str) -> tuple[list[_Request], str | None]:
    """The exchanges with live cache figures of a trace that is not a session log (a proxy trace
    file, a HAR file, a cassette, the mock's request log), or a reason to skip it.

    A trace carries each request's wire body and its answer as sent, so the header is known and
    nothing is rebuilt; the clock is the exchange's first byte (the server has read the input;
    its start when the first byte is not recorded) and its end.
    """
    try:
        trace = load_trace(path)
    except (TraceError, OSError, UnicodeDecodeError) as exc:
        return [], f"{not_a_log}; nor a trace: {exc}"
    out: list[_Request] = []
    for exchange in trace.exchanges:
        usage = exchange.usage
        if usage is None or usage.hit_tokens is None or usage.prompt_tokens <= 0:
            continue
        read_at = exchange.first_byte if exchange.first_byte is not None else exchange.started
        out.append(
            _Request(
                log=label,
                index=exchange.index,
                turn=None,
                step=None,
                attempt=None,
                model=exchange.model or "",
                read_at=read_at if read_at is not None else 0.0,
                done_at=(
                    exchange.finished
                    if exchange.finished is not None and read_at is not None
                    else (read_at if read_at is not None else 0.0)
                ),
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


# -- the simulation --------------------------------------------------------------------------


def _anchor_tokens(folder: str, count: int) -> tuple[int, ...]:
    """Opaque tokens standing for an unknown header of ``count`` tokens.

    One sequence per folder, cut to each epoch's size: the header of a later epoch, or of a
    subagent in the same folder, is assumed to share its leading part with the others (a
    harness keeps its preamble and edits near the end), so the shorter of two shares a prefix
    with the longer. Logs in different folders never share anchor tokens.
    """
    seed = int.from_bytes(hashlib.sha256(folder.encode("utf-8")).digest()[:4], "big")
    base = _ANCHOR_BASE + seed * 4_000_037
    return tuple(range(base, base + count))


def _spliced(prompt: RenderedPrompt, tokens: Sequence[int]) -> RenderedPrompt:
    """``prompt`` with ``tokens`` inserted after ``<｜begin▁of▁sentence｜>``."""
    n = len(tokens)
    return RenderedPrompt(
        tokens=(prompt.tokens[0], *tokens, *prompt.tokens[1:]),
        input_end=prompt.input_end + n,
        input_ends=tuple(i + n for i in prompt.input_ends),
        output_ends=tuple(i + n for i in prompt.output_ends),
        thinking=prompt.thinking,
    )


def _unit_name(kind: str | None) -> str:
    return kind if kind is not None else "none"


def _live_unit(
    live_hit: int, found: CacheLookup, candidates: Sequence[CacheUnit], granularity: int
) -> str:
    """The kind of unit the live hit most likely reused: among the units the prompt matches in
    full (visible or not) and the block-level common prefix the simulator found, the one whose
    reported size is nearest the live hit. On a tie the simulator's own unit wins (the figure
    cannot tell them apart), then the longer one."""
    if live_hit <= 0:
        return "none"
    sizes: list[tuple[int, str]] = [
        (unit.length // granularity * granularity, unit.kind) for unit in candidates
    ]
    if found.unit_kind == "common" and found.usage.hit_tokens:
        sizes.append((found.usage.hit_tokens, "common"))
    if not sizes:
        return "other"
    best = min(abs(size - live_hit) for size, _ in sizes)
    own = found.unit_kind if found.usage.hit_tokens else None
    if own is not None and abs(found.usage.hit_tokens - live_hit) == best:
        return own
    return [kind for size, kind in sizes if abs(size - live_hit) == best][-1]


def _header_tokens(renderer: PromptRenderer, body: Mapping[str, Any]) -> int:
    """Tokens of the body's leading system messages and tools alone."""
    messages = body.get("messages", [])
    leading = []
    for message in messages:
        if message.get("role") != "system":
            break
        leading.append(message)
    return renderer.render_chat({**body, "messages": leading}).input_end


def _simulate(
    requests: Sequence[_Request],
    settings: CalibrationSettings,
    renderer: PromptRenderer,
    notes: list[str],
) -> list[RequestCalibration]:
    clock = _Clock()
    # The live service's behaviour changed over time: follow it as of the scope's first request.
    live_at = requests[0].read_at if requests and requests[0].unix_clock else None
    cache = settings.simulator(clock, live_at=live_at)
    anchors: dict[tuple[str, int], tuple[int, ...]] = {}
    sidecar_fits: dict[tuple[str, int], bool] = {}
    rows: list[RequestCalibration] = []
    last_done: float | None = None
    for request in requests:
        body, header_known = request.body, request.header_known
        if request.bare_body is not None:
            fits = sidecar_fits.get(request.epoch)
            if fits is None:
                fits = _header_tokens(renderer, body) < request.live_prompt
                sidecar_fits[request.epoch] = fits
                if not fits:
                    notes.append(
                        f"{request.log}: the sidecars' system prompt and tools alone render to "
                        f"at least the live prompt ({request.live_prompt} tokens) of header "
                        f"epoch {request.epoch[1]}: they belong to another recording; the "
                        "header is anchored instead"
                    )
            if not fits:
                body, header_known = request.bare_body, False
        prompt = (
            renderer.render_anthropic(body)
            if request.endpoint == "anthropic"
            else renderer.render_chat(body)
        )
        anchoring = False
        if not header_known:
            anchor = anchors.get(request.epoch)
            if anchor is None:
                anchoring = True
                anchor = _anchor_tokens(
                    request.folder, max(0, request.live_prompt - len(prompt.tokens))
                )
                anchors[request.epoch] = anchor
            prompt = _spliced(prompt, anchor)
        if request.shadow:
            continue
        gap: float | None = None
        first = last_done is None
        if last_done is None:
            clock.now = max(clock.now, request.read_at)
        elif 0 <= request.read_at - last_done <= _SAME_RUN_MS / 1000:
            gap = request.read_at - last_done
            clock.now = max(clock.now, request.read_at)
        else:
            # The two events are of different recording runs: the gap is unknown.
            clock.now += settings.unknown_gap_seconds
        # One account and user per scope; the serving model keys the cache, as in the mock.
        key = CacheKey(account="calibration", model=cache_model(request.model))
        candidates = cache.matching_units(key, prompt)
        found = cache.lookup(key, prompt)
        granularity = cache.granularity_for(key)
        live_unit = _live_unit(request.live_hit, found, candidates, granularity)
        completion = None
        if request.reply is not None and request.endpoint == "anthropic":
            completion = renderer.render_anthropic_completion(
                request.reply.get("content"), thinking=prompt.thinking
            )
        elif request.reply is not None:
            completion = renderer.render_chat_completion(request.reply, thinking=prompt.thinking)
        clock.now += request.done_at - request.read_at
        cache.commit(found, completion)
        last_done = request.done_at
        if request.seeded:
            continue
        rows.append(
            RequestCalibration(
                log=request.log,
                index=request.index,
                turn=request.turn,
                step=request.step,
                attempt=request.attempt,
                model=request.model,
                live_prompt_tokens=request.live_prompt,
                live_hit_tokens=request.live_hit,
                simulated_prompt_tokens=found.usage.prompt_tokens,
                simulated_hit_tokens=found.usage.hit_tokens,
                simulated_unit=_unit_name(found.unit_kind if found.usage.hit_tokens else None),
                live_unit=live_unit,
                header_known=header_known,
                granularity=granularity,
                anchors=anchoring,
                first_in_scope=first,
                gap_seconds=gap,
            )
        )
    return rows


def calibrate(
    paths: Iterable[str | os.PathLike[str]],
    *,
    settings: CalibrationSettings | None = None,
    scope: Scope = "log",
    sidecars: Sequence[str | os.PathLike[str]] = (),
    renderer: PromptRenderer | None = None,
) -> CalibrationReport:
    """Calibrate the simulator on the logs at ``paths`` (files or folders).

    Raises :class:`CalibrationError` for a path that does not exist or unreadable sidecars;
    logs that do not read or carry no live cache figure are listed in ``skipped``.
    """
    settings = settings or CalibrationSettings()
    if renderer is None:
        renderer = PromptRenderer(make_tokenizer(settings.tokenizer))
    folders = [Path(f) for f in sidecars]
    logs = find_logs(paths)
    skipped: list[SkippedLog] = []
    notes: list[str] = []
    scopes: dict[str, list[_Request]] = {}
    compared = 0
    for path, label in logs:
        requests, reason = _requests_of(path, label, folders)
        if reason is not None:
            skipped.append(SkippedLog(log=label, reason=reason))
            continue
        compared += 1
        scope_key = os.fspath(path.parent) if scope == "folder" else os.fspath(path)
        scopes.setdefault(scope_key, []).extend(requests)
    rows: list[RequestCalibration] = []
    for requests in scopes.values():
        if scope == "folder":
            # A forked log's seed repeats its parent's requests: when the parent's own log is in
            # the folder, its requests warm the cache; the copies would count them twice (and,
            # sorted by time, come first and make the parent's first request a later one).
            # The copies still size their log's header anchor, as in a scope of their own.
            sessions = {r.session for r in requests}
            requests = [
                replace(r, shadow=True) if r.seeded and r.parent in sessions else r
                for r in requests
            ]
        # Within a folder, requests of several logs interleave by their time (stable).
        ordered = sorted(requests, key=lambda r: r.read_at) if scope == "folder" else requests
        rows.extend(_simulate(ordered, settings, renderer, notes))
    return CalibrationReport(
        settings=settings,
        scope=scope,
        requests=tuple(rows),
        skipped=tuple(skipped),
        notes=tuple(notes),
        summary=CalibrationSummary.of(rows, granularity=settings.granularity, logs=compared),
    )
