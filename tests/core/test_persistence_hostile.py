"""Hostile session logs: each test pins one defect class found by an adversarial run.

Wrong-typed envelopes and payload fields, a corrupt but complete last line, two writers on one
file, surrogate code points, and nesting deep enough to exhaust memory or the recursion limit.
The longer sweeps (every cut, every field) live in ``tests/adversarial``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import (
    MAX_JSON_DEPTH,
    CorruptLogError,
    InvalidEventError,
    JsonValueError,
    Session,
    SessionInfo,
    freeze_json,
    user_message,
)
from dsh_core._json_text import loads_json
from dsh_core.persistence import (
    JsonlWriter,
    LogLockedError,
    dumps_session,
    load_session,
    loads_session,
    open_session,
    write_session,
)
from dsh_core.scripted import text_response, tool_call, tool_call_response
from tests.core._loop_helpers import make_agent, read

HEADER = '{"type":"session","version":0,"id":"s1","createdAt":5}\n'


def line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def ev(seq: int, type: str = "turn/start", data: Any = None, **extra: Any) -> str:
    return line({"type": type, "seq": seq, "time": 7, "data": data or {"turn": 1}, **extra})


def new_session(session_id: str = "s1") -> Session:
    return Session.create(session_id, info=SessionInfo(id=session_id, created_at=5))


def a_turn(session: Session, text: str = "hello") -> None:
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message(text, id="u1").to_json(), surface_op="append")
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


WRONG = [["turn/start"], {"t": 1}, [], {}]


# ------------------------------------------------------------- 1. the envelope's types


@pytest.mark.parametrize("wrong", WRONG, ids=repr)
@pytest.mark.parametrize("audit", [False, True])
def test_a_record_type_that_is_not_a_string_is_a_corrupt_log_with_its_line(
    tmp_path: Path, wrong: Any, audit: bool
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER + ev(0) + line({"type": wrong, "seq": 1, "time": 7, "data": {}}))
    with pytest.raises(CorruptLogError, match="type must be a string") as info:
        load_session(path, audit=audit)
    assert (info.value.line, info.value.path) == (3, str(path))


@pytest.mark.parametrize("wrong", WRONG, ids=repr)
@pytest.mark.parametrize("field", ["seq", "time", "surfaceOp", "sourceEventSeqs", "ignorable"])
@pytest.mark.parametrize("audit", [False, True])
def test_every_envelope_field_of_the_wrong_type_is_a_typed_error(
    field: str, wrong: Any, audit: bool
) -> None:
    record = {"type": "turn/start", "seq": 0, "time": 7, "data": {"turn": 1}, field: wrong}
    with pytest.raises(CorruptLogError) as info:
        loads_session(HEADER + line(record), audit=audit)
    assert info.value.line == 2


@pytest.mark.parametrize("wrong", WRONG, ids=repr)
def test_a_chunk_row_with_wrong_typed_fields_is_a_typed_error(wrong: Any) -> None:
    row: dict[str, Any] = {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 7,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [0, 0, 0], "texts": ["a", "b", "c"]},
    }
    for key in ("seq0", "time0", "data"):
        with pytest.raises(CorruptLogError) as info:
            loads_session(HEADER + line({**row, key: wrong}), audit=True)
        assert info.value.line == 2
    for key in ("turn", "step", "index", "dt", "texts"):
        with pytest.raises(CorruptLogError) as info:
            loads_session(HEADER + line({**row, "data": {**row["data"], key: wrong}}), audit=True)
        assert info.value.line == 2


# ------------------------------------------------------------- 2. payload fields readers use


@pytest.mark.parametrize("wrong", ["1", "x", [1], {"k": 1}, 1.5, True, -1, None], ids=repr)
@pytest.mark.parametrize("key", ["turn", "step"])
@pytest.mark.parametrize("audit", [False, True])
def test_a_step_start_with_a_non_integer_position_is_refused_at_load(
    wrong: Any, key: str, audit: bool
) -> None:
    data = {"turn": 1, "step": 1, key: wrong}
    text = HEADER + ev(0) + ev(1, "step/start", data)
    with pytest.raises(CorruptLogError, match=key) as info:
        loads_session(text, audit=audit)
    assert (info.value.line, info.value.seq) == (3, 1)


@pytest.mark.parametrize(
    "event_type", ["turn/start", "turn/end", "step/end", "assistant/chunk", "assistant/message"]
)
def test_turn_and_step_are_checked_on_every_event_that_carries_them(event_type: str) -> None:
    text = HEADER + ev(0, event_type, {"turn": "1"})
    with pytest.raises(CorruptLogError, match="turn must be a non-negative integer") as info:
        loads_session(text, audit=True)
    assert info.value.line == 2


@pytest.mark.parametrize("event_type", ["turn/start", "turn/end", "step/start", "step/end"])
def test_turn_and_step_events_must_carry_their_positions(event_type: str) -> None:
    with pytest.raises(CorruptLogError, match=r"data\.turn is missing") as info:
        loads_session(HEADER + ev(0, event_type, {"other": 1}), audit=True)
    assert info.value.line == 2
    with pytest.raises(CorruptLogError, match="data must be an object holding turn") as info:
        loads_session(HEADER + ev(0, event_type, "x"), audit=True)
    assert info.value.line == 2


# ------------------------------------------------------------- 3. only an unterminated tail drops


def test_a_terminated_corrupt_last_line_is_corruption_and_resume_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER + ev(0) + '{"type":"turn/end","seq":1,"ti\n')
    before = path.read_bytes()
    with pytest.raises(CorruptLogError) as info:
        load_session(path)
    assert info.value.line == 3 and "although complete" in str(info.value)
    with pytest.raises(CorruptLogError):
        open_session(path)
    assert path.read_bytes() == before  # not cut off, no synthetic turn/end appended


def test_a_garbled_final_newline_never_deletes_the_complete_last_event(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    complete = ev(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path.write_text(HEADER + ev(0) + complete[:-1] + "x")  # its newline became an "x"
    before = path.read_bytes()
    with pytest.raises(CorruptLogError, match="not the start of a record cut short") as info:
        load_session(path)
    assert info.value.line == 3
    with pytest.raises(CorruptLogError):
        open_session(path)
    assert path.read_bytes() == before


def test_two_lines_merged_by_a_lost_newline_are_corruption_even_at_the_end() -> None:
    second = ev(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    merged_complete = HEADER + ev(0).rstrip("\n") + " " + second
    with pytest.raises(CorruptLogError):
        loads_session(merged_complete)
    merged_cut = HEADER + ev(0).rstrip("\n") + "," + second[:20]  # and the second one cut
    with pytest.raises(CorruptLogError, match="not the start of a record cut short"):
        loads_session(merged_cut)


def test_bytes_that_are_not_utf8_inside_an_unterminated_tail_are_corruption() -> None:
    data = (HEADER + ev(0)).encode() + b'{"type":"turn/\xff\xfeend","seq":1'
    with pytest.raises(CorruptLogError, match="not the start of a record cut short"):
        loads_session(data)


def test_a_complete_record_then_a_stray_partial_character_is_corruption() -> None:
    data = (HEADER + ev(0) + ev(1, "turn/end", {"turn": 1})[:-1]).encode() + b"\xe2\x82"
    with pytest.raises(CorruptLogError, match="not the start of a record cut short"):
        loads_session(data)


def test_an_unterminated_tail_nested_past_the_limit_is_corruption() -> None:
    tail = '{"type":"x/y","seq":1,"time":7,"data":' + '{"a":' * (MAX_JSON_DEPTH + 5)
    with pytest.raises(CorruptLogError, match="deeper than"):
        loads_session(HEADER + ev(0) + tail, audit=True)
    # ... also when it ends inside a character, so only its UTF-8 prefix is parsed
    with pytest.raises(CorruptLogError, match="not the start of a record cut short"):
        loads_session((HEADER + ev(0) + tail).encode() + b"\xe2", audit=True)


def test_an_event_without_positions_may_hold_any_json_data_in_audit_mode() -> None:
    loaded = loads_session(HEADER + ev(0, "todo/write", "just a string"), audit=True)
    assert loaded.events[0].data == "just a string"


def test_an_unterminated_prefix_of_a_record_is_still_a_crash_tail(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER + ev(0) + ev(1, "turn/end", {"turn": 1})[:25])
    loaded = load_session(path)
    assert [e.seq for e in loaded.events] == [0] and loaded.dropped is not None


# ------------------------------------------------------------- 4. one writer per log


def test_a_second_open_session_on_the_same_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = new_session()
    a_turn(session)
    write_session(path, session).close()
    first = open_session(path)
    with pytest.raises(LogLockedError) as info:
        open_session(path)
    assert info.value.path == str(path) and str(path) in str(info.value)
    first.session.append("turn/start", {"turn": 2})
    first.close()
    second = open_session(path)  # the lock goes with close
    second.close()
    starts = [e.data["turn"] for e in load_session(path).events if e.type == "turn/start"]
    assert starts == [1, 2]  # the first writer's event is on disk


@pytest.mark.parametrize("second", ["write_session", "overwrite", "append_to", "open_session"])
def test_every_way_to_write_is_refused_while_a_writer_holds_the_log(
    tmp_path: Path, second: str
) -> None:
    path = tmp_path / "s.jsonl"
    session = new_session()
    a_turn(session)
    holder = write_session(path, session)
    before = path.read_bytes()
    other = new_session()
    with pytest.raises((LogLockedError, FileExistsError)):
        if second == "write_session":
            write_session(path, other)
        elif second == "overwrite":
            write_session(path, other, overwrite=True)
        elif second == "append_to":
            JsonlWriter.append_to(path)
        else:
            open_session(path)
    assert path.read_bytes() == before  # an overwrite did not truncate under the holder
    session.append("turn/start", {"turn": 2})
    holder.close()
    assert len(load_session(path).events) == len(session.events)


def test_overwrite_creates_a_missing_file_and_truncates_an_unlocked_one(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = new_session()
    a_turn(session)
    write_session(path, session, overwrite=True).close()  # no file yet: created
    assert len(load_session(path).events) == 3
    write_session(path, new_session(), overwrite=True).close()  # unlocked: truncated
    assert load_session(path).events == ()


def test_the_lock_holds_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = new_session()
    a_turn(session)
    with write_session(path, session):
        script = (
            "import sys\n"
            "from dsh_core.persistence import LogLockedError, open_session\n"
            "try:\n    open_session(sys.argv[1])\n"
            "except LogLockedError as exc:\n    print(exc.path); sys.exit(3)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=False
        )
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == str(path)


# ------------------------------------------------------------- 5. surrogates


def test_a_surrogate_pair_held_as_two_code_points_is_refused_at_append() -> None:
    session = new_session()
    with pytest.raises(InvalidEventError, match="U\\+D83D U\\+DE00 as two code points"):
        session.append(
            "user/message", user_message("a\ud83d\ude00", id="u1").to_json(), surface_op="append"
        )
    assert session.seq == 0  # nothing was appended
    with pytest.raises(JsonValueError) as info:
        freeze_json({"k": ["ok", "\ud83d\ude00"]})
    assert info.value.path == "data.k[1]"
    with pytest.raises(JsonValueError, match="two code points"):
        freeze_json({"\ud83d\ude00": 1})


def test_a_header_holding_a_surrogate_pair_is_refused_before_a_file_exists(
    tmp_path: Path,
) -> None:
    info = SessionInfo(id="s\ud83d\ude00", created_at=5)
    path = tmp_path / "s.jsonl"
    with pytest.raises(JsonValueError, match="two code points"):
        JsonlWriter.create(path, info)
    assert not path.exists()
    lone = SessionInfo(id="s\ud83d", created_at=5)  # a lone one round-trips
    JsonlWriter.create(path, lone).close()
    assert load_session(path).info.id == "s\ud83d"


@pytest.mark.parametrize(
    "text", ["\ud83d", "\ude00", "x\ud800y", "\ude00\ud83d", "\ud83d \ude00", "😀\ud83d"]
)
def test_lone_surrogates_round_trip_byte_identically(tmp_path: Path, text: str) -> None:
    session = new_session()
    session.append("todo/write", {"todos": [{"content": text, "status": "pending"}], text: 1})
    path = tmp_path / "s.jsonl"
    write_session(path, session).close()
    data = path.read_bytes()
    data.decode("utf-8")  # stored as escapes: the file is valid UTF-8
    loaded = load_session(path)
    assert loaded.events[0].data == session.events[0].data
    assert loaded.events[0].data["todos"][0]["content"] == text
    assert dumps_session(loaded.info, loaded.events) == data


_ANY_CODE_POINTS = st.text(
    st.sampled_from(["a", "é", "😀", "\ud83d", "\ude00", "\udbff", "\udc00", '"', "\\"]),
    max_size=8,
)


@given(text=_ANY_CODE_POINTS)
def test_every_string_round_trips_byte_identically_or_is_refused_at_append(text: str) -> None:
    """The lossless promise as a law: append refuses exactly the strings JSON cannot spell."""
    session = new_session()
    holds_pair = any(
        "\ud800" <= a <= "\udbff" and "\udc00" <= b <= "\udfff" for a, b in itertools.pairwise(text)
    )
    try:
        session.append("todo/write", {"t": text, text: [text]})
    except InvalidEventError:
        assert holds_pair
        assert session.seq == 0
        return
    assert not holds_pair
    data = dumps_session(session.info, session.events)
    loaded = loads_session(data)
    assert loaded.events[0].data["t"] == text
    assert dumps_session(loaded.info, loaded.events) == data


def test_a_pair_written_as_escapes_by_another_writer_reads_as_one_character() -> None:
    raw = HEADER + '{"type":"todo/write","seq":0,"time":7,"data":{"t":"\\ud83d\\ude00"}}\n'
    loaded = loads_session(raw)
    assert loaded.events[0].data["t"] == "😀"
    again = loads_session(dumps_session(loaded.info, loaded.events))
    assert again.events == loaded.events


# ------------------------------------------------------------- 6. nesting depth


def _deep_text(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.slow
def test_a_line_nested_100000_deep_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    deep = '{"type":"todo/write","seq":0,"time":7,"data":' + _deep_text(100_000) + "}\n"
    path.write_text(HEADER + deep)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptLogError, match=f"deeper than the {MAX_JSON_DEPTH}") as info:
            load_session(path, audit=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.line == 2
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"  # was 14.8 GB before the fix


@pytest.mark.slow
def test_freezing_deep_values_uses_memory_linear_in_depth() -> None:
    value: Any = 1
    for _ in range(20_000):
        value = {"k": value}
    tracemalloc.start()
    try:
        freeze_json(value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # ~20,000 frozen dicts; the quadratic version built 20,000 paths of up to 40,000 chars each.
    assert peak < 40 * 2**20, f"peak {peak / 2**20:.0f} MiB"


@pytest.mark.slow
def test_the_depth_limit_is_exact_and_holds_for_frozen_parts() -> None:
    value: Any = []
    for _ in range(MAX_JSON_DEPTH - 1):
        value = [value]
    frozen = freeze_json(value)  # exactly MAX_JSON_DEPTH levels
    with pytest.raises(JsonValueError, match=f"at most {MAX_JSON_DEPTH} levels"):
        freeze_json([value])
    with pytest.raises(JsonValueError, match=f"at most {MAX_JSON_DEPTH} levels") as info:
        freeze_json({"x": [frozen]})  # a frozen part nested deeper is held to the limit too
    assert len(info.value.path) < 200  # the path of a depth error is abbreviated
    assert loads_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    with pytest.raises(JsonValueError, match="deeper than"):
        loads_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))


def test_a_session_refuses_to_append_data_deeper_than_the_limit() -> None:
    value: Any = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        value = {"k": value}
    session = new_session()
    with pytest.raises(InvalidEventError, match="nested"):
        session.append("todo/write", value)
    assert session.seq == 0


@pytest.mark.parametrize("depth", [300, 2_000, 100_000])
def test_too_deep_tool_arguments_are_a_tool_error_the_model_sees(depth: int) -> None:
    arguments = '{"path":' + "[" * depth + "]" * depth + "}"
    agent, _, session = make_agent(
        tool_call_response(tool_call("c1", "read", arguments)),
        text_response("done"),
        tools=[read],
    )
    asyncio.run(agent.run("hi"))  # no RecursionError
    (result,) = [e for e in session.events if e.type == "tool/result"]
    block = result.data["message"]["content"][0]
    assert block["isError"] is True
    assert "nest deeper than 256 levels" in block["content"][0]["text"]
    assert session.events[-1].type == "turn/end"


def test_tool_arguments_within_the_depth_limit_reach_the_tool() -> None:
    arguments = '{"path":' + "[" * 200 + "]" * 200 + "}"
    agent, _, session = make_agent(
        tool_call_response(tool_call("c1", "read", arguments)),
        text_response("done"),
        tools=[read],
    )
    asyncio.run(agent.run("hi"))
    (result,) = [e for e in session.events if e.type == "tool/result"]
    assert "contents of [[[" in result.data["message"]["content"][0]["content"][0]["text"]
