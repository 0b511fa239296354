"""The JSONL store: layout and byte stability, the loader's strict and lenient paths, the live
writer, and resuming a stored session."""

from __future__ import annotations

import itertools
import json
import os
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsh_core.persistence
from dsh_core import (
    CorruptLogError,
    DshError,
    Event,
    Session,
    SessionInfo,
    UnsupportedVersionError,
    assistant_message,
    tool_result_message,
    user_message,
)
from dsh_core._json_text import dumps_canonical
from dsh_core.persistence import (
    DroppedTail,
    JsonlWriter,
    dumps_session,
    header_line,
    load_session,
    loads_session,
    open_session,
    write_session,
)

HEADER = '{"type":"session","version":0,"id":"s1","createdAt":5,"delegationDepth":0}\n'


def clock_from(times: list[int] | None = None) -> Callable[[], int]:
    source: Iterator[int] = iter(times) if times is not None else itertools.count(1000)
    return lambda: next(source)


def line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def ev(seq: int, type: str = "turn/start", data: Any = None, **extra: Any) -> str:
    return line(
        {
            "type": type,
            "seq": seq,
            "time": 7,
            "data": {"turn": 1} if data is None else data,
            **extra,
        }
    )


def prompt_line(seq: int, text: str = "hi") -> str:
    message = user_message(text, id=f"u{seq}").to_json()
    return ev(seq, "user/message", message, surfaceOp="append")


def new_session(session_id: str = "s1") -> Session:
    return Session.create(
        session_id, info=SessionInfo(id=session_id, created_at=5), clock=clock_from()
    )


def run_turn(session: Session, turn: int = 1, text: str = "hello") -> None:
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append(
        "user/message", user_message(text, id=f"u{session.seq}").to_json(), surface_op="append"
    )
    for piece in ("Hel", "lo", "!"):
        session.append(
            "assistant/chunk",
            {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": piece}},
        )
    message = assistant_message("Hello!", provider="p", model="m", id=f"a{session.seq}")
    session.append(
        "assistant/message",
        {"turn": turn, "step": 1, "message": message.to_json()},
        surface_op="append",
        source_event_seqs=[session.seq - 3, session.seq - 2, session.seq - 1],
    )
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------------------- exports


def test_the_public_surface_is_exactly_all() -> None:
    package = dsh_core.persistence
    assert package.__all__ == sorted(package.__all__, key=lambda n: (not n.isupper(), n))
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(package.__all__) == public


# ------------------------------------------------------------------------------- layout


def test_the_file_is_a_header_record_then_one_compact_event_per_line() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("héllo ✓", id="m1").to_json(), surface_op="append")
    data = dumps_session(session.info, session.events)
    assert data == (
        b'{"type":"session","version":0,"id":"s1","createdAt":5,"delegationDepth":0}\n'
        b'{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}\n'
        b'{"type":"user/message","seq":1,"time":1001,"data":{"id":"m1","role":"user",'
        b'"content":[{"type":"text","text":"h\xc3\xa9llo \xe2\x9c\x93"}],"source":{"kind":"user"}},'
        b'"surfaceOp":"append"}\n'
    )


def test_write_session_writes_exactly_the_dumped_bytes(tmp_path: Path) -> None:
    session = new_session()
    run_turn(session)
    path = tmp_path / "session.jsonl"
    write_session(path, session).close()
    assert path.read_bytes() == dumps_session(session.info, session.events)
    packed = tmp_path / "packed.jsonl"
    write_session(packed, session, pack_chunks=True).close()
    assert packed.read_bytes() == dumps_session(session.info, session.events, pack_chunks=True)
    assert [r["type"] for r in read_lines(packed)].count("text-chunks") == 1


def test_a_lone_surrogate_is_escaped_and_reads_back() -> None:
    session = new_session()
    session.append("todo/write", {"todos": [{"content": "bad \ud800 half", "status": "pending"}]})
    data = dumps_session(session.info, session.events)
    assert b"\\ud800" in data
    data.decode("utf-8")  # the file is valid UTF-8
    assert loads_session(data).events == tuple(session.events)


