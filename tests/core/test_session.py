"""``Session`` (docs/design.md §2.4, §4, §9.2): create, seed validation, append,
the cached derivation, the incremental header fold, immutability and fork."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import pytest

import dsh_core._session as session_module
from dsh_core import (
    CorruptLogError,
    EpochHeader,
    Event,
    EventLog,
    ForkError,
    InvalidEventError,
    LlmCallConfig,
    Message,
    Session,
    SessionInfo,
    SurfaceError,
    TextBlock,
    derive_event_message,
    fork,
    thaw_json,
)
from dsh_core._surface import fold_surface

CONFIG = {"provider": "deepseek", "model": "deepseek-v4-flash"}


def user(i: int | str, text: str | None = None) -> dict[str, Any]:
    return {
        "id": f"u{i}",
        "role": "user",
        "content": [{"type": "text", "text": text if text is not None else f"hello {i}"}],
        "source": {"kind": "user"},
    }


def assistant(i: int | str, content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"a{i}",
            "role": "assistant",
            "content": content if content is not None else [{"type": "text", "text": f"a {i}"}],
            "source": {"kind": "model", "provider": "deepseek", "model": "m"},
        },
    }


def result(call_id: str = "c1", text: str = "out") -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"r-{call_id}",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        },
    }


def header_data(
    system: str | None = "sys", reason: str = "initial", **config: Any
) -> dict[str, Any]:
    header: dict[str, Any] = {"config": {**CONFIG, **config}}
    if system is not None:
        header["system"] = system
    return {"header": header, "reason": reason}


def ev(seq: int, type_: str, data: Any, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "seq": seq, "time": 1000 + seq, "data": data, **extra}


def clock(start: int = 5000) -> Any:
    ticks = iter(range(start, start + 10_000))
    return lambda: next(ticks)


def one_turn(session: Session) -> Session:
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user(1), surface_op="append")
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("request/header", header_data())
    chunk = session.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}},
    )
    session.append(
        "assistant/message", assistant(1), surface_op="append", source_event_seqs=[chunk.seq]
    )
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return session


# ---------------------------------------------------------------------------------- create


def test_create_without_a_seed_has_no_events_and_no_marker() -> None:
    session = Session.create("s1", clock=clock())
    assert session.id == "s1"
    assert len(session.events) == 0
    assert session.seq == 0
    assert session.info == SessionInfo(id="s1", created_at=5000)
    assert session.derive_messages() == []
    assert session.request_header() is None


def test_a_seed_gets_one_end_seed_marker() -> None:
    seed = [ev(0, "user/message", user(0), surfaceOp="append")]
    session = Session.create("s", seed, clock=clock())
    assert [e.type for e in session.events] == ["user/message", "session/end-seed"]
    marker = session.events[1]
    assert (marker.seq, marker.time, marker.data) == (1, 5001, {})
    reopened = Session.create("s", session.events)
    assert reopened.events == session.events  # not re-marked
    assert len(reopened.events) == 2


def test_an_empty_seed_is_still_marked() -> None:
    session = Session.create("s", [])
    assert [e.type for e in session.events] == ["session/end-seed"]


def test_a_seed_is_copied_and_frozen() -> None:
    data = user(0)
    seed = [ev(0, "user/message", data, surfaceOp="append", sourceEventSeqs=[])]
    with pytest.raises(SurfaceError):  # empty provenance on a user message
        Session.create("s", seed)
    seed[0].pop("sourceEventSeqs")
    session = Session.create("s", seed)
    data["content"][0]["text"] = "changed"
    seed[0]["seq"] = 9
    assert session.events[0].data == user(0)
    assert session.events[0].seq == 0
    with pytest.raises(TypeError):
        session.events[0].data["content"].append({})


def test_a_seed_may_hold_event_instances() -> None:
    source = one_turn(Session.create("a"))
    copy = Session.create("b", source.events)
    assert list(copy.events)[: len(source.events)] == list(source.events)
    assert copy.derive_messages() == source.derive_messages()
    assert copy.request_header() == source.request_header()


def test_a_hand_built_event_in_a_seed_is_checked_like_json() -> None:
    bad = Event(type="", seq=0, time=0, data={})
    with pytest.raises(InvalidEventError, match="seed event at index 0 is invalid: event type"):
        Session.create("s", [bad])


# ------------------------------------------------------------------------- seed validation


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        (
            ev(0, "todo/write", {"x": math.nan}),
            "seed event at index 0 is invalid: event data is not lossless JSON: data.x",
        ),
        (
            ev(0, "todo/write", {}, extra=1),
            "seed event at index 0 is invalid: event has unknown envelope keys",
        ),
        ({"type": "todo/write", "seq": 0, "time": 0}, "lacks required key 'data'"),
        (
            ev(0, "user/message", {**user(0), "id": ""}, surfaceOp="append"),
            "lacks an identified message",
        ),
        (ev(0, "user/message", [1], surfaceOp="append"), "lacks an identified message"),
        (
            ev(0, "assistant/message", {"turn": 1, "step": 1}, surfaceOp="append"),
            "lacks an identified message",
        ),
        (
            ev(0, "user/message", {**user(0), "role": "assistant"}, surfaceOp="append"),
            "message role must be 'user', got 'assistant'",
        ),
        (
            ev(0, "assistant/message", {"message": {**user(0)}}, surfaceOp="append"),
            "message role must be 'assistant', got 'user'",
        ),
        (
            ev(0, "user/message", {**user(0), "source": {"kind": ""}}, surfaceOp="append"),
            "message source must be an object with a non-empty kind",
        ),
        (
            ev(0, "user/message", {**user(0), "content": "hi"}, surfaceOp="append"),
            "message content must be an array",
        ),
        (
            ev(
                0,
                "assistant/message",
                {"message": {**assistant(0)["message"], "source": {"kind": "user"}}},
                surfaceOp="append",
            ),
            "assistant message source must be {kind:'model', provider, model}",
        ),
        (
            ev(
                0,
                "assistant/message",
                {
                    "message": {
                        **assistant(0)["message"],
                        "source": {"kind": "model", "provider": 1, "model": "m"},
                    }
                },
                surfaceOp="append",
            ),
            "assistant message source must be {kind:'model', provider, model}",
        ),
        (
            ev(
                0,
                "tool/result",
                {"message": {**result()["message"], "source": {"kind": "tool"}}},
                surfaceOp="append",
            ),
            "tool result source must be {kind:'tool', callId}",
        ),
        (
            ev(
                0,
                "tool/result",
                {"message": {**result()["message"], "content": []}},
                surfaceOp="append",
            ),
            "tool result content must be exactly one tool-result block",
        ),
        (
            ev(
                0,
                "tool/result",
                {"message": {**result()["message"], "content": [{"type": "text", "text": "x"}]}},
                surfaceOp="append",
            ),
            "tool result content must be exactly one tool-result block",
        ),
        (
            ev(
                0,
                "tool/result",
                {
                    "message": {
                        **result("c1")["message"],
                        "source": {"kind": "tool", "callId": "c2"},
                    }
                },
                surfaceOp="append",
            ),
            "tool-result block toolCallId 'c1' does not match source.callId 'c2'",
        ),
        (ev(0, "request/header", {"reason": "initial"}), "data must be {header, reason}"),
        (
            ev(0, "request/header", {"header": {"config": {"model": "m"}}, "reason": "initial"}),
            "header config lacks provider/model",
        ),
        (
            ev(
                0,
                "request/header",
                {"header": {"config": {**CONFIG, "model": ""}}, "reason": "initial"},
            ),
            "header config lacks provider/model",
        ),
        (
            ev(0, "request/header", header_data(reasoningEffort="")),
            "reasoningEffort must be a non-empty string, got ''",
        ),
        (
            ev(0, "request/header", header_data(reasoningEffort=1)),
            "reasoningEffort must be a non-empty string, got 1",
        ),
        (ev(0, "request/header", header_data(reason="because")), "reason must be one of"),
        (ev(0, "request/header-delta", [1]), "data must be an object {system?, tools?, config?}"),
        (ev(1, "todo/write", {}), "invalid seed event at index 0: seed must be contiguous from 0"),
        (
            ev(0, "user/message", user(0)),
            "invalid seed event at index 0: user/message at seq 0: requires a surfaceOp marker",
        ),
        (
            ev(0, "turn/start", {"turn": 1}, surfaceOp="append"),
            "invalid seed event at index 0: turn/start at seq 0: is not surface-eligible",
        ),
    ],
)
def test_each_seed_rejection(entry: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        Session.create("s", [entry])
    assert fragment in str(info.value)


def test_seed_errors_name_the_index_of_a_later_event() -> None:
    seed = [
        ev(0, "user/message", user(0), surfaceOp="append"),
        ev(1, "user/message", user(1), surfaceOp={"op": "replace", "start": 0, "end": 0}),
    ]
    with pytest.raises(SurfaceError) as info:
        Session.create("s", seed)
    assert str(info.value).startswith("invalid seed event at index 1: user/message at seq 1:")
    assert "missing [0]" in str(info.value)
    assert (info.value.seq, info.value.event_type) == (1, "user/message")
    gap = [ev(0, "todo/write", {}), ev(2, "todo/write", {})]
    with pytest.raises(
        InvalidEventError, match="index 1: seed must be contiguous from 0: it has seq 2"
    ):
        Session.create("s", gap)


def test_a_seed_whose_header_does_not_fold_is_refused() -> None:
    delta = {"system": {"keepStart": 0, "keepEnd": 0, "insert": ["x"]}}
    with pytest.raises(CorruptLogError, match="request/header-delta at seq 0 before any") as info:
        Session.create("s", [ev(0, "request/header-delta", delta)])
    assert info.value.seq == 0


def test_check_shapes_false_loads_other_harnesses_logs() -> None:
    odd = ev(0, "user/message", {**user(0), "role": "assistant"}, surfaceOp="append")
    session = Session.create("s", [odd], check_shapes=False)
    assert session.derive_messages()[0].role == "assistant"


def test_a_fallback_and_a_change_snapshot_are_valid_in_a_seed() -> None:
    seed = [
        ev(0, "request/header", header_data("a")),
        ev(1, "request/header", header_data("b", reason="fallback")),
        ev(2, "request/header", header_data("c", reason="change")),
    ]
    assert Session.create("s", seed).request_header().system == "c"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------- append


def test_append_returns_the_logged_snapshot() -> None:
    session = Session.create("s", clock=clock(7))
    data = {"todos": [{"content": "x", "status": "pending"}]}
    event = session.append("todo/write", data)
    assert (event.type, event.seq, event.time) == ("todo/write", 0, 8)  # 7 went to createdAt
    assert event.data == data and event.data is not data
    data["todos"].clear()
    assert event.data["todos"][0]["content"] == "x"
    assert session.events[0] is event
    assert session.seq == 1
    assert session.append("turn/start", {"turn": 1}, ignorable=True).to_json()["ignorable"] is True


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"type": "", "data": {}}, "event type must be a non-empty string"),
        ({"type": 3, "data": {}}, "event type must be a non-empty string"),
        ({"type": "x", "data": {}, "ignorable": "yes"}, "ignorable must be a bool"),
        ({"type": "x", "data": {1, 2}}, "x carries non-JSON-serializable data: data: set"),
        ({"type": "user/message", "data": user(0), "surface_op": "insert"}, "surfaceOp must be"),
    ],
)
def test_append_rejections_leave_the_log_unchanged(kwargs: dict[str, Any], fragment: str) -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvalidEventError) as info:
        session.append(**kwargs)
    assert fragment in str(info.value)
    assert len(session.events) == 1


def test_live_appends_skip_shape_checks_but_refuse_an_unprojectable_message() -> None:
    session = Session.create("s")
    # Role and pairing are the seed validator's and the dev invariant's business ...
    session.append("user/message", {**user(0), "role": "assistant"}, surface_op="append")
    # ... but a message derive_messages() could not parse would poison every later derivation.
    with pytest.raises(InvalidEventError) as info:
        session.append("user/message", {"content": []}, surface_op="append")
    assert str(info.value).startswith(
        "user/message at seq 1: a message needs a non-empty string id"
    )
    assert "refused: derive_messages() could not project this message" in str(info.value)
    with pytest.raises(InvalidEventError, match=r"content\[0\]\.text must be a string"):
        session.append("assistant/message", assistant(1, [{"type": "text"}]), surface_op="append")
    assert len(session.events) == 1
    assert len(session.derive_messages()) == 1


def test_header_events_that_do_not_fold_are_refused() -> None:
    session = Session.create("s")
    delta = {"system": {"keepStart": 0, "keepEnd": 0, "insert": ["x"]}}
    with pytest.raises(InvalidEventError, match="does not fold onto the log's header") as info:
        session.append("request/header-delta", delta)
    assert isinstance(info.value.__cause__, CorruptLogError)
    with pytest.raises(InvalidEventError, match="request/header at seq 0: header config lacks"):
        session.append("request/header", {"header": {"config": {"model": "m"}}, "reason": "x"})
    with pytest.raises(
        InvalidEventError, match=r"does not fold onto the log's header: .* system must"
    ):
        session.append(
            "request/header",
            {"header": {**header_data()["header"], "system": 1}, "reason": "initial"},
        )
    assert len(session.events) == 0
    session.append("request/header", header_data("line"))
    bad_keep = {"system": {"keepStart": 5, "keepEnd": 0, "insert": []}}
    with pytest.raises(InvalidEventError, match="keeps 5\\+0 lines of a 1-line prompt"):
        session.append("request/header-delta", bad_keep)
    session.append("request/header-delta", delta)
    assert session.request_header().system == "x"  # type: ignore[union-attr]
    with pytest.raises(InvalidEventError, match="reason must be one of"):
        session.append("request/header", header_data("y", reason="because"))
    assert len(session.events) == 2
    # What a live session writes, a reader loads.
    assert Session.create("r", session.events).request_header() == session.request_header()


def test_a_validator_veto_leaves_everything_unchanged() -> None:
    session = Session.create("s")
    session.append("user/message", user(0), surface_op="append")
    before = session.derive_messages()

    def veto(event: Event, s: Session) -> None:
        if event.type == "user/message":
            raise InvalidEventError("vetoed")

    remove = session.add_validator(veto)
    with pytest.raises(InvalidEventError, match="vetoed"):
        session.append(
            "user/message",
            user(1),
            surface_op={"op": "replace", "start": 0, "end": 0},
            source_event_seqs=[0],
        )
    assert (len(session.events), session.surface_nodes, session.surface_generation) == (1, (0,), 0)
    assert session.derive_messages() == before
    remove()
    session.append("user/message", user(1), surface_op="append")
    assert session.surface_nodes == (0, 1)


def test_listeners_see_committed_events_and_cannot_reenter() -> None:
    session = Session.create("s")
    seen: list[tuple[int, int]] = []
    errors: list[str] = []

    def listener(event: Event, s: Session) -> None:
        seen.append((event.seq, len(s.events)))
        try:
            s.append("todo/write", {})
        except InvalidEventError as exc:
            errors.append(str(exc))

    remove = session.add_listener(listener)
    session.append("turn/start", {"turn": 1})
    assert seen == [(0, 1)]
    assert errors == ["session append cannot reenter while another append is being published"]
    remove()
    session.append("turn/end", {"turn": 1})
    assert seen == [(0, 1)]
    assert len(session.events) == 2


def test_a_validator_cannot_append_either() -> None:
    session = Session.create("s")

    def reenter(event: Event, s: Session) -> None:
        s.append("todo/write", {})

    session.add_validator(reenter)
    with pytest.raises(InvalidEventError, match="cannot reenter"):
        session.append("turn/start", {"turn": 1})
    assert len(session.events) == 0


# ------------------------------------------------------------------------------ events view


def test_events_is_an_immutable_snapshot_that_never_grows() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    snapshot = session.events
    session.append("turn/end", {"turn": 1})
    assert isinstance(snapshot, EventLog)
    assert len(snapshot) == 1 and len(session.events) == 2
    assert [e.seq for e in snapshot] == [0]
    assert snapshot[-1].seq == 0
    assert snapshot[0:5] == (session.events[0],)
    assert repr(snapshot) == "EventLog(<1 events>)"
    with pytest.raises(IndexError, match="event index 1 out of range"):
        snapshot[1]
    with pytest.raises(IndexError):
        snapshot[-2]
    assert not hasattr(snapshot, "append")
    with pytest.raises(TypeError):
        snapshot[0] = snapshot[0]  # type: ignore[index]
    assert snapshot == [session.events[0]]
    assert snapshot != session.events
    assert snapshot != "x"
    with pytest.raises(TypeError):
        hash(snapshot)


def test_logged_events_are_immutable() -> None:
    session = one_turn(Session.create("s"))
    event = session.events[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.data = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.data["content"][0]["text"] = "x"
    with pytest.raises(TypeError):
        event.data["content"].append({})


# ------------------------------------------------------------------------- derived messages


@pytest.fixture
def projections(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Seqs projected by the session, in order (counts calls to the module-level function)."""
    calls: list[int] = []

    def counting(event: Event) -> Message | None:
        calls.append(event.seq)
        return derive_event_message(event)

    monkeypatch.setattr(session_module, "derive_event_message", counting)
    return calls


