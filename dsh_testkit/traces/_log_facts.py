"""Facts read off a session log for audit and cache-report: header steps, surface rewrites, usage.

Everything here is a pure function of the events. The folds are dsh_core's own
(:func:`fold_request_header`, the surface rules), so a report never disagrees with what the loop
and the reconstructor compute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from dsh_core import (
    DshError,
    EpochHeader,
    Event,
    ReconstructedRequest,
    SurfaceReplace,
    TokenUsage,
    fold_request_header,
)
from dsh_core._events import CORE_EVENT_TYPES, turn_step

from ._log_compare import header_changes, header_summary

__all__ = [
    "HeaderStep",
    "RewriteKind",
    "SurfaceRewrite",
    "UsageFound",
    "changes_between",
    "compaction_checkpoint_id",
    "find_usage",
    "header_steps",
    "opaque_type_counts",
    "surface_rewrites",
]

HEADER_EVENT_TYPES: Final = ("request/header", "request/header-delta")

_BRACKET_OPEN: Final = frozenset({"compaction/start", "compact/start"})
_BRACKET_CLOSE: Final = frozenset({"compaction/end", "compact/end"})
_METERING: Final = frozenset(
    {"compaction/summary", "compaction/prune", "compact/summary", "compact/prune"}
)
"""Events that price a surface replace (the replace follows right after)."""

_COMPACT_PLUGIN: Final = "compact"
"""The plugin name the reference harness's compaction checkpoints carry in their source."""


def compaction_checkpoint_id(event: Event) -> str | None:
    """The compaction id of a reference-harness compaction checkpoint, else ``None``.

    The reference harness's compaction rewrites history by a surface replace whose new node is
    a ``user/message`` with source ``{"kind": "plugin", "plugin": "compact", "compactionId": …}``
    (its summary checkpoint). Inside a ``compaction/start`` … ``compaction/end`` bracket or on
    its own (trimmed fixtures, backends that log no bracket), that source says "compaction".
    """
    if event.type != "user/message" or not isinstance(event.surface_op, SurfaceReplace):
        return None
    data = event.data if isinstance(event.data, Mapping) else {}
    source = data.get("source")
    if not isinstance(source, Mapping):
        message = data.get("message")
        source = message.get("source") if isinstance(message, Mapping) else None
    if (
        isinstance(source, Mapping)
        and source.get("kind") == "plugin"
        and source.get("plugin") == _COMPACT_PLUGIN
    ):
        compaction_id = source.get("compactionId")
        return compaction_id if isinstance(compaction_id, str) else ""
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderStep:
    """One header event and the header folded through it."""

    seq: int
    event_type: str
    """``request/header`` (a snapshot) or ``request/header-delta``."""
    reason: str | None
    """A snapshot's reason (``initial``, ``resume``, ``change``, ``fallback``); ``None`` for a delta."""
    turn: int | None
    """The turn open when it was logged."""
    header: EpochHeader
    changes: tuple[str, ...]
    """What changed against the header folded before it (``()`` when nothing did)."""

    @property
    def label(self) -> str:
        """``request/header change`` or ``request/header-delta``."""
        return f"{self.event_type} {self.reason}" if self.reason else self.event_type

    @property
    def summary(self) -> str:
        return header_summary(self.header)


def header_steps(events: Sequence[Event]) -> tuple[HeaderStep, ...]:
    """Fold the header events in order; raises :class:`CorruptLogError` where the fold breaks."""
    out: list[HeaderStep] = []
    state: EpochHeader | None = None
    turn: int | None = None
    for event in events:
        if event.type == "turn/start":
            turn = turn_step(event).turn
        elif event.type == "turn/end":
            turn = None
        elif event.type in HEADER_EVENT_TYPES:
            folded = fold_request_header((event,), state)
            assert folded is not None  # a header event always yields a header or raises
            reason = event.data.get("reason") if isinstance(event.data, Mapping) else None
            out.append(
                HeaderStep(
                    seq=event.seq,
                    event_type=event.type,
                    reason=reason if isinstance(reason, str) else None,
                    turn=turn,
                    header=folded,
                    changes=header_changes(state, folded),
                )
            )
            state = folded
    return tuple(out)


