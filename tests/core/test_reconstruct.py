"""``reconstruct_requests`` over the reference harness's real logs (read, never copied).

One request per attempt, checked against an independent count of the logs' chunk structure;
messages checked against a fresh ``Session`` over the boundary prefix; and, for the pin
scenarios, the header's placeholders restored from the ``*.expected`` sidecars.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from dsh_core import (
    EpochHeader,
    Event,
    Session,
    ToolSchema,
    ToolsPlaceholder,
    fold_request_header,
    reconstruct_requests,
)
from dsh_core._json_text import dumps_canonical
from dsh_core.persistence import load_session
from tests._support import REFERENCE_LOGS

pytestmark = pytest.mark.skipif(
    not REFERENCE_LOGS.is_dir(), reason=f"reference logs not found at {REFERENCE_LOGS}"
)

LOGS = sorted(REFERENCE_LOGS.glob("*/*.jsonl")) if REFERENCE_LOGS.is_dir() else []

# Attempts per log, counted by hand from the files (see the folder README): retries and
# error finishes are attempts of their own; a cancelled stream without a finish is one attempt.
EXPECTED_ATTEMPTS = {
    "cancel/session.jsonl": 1,
    "code-mode-turn/session.jsonl": 2,
    "compaction-recovery/session.jsonl": 3,
    "empty-response-retry/session.jsonl": 2,
    "error-finish/session.jsonl": 1,
    "max-tokens-continue/session.jsonl": 2,
    "multi-turn/session.jsonl": 2,
    "packed-chunks/session.jsonl": 2,
    "parallel-tool-calls/session.jsonl": 2,
    "plan-review/session.jsonl": 2,
    "subagent-fork-in-process/session.1.jsonl": 2,
    "subagent-fork-in-process/session.jsonl": 3,
}


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _attempts_by_structure(events: Sequence[Event]) -> list[tuple[int, int]]:
    """(turn, step) of every attempt: each run of a step's chunks ended by a finish chunk (or by
    the step's message), plus each chunkless assistant message. Independent of the reconstructor."""
    out: list[tuple[int, int]] = []
    open_run = False
    for event in events:
        if event.type in ("step/start", "step/end"):
            open_run = False
        elif event.type == "assistant/chunk":
            if not open_run:
                out.append((event.data["turn"], event.data["step"]))
                open_run = True
            if event.data["chunk"]["type"] == "finish":
                open_run = False
        elif event.type == "assistant/message":
            if not open_run and not event.source_event_seqs:
                out.append((event.data["turn"], event.data["step"]))
            open_run = False
    return out


@pytest.mark.parametrize("path", LOGS, ids=_name)
def test_one_request_per_attempt(path: Path) -> None:
    loaded = load_session(path, audit=True)
    events = loaded.events
    rebuilt = list(reconstruct_requests(events, session_id=loaded.info.id))
    assert [(r.turn, r.step) for r in rebuilt] == _attempts_by_structure(events)
    assert len(rebuilt) == EXPECTED_ATTEMPTS[_name(path)]
    for r in rebuilt:
        assert r.request.session_id == loaded.info.id and r.request.purpose is None
        assert r.first_response_seq is not None and r.boundary_seq <= r.first_response_seq


@pytest.mark.parametrize("path", LOGS, ids=_name)
def test_requests_match_a_fresh_session_over_the_boundary_prefix(path: Path) -> None:
    loaded = load_session(path, audit=True)
    events = loaded.events
    for r in reconstruct_requests(events, session_id=loaded.info.id):
        prefix = events[: r.boundary_seq]
        fresh = Session.create("witness", prefix, check_shapes=False).derive_messages()
        assert [m.canonical_json() for m in r.request.messages] == [
            m.canonical_json() for m in fresh
        ]
        header = fold_request_header(events[: r.first_response_seq])
        assert header is not None
        assert r.request.config == header.config
        assert (r.request.system, r.request.tools) == (header.system, header.tools)


def test_the_known_shapes_of_some_logs() -> None:
    by_name = {_name(p): p for p in LOGS}
    retry = list(
        reconstruct_requests(
            load_session(by_name["empty-response-retry/session.jsonl"], audit=True).events
        )
    )
    assert [r.attempt for r in retry] == [0, 1]
    assert retry[0].request.canonical_json() == retry[1].request.canonical_json()
    compaction = list(
        reconstruct_requests(
            load_session(by_name["compaction-recovery/session.jsonl"], audit=True).events
        )
    )
    before, after = compaction[1].request, compaction[2].request
    assert before.canonical_json() != after.canonical_json()  # the replace reached the retry
    assert after.messages[0].source["kind"] == "plugin"