# ------------------------------------------------------------------------------- round trip

_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12
) | st.sampled_from(
    ["", "\n", "naïve café", "日本語のテキスト", "emoji 🎉👍🏽", '"quoted" \\ back', "\u2028"]
)
_NUMBERS = st.integers() | st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f + 0.0)
_TIMES = st.integers(-(2**53) + 1, 2**53 - 1)


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    """Sessions with events of many types: turns, steps, prompts, chunks (runs that pack), assistant
    messages, tool calls and results, headers, todos, and an ignorable plugin event."""
    times = draw(st.lists(_TIMES, min_size=60, max_size=60))
    session_id = "s-" + draw(st.text("abc123", min_size=1, max_size=4))
    session = Session.create(
        session_id,
        info=SessionInfo(id=session_id, created_at=draw(st.integers(0, 2**53 - 1))),
        clock=clock_from(times * 4),
    )
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(
            st.sampled_from(
                ["turn", "step", "prompt", "chunks", "answer", "tool", "header", "todo", "plugin"]
            )
        )
        seq = session.seq
        if kind == "turn":
            session.append(draw(st.sampled_from(["turn/start", "turn/end"])), {"turn": 1})
        elif kind == "step":
            session.append(
                draw(st.sampled_from(["step/start", "step/end"])), {"turn": 1, "step": 1}
            )
        elif kind == "prompt":
            session.append(
                "user/message",
                user_message(draw(_TEXT), id=f"u{seq}").to_json(),
                surface_op="append",
            )
        elif kind == "chunks":
            delta = draw(st.sampled_from(["text-delta", "reasoning-delta"]))
            for text in draw(st.lists(_TEXT, min_size=1, max_size=5)):
                session.append(
                    "assistant/chunk",
                    {"turn": 1, "step": 1, "chunk": {"type": delta, "index": 0, "text": text}},
                )
        elif kind == "answer":
            message = assistant_message(draw(_TEXT), provider="p", model="m", id=f"a{seq}")
            usage = draw(st.sampled_from([{}, {"usage": {"inputTokens": 3, "outputTokens": 1}}]))
            session.append(
                "assistant/message",
                {"turn": 1, "step": 1, "message": message.to_json(), **usage},
                surface_op="append",
                source_event_seqs=[],
            )
        elif kind == "tool":
            session.append(
                "tool/call",
                {"turn": 1, "step": 1, "callId": f"c{seq}", "name": "t", "arguments": draw(_TEXT)},
            )
            result = tool_result_message(
                f"c{seq}", draw(_TEXT), is_error=draw(st.booleans()), id=f"r{seq}"
            )
            session.append(
                "tool/result",
                {"turn": 1, "step": 1, "message": result.to_json()},
                surface_op="append",
                source_event_seqs=[seq],
            )
        elif kind == "header":
            header = {"config": {"provider": "p", "model": "m"}, "system": draw(_TEXT)}
            session.append("request/header", {"header": header, "reason": "initial"})
        elif kind == "todo":
            session.append("todo/write", {"todos": [{"content": draw(_TEXT), "status": "pending"}]})
        else:
            session.append(
                "plugin/note", {"note": draw(_TEXT), "n": draw(_NUMBERS)}, ignorable=True
            )
    return session


@given(sessions(), st.booleans())
def test_write_then_read_is_the_identity(session: Session, pack: bool) -> None:
    data = dumps_session(session.info, session.events, pack_chunks=pack)
    loaded = loads_session(data)
    assert loaded.info == session.info
    assert loaded.events == tuple(session.events)
    assert loaded.dropped is None and loaded.committed_bytes == len(data)
    # Byte stable: reading and writing again reproduces the file.
    assert dumps_session(loaded.info, loaded.events, pack_chunks=pack) == data
    assert loaded.to_session().derive_messages() == session.derive_messages()


# ------------------------------------------------------------------------------- truncation


