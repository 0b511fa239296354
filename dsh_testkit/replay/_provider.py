"""Replay a recorded session log as a provider: keyless, networkless, and strict by default.

:class:`ReplayProvider` serves the ``assistant/chunk`` stream a log recorded, call by call, to
an agent under test (docs/design.md §T1). The script is derived from the log alone
(:func:`derive_replay_script`): each model call is a run of chunks of one ``(turn, step)`` ended
by its ``finish`` chunk, so retries that share a step split at each finish, and a compaction
summary that went through the model becomes a call of its own. Calls bind per session in
first-call order (primary log first, then child logs by ``createdAt``), and everything that
does not fit fails loudly: an unrecorded session, a session asking for more calls than were
recorded, and — through :meth:`ReplayProvider.assert_consumed` — calls left unserved.

Strict mode (the default) adds what the reference replay lacks: before serving call N it
rebuilds the request the recorded log owes for that call (:func:`dsh_core.reconstruct_requests`)
and compares it with the live request, failing at once with :class:`ReplayMismatch` and a
structured diff (``system line 3``, ``temperature``, ``messages[4].content[0].text``)
instead of letting the divergence surface later as a log diff. The reference harness's
``{{system}}`` / ``{{tools}}`` placeholders compare as opaque: a placeholder in the recorded
header leaves that part uncompared.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from dsh_core import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    InvalidEventError,
    LlmFailure,
    ReconstructedRequest,
    Sidecars,
    StreamChunk,
    TokenUsage,
    ToolsPlaceholder,
    UsageChunk,
    diff_requests,
    reconstruct_requests,
)
from dsh_core._events import turn_step
from dsh_core._stream import chunk_from_json

from .._errors import (
    ReplayError,
    ReplayExhausted,
    ReplayMismatch,
    ReplayNotConsumed,
    ReplayScriptError,
    UnrecordedSession,
)

__all__ = ["LogSource", "RecordedSession", "ReplayEntry", "ReplayProvider", "derive_replay_script"]

_PLACEHOLDER: Final = re.compile(r"\{\{[A-Za-z0-9_.:-]+\}\}")
"""A normalized-fixture placeholder such as ``{{system}}``: compared as opaque."""

_SUMMARY_TYPES: Final = ("compaction/summary", "compact/summary")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayEntry:
    """One recorded model call: the chunks to serve, and where the log recorded them."""

    chunks: tuple[StreamChunk, ...]
    kind: Literal["conversation", "compaction"] = "conversation"
    """``compaction`` for a summary call synthesized from a compaction summary event."""
    turn: int | None = None
    step: int | None = None
    first_seq: int
    """Seq of the call's first ``assistant/chunk`` (or of its compaction summary event)."""


def _turn_step(event: Event) -> tuple[int, int]:
    named = turn_step(event)
    return named.turn or 0, named.step or 0


def _summary_entry(event: Event) -> ReplayEntry | None:
    """The synthesized call of a compaction summary, or ``None`` when no model call was made.

    The reference harness marks model-made summaries ``llmStreamCall: true`` and logs their
    ``rawOutput``; this project's ``compact/summary`` is always model-made (unless it says
    ``llmStreamCall: false``) and its ``summary`` blocks are the output.
    """
    data = event.data if isinstance(event.data, Mapping) else {}
    if event.type == "compaction/summary":
        if data.get("llmStreamCall") is not True:
            return None
        blocks = data.get("rawOutput")
        if not isinstance(blocks, list):
            raise ReplayScriptError(
                f"compaction/summary at seq {event.seq} is marked llmStreamCall but has no "
                "rawOutput to replay; re-record the scenario",
                seq=event.seq,
            )
    else:
        if data.get("llmStreamCall") is False:
            return None
        blocks = data.get("rawOutput", data.get("summary"))
        if not isinstance(blocks, list):
            raise ReplayScriptError(
                f"compact/summary at seq {event.seq} has no summary blocks to replay",
                seq=event.seq,
            )
    chunks: list[StreamChunk] = []
    try:
        for i, raw in enumerate(blocks):
            end = chunk_from_json({"type": "block-end", "index": i, "block": raw})
            assert isinstance(end, BlockEnd)
            chunks.append(BlockStart(index=i, block_type=end.block.type))
            chunks.append(end)
        if data.get("usage") is not None:
            chunks.append(UsageChunk(usage=TokenUsage.from_json(data["usage"])))
    except InvalidEventError as exc:
        raise ReplayScriptError(
            f"{event.type} at seq {event.seq} cannot be replayed: {exc}", seq=event.seq
        ) from None
    chunks.append(Finish(reason=FinishReason(kind="stop")))
    return ReplayEntry(
        chunks=tuple(chunks),
        kind="compaction",
        turn=turn_step(event).turn,
        first_seq=event.seq,
    )