def fresh(session: Session) -> list[Message]:
    """A from-scratch replay over the same log (no shared cache)."""
    nodes, _ = fold_surface(session.events)
    return [m for m in (derive_event_message(session.events[s]) for s in nodes) if m is not None]


def test_each_node_is_projected_once(projections: list[int]) -> None:
    session = Session.create("s")
    session.append("user/message", user(0), surface_op="append")
    session.append("turn/start", {"turn": 1})
    session.append("assistant/message", assistant(1), surface_op="append")
    assert len(session.derive_messages()) == 2
    assert len(session.derive_messages()) == 2
    assert projections == [0, 2]
    session.append("tool/result", result(), surface_op="append")
    assert [m.id for m in session.derive_messages()] == ["u0", "a1", "r-c1"]
    session.derive_messages()
    assert projections == [0, 2, 3]


def test_a_replace_rebuilds_the_derivation(projections: list[int]) -> None:
    session = Session.create("s")
    session.append("user/message", user(0), surface_op="append")
    session.append("user/message", user(1), surface_op="append")
    held = session.derive_messages()
    assert len(held) == 2
    session.append(
        "user/message",
        user("sum"),
        surface_op={"op": "replace", "start": 0, "end": 1},
        source_event_seqs=[0, 1],
    )
    assert [m.id for m in session.derive_messages()] == ["usum"]
    assert len(held) == 2  # a list already handed out is untouched
    assert projections == [0, 1, 2]
    session.append("user/message", user(3), surface_op="append")
    assert [m.id for m in session.derive_messages()] == ["usum", "u3"]
    assert projections == [0, 1, 2, 3]


