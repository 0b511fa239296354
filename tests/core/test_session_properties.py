"""Session laws (the cached derivation of docs/design.md §4 under random appends and
replaces) over generated logs from ``dsh_testkit.strategies``."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import Event, Message, Session, TextBlock, derive_event_message, fold_request_header
from dsh_core._surface import fold_surface
from dsh_testkit.strategies import EventDraft, message_events, noise_events, session_logs


def append_json(session: Session, raw: dict[str, Any]) -> Event:
    return session.append(
        raw["type"],
        raw["data"],
        surface_op=raw.get("surfaceOp"),
        source_event_seqs=raw.get("sourceEventSeqs"),
    )


def from_scratch(events: Any) -> list[Message]:
    """fold_surface, then derive_event_message per node: shares nothing with Session."""
    nodes, _ = fold_surface(list(events))
    return [m for m in (derive_event_message(events[seq]) for seq in nodes) if m is not None]


# ------------------------------------------------------------------ (d) cache == from scratch


@given(session_logs(max_size=30), st.data())
def test_the_cached_derivation_equals_a_from_scratch_fold(
    log: list[dict[str, Any]], data: st.DataObject
) -> None:
    session = Session.create("s")
    held: list[tuple[int, list[Message]]] = []
    for raw in log:
        append_json(session, raw)
        if data.draw(st.booleans(), label="derive now"):  # exercise the cache mid-way
            derived = session.derive_messages()
            assert derived == from_scratch(session.events)
            held.append((len(derived), derived))
    assert session.derive_messages() == from_scratch(session.events)
    assert session.surface_nodes == fold_surface(list(session.events))[0]
    for length, derived in held:  # lists handed out earlier never changed
        assert len(derived) == length


@settings(max_examples=50)
@given(session_logs(max_size=30))
def test_seeded_and_live_sessions_agree(log: list[dict[str, Any]]) -> None:
    live = Session.create("live")
    for raw in log:
        append_json(live, raw)
    seeded = Session.create("seeded", log)
    assert seeded.derive_messages() == live.derive_messages()
    assert seeded.surface_generation == live.surface_generation
    assert seeded.request_header() == live.request_header() == fold_request_header(live.events)


# ---------------------------------------------------------------------------- §12.1 laws


@given(session_logs(replaces=False))
def test_derivation_is_deterministic(log: list[dict[str, Any]]) -> None:
    session = Session.create("s", log)
    assert session.derive_messages() == session.derive_messages()
    assert Session.create("t", log).derive_messages() == session.derive_messages()


@given(session_logs())
def test_seqs_are_contiguous_from_zero(log: list[dict[str, Any]]) -> None:
    session = Session.create("s")
    for raw in log:
        append_json(session, raw)
    n = len(log)
    assert [e.seq for e in session.events] == list(range(n))
    assert session.seq == n


@given(session_logs())
def test_replay_as_seed_derives_equal_and_adds_one_marker(log: list[dict[str, Any]]) -> None:
    original = Session.create("s")
    for raw in log:
        append_json(original, raw)
    n = len(original.events)
    replay = Session.create("r", original.events)
    assert replay.derive_messages() == original.derive_messages()
    assert replay.events[:n] == tuple(original.events)
    assert len(replay.events) == n + 1
    assert replay.events[n].type == "session/end-seed"
    again = Session.create("rr", [e.to_json() for e in replay.events])
    assert again.events == replay.events  # the marker is not doubled
    assert again.derive_messages() == original.derive_messages()


@st.composite
def merged(draw: st.DrawFn) -> tuple[list[EventDraft], list[EventDraft]]:
    """``(messages, merge)``: ≤12 message events and an order-preserving merge with ≤12 noise
    events, interleaved by a boolean stream."""
    messages = draw(st.lists(message_events(), max_size=12))
    noise = draw(st.lists(noise_events(), max_size=12))
    out: list[EventDraft] = []
    m = n = 0
    while m < len(messages) or n < len(noise):
        take_message = n >= len(noise) or (m < len(messages) and draw(st.booleans()))
        if take_message:
            out.append(messages[m])
            m += 1
        else:
            out.append(noise[n])
            n += 1
    return messages, out


@given(merged())
def test_noise_never_changes_the_derivation(
    drafts: tuple[list[EventDraft], list[EventDraft]],
) -> None:
    messages, merge = drafts
    alone = Session.create("a")
    for draft in messages:
        draft.append_to(alone)
    mixed = Session.create("m")
    for draft in merge:
        draft.append_to(mixed)
    assert mixed.derive_messages() == alone.derive_messages()


@given(session_logs(max_size=15))
def test_derived_messages_are_frozen_and_the_log_survives_mutation_attempts(
    log: list[dict[str, Any]],
) -> None:
    session = Session.create("s", log)
    before = [e.to_json() for e in session.events]
    for message in session.derive_messages():
        assert message.role in {"user", "assistant", "system"}
        assert isinstance(message.content, tuple)
        with pytest.raises(AttributeError):
            message.content.append(TextBlock(text="x"))  # type: ignore[attr-defined]
        with pytest.raises(dataclasses.FrozenInstanceError):
            message.role = "system"  # type: ignore[misc]
        with pytest.raises(TypeError):
            message.source["kind"] = "x"
        for block in message.content:
            with pytest.raises(dataclasses.FrozenInstanceError):
                block.type = "x"  # type: ignore[misc]
    assert [e.to_json() for e in session.events] == before
    assert session.derive_messages() == from_scratch(session.events)
