"""Packed chunk rows: the reference harness's storage encoding for runs of delta chunks.

Providers stream token-sized deltas, so a log holds hundreds of ``assistant/chunk`` events whose
envelopes dwarf their payloads. The reference harness stores each run of ≥3 consecutive,
same-block delta chunks as ONE storage row::

    {"type":"text-chunks","seq0":10,"time0":…,"data":{"turn":1,"step":1,"index":0,"dt":[…],"texts":[…]}}

``reasoning-chunks`` has the same shape; ``tool-call-chunks`` carries ``id``, ``name?`` and
``args`` instead of ``texts``. Rows are a storage vocabulary, never events: they do not enter a
log, and their tags have no slash so nobody mistakes them for an event type.

Both directions are strict. The packer whitelists exact shapes (keys *and* key order, integer
turn/step/index, safe-integer seqs and times), so anything it does not fully recognise is stored
verbatim and ``expand(pack(events)) == events`` holds byte for byte. The decoder validates a row
completely before expanding it and raises :class:`CorruptLogError` on a malformed one: treating
it as an event would silently drop a whole run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, TypeGuard

from .._errors import CorruptLogError
from .._events import Event
from .._json import FrozenDict, freeze_json

__all__ = [
    "CHUNK_ROW_TYPES",
    "MIN_RUN",
    "ChunkRow",
    "RunPacker",
    "expand_chunk_rows",
    "pack_chunk_rows",
]

ChunkRowType: TypeAlias = Literal["text-chunks", "reasoning-chunks", "tool-call-chunks"]
_DeltaKind: TypeAlias = Literal["text-delta", "reasoning-delta", "tool-call-delta"]

CHUNK_ROW_TYPES: Final[frozenset[str]] = frozenset(
    {"text-chunks", "reasoning-chunks", "tool-call-chunks"}
)
"""The storage-row tags. A JSONL line with one of these types is a row, not an event."""

MIN_RUN: Final = 3
"""Fewest members a run needs before it packs (below that a row saves nothing). Both layouts
decode identically, so this is a format constant only for the writer."""

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: the reference reader's exact-integer limit."""