def test_every_call_returns_a_new_list_over_shared_messages() -> None:
    session = Session.create("s")
    session.append("user/message", user(0), surface_op="append")
    first = session.derive_messages()
    second = session.derive_messages()
    assert first == second and first is not second
    assert all(a is b for a, b in zip(first, second, strict=True))
    first.append(first[0])
    first.reverse()
    assert len(session.derive_messages()) == 1
    session.append("user/message", user(1), surface_op="append")
    assert len(second) == 1  # later appends never grow a list a caller holds
    third = session.derive_messages()
    assert third[0] is second[0]


def test_the_cache_matches_a_fresh_replay_after_each_append() -> None:
    session = Session.create("s")
    steps: list[tuple[str, Any, dict[str, Any]]] = [
        ("user/message", user(0), {"surface_op": "append"}),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {}}, {}),
        ("assistant/message", assistant(1, []), {"surface_op": "append", "source_event_seqs": [1]}),
        ("assistant/message", assistant(2), {"surface_op": "append"}),
        ("tool/result", result(), {"surface_op": "append"}),
        (
            "tool/result",
            result(text="trimmed"),
            {"surface_op": {"op": "replace", "start": 4, "end": 4}, "source_event_seqs": [4]},
        ),
        (
            "user/message",
            user(6),
            {"surface_op": {"op": "replace", "start": 0, "end": 3}, "source_event_seqs": [0, 2, 3]},
        ),
        ("user/message", user(7), {"surface_op": "append"}),
    ]
    for type_, data, kwargs in steps:
        session.append(type_, data, **kwargs)
        assert session.derive_messages() == fresh(session)
        assert session.derive_messages() == Session.create("r", session.events).derive_messages()
    assert [m.id for m in session.derive_messages()] == ["u6", "r-c1", "u7"]