def derive_replay_script(events: Sequence[Event]) -> tuple[ReplayEntry, ...]:
    """The model calls a log recorded, in order (docs/design.md §T1).

    A call is a run of ``assistant/chunk`` events of one ``(turn, step)`` closed by a ``finish``
    chunk; a new ``(turn, step)`` closes the run before it. A compaction summary made by the
    model becomes a call of its own (blocks, usage, ``finish{stop}``). Other events are ignored.
    A run that ends without a ``finish`` raises :class:`ReplayScriptError` naming its turn/step.
    """
    script: list[ReplayEntry] = []
    current: list[StreamChunk] = []
    key: tuple[int, int] | None = None
    first_seq = 0

    def close() -> None:
        nonlocal current, key
        if current:
            if not isinstance(current[-1], Finish):
                turn, step = key or (0, 0)
                raise ReplayScriptError(
                    f"model call {turn}/{step} (first chunk at seq {first_seq}) ended without a "
                    "finish chunk, so it cannot be replayed as recorded; an interrupted call "
                    "needs a replay.override.json sidecar or a re-recording",
                    turn=turn,
                    step=step,
                    seq=first_seq,
                )
            turn, step = key or (0, 0)
            script.append(
                ReplayEntry(chunks=tuple(current), turn=turn, step=step, first_seq=first_seq)
            )
        current, key = [], None

    for event in events:
        if event.type in _SUMMARY_TYPES:
            close()
            entry = _summary_entry(event)
            if entry is not None:
                script.append(entry)
            continue
        if event.type != "assistant/chunk":
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        this_key = _turn_step(event)
        if current and this_key != key:
            close()
        try:
            chunk = chunk_from_json(data.get("chunk"))
        except InvalidEventError as exc:
            raise ReplayScriptError(
                f"assistant/chunk at seq {event.seq} is not a valid chunk: {exc}",
                turn=this_key[0],
                step=this_key[1],
                seq=event.seq,
            ) from None
        if not current:
            key, first_seq = this_key, event.seq
        current.append(chunk)
        if isinstance(chunk, Finish):
            close()
    close()
    return tuple(script)


@dataclass(slots=True, kw_only=True)
class RecordedSession:
    """One recorded log prepared for replay: its script and the requests it owes."""

    session_id: str
    events: tuple[Event, ...]
    created_at: int = 0
    seed_length: int = 0
    """Events inherited from a parent (a fork child's seed), never replayed as its calls."""
    script: tuple[ReplayEntry, ...] = ()
    _expected: dict[int, ReconstructedRequest] | None = field(default=None, repr=False)

    def expected_request(self, entry: ReplayEntry) -> ReconstructedRequest | None:
        """The request the log rebuilds for ``entry`` (``None`` for a compaction call)."""
        if self._expected is None:
            self._expected = {
                r.first_response_seq: r
                for r in reconstruct_requests(self.events)
                if r.first_response_seq is not None
            }
        return self._expected.get(entry.first_seq)


LogSource = Any
"""A log to replay: a :class:`~dsh_core.Session`, a loaded log (``.info`` + ``.events``), a
sequence of :class:`~dsh_core.Event`, or a path to a ``session.jsonl``."""