_ROW_OF_KIND: Final[dict[str, ChunkRowType]] = {
    "text-delta": "text-chunks",
    "reasoning-delta": "reasoning-chunks",
    "tool-call-delta": "tool-call-chunks",
}
_KIND_OF_ROW: Final[dict[str, _DeltaKind]] = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_safe(value: object) -> TypeGuard[int]:
    return _is_int(value) and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkRow:
    """One packed run of consecutive delta chunks of one block.

    Member ``k`` expands to ``assistant/chunk`` at seq ``seq0 + k`` and time ``time0 + sum(dt[:k])``.
    """

    type: ChunkRowType
    """``text-chunks``, ``reasoning-chunks`` or ``tool-call-chunks``."""
    seq0: int
    """Seq of the first member."""
    time0: int
    """Time (epoch ms) of the first member."""
    turn: int
    step: int
    index: int
    """The stream block index every member shares."""
    dt: tuple[int, ...]
    """Time gaps between consecutive members (may be negative); one fewer than the members."""
    payload: tuple[str, ...]
    """Each member's text (``texts``) or raw arguments fragment (``args``), never joined: token
    boundaries are data."""
    call_id: str | None = None
    """Tool-call rows: the call id every member carries (JSON ``id``)."""
    name: str | None = None
    """Tool-call rows: the tool name, present only when every member carried the same one."""

    def to_json(self) -> dict[str, Any]:
        """The storage record, in the reference harness's key order."""
        data: dict[str, Any] = {
            "turn": self.turn,
            "step": self.step,
            "index": self.index,
            "dt": list(self.dt),
        }
        if self.type == "tool-call-chunks":
            data["id"] = self.call_id
            if self.name is not None:
                data["name"] = self.name
            data["args"] = list(self.payload)
        else:
            data["texts"] = list(self.payload)
        return {"type": self.type, "seq0": self.seq0, "time0": self.time0, "data": data}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ChunkRow:
        """Validate a row-tagged record strictly; a malformed row raises :class:`CorruptLogError`."""
        tag = obj.get("type")
        if tag not in CHUNK_ROW_TYPES:
            raise CorruptLogError(f"{tag!r} is not a chunk-row type ({sorted(CHUNK_ROW_TYPES)})")

        raw_seq0, time0 = obj.get("seq0"), obj.get("time0")
        seq_hint = raw_seq0 if _is_safe(raw_seq0) and raw_seq0 >= 0 else None

        def malformed(why: str) -> CorruptLogError:
            return CorruptLogError(f"malformed {tag} storage row: {why}", seq=seq_hint)

        if set(obj) != {"type", "seq0", "time0", "data"}:
            raise malformed(
                f"envelope must be exactly {{type, seq0, time0, data}}, got {sorted(obj)}"
            )
        if seq_hint is None:
            raise malformed(f"seq0 must be a non-negative safe integer, got {raw_seq0!r}")
        seq0 = seq_hint
        if not _is_safe(time0):
            raise malformed(f"time0 must be a safe integer, got {time0!r}")
        data = obj["data"]
        if not isinstance(data, Mapping):
            raise malformed("data must be an object")
        if tag == "tool-call-chunks":
            want = {"turn", "step", "index", "dt", "id", "args"}
            if set(data) != want and set(data) != want | {"name"}:
                raise malformed(
                    f"data must be exactly {{turn, step, index, id, name?, dt, args}}, got {sorted(data)}"
                )
            if not isinstance(data["id"], str):
                raise malformed(f"id must be a string, got {data['id']!r}")
            if "name" in data and not isinstance(data["name"], str):
                raise malformed(f"name must be a string when present, got {data['name']!r}")
            payload_key = "args"
        else:
            if set(data) != {"turn", "step", "index", "dt", "texts"}:
                raise malformed(
                    f"data must be exactly {{turn, step, index, dt, texts}}, got {sorted(data)}"
                )
            payload_key = "texts"
        for key in ("turn", "step", "index"):
            if not _is_int(data[key]):
                raise malformed(f"{key} must be an integer, got {data[key]!r}")
        payload = data[payload_key]
        if (
            not isinstance(payload, list)
            or not payload
            or not all(isinstance(p, str) for p in payload)
        ):
            raise malformed(f"{payload_key} must be a non-empty array of strings")
        dt = data["dt"]
        if not isinstance(dt, list) or not all(_is_safe(g) for g in dt):
            raise malformed("dt must be an array of safe integers")
        if len(dt) != len(payload) - 1:
            raise malformed(f"dt has {len(dt)} gaps for {len(payload)} members (want members - 1)")
        # The reference encoder only packs safe seqs and times; a member outside that range is
        # outside any encoder's image (a JavaScript reader would round it), so it is corruption.
        if seq0 + len(payload) - 1 > MAX_SAFE_INTEGER:
            raise malformed("member seqs must stay safe integers")
        time = time0
        for gap in dt:
            time += gap
            if not _is_safe(time):
                raise malformed("member times must stay safe integers")
        return cls(
            type=tag,
            seq0=seq0,
            time0=time0,
            turn=data["turn"],
            step=data["step"],
            index=data["index"],
            dt=tuple(dt),
            payload=tuple(payload),
            call_id=data.get("id"),
            name=data.get("name"),
        )

    def expand(self) -> list[Event]:
        """The member events, exactly as they were before packing."""
        kind = _KIND_OF_ROW[self.type]
        events: list[Event] = []
        time = self.time0
        for k, text in enumerate(self.payload):
            if k:
                time += self.dt[k - 1]
            chunk: dict[str, Any]
            if kind == "tool-call-delta":
                chunk = {"type": kind, "index": self.index, "id": self.call_id}
                if self.name is not None:
                    chunk["name"] = self.name
                chunk["argumentsDelta"] = text
            else:
                chunk = {"type": kind, "index": self.index, "text": text}
            events.append(
                Event(
                    type="assistant/chunk",
                    seq=self.seq0 + k,
                    time=time,
                    data=freeze_json(
                        {"turn": self.turn, "step": self.step, "chunk": chunk}, path="data"
                    ),
                )
            )
        return events


# Exact key sequences (order included) of the chunk shapes that pack. Requiring the order means
# a packed event re-encodes to the very bytes it had; anything else is stored verbatim.
_TEXT_KEYS: Final = ("type", "index", "text")
_TOOL_KEYS: Final = ("type", "index", "id", "argumentsDelta")
_TOOL_KEYS_NAMED: Final = ("type", "index", "id", "name", "argumentsDelta")


