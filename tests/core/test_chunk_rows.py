"""Packed chunk rows (docs/design.md §14): the packer's whitelist and runs, the strict decoder,
and the law "pack, store as JSON, decode, expand" is the identity."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import CorruptLogError, Event
from dsh_core._json_text import dumps_canonical
from dsh_core.persistence._chunk_rows import (
    MAX_SAFE_INTEGER,
    ChunkRow,
    RunPacker,
    expand_chunk_rows,
    pack_chunk_rows,
)

SAFE = st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)


def chunk(
    seq: int, chunk: dict[str, Any], *, time: int = 1000, turn: int = 1, step: int = 1
) -> Event:
    return Event(
        type="assistant/chunk",
        seq=seq,
        time=time,
        data={"turn": turn, "step": step, "chunk": chunk},
    )


def text(
    seq: int, value: str = "x", *, index: int = 0, kind: str = "text-delta", **kw: Any
) -> Event:
    return chunk(seq, {"type": kind, "index": index, "text": value}, **kw)


def tool(
    seq: int, args: str = "{", *, call_id: str = "c1", name: str | None = None, **kw: Any
) -> Event:
    delta: dict[str, Any] = {"type": "tool-call-delta", "index": 1, "id": call_id}
    if name is not None:
        delta["name"] = name
    delta["argumentsDelta"] = args
    return chunk(seq, delta, **kw)


def other(seq: int, kind: str = "turn/start") -> Event:
    return Event(type=kind, seq=seq, time=5, data={"turn": 1})


def as_json(records: list[Event | ChunkRow]) -> list[dict[str, Any]]:
    return [json.loads(dumps_canonical(r.to_json())) for r in records]


# ------------------------------------------------------------------------------- packing


def test_a_run_of_three_text_deltas_packs_into_the_reference_row_layout() -> None:
    events = [text(4, "He", time=100), text(5, "ll", time=142), text(6, "o", time=141)]
    [row] = pack_chunk_rows(events)
    assert isinstance(row, ChunkRow)
    # Key order matters: it is the reference harness's, so stored bytes interchange.
    assert dumps_canonical(row.to_json()) == (
        '{"type":"text-chunks","seq0":4,"time0":100,'
        '"data":{"turn":1,"step":1,"index":0,"dt":[42,-1],"texts":["He","ll","o"]}}'
    )
    assert row.expand() == events


def test_reasoning_and_tool_call_runs_pack_with_their_own_tags() -> None:
    reasoning = [text(i, "r", kind="reasoning-delta") for i in range(3)]
    [row] = pack_chunk_rows(reasoning)
    assert isinstance(row, ChunkRow) and row.type == "reasoning-chunks"

    calls = [tool(0, "", name="bash"), tool(1, '{"a"', name="bash"), tool(2, ":1}", name="bash")]
    [row] = pack_chunk_rows(calls)
    assert row.to_json() == {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 1000,
        "data": {
            "turn": 1,
            "step": 1,
            "index": 1,
            "dt": [0, 0],
            "id": "c1",
            "name": "bash",
            "args": ["", '{"a"', ":1}"],
        },
    }
    assert list(row.to_json()["data"]) == ["turn", "step", "index", "dt", "id", "name", "args"]
    assert isinstance(row, ChunkRow) and row.expand() == calls


def test_a_tool_call_run_without_a_name_has_no_name_key() -> None:
    [row] = pack_chunk_rows([tool(i) for i in range(3)])
    assert isinstance(row, ChunkRow)
    assert "name" not in row.to_json()["data"]
    assert "name" not in row.expand()[0].data["chunk"]


def test_runs_shorter_than_three_are_stored_verbatim() -> None:
    events = [text(0), text(1), other(2), text(3)]
    assert pack_chunk_rows(events) == events


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (text(1, kind="reasoning-delta"), "another kind"),
        (text(1, index=1), "another block index"),
        (text(1, turn=2), "another turn"),
        (text(1, step=2), "another step"),
        (text(5), "a seq gap"),
    ],
)
def test_a_run_breaks_on(second: Event, why: str) -> None:
    first = text(0)
    third = Event(type=second.type, seq=second.seq + 1, time=second.time, data=second.data)
    fourth = Event(type=second.type, seq=second.seq + 2, time=second.time, data=second.data)
    packed = pack_chunk_rows([first, second, third, fourth])
    # The first event is alone (verbatim); the other three form one row.
    assert packed[0] == first, why
    assert isinstance(packed[1], ChunkRow) and packed[1].seq0 == second.seq
    assert len(packed) == 2


@pytest.mark.parametrize(
    ("name", "breaker"),
    [
        (None, tool(2, call_id="c2")),
        ("bash", tool(2)),  # the name is present on some members only
        ("bash", tool(2, name="ls")),
    ],
    ids=["other id", "name presence", "other name"],
)
def test_a_tool_call_run_needs_the_same_id_and_name(name: str | None, breaker: Event) -> None:
    events = [tool(0, name=name), tool(1, name=name), breaker]
    assert pack_chunk_rows(events) == events
    assert isinstance(pack_chunk_rows([*events[:2], tool(2, name=name)])[0], ChunkRow)


def test_a_time_gap_beyond_the_safe_range_breaks_a_run() -> None:
    events = [text(0, time=-MAX_SAFE_INTEGER), text(1, time=MAX_SAFE_INTEGER), text(2), text(3)]
    packed = pack_chunk_rows(events)
    assert packed[0] == events[0]
    assert isinstance(packed[1], ChunkRow) and packed[1].seq0 == 1
    assert expand_chunk_rows(packed) == events


@pytest.mark.parametrize(
    "odd",
    [
        chunk(1, {"type": "text-delta", "index": 0, "text": "x", "extra": 1}),
        chunk(1, {"index": 0, "type": "text-delta", "text": "x"}),  # key order
        chunk(1, {"type": "text-delta", "index": True, "text": "x"}),
        chunk(1, {"type": "text-delta", "index": 0, "text": 5}),
        chunk(
            1, {"type": "tool-call-delta", "index": 1, "id": "c1", "name": 3, "argumentsDelta": ""}
        ),
        chunk(1, {"type": "tool-call-delta", "index": 1, "id": 7, "argumentsDelta": ""}),
        chunk(1, {"type": "block-start", "index": 0, "blockType": "text"}),
        chunk(1, {"type": "text-delta", "index": 0, "text": "x"}, turn=1.5),  # type: ignore[arg-type]
        Event(type="assistant/chunk", seq=1, time=0, data={"turn": 1, "step": 1, "chunk": {}}),
        Event(type="assistant/chunk", seq=1, time=0, data=[1]),
        Event(
            type="assistant/chunk",
            seq=1,
            time=0,
            data={"step": 1, "turn": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
        ),
        Event(
            type="assistant/chunk",
            seq=1,
            time=0,
            data={"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
            ignorable=True,
        ),
    ],
    ids=[
        "extra chunk key",
        "chunk key order",
        "bool index",
        "non-string text",
        "non-string name",
        "non-string id",
        "block-start",
        "fractional turn",
        "empty chunk",
        "non-object data",
        "data key order",
        "ignorable",
    ],
)
def test_anything_not_whitelisted_is_stored_verbatim(odd: Event) -> None:
    events = [text(0), odd, text(2)]
    assert pack_chunk_rows(events) == events


def test_the_incremental_packer_holds_a_run_until_it_ends() -> None:
    packer = RunPacker()
    assert packer.feed(text(0)) == []
    assert packer.feed(text(1)) == []
    assert packer.feed(text(2)) == []
    assert packer.pending == 3
    out = packer.feed(other(3))
    assert isinstance(out[0], ChunkRow) and out[1] == other(3)
    assert packer.pending == 0
    assert packer.finish() == []


# ------------------------------------------------------------------------------- decoding

GOOD_TEXT_ROW: dict[str, Any] = {
    "type": "text-chunks",
    "seq0": 10,
    "time0": 500,
    "data": {"turn": 1, "step": 2, "index": 0, "dt": [1, -3], "texts": ["a", "", "c"]},
}
GOOD_TOOL_ROW: dict[str, Any] = {
    "type": "tool-call-chunks",
    "seq0": 0,
    "time0": 0,
    "data": {"turn": 1, "step": 1, "index": 1, "dt": [0], "id": "c", "args": ["", "{}"]},
}


def test_a_row_decodes_and_expands_to_its_members() -> None:
    events = ChunkRow.from_json(GOOD_TEXT_ROW).expand()
    assert [(e.seq, e.time, e.data["chunk"]["text"]) for e in events] == [
        (10, 500, "a"),
        (11, 501, ""),
        (12, 498, "c"),
    ]
    assert all(e.type == "assistant/chunk" and e.data["step"] == 2 for e in events)
    assert ChunkRow.from_json(GOOD_TEXT_ROW).to_json() == GOOD_TEXT_ROW
    assert ChunkRow.from_json(GOOD_TOOL_ROW).to_json() == GOOD_TOOL_ROW


def _patched(row: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**row, "data": dict(row["data"])}
    for key, value in changes.items():
        target = out["data"] if key.startswith("data_") else out
        name = key.removeprefix("data_")
        if value is _DROP:
            del target[name]
        else:
            target[name] = value
    return out


_DROP = object()
_UNSAFE = MAX_SAFE_INTEGER + 1


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_patched(GOOD_TEXT_ROW, extra=1), "envelope must be exactly"),
        (_patched(GOOD_TEXT_ROW, seq0=-1), "seq0 must be a non-negative safe integer"),
        (_patched(GOOD_TEXT_ROW, seq0=True), "seq0 must be a non-negative safe integer"),
        (_patched(GOOD_TEXT_ROW, seq0=_UNSAFE), "seq0 must be a non-negative safe integer"),
        (_patched(GOOD_TEXT_ROW, time0=1.5), "time0 must be a safe integer"),
        (_patched(GOOD_TEXT_ROW, time0=-_UNSAFE), "time0 must be a safe integer"),
        ({**GOOD_TEXT_ROW, "data": [1]}, "data must be an object"),
        (
            _patched(GOOD_TEXT_ROW, data_id="c"),
            "data must be exactly {turn, step, index, dt, texts}",
        ),
        (_patched(GOOD_TEXT_ROW, data_texts=_DROP), "data must be exactly"),
        (
            _patched(GOOD_TOOL_ROW, data_texts=["a"]),
            "data must be exactly {turn, step, index, id, name?, dt, args}",
        ),
        (_patched(GOOD_TOOL_ROW, data_id=3), "id must be a string"),
        (_patched(GOOD_TOOL_ROW, data_name=None), "name must be a string when present"),
        (_patched(GOOD_TEXT_ROW, data_turn="1"), "turn must be an integer"),
        (_patched(GOOD_TEXT_ROW, data_step=1.0), "step must be an integer"),
        (_patched(GOOD_TEXT_ROW, data_index=False), "index must be an integer"),
        (
            _patched(GOOD_TEXT_ROW, data_texts=[], data_dt=[]),
            "texts must be a non-empty array of strings",
        ),
        (
            _patched(GOOD_TEXT_ROW, data_texts=["a", 1, "c"]),
            "texts must be a non-empty array of strings",
        ),
        (_patched(GOOD_TOOL_ROW, data_args="{}"), "args must be a non-empty array of strings"),
        (_patched(GOOD_TEXT_ROW, data_dt=[1, 0.5]), "dt must be an array of safe integers"),
        (_patched(GOOD_TEXT_ROW, data_dt=[1, _UNSAFE]), "dt must be an array of safe integers"),
        (_patched(GOOD_TEXT_ROW, data_dt=[1]), "dt has 1 gaps for 3 members"),
        (_patched(GOOD_TEXT_ROW, seq0=MAX_SAFE_INTEGER - 1), "member seqs must stay safe integers"),
        (
            _patched(GOOD_TEXT_ROW, time0=MAX_SAFE_INTEGER, data_dt=[0, 1]),
            "member times must stay safe integers",
        ),
    ],
)
def test_a_malformed_row_is_refused(row: dict[str, Any], message: str) -> None:
    with pytest.raises(CorruptLogError, match=r"malformed .*-chunks storage row") as info:
        ChunkRow.from_json(row)
    assert message in str(info.value)


def test_a_malformed_row_names_its_first_seq_when_readable() -> None:
    with pytest.raises(CorruptLogError) as info:
        ChunkRow.from_json(_patched(GOOD_TEXT_ROW, data_dt=[]))
    assert info.value.seq == 10
    with pytest.raises(CorruptLogError) as info:
        ChunkRow.from_json(_patched(GOOD_TEXT_ROW, seq0="x"))
    assert info.value.seq is None


def test_only_row_tags_decode_as_rows() -> None:
    with pytest.raises(CorruptLogError, match="'turn/start' is not a chunk-row type"):
        ChunkRow.from_json({"type": "turn/start", "seq": 0})


# ------------------------------------------------------------------------------- the law

_texts = st.text(max_size=4)


@st.composite
def batches(draw: st.DrawFn) -> list[Event]:
    """Arbitrary batches: runs of same-block deltas of every kind (sometimes with one member that
    differs), times anywhere in the safe-integer range with small or huge gaps, and other events
    in between."""
    events: list[Event] = []
    time = draw(SAFE)

    def next_time() -> int:
        nonlocal time
        step = draw(st.one_of(st.integers(-3, 60), SAFE))
        time = time + step if abs(time + step) <= MAX_SAFE_INTEGER else step
        return time

    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["text", "reasoning", "tool", "other"]))
        turn, index = draw(st.sampled_from([1, 2])), draw(st.sampled_from([0, 1]))
        call_id, name = draw(st.sampled_from(["a", "b"])), draw(st.sampled_from([None, "bash"]))
        for _ in range(draw(st.integers(1, 6))):
            seq, at = len(events), next_time()
            if draw(st.integers(0, 9)) == 0:  # one odd member: another block or call
                index, call_id, turn = 1 - index, call_id + "x", turn + 1
            if kind == "text":
                events.append(text(seq, draw(_texts), index=index, turn=turn, time=at))
            elif kind == "reasoning":
                events.append(text(seq, draw(_texts), kind="reasoning-delta", turn=turn, time=at))
            elif kind == "tool":
                name = name if draw(st.integers(0, 9)) else draw(st.sampled_from([None, "ls"]))
                events.append(tool(seq, draw(_texts), call_id=call_id, name=name, time=at))
            else:
                events.append(
                    chunk(
                        seq, {"type": "block-start", "index": index, "blockType": "text"}, time=at
                    )
                )
    return events


def _decode(record: dict[str, Any]) -> list[Event]:
    if record["type"] in ("text-chunks", "reasoning-chunks", "tool-call-chunks"):
        return ChunkRow.from_json(record).expand()
    return [Event.from_json(record)]


@given(batches())
def test_pack_then_decode_is_the_identity(events: list[Event]) -> None:
    packed = pack_chunk_rows(events)
    stored = [json.loads(dumps_canonical(r.to_json())) for r in packed]
    decoded = [event for record in stored for event in _decode(record)]
    assert decoded == events
    # Byte identity too: every decoded event re-encodes to the bytes of the original.
    assert [dumps_canonical(e.to_json()) for e in decoded] == [
        dumps_canonical(e.to_json()) for e in events
    ]
    assert all(len(r.payload) >= 3 for r in packed if isinstance(r, ChunkRow))


@given(batches(), st.lists(st.integers(0, 30), max_size=4))
def test_packing_in_batches_decodes_the_same(events: list[Event], cuts: list[int]) -> None:
    """A writer that flushes mid-run packs per batch; the decoded log is the same."""
    records: list[Event | ChunkRow] = []
    bounds = sorted({0, len(events), *(c for c in cuts if c <= len(events))})
    for lo, hi in itertools.pairwise(bounds):
        records.extend(pack_chunk_rows(events[lo:hi]))
    assert expand_chunk_rows(records) == events
