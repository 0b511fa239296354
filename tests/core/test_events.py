"""The event envelope (docs/design.md §2.1): exact keys, each field's rule, and each rejection."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given

from dsh_core import Event, FrozenDict, InvalidEventError, SurfaceReplace, freeze_json
from dsh_core._events import (
    CORE_EVENT_TYPES,
    MAX_SAFE_INTEGER,
    SURFACE_EVENT_TYPES,
    check_event_shape,
    parse_source_seqs,
    parse_surface_op,
)
from dsh_testkit.strategies import session_logs


def _env(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not _ABSENT}


_ABSENT = object()


def test_surface_types_are_exactly_the_three_message_types() -> None:
    assert frozenset({"user/message", "assistant/message", "tool/result"}) == SURFACE_EVENT_TYPES
    assert SURFACE_EVENT_TYPES <= CORE_EVENT_TYPES


def test_minimal_envelope_round_trips_with_type_first() -> None:
    event = Event.from_json(_env())
    assert (event.type, event.seq, event.time) == ("turn/start", 0, 1)
    assert event.data == {"turn": 1}
    assert event.surface_op is None
    assert event.source_event_seqs is None
    assert event.ignorable is False
    assert event.to_json() == _env()
    assert next(iter(event.to_json())) == "type"


def test_full_envelope_round_trips() -> None:
    raw = {
        "type": "user/message",
        "seq": 5,
        "time": -3,  # any safe integer, in a seed
        "data": {"id": "m"},
        "surfaceOp": {"op": "replace", "start": 1, "end": 2},
        "sourceEventSeqs": [1, 2, 4],
        "ignorable": True,
    }
    event = Event.from_json(raw)
    assert event.surface_op == SurfaceReplace(start=1, end=2)
    assert event.source_event_seqs == (1, 2, 4)
    assert event.ignorable is True
    assert event.to_json() == raw
    assert Event.from_json({**raw, "surfaceOp": "append"}).to_json()["surfaceOp"] == "append"


def test_to_json_writes_the_reference_key_order() -> None:
    # Byte-identical re-encoding of the reference harness's logs depends on it.
    raw = {
        "ignorable": True,
        "surfaceOp": "append",
        "sourceEventSeqs": [0],
        "data": {},
        "time": 0,
        "seq": 1,
        "type": "user/message",
    }
    assert list(Event.from_json(raw).to_json()) == [
        "type",
        "seq",
        "time",
        "data",
        "sourceEventSeqs",
        "surfaceOp",
        "ignorable",
    ]


def test_data_may_be_null_but_not_missing() -> None:
    assert Event.from_json(_env(data=None)).data is None
    with pytest.raises(InvalidEventError, match="lacks required key 'data'"):
        Event.from_json(_env(data=_ABSENT))


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([], "must be a JSON object"),
        (_env(extra=1), "unknown envelope keys ['extra']"),
        (_env(turn=1), "unknown envelope keys ['turn']"),
        (_env(type=_ABSENT), "lacks required key 'type'"),
        (_env(seq=_ABSENT), "lacks required key 'seq'"),
        (_env(time=_ABSENT), "lacks required key 'time'"),
        (_env(type=""), "type must be a non-empty string"),
        (_env(type=3), "type must be a non-empty string"),
        (_env(seq=-1), "seq must be a non-negative safe integer"),
        (_env(seq=1.0), "seq must be a non-negative safe integer"),
        (_env(seq=True), "seq must be a non-negative safe integer"),
        (_env(seq="0"), "seq must be a non-negative safe integer"),
        (_env(seq=MAX_SAFE_INTEGER + 1), "seq must be a non-negative safe integer"),
        (_env(time=1.5), "time must be a safe integer"),
        (_env(time=None), "time must be a safe integer"),
        (_env(time=False), "time must be a safe integer"),
        (_env(time=-(2**60)), "time must be a safe integer"),
        (_env(ignorable=False), "ignorable must be absent or exactly true"),
        (_env(ignorable=1), "ignorable must be absent or exactly true"),
        (_env(ignorable=None), "ignorable must be absent or exactly true"),
        (_env(surfaceOp=None), "surfaceOp must be absent or a value, not null"),
        (_env(sourceEventSeqs=None), "sourceEventSeqs must be absent or a value, not null"),
        (_env(surfaceOp="prepend"), "surfaceOp must be 'append' or {op, start, end}"),
        (_env(surfaceOp={"op": "replace", "start": 0}), "surfaceOp must be 'append'"),
        (_env(surfaceOp={"op": "replace", "start": 0, "end": 0, "x": 1}), "surfaceOp must be"),
        (_env(surfaceOp={"op": "swap", "start": 0, "end": 0}), "surfaceOp.op must be 'replace'"),
        (_env(surfaceOp={"op": "replace", "start": -1, "end": 0}), "start/end must be"),
        (_env(surfaceOp={"op": "replace", "start": 0, "end": 0.5}), "start/end must be"),
        (_env(surfaceOp={"op": "replace", "start": True, "end": 0}), "start/end must be"),
        (_env(sourceEventSeqs={"0": 1}), "sourceEventSeqs must be an array"),
        (_env(sourceEventSeqs="0"), "sourceEventSeqs must be an array"),
        (_env(sourceEventSeqs=[0, "1"]), "entries must be non-negative safe integers"),
        (_env(sourceEventSeqs=[0, 1.5]), "entries must be non-negative safe integers"),
        (_env(sourceEventSeqs=[-1]), "entries must be non-negative safe integers"),
        (_env(sourceEventSeqs=[None]), "entries must be non-negative safe integers"),
        (_env(sourceEventSeqs=[False]), "entries must be non-negative safe integers"),
        (_env(data={"x": math.nan}), "event data is not lossless JSON: data.x"),
        (_env(data=(1, 2)), "event data is not lossless JSON: data: tuple"),
    ],
)
def test_each_envelope_rejection(raw: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        Event.from_json(raw)
    assert fragment in str(info.value)


def test_rejections_carry_the_seq_and_type_when_known() -> None:
    with pytest.raises(InvalidEventError) as info:
        Event.from_json(_env(seq=4, type="step/start", time="now"))
    assert (info.value.seq, info.value.event_type) == (4, "step/start")
    with pytest.raises(InvalidEventError) as info:
        Event.from_json(_env(seq=-4, type=7))
    assert (info.value.seq, info.value.event_type) == (None, None)


def test_events_are_immutable_all_the_way_down() -> None:
    event = Event.from_json(_env(data={"turn": 1, "nested": [1, {"a": 2}]}))
    with pytest.raises(AttributeError):
        event.seq = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.data["turn"] = 2
    with pytest.raises(TypeError):
        event.data["nested"][1]["a"] = 3
    with pytest.raises(TypeError):
        event.data["nested"].append(1)


def test_a_hand_built_event_freezes_its_data_and_seqs() -> None:
    data = {"todos": [{"content": "x"}]}
    event = Event(type="todo/write", seq=0, time=0, data=data, source_event_seqs=[1, 2])  # type: ignore[arg-type]
    data["todos"].append({"content": "y"})
    assert event.data == {"todos": [{"content": "x"}]}
    assert type(event.data) is FrozenDict
    assert event.source_event_seqs == (1, 2)
    with pytest.raises(InvalidEventError, match=r"data\.bad"):
        Event(type="x", seq=3, time=0, data={"bad": math.inf})


def test_unknown_types_are_carried_as_opaque_events() -> None:
    event = Event.from_json(_env(type="plugin/thing", data={"anything": [1]}, ignorable=True))
    assert event.type not in CORE_EVENT_TYPES
    assert event.to_json()["ignorable"] is True


def test_parse_helpers_accept_python_forms() -> None:
    assert parse_surface_op(None) is None
    assert parse_surface_op("append") == "append"
    replace = SurfaceReplace(start=2, end=1)
    assert parse_surface_op(replace) is replace
    assert parse_surface_op(freeze_json({"op": "replace", "start": 2, "end": 1})) == replace
    assert replace.to_json() == {"op": "replace", "start": 2, "end": 1}
    assert parse_source_seqs((3, 1)) == (3, 1)
    assert parse_source_seqs(None) is None


@given(session_logs(max_size=12))
def test_every_generated_event_round_trips_through_its_json(log: list[dict[str, Any]]) -> None:
    for raw in log:
        event = Event.from_json(raw)
        assert event.to_json() == raw
        assert Event.from_json(event.to_json()) == event
        check_event_shape(event)


# --------------------------------------------------------------------------------------------
# The typed vocabulary: the catalog as a Literal, the turn/step reader, the open-turn walker


def test_the_event_type_literal_is_the_catalog() -> None:
    from typing import get_args

    from dsh_core import EventType
    from dsh_core._events import CORE_EVENT_TYPES, SURFACE_EVENT_TYPES

    assert set(get_args(EventType)) == CORE_EVENT_TYPES
    assert len(get_args(EventType)) == len(CORE_EVENT_TYPES) == 18
    assert SURFACE_EVENT_TYPES <= CORE_EVENT_TYPES


def _event(kind: str, data: Any, seq: int = 0) -> Event:
    return Event(type=kind, seq=seq, time=0, data=data)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"turn": 2, "step": 3}, (2, 3)),
        ({"turn": 2}, (2, None)),
        ({"turn": True, "step": "1"}, (None, None)),  # a bool or a string is not a number
        ({"turn": 1.0}, (None, None)),
        ("not an object", (None, None)),
        (None, (None, None)),
    ],
)
def test_turn_step_reads_integers_only(data: Any, expected: tuple[Any, Any]) -> None:
    from dsh_core._events import TurnStep, turn_step

    assert turn_step(_event("step/start", data)) == TurnStep(turn=expected[0], step=expected[1])


def _turns(*kinds_and_turns: tuple[str, int]) -> list[Event]:
    return [_event(kind, {"turn": turn}, seq) for seq, (kind, turn) in enumerate(kinds_and_turns)]


def test_the_open_turn_is_the_last_turn_start_without_its_turn_end() -> None:
    from dsh_core import last_turn_boundary
    from dsh_core._events import OpenTurn, open_turn

    events = _turns(
        ("turn/start", 1), ("step/start", 1), ("turn/end", 1), ("turn/start", 2), ("step/end", 2)
    )
    assert open_turn(events) == OpenTurn(turn=2, seq=3)
    assert open_turn(events, 3) is None  # after the first turn's end
    assert open_turn(events, 2) == OpenTurn(turn=1, seq=0)
    assert open_turn(events, 99) == OpenTurn(turn=2, seq=3)
    assert open_turn([]) is None and open_turn(events, 0) is None
    boundary = last_turn_boundary(events, 3)
    assert boundary is not None and (boundary.type, boundary.seq) == ("turn/end", 2)
    assert last_turn_boundary(events[1:2]) is None