def test_derivation_ignores_log_only_events() -> None:
    session = one_turn(Session.create("s"))
    assert [m.id for m in session.derive_messages()] == ["u1", "a1"]


def test_a_failing_projection_is_not_projected_twice(projections: list[int]) -> None:
    good = ev(0, "user/message", user(0), surfaceOp="append")
    bad = ev(1, "user/message", {**user(1), "content": [{"type": "text"}]}, surfaceOp="append")
    session = Session.create("s", [good, bad], check_shapes=False)
    for _ in range(2):
        with pytest.raises(InvalidEventError, match="user/message at seq 1"):
            session.derive_messages()
    assert projections == [0, 1, 1]


def test_derived_messages_are_immutable_and_mutation_attempts_change_nothing() -> None:
    session = Session.create("s")
    session.append("tool/result", result(), surface_op="append")
    (message,) = session.derive_messages()
    with pytest.raises(AttributeError):
        message.content.append(TextBlock(text="x"))  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.id = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content[0].content[0].text = "x"  # type: ignore[union-attr, misc]
    with pytest.raises(TypeError):
        message.source["callId"] = "x"
    assert session.derive_messages()[0].to_json() == result()["message"]


def test_message_view_matches_derive_messages() -> None:
    session = one_turn(Session.create("s"))
    view = session.message_view()
    assert list(view) == session.derive_messages()
    session.append("user/message", user(9), surface_op="append")
    assert len(view) == 2