def _recorded(
    source: LogSource, *, child: bool, ordinal: int, sidecars: Any = None
) -> RecordedSession:
    info: Any = None
    if isinstance(source, (str, os.PathLike)):
        from dsh_core.persistence import load_session

        source = load_session(Path(source), audit=True, fill=sidecars)
    if hasattr(source, "events") and hasattr(source, "info"):
        info = source.info
        events = tuple(source.events)
    elif isinstance(source, Sequence) and all(isinstance(e, Event) for e in source):
        events = tuple(source)
    else:
        raise TypeError(
            "a replay log must be a Session, a loaded log, a sequence of Events or a path, "
            f"got {type(source).__name__}"
        )
    seed = int(getattr(info, "seed_length", None) or 0) if child else 0
    session_id = str(getattr(info, "id", None) or f"log-{ordinal}")
    return RecordedSession(
        session_id=session_id,
        events=events,
        created_at=int(getattr(info, "created_at", 0) or 0),
        seed_length=seed,
        script=derive_replay_script(events[seed:]),
    )


class _Anonymous:
    def __repr__(self) -> str:
        return "<no sessionId>"


_ANONYMOUS: Final = _Anonymous()


def _opaque(expected: Any) -> bool:
    if isinstance(expected, ToolsPlaceholder):
        return True
    return isinstance(expected, str) and _PLACEHOLDER.fullmatch(expected) is not None