def test_a_cut_last_line_is_dropped_and_reported(tmp_path: Path) -> None:
    whole = HEADER + ev(0) + prompt_line(1)
    cut = ev(2, "step/start", {"turn": 1, "step": 1})[:25]
    path = tmp_path / "s.jsonl"
    path.write_bytes((whole + cut).encode())
    loaded = load_session(path)
    assert [e.seq for e in loaded.events] == [0, 1]
    assert loaded.dropped is not None
    assert loaded.dropped == DroppedTail(
        line=4, offset=len(whole.encode()), data=cut.encode(), reason=loaded.dropped.reason
    )
    assert loaded.dropped.size == 25
    assert "Unterminated string" in loaded.dropped.reason or "Expecting" in loaded.dropped.reason
    assert loaded.committed_bytes == len(whole.encode())
    assert path.read_bytes() == (whole + cut).encode()  # loading never modifies the file


def test_invalid_json_on_a_terminated_last_line_is_corruption_not_a_crash_tail() -> None:
    """A crash cuts a line short; it never writes the newline after a partial record."""
    text = HEADER + ev(0) + '{"type":"turn/e\n' + "\n  \n"
    with pytest.raises(CorruptLogError, match="although complete") as info:
        loads_session(text)
    assert info.value.line == 3


def test_a_cut_multibyte_character_on_the_last_line_is_a_truncation() -> None:
    kept = (HEADER + ev(0)).encode()
    data = kept + prompt_line(1, "é").encode()[:-5]
    data = data[: data.rindex(b"\xc3") + 1]  # cut inside the two-byte é
    loaded = loads_session(data)
    assert [e.type for e in loaded.events] == ["turn/start"]
    assert loaded.dropped is not None
    assert (loaded.dropped.line, loaded.dropped.offset) == (3, len(kept))
    assert loaded.dropped.data == data[len(kept) :] and loaded.dropped.data.endswith(b"\xc3")
    assert loaded.dropped.size == len(data) - len(kept)
    # The reason is the decoder's, naming the cut byte, not a JSON syntax error.
    assert "can't decode byte 0xc3" in loaded.dropped.reason
    assert "unexpected end of data" in loaded.dropped.reason
    assert loaded.committed_bytes == len(kept)


def test_a_complete_last_record_without_its_newline_is_kept() -> None:
    """Decision: a last line that parses is a whole record (a cut JSON object never parses), so
    it is kept; only the newline is missing."""
    loaded = loads_session(
        HEADER
        + ev(0)
        + ev(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}).rstrip("\n")
    )
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"]
    assert loaded.dropped is None


def test_a_log_holding_only_a_header_has_no_events() -> None:
    loaded = loads_session(HEADER)
    assert loaded.events == () and loaded.closers == () and loaded.info.id == "s1"


def test_blank_lines_and_crlf_endings_are_tolerated() -> None:
    text = "\n" + HEADER + "\n\n" + ev(0).replace("\n", "\r\n") + "   \n" + prompt_line(1) + "\n"
    loaded = loads_session(text)
    assert [e.seq for e in loaded.events] == [0, 1]
    assert loaded.dropped is None


# ------------------------------------------------------------------------------- corruption


def test_a_damaged_line_inside_the_log_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER + ev(0) + '{"type":"tu\n' + prompt_line(1), encoding="utf-8")
    with pytest.raises(CorruptLogError) as info:
        load_session(path)
    err = info.value
    assert (err.line, err.path, err.seq) == (3, str(path), None)
    assert "not valid JSON (after seq 0)" in str(err)
    assert "Only an unfinished last line can be dropped" in str(err)
    assert str(err).startswith(f"{path}:line 3: ")


def test_invalid_utf8_inside_the_log_is_corruption() -> None:
    with pytest.raises(CorruptLogError) as info:
        loads_session(HEADER.encode() + b'{"type":"\xff"}\n' + ev(0).encode())
    assert info.value.line == 2


