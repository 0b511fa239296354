"""How far the mock's prefix-cache simulator agrees with the live API on recorded traffic.

For every session log that carries live usage (``cacheReadTokens``), each request is rebuilt
with :func:`dsh_core.reconstruct_requests`, rendered to its wire body by the DeepSeek provider
(:func:`dsh_core.providers.deepseek.serialize_request`), tokenized by the mock's
:class:`~dsh_testkit.prompt.PromptRenderer` and run, in order, through a fresh
:class:`~dsh_testkit.prompt.PrefixCacheSimulator`: one per log (scope ``log``) or one per folder
(scope ``folder``, so a parent and its subagents share the cache as they share an account). Each
request's reply (the step's ``assistant/message``) is committed, so its output-end unit exists.
Traces (a proxy trace file, HAR, cassette, the mock's request log) give their wire bodies as
sent, with the header known. Reading both kinds is ``_sources.py``'s job; this module simulates.

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
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dsh_core.providers._models import cache_model

from ..prompt._cache_values import CacheKey, CacheLookup, PrefixUnit
from ..prompt._template import PromptRenderer
from ..prompt._template_tokens import RenderedPrompt
from ._sources import Request, find_logs, requests_of
from ._values import (
    _ANCHOR_BASE,
    _SAME_RUN_MS,
    CalibrationReport,
    CalibrationSettings,
    CalibrationSummary,
    RequestCalibration,
    Scope,
    SkippedLog,
    _Clock,
    make_tokenizer,
)

__all__ = ["calibrate"]


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
    live_hit: int, found: CacheLookup, candidates: Sequence[PrefixUnit], granularity: int
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
    requests: Sequence[Request],
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
    scopes: dict[str, list[Request]] = {}
    compared = 0
    for path, label in logs:
        requests, reason = requests_of(path, label, folders)
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