class ReplayProvider:
    """A :class:`dsh_core.Provider` that serves recorded calls instead of calling a model.

    ``log`` is the primary session; ``children`` are subagent logs (bound after the primary,
    by ``createdAt``, then id). Each live session (``options.session_id``; no id is one
    anonymous session) binds to the next unbound recording at its first call, and its Nth call
    gets that recording's Nth call. With ``strict=True`` each conversation call's live request
    must equal the request the recorded log rebuilds for it (compaction calls are checked for
    their purpose only). Errors are raised when the returned stream is first iterated.

    ``sidecars`` fills a normalized log's placeholders when logs are given as paths:
    ``"auto"`` reads the sidecar files beside each log (``session.N.jsonl`` takes its numbered
    ones), a :class:`dsh_core.Sidecars` applies to the primary log only; ``None`` (the default)
    keeps placeholders, which strict mode then compares as opaque.
    """

    def __init__(
        self,
        log: LogSource,
        *children: LogSource,
        strict: bool = True,
        sidecars: Sidecars | Literal["auto"] | None = None,
    ) -> None:
        primary = _recorded(log, child=False, ordinal=0, sidecars=sidecars)
        child_sidecars = "auto" if sidecars == "auto" else None
        kids = [
            _recorded(c, child=True, ordinal=i + 1, sidecars=child_sidecars)
            for i, c in enumerate(children)
        ]
        kids.sort(key=lambda s: (s.created_at, s.session_id))
        self.recordings: tuple[RecordedSession, ...] = (primary, *kids)
        """The recorded sessions in binding order (primary first)."""
        self.strict = strict
        self.requests: list[GenerateOptions] = []
        """Every live request received, in order."""
        self._bindings: dict[object, int] = {}
        self._cursors: list[int] = [0] * len(self.recordings)

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Serve the next recorded call of ``options.session_id``'s session.

        The session's cursor advances now, when the call is made, not when it is iterated.
        """
        self.requests.append(options)
        key: object = options.session_id if options.session_id is not None else _ANONYMOUS
        try:
            recording, index = self._advance(key, options)
        except ReplayError as error:
            return self._fail(error)
        return self._play(recording, index, options)

    def _advance(self, key: object, options: GenerateOptions) -> tuple[int, int]:
        slot = self._bindings.get(key)
        if slot is None:
            slot = len(self._bindings)
            if slot >= len(self.recordings):
                bound = ", ".join(
                    f"{self.recordings[s].session_id!r} ← {k!r}" for k, s in self._bindings.items()
                )
                raise UnrecordedSession(
                    f"unrecorded session {key!r}: it made a model call but all "
                    f"{len(self.recordings)} recorded session(s) are bound already ({bound}); "
                    "re-record the scenario, or pass the missing child log to ReplayProvider",
                    session_id=options.session_id,
                )
            self._bindings[key] = slot
        index = self._cursors[slot]
        self._cursors[slot] = index + 1
        recording = self.recordings[slot]
        if index >= len(recording.script):
            raise ReplayExhausted(
                f"replay script exhausted: session {key!r} (recorded as "
                f"{recording.session_id!r}) requested model call #{index + 1}, but its log "
                f"recorded only {len(recording.script)}; the code now makes more calls than "
                "were recorded: fix it, or re-record the scenario",
                session_id=options.session_id,
                index=index,
                recorded=len(recording.script),
            )
        return slot, index

    async def _fail(self, error: ReplayError) -> AsyncIterator[StreamChunk]:
        raise error
        yield  # pragma: no cover - makes this an async generator

    async def _play(
        self, slot: int, index: int, options: GenerateOptions
    ) -> AsyncIterator[StreamChunk]:
        recording = self.recordings[slot]
        entry = recording.script[index]
        if self.strict:
            self._check(recording, entry, index, options)
        cancel = options.cancel
        for chunk in entry.chunks:
            if cancel is not None and cancel.cancelled:
                reason = cancel.reason or "cancelled"
                failure = LlmFailure(message=f"request cancelled ({reason})", code="ABORTED")
                yield Finish(reason=FinishReason(kind="aborted", failure=failure))
                return
            yield chunk

    def _check(
        self, recording: RecordedSession, entry: ReplayEntry, index: int, actual: GenerateOptions
    ) -> None:
        where = f"session {recording.session_id!r} model call #{index + 1}"
        if entry.kind == "compaction" or actual.purpose == "compaction":
            if (entry.kind == "compaction") != (actual.purpose == "compaction"):
                recorded = (
                    "a compaction summary" if entry.kind == "compaction" else "a conversation call"
                )
                purpose_diff = (
                    f"purpose: the log recorded {recorded}, the request has purpose={actual.purpose!r}",
                )
                raise ReplayMismatch(
                    f"strict replay: {where} differs from the recorded call at seq "
                    f"{entry.first_seq}:",
                    index=index,
                    expected=None,
                    actual=actual,
                    diff=purpose_diff,
                )
            return
        rebuilt = recording.expected_request(entry)
        if rebuilt is None:
            return
        expected = rebuilt.request
        expected = replace(
            expected,
            session_id=actual.session_id,
            system=actual.system if _opaque(expected.system) else expected.system,
            tools=actual.tools if _opaque(expected.tools) else expected.tools,
            message_prefix=(
                actual.message_prefix
                if any(isinstance(e, str) for e in expected.message_prefix)
                else expected.message_prefix
            ),
        )
        diff = diff_requests(expected, actual, model_visible_only=True, names=("recorded", "live"))
        if diff:
            raise ReplayMismatch(
                f"strict replay: the live request for {where} differs from the request the "
                f"recorded log rebuilds for it (turn {rebuilt.turn}, step {rebuilt.step}, attempt "
                f"{rebuilt.attempt}, first chunk at seq {entry.first_seq}); fix the code, or "
                "re-record the scenario if the change is intended:",
                index=index,
                expected=expected,
                actual=actual,
                diff=diff,
            )

    def assert_consumed(self) -> None:
        """Fail with :class:`ReplayNotConsumed` when a recorded call was never served.

        Either a recorded session was never bound, or a bound one made fewer calls than it
        recorded: the code under test drove fewer model calls than the recording.
        """
        remaining: dict[str, int] = {}
        lines: list[str] = []
        bound = set(self._bindings.values())
        ids = [recording.session_id for recording in self.recordings]
        for slot, recording in enumerate(self.recordings):
            left = len(recording.script) - self._cursors[slot]
            if left <= 0:
                continue
            # Two recordings may share a session id: key them apart by their position.
            key = (
                recording.session_id
                if ids.count(recording.session_id) == 1
                else f"{recording.session_id}[{slot}]"
            )
            remaining[key] = left
            if slot not in bound:
                lines.append(
                    f"recorded session {recording.session_id!r} was never used "
                    f"({len(recording.script)} call(s))"
                )
            else:
                lines.append(
                    f"recorded session {recording.session_id!r} served {self._cursors[slot]} of "
                    f"{len(recording.script)} call(s)"
                )
        if remaining:
            raise ReplayNotConsumed(
                "replay fixture not fully consumed: the code drove fewer model calls than were "
                "recorded:" + "".join(f"\n  {line}" for line in lines),
                remaining=remaining,
            )