@pytest.mark.parametrize(
    ("body", "seq", "message"),
    [
        ("[1,2]\n", None, "a record must be a JSON object (an event or a chunk row), got list"),
        (ev(0, extra_key=1), 0, "invalid event: event has unknown envelope keys ['extra_key']"),
        (
            line({"type": "turn/start", "seq": 0, "time": 1.5, "data": {}}),
            0,
            "event time must be a safe integer",
        ),
        (ev(1), 1, "turn/start has seq 1 where seq 0 was expected"),
        (
            line(
                {
                    "type": "text-chunks",
                    "seq0": 0,
                    "time0": 0,
                    "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a", "b"]},
                }
            ),
            0,
            "malformed text-chunks storage row: dt has 0 gaps for 2 members",
        ),
    ],
    ids=["not an object", "envelope", "time", "seq gap", "bad row"],
)
def test_a_record_that_does_not_read_names_its_line_and_seq(
    body: str, seq: int | None, message: str
) -> None:
    with pytest.raises(CorruptLogError) as info:
        loads_session(HEADER + body + ev(5), path="x.jsonl")
    assert info.value.line == 2
    assert info.value.seq == seq
    assert info.value.path == "x.jsonl"
    assert message in str(info.value)


def test_a_seq_gap_inside_a_packed_row_is_corruption() -> None:
    row = {
        "type": "text-chunks",
        "seq0": 1,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]},
    }
    with pytest.raises(CorruptLogError, match="seq 1 where seq 0 was expected") as info:
        loads_session(HEADER + line(row))
    assert info.value.line == 2


def test_a_surface_rule_violation_names_its_line() -> None:
    bad = ev(1, "user/message", user_message("x", id="m").to_json())  # no surfaceOp
    with pytest.raises(CorruptLogError, match="requires a surfaceOp marker") as info:
        loads_session(HEADER + ev(0) + bad)
    assert (info.value.line, info.value.seq) == (3, 1)


def test_a_header_event_that_does_not_fold_names_its_line() -> None:
    bad = ev(
        1,
        "request/header",
        {"header": {"config": {"provider": "p", "model": "m"}, "tools": 5}, "reason": "initial"},
    )
    with pytest.raises(CorruptLogError) as info:
        loads_session(HEADER + ev(0) + bad, audit=True)
    assert (info.value.line, info.value.seq) == (3, 1)


def test_message_shapes_are_checked_unless_auditing() -> None:
    anonymous = ev(
        0,
        "user/message",
        {"role": "user", "content": [], "source": {"kind": "user"}},
        surfaceOp="append",
    )
    with pytest.raises(CorruptLogError, match="lacks an identified message") as info:
        loads_session(HEADER + anonymous)
    assert info.value.line == 2
    assert len(loads_session(HEADER + anonymous, audit=True).events) == 1


# ------------------------------------------------------------------------------- header


def test_an_empty_file_has_no_header() -> None:
    with pytest.raises(CorruptLogError, match="empty log: there is no session header record"):
        loads_session(b"\n \n")


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ('{"type":"sess', "the session header is not valid JSON"),
        (line({"type": "turn/start", "seq": 0}), "the first record is not a session header"),
        ("[1]\n", "the first record is not a session header"),
        (
            line({"type": "session", "version": "0", "id": "s", "createdAt": 1}),
            "version must be an integer, got '0'",
        ),
        (
            line({"type": "session", "version": 0, "id": "", "createdAt": 1}),
            "id must be a non-empty string",
        ),
        (
            line({"type": "session", "version": 0, "id": "s"}),
            "createdAt must be a non-negative integer, got None",
        ),
        (
            line({"type": "session", "version": 0, "id": "s", "createdAt": -1}),
            "createdAt must be a non-negative integer",
        ),
        (
            line({"type": "session", "version": 0, "id": "s", "createdAt": 1, "cwd": 3}),
            "cwd must be a string",
        ),
        (
            line(
                {"type": "session", "version": 0, "id": "s", "createdAt": 1, "parentSession": None}
            ),
            "parentSession must be a string",
        ),
        (
            line({"type": "session", "version": 0, "id": "s", "createdAt": 1, "seedLength": -2}),
            "seedLength must be a non-negative integer",
        ),
        ('{"type":"session","version":0,"id":"s","createdAt":1,"x":-0.0}\n', "not lossless JSON"),
    ],
)
def test_an_invalid_header_is_refused(header: str, message: str) -> None:
    with pytest.raises(CorruptLogError) as info:
        loads_session(header + ev(0))
    assert message in str(info.value)
    assert info.value.line == 1
    assert not isinstance(info.value, UnsupportedVersionError)


