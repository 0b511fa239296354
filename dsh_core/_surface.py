"""The surface: the ordered seqs of the events the model currently sees.

It is the only source of derived history. Each event goes through one transition, shared by live
appends, seeds and :func:`fold_surface`: ``plan`` validates a candidate against the current
nodes without changing anything, ``apply`` commits the plan. A refused candidate therefore
leaves nodes and generation untouched (docs/design.md §3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import SurfaceError
from ._events import SURFACE_EVENT_TYPES, Event, SurfaceReplace
from ._json_text import dumps_canonical

__all__ = ["SurfaceFold", "SurfaceReplacement", "fold_surface"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SurfaceReplacement:
    """One replace that happened during a fold."""

    seq: int
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Plan:
    seq: int
    start_index: int
    end_index: int  # exclusive; start == end for an append at the tail
    shadowed: tuple[int, ...]


def _fail(event: Event, message: str) -> SurfaceError:
    return SurfaceError(
        f"{event.type} at seq {event.seq}: {message}", seq=event.seq, event_type=event.type
    )


def _blank_result_content(data: Any) -> str:
    """``data`` as canonical JSON with ``message.content[0].content`` blanked."""
    message = data.get("message") if isinstance(data, Mapping) else None
    if not isinstance(message, Mapping):
        return dumps_canonical(data, sort_keys=True)
    content = message.get("content")
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        first = dict(content[0])
        first["content"] = None
        message = {**message, "content": [first, *content[1:]]}
    return dumps_canonical({**data, "message": message}, sort_keys=True)


class SurfaceFold:
    """Incremental surface state over a log: ``nodes`` and ``generation`` (bumped by each replace).

    ``base_seq`` lets a fold start at a window of a long log; a replace citing a seq before the
    window fails as "not found".
    """

    __slots__ = ("_index", "base_seq", "generation", "nodes", "replacements", "track")

    def __init__(self, base_seq: int = 0, *, track: bool = False) -> None:
        self.base_seq = base_seq
        self.nodes: list[int] = []
        self.generation = 0
        self.track = track
        self.replacements: list[SurfaceReplacement] = []
        self._index: dict[int, int] | None = {}  # seq -> position while no replace happened

    def _position(self, seq: int) -> int | None:
        if self._index is not None:
            return self._index.get(seq)
        try:
            return self.nodes.index(seq)
        except ValueError:
            return None

    def plan(self, event: Event, expected_seq: int, log: Sequence[Event]) -> _Plan | None:
        """Validate ``event`` as the next event; ``None`` when it does not touch the surface."""
        if event.seq != expected_seq:
            raise _fail(event, f"seq {event.seq} is not contiguous; expected {expected_seq}")
        eligible = event.type in SURFACE_EVENT_TYPES
        if not eligible:
            if event.surface_op is not None:
                raise _fail(event, "is not surface-eligible and cannot carry surfaceOp")
            if event.source_event_seqs is not None:
                raise _fail(event, "is not surface-eligible and cannot carry sourceEventSeqs")
            return None
        if event.surface_op is None:
            raise _fail(event, "requires a surfaceOp marker ('append' or a replace)")
        cited = event.source_event_seqs
        if cited is not None:
            if not cited and event.type != "assistant/message":
                raise _fail(event, "sourceEventSeqs must not be empty except on assistant/message")
            if len(set(cited)) != len(cited):
                raise _fail(event, f"sourceEventSeqs has duplicates: {list(cited)}")
            later = [s for s in cited if s >= event.seq]
            if later:
                raise _fail(event, f"sourceEventSeqs must reference earlier events, got {later}")
        if event.surface_op == "append":
            n = len(self.nodes)
            return _Plan(event.seq, n, n, ())
        op = event.surface_op
        assert isinstance(op, SurfaceReplace)
        start_index = self._position(op.start)
        if start_index is None:
            raise _fail(event, f"replace start seq {op.start} not found in surface")
        end_index = self._position(op.end)
        if end_index is None:
            raise _fail(event, f"replace end seq {op.end} not found in surface")
        if start_index > end_index:
            raise _fail(
                event,
                f"replace start seq {op.start} comes after end seq {op.end} in surface order",
            )
        shadowed = tuple(self.nodes[start_index : end_index + 1])
        cited_set = set(cited or ())
        missing = [s for s in shadowed if s not in cited_set]
        if missing:
            raise _fail(
                event,
                f"a replace must cite every shadowed seq in sourceEventSeqs; missing {missing}",
            )
        if event.type == "tool/result":
            if len(shadowed) != 1:
                raise _fail(event, "a tool/result replace must shadow exactly one node")
            original = log[shadowed[0] - self.base_seq] if shadowed[0] >= self.base_seq else None
            if original is None or original.type != "tool/result":
                raise _fail(event, "a tool/result may only replace a tool/result")
            if _blank_result_content(original.data) != _blank_result_content(event.data):
                raise _fail(
                    event,
                    "a tool/result replace may change only the result block's content "
                    "(turn, step, error, meta, message id, source, toolCallId, isError must match)",
                )
        return _Plan(event.seq, start_index, end_index + 1, shadowed)

    def apply(self, plan: _Plan | None) -> None:
        """Commit a plan returned by :meth:`plan` for the same state."""
        if plan is None:
            return
        if plan.start_index == plan.end_index == len(self.nodes) and not plan.shadowed:
            if self._index is not None:
                self._index[plan.seq] = len(self.nodes)
            self.nodes.append(plan.seq)
            return
        self.nodes[plan.start_index : plan.end_index] = [plan.seq]
        self._index = None  # positions shifted; fall back to list search (replaces are rare)
        self.generation += 1
        if self.track:
            self.replacements.append(
                SurfaceReplacement(
                    seq=plan.seq,
                    start=plan.shadowed[0],
                    end=plan.shadowed[-1],
                    shadowed_seqs=plan.shadowed,
                )
            )


def fold_surface(events: Sequence[Event]) -> tuple[tuple[int, ...], tuple[SurfaceReplacement, ...]]:
    """Replay a whole log: the final surface nodes and every replace, in order."""
    fold = SurfaceFold(track=True)
    for i, event in enumerate(events):
        fold.apply(fold.plan(event, i, events))
    return tuple(fold.nodes), tuple(fold.replacements)