def _sidecar_prompts(folder: Path) -> list[str]:
    text = (folder / "system-prompt.expected.md").read_text(encoding="utf-8")
    parts = text.split("\n\n<!-- request/header change ")
    prompts = [parts[0]]
    for part in parts[1:]:
        _, _, body = part.partition(" -->\n\n")
        prompts.append(body)
    return [p.removesuffix("\n") for p in prompts]


PINS = [p for p in LOGS if (p.parent / "system-prompt.expected.md").exists()]


def _epoch(seq: int, changes: Sequence[Event]) -> int:
    """Which header of the log is in force at ``seq``: 0 for the initial one, k after the
    k-th ``change`` snapshot."""
    return sum(1 for e in changes if e.seq <= seq)


@pytest.mark.skipif(not PINS, reason="no pin scenario with sidecars in the reference logs")
@pytest.mark.parametrize("path", PINS, ids=_name)
def test_pin_headers_restore_to_the_sidecars(path: Path) -> None:
    """Per header of a pin log (the initial one and each ``change``), what the LOG says (the
    model, the tools called and dispatched) agrees with the sidecars' real prompt and schemas,
    and the header restored from the sidecars keeps their tool order."""
    folder = path.parent
    prompt_text = (folder / "system-prompt.expected.md").read_text(encoding="utf-8")
    prompts = _sidecar_prompts(folder)
    schema_text = (folder / "tool-schemas.expected.json").read_text(encoding="utf-8")
    schemas = json.loads(schema_text)
    # The sidecar formats of docs/design.md §T2: a newline-terminated prompt file, and
    # the schemas as 2-space pretty JSON with a trailing newline (so their order is as written).
    assert prompt_text.endswith("\n") and all(p.strip() for p in prompts)
    assert schema_text == json.dumps(schemas, indent=2, ensure_ascii=False) + "\n"
    assert set(schemas) == {"initial", "changes"}
    tool_lists = [schemas["initial"], *schemas["changes"]]
    loaded = load_session(path, audit=True)
    events = loaded.events
    headers = [e for e in events if e.type == "request/header"]
    changes = [e for e in headers if e.data["reason"] == "change"]
    assert [e.data["reason"] for e in headers[1:]] == ["change"] * len(changes)
    assert len(prompts) == len(tool_lists) == len(headers) == 1 + len(changes)
    assert all(e.data["header"].get("tools") == "{{tools}}" for e in headers)

    for k, snapshot in enumerate(headers):
        model = snapshot.data["header"]["config"]["model"]
        names = [t["name"] for t in tool_lists[k]]
        # The model the log used is the one the real prompt names.
        assert re.findall(r"powered by the (\S+) model", prompts[k]) == [model]
        in_epoch = [e for e in events if _epoch(e.seq, changes) == k]
        replies = [e for e in in_epoch if e.type == "assistant/message"]
        assert replies and {e.data["message"]["source"]["model"] for e in replies} == {model}
        # Every tool the model called directly is a header tool of that epoch ...
        called = [e.data["name"] for e in in_epoch if e.type == "tool/call"]
        called += [
            b["name"]
            for e in replies
            for b in e.data["message"]["content"]
            if b["type"] == "tool-call"
        ]
        assert called and set(called) <= set(names), (called, names)
        # ... and every tool a program reached from inside is declared in the prompt, not a
        # header tool (code mode: the header carries run_code only).
        dispatched = {e.data["name"] for e in in_epoch if e.type == "tool/code-dispatch"}
        for name in dispatched:
            assert re.search(rf'\n  "?{re.escape(name)}"?: {{', prompts[k]), name
            assert name not in names

    for r in reconstruct_requests(events, session_id=loaded.info.id):
        assert r.request.system == "{{system}}"
        assert r.request.tools == ToolsPlaceholder(token="{{tools}}")
        assert r.header_seq is not None
        k = _epoch(r.header_seq, changes)
        assert r.request.model == headers[k].data["header"]["config"]["model"]
        real = EpochHeader(
            config=r.request.config,
            system=prompts[k],
            tools=tuple(ToolSchema.from_json(t) for t in tool_lists[k]),
        )
        assert [t.name for t in real.tool_list] == [t["name"] for t in tool_lists[k]]
        body = json.loads(dumps_canonical(real.to_json()))
        assert body["tools"] == tool_lists[k]  # the schemas round-trip unchanged, in order
        assert body["system"] == prompts[k] != "{{system}}"