def test_the_header_keeps_fields_of_other_harnesses_in_order() -> None:
    header = '{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","parentSession":"p","seedLength":0,"origin":"subagent","delegationDepth":1}\n'
    loaded = loads_session(header)
    assert (loaded.info.cwd, loaded.info.parent_session, loaded.info.seed_length) == ("/w", "p", 0)
    assert loaded.info.extra == {"origin": "subagent", "delegationDepth": 1}
    assert dumps_session(loaded.info, ()) == header.encode()


def test_a_newer_version_is_refused_as_written_by_a_newer_harness(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER.replace('"version":0', '"version":1') + ev(0), encoding="utf-8")
    with pytest.raises(UnsupportedVersionError) as info:
        load_session(path)
    assert "session format version 1 was written by a newer harness" in str(info.value)
    assert "upgrade" in str(info.value)
    assert (info.value.line, info.value.path) == (1, str(path))


def test_an_older_version_is_refused_with_no_upgrade_path() -> None:
    with pytest.raises(
        UnsupportedVersionError, match=r"version -1 has no upgrade path.*never migrates"
    ):
        loads_session(HEADER.replace('"version":0', '"version":-1'))


# ------------------------------------------------------------------------------- unknown types


def test_an_unknown_event_type_is_refused_naming_type_seq_and_line() -> None:
    text = HEADER + ev(0) + ev(1, "session/title", {"title": "x"})
    with pytest.raises(CorruptLogError) as info:
        loads_session(text)
    assert (
        "event type 'session/title' at seq 1 is unknown to this build and not marked ignorable"
        in str(info.value)
    )
    assert "audit=True" in str(info.value)
    assert (info.value.seq, info.value.line) == (1, 3)


def test_an_ignorable_unknown_event_is_carried_opaque() -> None:
    loaded = loads_session(HEADER + ev(0, "plugin/x", {"a": 1}, ignorable=True))
    assert loaded.events[0].type == "plugin/x" and loaded.events[0].ignorable
    assert loaded.opaque_types == {"plugin/x"}


def test_audit_mode_carries_any_unknown_type() -> None:
    loaded = loads_session(HEADER + ev(0, "session/title", {"title": "x"}), audit=True)
    assert loaded.audit and loaded.opaque_types == {"session/title"}
    assert loaded.to_session().events[0].type == "session/title"


# ------------------------------------------------------------------------------- crash repair


def _open_turn_text() -> str:
    return HEADER + ev(0) + ev(1, "step/start", {"turn": 1, "step": 1}) + prompt_line(2)


def test_a_log_ending_inside_a_turn_is_closed_in_memory_only(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_open_turn_text(), encoding="utf-8")
    loaded = load_session(path)
    assert loaded.interrupted
    assert [e.type for e in loaded.closers] == ["step/end", "turn/end"]
    assert [e.seq for e in loaded.repaired_events] == [0, 1, 2, 3, 4]
    assert path.read_text(encoding="utf-8") == _open_turn_text()
    session = loaded.to_session()
    assert [e.type for e in session.events][-3:] == ["step/end", "turn/end", "session/end-seed"]


# ------------------------------------------------------------------------------- the writer


