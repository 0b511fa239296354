"""Real logs of the reference TypeScript harness load, fold and re-encode.

Each check recounts what it can from the raw file with nothing but ``json``, so the loader is
compared against an independent reading, and a couple of figures are pinned by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsh_core import CorruptLogError, ToolsPlaceholder, fold_request_header
from dsh_core._events import CORE_EVENT_TYPES
from dsh_core.persistence import dumps_session, load_session, open_session
from tests._support import REFERENCE_LOGS

ROW_TYPES = {"text-chunks", "reasoning-chunks", "tool-call-chunks"}

LOGS = sorted(REFERENCE_LOGS.glob("*/*.jsonl")) if REFERENCE_LOGS.is_dir() else []

needs_logs = pytest.mark.skipif(
    not LOGS, reason=f"reference logs are absent (expected under {REFERENCE_LOGS})"
)


def records(path: Path) -> list[dict[str, Any]]:
    """The raw records after the header, read independently of the loader."""
    lines = [text for text in path.read_text(encoding="utf-8").split("\n") if text.strip()]
    return [json.loads(text) for text in lines[1:]]


def members(record: dict[str, Any]) -> int:
    if record["type"] in ROW_TYPES:
        data = record["data"]
        return len(data["texts"] if "texts" in data else data["args"])
    return 1


def last_seq(record: dict[str, Any]) -> int:
    if record["type"] in ROW_TYPES:
        return int(record["seq0"]) + members(record) - 1
    return int(record["seq"])


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@needs_logs
@pytest.mark.parametrize("path", LOGS, ids=_id)
def test_a_reference_log_loads_in_audit_mode_with_every_event(path: Path) -> None:
    raw = records(path)
    loaded = load_session(path, audit=True)
    expected = sum(members(r) for r in raw)
    assert len(loaded.events) == expected == max(last_seq(r) for r in raw) + 1
    assert [e.seq for e in loaded.events] == list(range(expected))
    assert loaded.dropped is None
    assert loaded.closers == ()  # every reference scenario ends between turns
    assert loaded.info.id == json.loads(path.read_text(encoding="utf-8").split("\n")[0])["id"]
    # Plugin-owned types are carried opaque, never dropped.
    plugin_types = {r["type"] for r in raw} - ROW_TYPES - CORE_EVENT_TYPES
    assert "session/title" in plugin_types or "command/run" in plugin_types
    assert loaded.opaque_types == plugin_types


@needs_logs
@pytest.mark.parametrize("path", LOGS, ids=_id)
def test_a_reference_log_header_folds(path: Path) -> None:
    loaded = load_session(path, audit=True)
    session = loaded.to_session()
    header = session.request_header()
    assert header is not None
    assert header == fold_request_header(loaded.events)
    # These logs hold full snapshots only: the fold is the last one, field for field, compared
    # with the raw JSON read independently of the loader.
    last = [r for r in records(path) if r["type"] == "request/header"][-1]["data"]["header"]
    assert header.config.to_json() == last["config"]
    assert header.config.model == last["config"]["model"]
    assert header.config.reasoning_effort == last["config"].get("reasoningEffort")
    assert header.system == last.get("system")
    raw_tools = last.get("tools")
    if isinstance(raw_tools, list):
        assert [t.to_json() for t in header.tool_list] == raw_tools  # names, order, schemas
    else:
        assert header.tools == ToolsPlaceholder.of(raw_tools)  # "{{tools}}", kept as is
    assert json.dumps(header.to_json()) == json.dumps(last)  # nothing else, key order too


@needs_logs
@pytest.mark.parametrize("path", LOGS, ids=_id)
def test_a_reference_log_is_refused_outside_audit_mode(path: Path) -> None:
    """They hold plugin types (session/title, agent/inbox/spliced, …) that are not ignorable."""
    with pytest.raises(CorruptLogError, match="is unknown to this build and not marked ignorable"):
        load_session(path)


@needs_logs
@pytest.mark.parametrize("path", LOGS, ids=_id)
def test_packing_a_reference_log_again_reproduces_its_records(path: Path) -> None:
    loaded = load_session(path, audit=True)
    again = dumps_session(loaded.info, loaded.events, pack_chunks=True).decode("utf-8")
    original = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
    written = [json.loads(t) for t in again.splitlines()]
    assert written[1:] == original[1:]
    # The header line gains the delegationDepth the reference reader requires (its own writer
    # adds it too: 0 when the session records none); nothing else changes.
    assert written[0] == {"delegationDepth": 0, **original[0]}


@needs_logs
def test_a_reference_log_re_encodes_byte_for_byte() -> None:
    path = REFERENCE_LOGS / "multi-turn" / "session.jsonl"
    loaded = load_session(path, audit=True)
    assert dumps_session(loaded.info, loaded.events, pack_chunks=True) == path.read_bytes()


@needs_logs
def test_known_figures_counted_by_hand() -> None:
    multi = load_session(REFERENCE_LOGS / "multi-turn" / "session.jsonl", audit=True)
    assert len(records(REFERENCE_LOGS / "multi-turn" / "session.jsonl")) == 37  # 2 packed rows
    assert len(multi.events) == 71
    header = multi.to_session().request_header()
    assert header is not None
    assert (header.system, header.tools) == ("{{system}}", ToolsPlaceholder(token="{{tools}}"))
    assert header.config.model == "deepseek-v4-flash"

    packed = load_session(REFERENCE_LOGS / "packed-chunks" / "session.jsonl", audit=True)
    assert len(packed.events) == 124  # 35 records, 4 of them rows
    assert sum(e.type == "assistant/chunk" for e in packed.events) > 35

    child = load_session(
        REFERENCE_LOGS / "subagent-fork-in-process" / "session.1.jsonl", audit=True
    )
    assert child.info.seed_length == 42
    assert child.info.parent_session is not None
    assert child.events[42].type == "session/end-seed"
    assert child.info.extra == {"origin": "subagent", "delegationDepth": 1}


@needs_logs
def test_a_reference_log_resumes_in_audit_mode(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    shutil.copyfile(REFERENCE_LOGS / "multi-turn" / "session.jsonl", path)
    before = path.read_bytes()
    with open_session(path, audit=True) as writer:
        events = writer.session.events
        assert events[-1].type == "session/end-seed" and events[-1].seq == 71
    assert path.read_bytes().startswith(before)
    assert len(load_session(path, audit=True).events) == 72