def _classify(event: Event) -> _DeltaKind | None:
    """The delta kind when the event's ENTIRE shape is whitelisted, else ``None`` (verbatim)."""
    if (
        event.type != "assistant/chunk"
        or event.surface_op is not None
        or event.source_event_seqs is not None
        or event.ignorable
        or not _is_safe(event.seq)
        or not _is_safe(event.time)
    ):
        return None
    data = event.data
    if not isinstance(data, FrozenDict) or tuple(data) != ("turn", "step", "chunk"):
        return None
    chunk = data["chunk"]
    if not (_is_int(data["turn"]) and _is_int(data["step"]) and isinstance(chunk, FrozenDict)):
        return None
    if not _is_int(chunk.get("index")):
        return None
    kind = chunk.get("type")
    keys = tuple(chunk)
    if kind in ("text-delta", "reasoning-delta"):
        return kind if keys == _TEXT_KEYS and isinstance(chunk["text"], str) else None
    if kind == "tool-call-delta":
        if keys == _TOOL_KEYS_NAMED and not isinstance(chunk["name"], str):
            return None
        if (
            keys in (_TOOL_KEYS, _TOOL_KEYS_NAMED)
            and isinstance(chunk["id"], str)
            and isinstance(chunk["argumentsDelta"], str)
        ):
            return "tool-call-delta"
    return None


def _continues(prev: Event, nxt: Event, kind: _DeltaKind) -> bool:
    """Whether ``nxt`` extends a run ending in ``prev`` (both already classified as ``kind``)."""
    if nxt.seq != prev.seq + 1 or not _is_safe(nxt.time - prev.time):
        return False
    a, b = prev.data, nxt.data
    if a["turn"] != b["turn"] or a["step"] != b["step"]:
        return False
    ca, cb = a["chunk"], b["chunk"]
    if ca["index"] != cb["index"]:
        return False
    if kind != "tool-call-delta":
        return True
    # A mixed run (name on some members only, or two names) is not representable.
    return (
        ca["id"] == cb["id"]
        and ("name" in ca) == ("name" in cb)
        and ca.get("name") == cb.get("name")
    )


def _build_row(kind: _DeltaKind, run: Sequence[Event]) -> ChunkRow:
    first = run[0]
    chunk = first.data["chunk"]
    payload_key = "argumentsDelta" if kind == "tool-call-delta" else "text"
    return ChunkRow(
        type=_ROW_OF_KIND[kind],
        seq0=first.seq,
        time0=first.time,
        turn=first.data["turn"],
        step=first.data["step"],
        index=chunk["index"],
        dt=tuple(run[i].time - run[i - 1].time for i in range(1, len(run))),
        payload=tuple(e.data["chunk"][payload_key] for e in run),
        call_id=chunk["id"] if kind == "tool-call-delta" else None,
        name=chunk.get("name") if kind == "tool-call-delta" else None,
    )


class RunPacker:
    """Incremental packer: feed events in log order, get the records ready to store.

    A whitelisted delta chunk is held back while its run may still grow; it comes out when the
    run ends (the next event does not continue it) or on :meth:`finish`. This is what lets a live
    writer pack while still writing every other event the moment it is appended.
    """

    __slots__ = ("_kind", "_run")

    def __init__(self) -> None:
        self._kind: _DeltaKind | None = None
        self._run: list[Event] = []

    @property
    def pending(self) -> int:
        """How many events are held back in the current run."""
        return len(self._run)

    def copy(self) -> RunPacker:
        """An independent packer in the same state (to commit a batch only once it is written)."""
        twin = RunPacker()
        twin._kind = self._kind
        twin._run = list(self._run)
        return twin

    def feed(self, event: Event) -> list[Event | ChunkRow]:
        """Accept the next event; returns the records that are final now (possibly none)."""
        kind = _classify(event)
        if (
            kind is not None
            and kind == self._kind
            and self._run
            and _continues(self._run[-1], event, kind)
        ):
            self._run.append(event)
            return []
        out = self.finish()
        if kind is None:
            out.append(event)
        else:
            self._kind = kind
            self._run = [event]
        return out

    def finish(self) -> list[Event | ChunkRow]:
        """End the current run: one row when it is long enough, else its events verbatim."""
        run, kind = self._run, self._kind
        self._run, self._kind = [], None
        if kind is not None and len(run) >= MIN_RUN:
            return [_build_row(kind, run)]
        return list(run)


def pack_chunk_rows(events: Iterable[Event]) -> list[Event | ChunkRow]:
    """Pack every run of ≥3 consecutive whitelisted same-block delta chunks into one row.

    Pure; everything that is not part of such a run passes through unchanged, in order.
    ``expand_chunk_rows(pack_chunk_rows(events)) == list(events)`` for any events.
    """
    packer = RunPacker()
    out: list[Event | ChunkRow] = []
    for event in events:
        out.extend(packer.feed(event))
    out.extend(packer.finish())
    return out


def expand_chunk_rows(records: Iterable[Event | ChunkRow]) -> list[Event]:
    """Expand rows back into their member events; events pass through unchanged."""
    out: list[Event] = []
    for record in records:
        if isinstance(record, ChunkRow):
            out.extend(record.expand())
        else:
            out.append(record)
    return out