@pytest.mark.parametrize("fsync", ["never", "always"])
def test_every_append_is_on_disk_before_append_returns(tmp_path: Path, fsync: Any) -> None:
    session = new_session()
    path = tmp_path / "s.jsonl"
    with write_session(path, session, fsync=fsync) as writer:
        assert writer.attached and writer.session is session
        assert read_lines(path) == [header_line(session.info)]
        appends: list[tuple[str, Any, dict[str, Any]]] = []
        for turn in (1, 2):
            appends += [
                ("turn/start", {"turn": turn}, {}),
                (
                    "user/message",
                    user_message("x", id=f"u{turn}").to_json(),
                    {"surface_op": "append"},
                ),
                ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}),
            ]
        for type_, data, kw in appends:
            event = session.append(type_, data, **kw)
            # Read with a separate handle while the writer is still open.
            assert read_lines(path)[-1] == json.loads(dumps_canonical(event.to_json()))
            assert len(read_lines(path)) == event.seq + 2
        assert writer.next_seq == session.seq == 6
    assert writer.closed


def test_a_packing_writer_holds_a_chunk_run_until_it_ends(tmp_path: Path) -> None:
    session = new_session()
    path = tmp_path / "s.jsonl"
    writer = write_session(path, session, pack_chunks=True)
    session.append("turn/start", {"turn": 1})
    for piece in "abcd":
        session.append(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": piece}},
        )
    assert len(read_lines(path)) == 2  # header + turn/start; the run may still grow
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert [r["type"] for r in read_lines(path)] == [
        "session",
        "turn/start",
        "text-chunks",
        "turn/end",
    ]
    for piece in "xyz":
        session.append(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": piece}},
        )
    writer.flush()
    assert read_lines(path)[-1]["type"] == "text-chunks"
    writer.flush()  # nothing pending: no-op
    writer.close()
    assert load_session(path).events == tuple(session.events)