RewriteKind: TypeAlias = Literal["compaction", "prune", "rewrite"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SurfaceRewrite:
    """A surface replace: what it replaced and whether the log explains it."""

    seq: int
    event_type: str
    start: int
    end: int
    kind: RewriteKind
    """``compaction`` (inside a compaction or priced by its summary), ``prune`` (a tool/result
    replace priced by a prune event), ``rewrite`` (nothing in the log explains it)."""
    explained_by: int | None
    """Seq of the compaction or metering event that explains it (for a compaction checkpoint
    with no bracket: the checkpoint itself)."""
    compaction_id: str | None = None
    """Set when a reference-harness compaction checkpoint alone explains the replace: the
    compaction id it names (``""`` when it names none)."""

    @property
    def description(self) -> str:
        span = f"seq {self.start}" if self.start == self.end else f"seqs {self.start}..{self.end}"
        if self.kind == "rewrite":
            return (
                f"{self.event_type} at seq {self.seq} replaced {span} with no compaction "
                "or prune event before it"
            )
        what = "compaction" if self.kind == "compaction" else "tool-result prune"
        if self.compaction_id is not None:
            what += f" (checkpoint of compaction {self.compaction_id or '(no id)'})"
        return f"{what}: {self.event_type} at seq {self.seq} replaced {span}"


def surface_rewrites(events: Sequence[Event]) -> tuple[SurfaceRewrite, ...]:
    """Every surface replace, classified (docs/design.md §10: compactions and prunes are priced)."""
    out: list[SurfaceRewrite] = []
    bracket: int | None = None
    starts: dict[str, int] = {}
    previous: Event | None = None
    for event in events:
        op = event.surface_op
        if isinstance(op, SurfaceReplace):
            kind: RewriteKind = "rewrite"
            explained: int | None = None
            checkpoint = compaction_checkpoint_id(event)
            decided_by_checkpoint = False
            if previous is not None and previous.type in _METERING:
                explained = previous.seq
                kind = "prune" if previous.type.endswith("/prune") else "compaction"
            elif bracket is not None:
                explained, kind = bracket, "compaction"
            elif checkpoint is not None:
                # The reference's checkpoint form: the replacing message names its compaction.
                explained, kind = starts.get(checkpoint, event.seq), "compaction"
                decided_by_checkpoint = True
            if kind == "compaction" and event.type == "tool/result":
                kind = "prune"
            out.append(
                SurfaceRewrite(
                    seq=event.seq,
                    event_type=event.type,
                    start=op.start,
                    end=op.end,
                    kind=kind,
                    explained_by=explained,
                    compaction_id=checkpoint if decided_by_checkpoint else None,
                )
            )
        elif event.type in _BRACKET_OPEN:
            bracket = event.seq
            data = event.data if isinstance(event.data, Mapping) else {}
            if isinstance(data.get("compactionId"), str):
                starts[data["compactionId"]] = event.seq
        elif event.type in _BRACKET_CLOSE:
            bracket = None
        previous = event
    return tuple(out)


def opaque_type_counts(events: Sequence[Event]) -> tuple[tuple[str, int], ...]:
    """Event types this build does not model, with how often each occurs (sorted by type)."""
    counts = Counter(e.type for e in events if e.type not in CORE_EVENT_TYPES)
    return tuple(sorted(counts.items()))


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageFound:
    """The usage a request's attempt reported, and where it was logged."""

    seq: int
    usage: TokenUsage
    source: Literal["assistant/message", "usage-chunk"]


def _chunk_usage(event: Event) -> object:
    data = event.data if isinstance(event.data, Mapping) else {}
    chunk = data.get("chunk")
    if isinstance(chunk, Mapping) and chunk.get("type") == "usage":
        return chunk.get("usage")
    return None


def find_usage(
    events: Sequence[Event], request: ReconstructedRequest, end: int
) -> UsageFound | None:
    """The usage of ``request``'s attempt, looked for in ``events[first_response_seq:end]``.

    The search stops at the end of the step. The step's ``assistant/message`` usage wins (it is what the reference harness's meters
    read); without one (a failed attempt), the attempt's last ``usage`` chunk. An unreadable
    usage object counts as none.
    """
    start = request.first_response_seq
    if start is None:
        return None
    chunk_usage: UsageFound | None = None
    for seq in range(start, min(end, len(events))):
        event = events[seq]
        if event.type in ("step/start", "step/end", "turn/end"):
            break
        data = event.data if isinstance(event.data, Mapping) else {}
        try:
            if event.type == "assistant/message":
                if "usage" not in data:
                    return chunk_usage
                return UsageFound(
                    seq=seq, usage=TokenUsage.from_json(data["usage"]), source="assistant/message"
                )
            if event.type == "assistant/chunk":
                raw = _chunk_usage(event)
                if raw is not None:
                    chunk_usage = UsageFound(
                        seq=seq, usage=TokenUsage.from_json(raw), source="usage-chunk"
                    )
        except DshError:
            continue
    return chunk_usage


def changes_between(
    previous: ReconstructedRequest,
    request: ReconstructedRequest,
    steps: Sequence[HeaderStep],
    rewrites: Sequence[SurfaceRewrite],
) -> tuple[int, ...]:
    """Seqs of the header events and surface replaces that landed between two requests.

    A header event belongs to the first request whose first response follows it; a replace to
    the first request whose message boundary follows it.
    """
    low = previous.first_response_seq if previous.first_response_seq is not None else -1
    high = request.first_response_seq if request.first_response_seq is not None else -1
    seqs = {s.seq for s in steps if low < s.seq < high}
    seqs.update(r.seq for r in rewrites if previous.boundary_seq <= r.seq < request.boundary_seq)
    return tuple(sorted(seqs))
