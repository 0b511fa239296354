"""The surface (docs/design.md §3): appends, replaces by surface position, the
citation rules and the tool-result rewrite rule; a refused candidate changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import Event, InvalidEventError, Session, SurfaceError, SurfaceReplace, thaw_json
from dsh_core._surface import SurfaceFold, SurfaceReplacement, _blank_result_content, fold_surface


def user(i: int | str) -> dict[str, Any]:
    return {
        "id": f"u{i}",
        "role": "user",
        "content": [{"type": "text", "text": f"hello {i}"}],
        "source": {"kind": "user"},
    }


def assistant(i: int | str) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"a{i}",
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {i}"}],
            "source": {"kind": "model", "provider": "deepseek", "model": "m"},
        },
    }


def result(call_id: str = "c1", text: str = "output", **extra: Any) -> dict[str, Any]:
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
        **extra,
    }


def replace(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "start": start, "end": end}


def session_with_users(n: int) -> Session:
    session = Session.create("s")
    for i in range(n):
        session.append("user/message", user(i), surface_op="append")
    return session


def assert_refused_without_change(
    session: Session, fragment: str, type_: str, data: Any, **kwargs: Any
) -> SurfaceError:
    nodes_list = session._surface.nodes
    before = (session.surface_nodes, session.surface_generation, len(session.events))
    messages_before = session.derive_messages()
    with pytest.raises(SurfaceError) as info:
        session.append(type_, data, **kwargs)
    assert fragment in str(info.value)
    assert info.value.seq == before[2]
    assert info.value.event_type == type_
    assert (session.surface_nodes, session.surface_generation, len(session.events)) == before
    assert session._surface.nodes is nodes_list  # the same list object, untouched
    assert session.derive_messages() == messages_before
    return info.value


# -------------------------------------------------------------------------------- eligibility


def test_appends_grow_the_surface_and_log_only_events_do_not() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user(1), surface_op="append")
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {}})
    session.append("assistant/message", assistant(1), surface_op="append", source_event_seqs=[2])
    session.append("tool/result", result(), surface_op="append", source_event_seqs=[0])
    assert session.surface_nodes == (1, 3, 4)
    assert session.surface_generation == 0


@pytest.mark.parametrize("type_", ["user/message", "assistant/message", "tool/result"])
def test_a_surface_type_requires_a_marker(type_: str) -> None:
    data = {"user/message": user(0), "assistant/message": assistant(0), "tool/result": result()}
    session = session_with_users(1)
    assert_refused_without_change(session, "requires a surfaceOp marker", type_, data[type_])


def test_a_log_only_event_cannot_carry_surface_metadata() -> None:
    session = session_with_users(1)
    assert_refused_without_change(
        session,
        "not surface-eligible and cannot carry surfaceOp",
        "turn/start",
        {"turn": 1},
        surface_op="append",
    )
    assert_refused_without_change(
        session,
        "not surface-eligible and cannot carry sourceEventSeqs",
        "todo/write",
        {"todos": []},
        source_event_seqs=[0],
    )


# --------------------------------------------------------------------------------- provenance


@pytest.mark.parametrize(
    ("type_", "data", "cited"),
    [
        ("user/message", user("x"), [0]),
        ("user/message", user("x"), [2, 0, 1]),  # any order
        ("assistant/message", assistant("x"), []),  # empty only on assistant/message
        ("assistant/message", assistant("x"), [1]),
        ("tool/result", result(), [2]),
        ("user/message", user("x"), None),
    ],
)
def test_provenance_accepted(type_: str, data: Any, cited: list[int] | None) -> None:
    session = session_with_users(3)
    event = session.append(type_, data, surface_op="append", source_event_seqs=cited)
    assert event.source_event_seqs == (tuple(cited) if cited is not None else None)
    assert event.to_json().get("sourceEventSeqs") == cited


@pytest.mark.parametrize(
    ("cited", "error", "fragment"),
    [
        (5, InvalidEventError, "sourceEventSeqs must be an array"),
        ({"0": 1}, InvalidEventError, "sourceEventSeqs must be an array"),
        ([], SurfaceError, "must not be empty except on assistant/message"),
        ([0, 0], SurfaceError, "duplicates"),
        ([None], InvalidEventError, "non-negative safe integers"),  # the "sparse" hole
        (["0"], InvalidEventError, "non-negative safe integers"),
        ([1.0], InvalidEventError, "non-negative safe integers"),
        ([0.5], InvalidEventError, "non-negative safe integers"),
        ([-1], InvalidEventError, "non-negative safe integers"),
        ([True], InvalidEventError, "non-negative safe integers"),
        ([3], SurfaceError, "must reference earlier events, got [3]"),  # self-reference
        ([1, 9], SurfaceError, "must reference earlier events, got [9]"),  # a later seq
    ],
)
def test_provenance_rejected(cited: Any, error: type[Exception], fragment: str) -> None:
    session = session_with_users(3)
    before = session.events
    with pytest.raises(error, match=None) as info:
        session.append("user/message", user("x"), surface_op="append", source_event_seqs=cited)
    assert fragment in str(info.value)
    assert list(session.events) == list(before)
    assert session.surface_nodes == (0, 1, 2)


def test_a_replace_must_cite_every_shadowed_seq() -> None:
    session = session_with_users(4)
    error = assert_refused_without_change(
        session,
        "must cite every shadowed seq in sourceEventSeqs; missing [2]",
        "user/message",
        user("sum"),
        surface_op=replace(1, 3),
        source_event_seqs=[1, 3],
    )
    assert error.seq == 4
    assert_refused_without_change(
        session,
        "missing [1, 2, 3]",
        "user/message",
        user("sum"),
        surface_op=replace(1, 3),
    )
    # Extra citations (a summary event, a non-surface seq) are fine.
    session.append(
        "user/message", user("sum"), surface_op=replace(1, 3), source_event_seqs=[0, 1, 2, 3]
    )
    assert session.surface_nodes == (0, 4)


# ----------------------------------------------------------------------------------- replaces


def test_replace_a_range() -> None:
    session = session_with_users(4)
    event = session.append(
        "user/message", user("sum"), surface_op=replace(1, 2), source_event_seqs=[1, 2]
    )
    assert event.surface_op is not None and event.to_json()["surfaceOp"] == replace(1, 2)
    assert session.surface_nodes == (0, 4, 3)
    assert session.surface_generation == 1
    assert [m.id for m in session.derive_messages()] == ["u0", "usum", "u3"]


def test_replace_a_single_node() -> None:
    session = session_with_users(2)
    session.append("user/message", user("x"), surface_op=replace(0, 0), source_event_seqs=[0])
    assert session.surface_nodes == (2, 1)


def test_replace_the_middle_node() -> None:
    session = session_with_users(3)
    session.append("user/message", user("m"), surface_op=replace(1, 1), source_event_seqs=[1])
    assert session.surface_nodes == (0, 3, 2)


def test_replace_the_whole_surface() -> None:
    session = session_with_users(3)
    session.append(
        "user/message", user("all"), surface_op=replace(0, 2), source_event_seqs=[0, 1, 2]
    )
    assert session.surface_nodes == (3,)


def test_replace_start_or_end_not_in_the_surface() -> None:
    session = session_with_users(3)
    session.append("turn/start", {"turn": 1})
    assert_refused_without_change(
        session,
        "replace start seq 3 not found in surface",
        "user/message",
        user("x"),
        surface_op=replace(3, 2),
        source_event_seqs=[2, 3],
    )
    assert_refused_without_change(
        session,
        "replace end seq 9 not found in surface",
        "user/message",
        user("x"),
        surface_op=replace(0, 9),
        source_event_seqs=[0],
    )


def test_replace_with_start_after_end_in_surface_order_is_refused() -> None:
    session = session_with_users(3)
    assert_refused_without_change(
        session,
        "replace start seq 2 comes after end seq 0 in surface order",
        "user/message",
        user("x"),
        surface_op=replace(2, 0),
        source_event_seqs=[0, 1, 2],
    )


def test_replace_range_is_by_position_so_numeric_start_may_exceed_end() -> None:
    session = session_with_users(2)
    session.append("user/message", user("a"), surface_op=replace(0, 0), source_event_seqs=[0])
    assert session.surface_nodes == (2, 1)
    session.append("user/message", user("b"), surface_op=replace(2, 1), source_event_seqs=[2, 1])
    assert session.surface_nodes == (3,)  # type: ignore[comparison-overlap]  # mypy keeps (2, 1)
    assert session.surface_generation == 2
    nodes, replacements = fold_surface(session.events)
    assert nodes == (3,)
    assert replacements == (
        SurfaceReplacement(seq=2, start=0, end=0, shadowed_seqs=(0,)),
        SurfaceReplacement(seq=3, start=2, end=1, shadowed_seqs=(2, 1)),
    )


def test_a_replaced_node_cannot_be_replaced_again() -> None:
    session = session_with_users(2)
    session.append("user/message", user("a"), surface_op=replace(0, 0), source_event_seqs=[0])
    assert_refused_without_change(
        session,
        "start seq 0 not found",
        "user/message",
        user("b"),
        surface_op=replace(0, 1),
        source_event_seqs=[0, 1],
    )


def test_the_replacing_event_may_be_of_any_surface_type() -> None:
    session = session_with_users(2)
    session.append(
        "assistant/message", assistant("s"), surface_op=replace(0, 1), source_event_seqs=[0, 1]
    )
    assert [m.id for m in session.derive_messages()] == ["as"]


# ----------------------------------------------------------------------- tool-result rewrites


def _with_result(**extra: Any) -> Session:
    session = Session.create("s")
    session.append("user/message", user(0), surface_op="append")
    session.append("tool/result", result("c1", **extra), surface_op="append")
    session.append("user/message", user(2), surface_op="append")
    return session


def test_a_tool_result_may_rewrite_only_its_inner_content() -> None:
    session = _with_result(meta={"lines": 900}, error={"name": "E", "code": "X"})
    trimmed = result(
        "c1", text="out…[trimmed]", meta={"lines": 900}, error={"name": "E", "code": "X"}
    )
    event = session.append("tool/result", trimmed, surface_op=replace(1, 1), source_event_seqs=[1])
    assert session.surface_nodes == (0, event.seq, 2)
    derived = session.derive_messages()[1]
    assert derived.content[0].content[0].text == "out…[trimmed]"  # type: ignore[union-attr]


def test_tool_result_rewrite_compares_meta_structurally() -> None:
    session = _with_result(meta={"a": 1, "b": [1, 2]})
    reordered_keys = result("c1", text="short", meta={"b": [1, 2], "a": 1})
    session.append("tool/result", reordered_keys, surface_op=replace(1, 1), source_event_seqs=[1])
    assert session.surface_nodes == (0, 3, 2)


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d["message"].__setitem__("id", "other"), "may change only the result block"),
        (lambda d: d.__setitem__("turn", 2), "may change only the result block"),
        (lambda d: d.__setitem__("step", 2), "may change only the result block"),
        (lambda d: d.__setitem__("meta", [2, 1]), "may change only the result block"),
        (lambda d: d.__setitem__("meta", {"a": 1}), "may change only the result block"),
        (lambda d: d.__setitem__("error", {"name": "E", "code": "Y"}), "may change only"),
        (lambda d: d["message"]["source"].__setitem__("callId", "c9"), "may change only"),
        (lambda d: d["message"]["content"][0].__setitem__("toolCallId", "c9"), "may change only"),
        (lambda d: d["message"]["content"][0].__setitem__("isError", True), "may change only"),
        (lambda d: d["message"]["content"][0].pop("isError"), "may change only"),
        (
            lambda d: d["message"]["content"].append({"type": "text", "text": "x"}),
            "may change only",
        ),
    ],
)
def test_tool_result_rewrite_rejections(mutate: Any, fragment: str) -> None:
    session = _with_result(meta=[1, 2], error={"name": "E", "code": "X"})
    data = thaw_json(session.events[1].data)
    data["message"]["content"][0]["content"] = [{"type": "text", "text": "short"}]
    mutate(data)
    assert_refused_without_change(
        session, fragment, "tool/result", data, surface_op=replace(1, 1), source_event_seqs=[1]
    )


def test_a_tool_result_replace_must_shadow_exactly_one_node() -> None:
    session = _with_result()
    session.append("tool/result", result("c2"), surface_op="append")
    assert_refused_without_change(
        session,
        "must shadow exactly one node",
        "tool/result",
        result("c1", text="x"),
        surface_op=replace(1, 3),
        source_event_seqs=[1, 2, 3],
    )


def test_a_tool_result_may_only_replace_a_tool_result() -> None:
    session = _with_result()
    assert_refused_without_change(
        session,
        "a tool/result may only replace a tool/result",
        "tool/result",
        result("c1"),
        surface_op=replace(0, 0),
        source_event_seqs=[0],
    )


# ---------------------------------------------------------------------- atomicity and caches


def test_caller_mutation_after_append_does_not_leak() -> None:
    session = session_with_users(2)
    cited = [0, 1]
    op = replace(0, 1)
    data = user("s")
    event = session.append("user/message", data, surface_op=op, source_event_seqs=cited)
    cited.append(99)
    op["end"] = 7
    data["content"].append({"type": "text", "text": "late"})
    assert event.source_event_seqs == (0, 1)
    assert event.to_json()["surfaceOp"] == replace(0, 1)
    assert event.data == user("s")
    assert session.events[2] is event


def test_surface_generation_folds_on_access() -> None:
    session = session_with_users(2)
    assert session.surface_generation == 0
    session.append("user/message", user("x"), surface_op=replace(0, 1), source_event_seqs=[0, 1])
    assert session.surface_generation == 1
    seeded = Session.create("again", session.events)
    assert seeded.surface_generation == 1
    assert seeded.surface_nodes == (2,)


# --------------------------------------------------------------------------- fold_surface


def _events(session: Session) -> list[Event]:
    return list(session.events)


def test_fold_surface_equals_the_incremental_nodes_and_reports_replacements() -> None:
    session = session_with_users(2)
    session.append("user/message", user("a"), surface_op=replace(0, 0), source_event_seqs=[0])
    session.append("user/message", user("b"), surface_op=replace(2, 1), source_event_seqs=[1, 2])
    session.append("user/message", user(4), surface_op="append")
    nodes, replacements = fold_surface(_events(session))
    assert nodes == session.surface_nodes == (3, 4)
    assert [(r.seq, r.start, r.end, r.shadowed_seqs) for r in replacements] == [
        (2, 0, 0, (0,)),
        (3, 2, 1, (2, 1)),
    ]
    # Detached: tuples of frozen records, nothing shared with the session's state.
    assert isinstance(nodes, tuple)
    assert isinstance(replacements, tuple)
    with pytest.raises(AttributeError):
        replacements[0].seq = 9  # type: ignore[misc]
    assert session.surface_nodes == (3, 4)


def test_fold_surface_of_an_empty_log() -> None:
    assert fold_surface([]) == ((), ())


def test_fold_surface_refuses_a_seq_gap() -> None:
    events = _events(session_with_users(3))
    with pytest.raises(SurfaceError, match="seq 2 is not contiguous; expected 1"):
        fold_surface([events[0], events[2]])


def test_fold_surface_refuses_an_invalid_log() -> None:
    bad = Event(type="user/message", seq=0, time=0, data=user(0))  # no marker
    with pytest.raises(SurfaceError, match="requires a surfaceOp marker"):
        fold_surface([bad])


def test_a_windowed_fold_starts_at_base_seq() -> None:
    base = 400_000
    window = [
        Event(type="user/message", seq=base, time=0, data=user(0), surface_op="append"),
        Event(type="tool/result", seq=base + 1, time=0, data=result(), surface_op="append"),
    ]
    fold = SurfaceFold(base)
    for i, event in enumerate(window):
        fold.apply(fold.plan(event, base + i, window))
    assert fold.nodes == [base, base + 1]
    trim = Event(
        type="tool/result",
        seq=base + 2,
        time=0,
        data=result(text="x"),
        surface_op=SurfaceReplace(start=base + 1, end=base + 1),
        source_event_seqs=(base + 1,),
    )
    fold.apply(fold.plan(trim, base + 2, [*window, trim]))
    assert fold.nodes == [base, base + 2]
    before_window = Event(
        type="user/message",
        seq=base + 3,
        time=0,
        data=user("x"),
        surface_op=SurfaceReplace(start=base - 1, end=base - 1),
        source_event_seqs=(base - 1,),
    )
    with pytest.raises(SurfaceError, match=f"start seq {base - 1} not found"):
        fold.plan(before_window, base + 3, window)
    assert fold.nodes == [base, base + 2]
    assert fold.generation == 1


def test_the_rewrite_comparison_tolerates_odd_shapes() -> None:
    # Blanking reaches only a well-formed message; anything else is compared whole.
    assert _blank_result_content([1, 2]) == "[1,2]"
    assert _blank_result_content({"message": "x"}) == '{"message":"x"}'
    assert _blank_result_content({"message": {"content": []}}) == '{"message":{"content":[]}}'
    blanked = _blank_result_content({"message": {"content": [{"content": [1], "b": 2}, 3]}})
    assert blanked == '{"message":{"content":[{"b":2,"content":null},3]}}'