def test_closing_flushes_a_pending_run(tmp_path: Path) -> None:
    session = new_session()
    path = tmp_path / "s.jsonl"
    with write_session(path, session, pack_chunks=True):
        for piece in "abc":
            session.append(
                "assistant/chunk",
                {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": piece}},
            )
    assert path.read_bytes() == dumps_session(session.info, session.events, pack_chunks=True)


def test_the_writer_refuses_a_seq_gap(tmp_path: Path) -> None:
    def event(seq: int) -> Event:
        return Event(type="turn/start", seq=seq, time=1, data={"turn": 1})

    with JsonlWriter.create(tmp_path / "s.jsonl", SessionInfo(id="s1", created_at=5)) as writer:
        writer.write([event(0)])
        with pytest.raises(
            CorruptLogError, match="with seq 3 to the log: seq 2 comes next"
        ) as info:
            writer.write([event(1), event(3)])
        assert info.value.seq == 3
        assert writer.next_seq == 1
    assert len(load_session(tmp_path / "s.jsonl").events) == 1  # the refused batch wrote nothing


def test_a_failed_write_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = new_session()
    path = tmp_path / "s.jsonl"
    with write_session(path, session, fsync="always") as writer:
        session.append("turn/start", {"turn": 1})
        before = path.read_bytes()

        def broken_fsync(fd: int) -> None:
            raise OSError(5, "disk on fire")

        monkeypatch.setattr(os, "fsync", broken_fsync)
        with pytest.raises(OSError, match="disk on fire"):
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert writer.next_seq == 1


def test_create_refuses_an_existing_file_unless_overwriting(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("old", encoding="utf-8")
    with pytest.raises(FileExistsError):
        JsonlWriter.create(path, SessionInfo(id="s1", created_at=5))
    JsonlWriter.create(path, SessionInfo(id="s1", created_at=5), overwrite=True).close()
    assert path.read_text(encoding="utf-8") == HEADER


def test_a_bad_fsync_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync must be one of"):
        JsonlWriter.create(
            tmp_path / "s.jsonl",
            SessionInfo(id="s1", created_at=5),
            fsync="sometimes",  # type: ignore[arg-type]
        )
    assert not (tmp_path / "s.jsonl").exists()


def test_attach_refuses_another_session_or_a_shorter_one(tmp_path: Path) -> None:
    session = new_session()
    run_turn(session)
    path = tmp_path / "s.jsonl"
    write_session(path, session).close()
    with JsonlWriter.append_to(path) as writer:
        with pytest.raises(
            CorruptLogError, match="cannot attach session 'other': the file holds session 's1'"
        ):
            writer.attach(new_session("other"))
        with pytest.raises(CorruptLogError, match="with 0 events: the file already holds 9"):
            writer.attach(new_session())
        with pytest.raises(DshError, match="no session is attached"):
            _ = writer.session
        writer.attach(session)
        with pytest.raises(DshError, match="already attached"):
            writer.attach(session)


def test_a_closed_or_detached_writer_writes_nothing(tmp_path: Path) -> None:
    session = new_session()
    path = tmp_path / "s.jsonl"
    writer = write_session(path, session)
    writer.detach()
    session.append("turn/start", {"turn": 1})
    assert len(read_lines(path)) == 1
    writer.close()
    writer.close()  # idempotent
    writer.detach()  # so is detaching
    assert "closed" in repr(writer)
    with pytest.raises(DshError, match="is closed; open the session again"):
        writer.write([session.events[0]])


def test_append_to_continues_a_file_without_repairing_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_open_turn_text(), encoding="utf-8")
    with JsonlWriter.append_to(path) as writer:
        assert writer.next_seq == 3
        assert writer.loaded is not None and writer.loaded.interrupted
        assert writer.info.id == "s1" and writer.path == str(path)
        assert "next_seq=3" in repr(writer)
        writer.write([Event(type="step/end", seq=3, time=9, data={"turn": 1, "step": 1})])
    assert path.read_text(encoding="utf-8") == _open_turn_text() + ev(
        3, "step/end", {"turn": 1, "step": 1}
    ).replace('"time":7', '"time":9')


# ------------------------------------------------------------------------------- resuming


def test_open_session_resumes_and_turn_numbering_continues(tmp_path: Path) -> None:
    session = new_session()
    run_turn(session, 1)
    run_turn(session, 2)
    session.append("turn/start", {"turn": 3})
    session.append("step/start", {"turn": 3, "step": 1})
    path = tmp_path / "s.jsonl"
    write_session(path, session).close()
    stored = path.read_bytes()

    with open_session(path, clock=clock_from([77, *range(100, 200)])) as writer:
        resumed = writer.session
        assert writer.loaded is not None and writer.loaded.interrupted
        tail = [e.type for e in resumed.events][-3:]
        assert tail == ["step/end", "turn/end", "session/end-seed"]
        assert resumed.events[-1].time == 77
        # The file holds the repair and the marker, appended after the untouched old bytes.
        assert path.read_bytes().startswith(stored)
        assert load_session(path).events == tuple(resumed.events)
        last_turn = max(e.data["turn"] for e in resumed.events if e.type == "turn/start")
        assert last_turn == 3
        run_turn(resumed, last_turn + 1)
    reloaded = load_session(path)
    assert not reloaded.interrupted
    assert [e.data["turn"] for e in reloaded.events if e.type == "turn/start"] == [1, 2, 3, 4]
    assert [e.seq for e in reloaded.events] == list(range(len(reloaded.events)))


def test_reopening_an_untouched_session_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = new_session()
    run_turn(session)
    write_session(path, session).close()
    open_session(path).close()  # appends the end-seed marker
    once = path.read_bytes()
    open_session(path).close()
    assert path.read_bytes() == once
    assert [e.type for e in load_session(path).events].count("session/end-seed") == 1


def test_open_session_cuts_an_unfinished_last_line_first(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = HEADER + ev(0) + ev(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path.write_text(good + '{"type":"turn/st', encoding="utf-8")
    with open_session(path) as writer:
        assert writer.loaded is not None and writer.loaded.dropped is not None
        assert path.read_text(encoding="utf-8").startswith(
            good + '{"type":"session/end-seed","seq":2,'
        )
    assert [e.type for e in load_session(path).events] == [
        "turn/start",
        "turn/end",
        "session/end-seed",
    ]


def test_open_session_ends_a_last_record_that_lost_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = HEADER + ev(0) + ev(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path.write_text(good.rstrip("\n"), encoding="utf-8")
    open_session(path).close()
    assert path.read_text(encoding="utf-8").startswith(good + '{"type":"session/end-seed"')


def test_open_session_leaves_a_corrupt_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    text = HEADER + '{"type":"x\n' + ev(0) + '{"type":"cut'
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorruptLogError):
        open_session(path)
    assert path.read_text(encoding="utf-8") == text


def test_a_strict_open_refuses_unknown_types_and_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    text = HEADER + ev(0, "turn/start", {"turn": 1}) + ev(1, "session/title", {"t": 1}) + '{"cut'
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorruptLogError, match="session/title"):
        open_session(path)
    assert path.read_text(encoding="utf-8") == text
    with open_session(path, audit=True) as writer:
        types_ = [e.type for e in writer.session.events]
    assert types_ == ["turn/start", "session/title", "turn/end", "session/end-seed"]
    assert [r["type"] for r in read_lines(path)][1:] == types_


def test_open_session_of_a_missing_file_fails_without_creating_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_session(tmp_path / "none.jsonl")
    assert not (tmp_path / "none.jsonl").exists()


def test_a_loaded_log_is_a_frozen_value() -> None:
    loaded = loads_session(HEADER + ev(0))
    with pytest.raises(AttributeError):
        loaded.events = ()  # type: ignore[misc]


# ------------------------------------------------------------------------------- I/O failures


def _failing_writes(monkeypatch: pytest.MonkeyPatch, *, after: int) -> None:
    """Let ``after`` writes through, then fail every write like a full disk."""
    real = JsonlWriter._write_bytes
    calls = itertools.count()

    def write(self: JsonlWriter, data: bytes) -> None:
        if next(calls) >= after:
            raise OSError(28, "No space left on device")
        real(self, data)

    monkeypatch.setattr(JsonlWriter, "_write_bytes", write)


@pytest.mark.parametrize("after", [0, 1], ids=["header", "events"])
def test_a_failed_first_write_raises_and_closes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    _failing_writes(monkeypatch, after=after)
    with pytest.raises(OSError, match="No space left"):
        write_session(tmp_path / "s.jsonl", session, fsync="always")
    # No writer is left attached: the session keeps working without it.
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def test_a_failed_resume_raises_and_closes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_open_turn_text().rstrip("\n"), encoding="utf-8")
    _failing_writes(monkeypatch, after=0)
    with pytest.raises(OSError, match="No space left"):
        open_session(path)  # fails ending the last line
    with pytest.raises(OSError, match="No space left"):
        JsonlWriter.append_to(path)
    monkeypatch.undo()
    path.write_text(_open_turn_text(), encoding="utf-8")
    _failing_writes(monkeypatch, after=0)
    with pytest.raises(OSError, match="No space left"):
        open_session(path)  # fails writing the repair
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == _open_turn_text()


def test_a_directory_that_cannot_be_synced_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_directories(path: str, flags: int, *args: Any) -> int:
        raise PermissionError(13, "cannot open a directory here")

    monkeypatch.setattr(os, "open", no_directories)
    JsonlWriter.create(
        tmp_path / "s.jsonl", SessionInfo(id="s1", created_at=5), fsync="always"
    ).close()
    assert (tmp_path / "s.jsonl").read_text(encoding="utf-8") == HEADER


def test_a_wrong_value_is_named_in_json_words_frozen_or_not() -> None:
    from dsh_core import FrozenDict, FrozenList
    from dsh_core._json import json_kind
    from dsh_core.persistence._checks import describe

    values: list[object] = [None, {}, FrozenDict({}), [], FrozenList([1]), "x", True, 1]
    assert [json_kind(v) for v in values] == [
        "null",
        "an object",
        "an object",
        "an array",
        "an array",
        "a string",
        "a boolean",
        "a number",
    ]
    assert describe(FrozenList([1])) == "an array"
    assert describe(1.5) == "a number 1.5"
    assert json_kind(object()) == "object"  # not JSON at all: its class