# ------------------------------------------------------------------------------ the header


def test_request_header_folds_incrementally(monkeypatch: pytest.MonkeyPatch) -> None:
    folded: list[list[int]] = []
    real = session_module.fold_request_header  # type: ignore[attr-defined]  # patched below

    def recording(events: Iterable[Event], start: EpochHeader | None = None) -> EpochHeader | None:
        events = list(events)
        folded.append([e.seq for e in events])
        return real(events, start)

    monkeypatch.setattr(session_module, "fold_request_header", recording)
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    assert session.request_header() is None
    session.append("request/header", header_data("one"))
    first = session.request_header()
    assert first is not None and first.system == "one"
    assert session.request_header() is first
    session.append("todo/write", {})
    session.append(
        "request/header-delta", {"system": {"keepStart": 0, "keepEnd": 0, "insert": ["two"]}}
    )
    assert session.request_header().system == "two"  # type: ignore[union-attr]
    session.append("todo/write", {})
    session.request_header()
    # Each event is folded at most once; header appends fold their own candidate up front.
    flat = [seq for batch in folded for seq in batch]
    assert flat.count(0) == 1
    assert flat.count(1) == 1
    assert flat.count(3) == 1
    assert flat.count(4) == 1


def test_request_header_is_canonical_and_frozen() -> None:
    session = Session.create("s")
    session.append(
        "request/header",
        {"header": {"config": CONFIG, "system": "", "tools": []}, "reason": "initial"},
    )
    header = session.request_header()
    assert header == EpochHeader(
        config=LlmCallConfig(provider="deepseek", model="deepseek-v4-flash")
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.system = "x"  # type: ignore[misc]


def test_a_seeded_header_folds_on_first_read() -> None:
    seed = [
        ev(0, "request/header", header_data("a")),
        ev(1, "request/header", header_data("b", reason="resume")),
    ]
    session = Session.create("s", seed)
    assert session.request_header().system == "b"  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------ fork


def two_turns() -> Session:
    session = one_turn(Session.create("parent", clock=clock()))
    session.append("todo/write", {"todos": []})  # a between-turns log-only event (seq 8)
    session.append("turn/start", {"turn": 2})  # seq 9
    session.append("user/message", user(2), surface_op="append")
    return session


def test_fork_at_a_turn_boundary() -> None:
    parent = two_turns()
    parent_events = list(parent.events)
    child = parent.fork(7, child_id="child")
    assert child.id == "child"
    assert child.info.parent_session == "parent"
    assert child.info.seed_length == 8
    assert [e.type for e in child.events][-2:] == ["turn/end", "session/end-seed"]
    assert list(child.events)[:8] == parent_events[:8]
    assert child.derive_messages() == [m for m in parent.derive_messages() if m.id != "u2"]
    assert child.request_header() == parent.request_header()
    child.append("turn/start", {"turn": 2})
    assert list(parent.events) == parent_events
    with pytest.raises(TypeError):
        child.events[1].data["content"].append({})
    assert fork(parent, 8, child_id="c2").info.seed_length == 9  # between-turn events are fine


def test_fork_of_a_fork_at_its_marker_is_not_re_marked() -> None:
    parent = two_turns()
    child = fork(parent, 7, child_id="c")
    grandchild = fork(child, len(child.events) - 1, child_id="g")
    assert grandchild.info.seed_length == len(child.events)
    assert len(grandchild.events) == len(child.events)  # seed already ends with the marker


@pytest.mark.parametrize(
    ("at", "fragment", "seq"),
    [
        (-1, "fork boundary must be a non-negative seq, got -1", None),
        (True, "fork boundary must be a non-negative seq, got True", None),
        ("3", "fork boundary must be a non-negative seq, got '3'", None),
        (11, "fork boundary seq 11 does not exist (last seq: 10)", 11),
        (0, "fork boundary seq 0 ends inside open turn 1 (opened at seq 0)", 0),
        (5, "fork boundary seq 5 ends inside open turn 1 (opened at seq 0)", 5),
        (9, "fork boundary seq 9 ends inside open turn 2 (opened at seq 9)", 9),
        (10, "fork boundary seq 10 ends inside open turn 2 (opened at seq 9)", 10),
    ],
)
def test_fork_boundary_errors(at: Any, fragment: str, seq: int | None) -> None:
    parent = two_turns()
    with pytest.raises(ForkError) as info:
        fork(parent, at, child_id="c")
    assert fragment in str(info.value)
    assert info.value.seq == seq


def test_fork_of_a_log_without_turns() -> None:
    parent = Session.create("p")
    parent.append("user/message", user(0), surface_op="append")
    parent.append("todo/write", {"todos": []})
    child = fork(parent, 0, child_id="c")
    assert [e.type for e in child.events] == ["user/message", "session/end-seed"]


def test_fork_of_an_empty_session() -> None:
    with pytest.raises(ForkError, match=r"does not exist \(last seq: none\)"):
        fork(Session.create("s"), 0, child_id="c")


# ------------------------------------------------------------------------------ SessionInfo


def test_session_info_round_trips_and_keeps_unknown_fields() -> None:
    raw = {
        "type": "session",
        "version": 0,
        "id": "s",
        "createdAt": 12,
        "cwd": "/work",
        "parentSession": "p",
        "seedLength": 3,
        "origin": "subagent",
    }
    info = SessionInfo.from_json(raw)
    assert info.extra == {"origin": "subagent"}
    assert info.to_json() == raw
    minimal = SessionInfo(id="x", created_at=1)
    assert minimal.to_json() == {"type": "session", "version": 0, "id": "x", "createdAt": 1}


def test_turn_end_reasons_round_trip_through_a_seed() -> None:
    reasons = [
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "max-tokens"},
        {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
    ]
    session = Session.create("s")
    for turn, reason in enumerate(reasons, start=1):
        session.append("turn/start", {"turn": turn})
        session.append("turn/end", {"turn": turn, "reason": reason})
    again = Session.create("r", [e.to_json() for e in session.events])
    assert [thaw_json(e.data["reason"]) for e in again.events if e.type == "turn/end"] == reasons


def test_fold_state_is_owned_by_the_session_one_per_key() -> None:
    a, b = Session.create("a"), Session.create("b")
    first = a.fold_state("fold", list)
    first.append(1)
    assert a.fold_state("fold", list) is first == [1]
    assert b.fold_state("fold", list) == [] and b.fold_state("fold", list) is not first
    assert a.fold_state("other", dict) == {}
