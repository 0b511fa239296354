"""Interop both ways: our loop's message prefix, and a header line the reference reader accepts.

The header-line rules are the table in ``docs/reference-logs.md`` §1; :func:`reference_accepts`
implements that table, and a test keeps the table and the checker naming the same fields.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    AgentError,
    AgentOptions,
    EpochHeader,
    Session,
    SessionInfo,
    fold_request_header,
    reconstruct_requests,
    request_wire_body,
    user_message,
)
from dsh_core.persistence import JsonlWriter, dumps_session, header_line, load_session
from dsh_core.persistence._header_line import HEADER_LINE_FIELDS
from dsh_core.scripted import text_response

from ._loop_helpers import assert_reconstructs, make_agent

DOC = Path(__file__).parent.parent.parent / "docs" / "reference-logs.md"
SAFE = 2**53 - 1


def _safe_count(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and float(value).is_integer()
        and 0 <= value <= SAFE
        and not (value == 0 and math.copysign(1, value) < 0)
    )


RULES: dict[str, tuple[bool, Any]] = {
    # field: (required, check)
    "type": (True, lambda v: v == "session"),
    "version": (True, lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    "id": (True, lambda v: isinstance(v, str)),
    "createdAt": (True, _safe_count),
    "delegationDepth": (True, _safe_count),
    "origin": (False, lambda v: v == "subagent"),
    "agentPreset": (False, lambda v: isinstance(v, str)),
    "cwd": (False, lambda v: isinstance(v, str)),
    "parentSession": (False, lambda v: isinstance(v, str)),
    "seedLength": (False, _safe_count),
}


def reference_accepts(line: str) -> list[str]:
    """The documented rules the header ``line`` breaks (``[]``: the reference reader accepts it)."""
    value = json.loads(line)
    if not isinstance(value, dict):
        return ["not an object"]
    broken = []
    for field, (required, check) in RULES.items():
        if field not in value:
            if required:
                broken.append(f"{field} missing")
        elif not check(value[field]):
            broken.append(f"{field} = {value[field]!r}")
    return broken


def test_the_documented_table_and_the_checker_name_the_same_fields() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## 1. The header line", 1)[1].split("## 2.", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert sorted(documented) == sorted(RULES) == sorted(HEADER_LINE_FIELDS)
    required = {
        m for m in documented if re.search(rf"^\| `{m}` \| (exactly|required|a )", section, re.M)
    }
    assert required == {f for f, (needed, _) in RULES.items() if needed}


@pytest.mark.parametrize(
    "info",
    [
        SessionInfo(id="s1", created_at=0),
        SessionInfo(
            id="s2", created_at=1785000000000, cwd="/w", parent_session="s1", seed_length=4
        ),
        SessionInfo(
            id="s3",
            created_at=5,
            extra={"origin": "subagent", "delegationDepth": 2, "agentPreset": "reviewer"},  # type: ignore[arg-type]
        ),
    ],
)
def test_our_header_line_passes_the_reference_readers_rules(info: SessionInfo) -> None:
    line = dumps_session(info, []).decode("utf-8")
    assert reference_accepts(line) == []
    keys = list(json.loads(line))
    assert keys == [k for k in HEADER_LINE_FIELDS if k in keys]  # the reference's field order
    assert json.loads(line)["delegationDepth"] == dict(info.extra).get("delegationDepth", 0)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"delegationDepth": -1}, "delegationDepth must be a non-negative safe integer"),
        ({"origin": "parent"}, "origin must be 'subagent'"),
        ({"agentPreset": 3}, "agentPreset must be a string"),
    ],
)
def test_a_header_the_reference_would_refuse_is_not_written(
    extra: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(Exception, match=fragment):
        header_line(SessionInfo(id="s", created_at=0, extra=extra))  # type: ignore[arg-type]


def test_a_log_our_loop_writes_opens_with_the_reference_rules_and_reads_back_identically(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    session = Session.create("s-ref", clock=lambda: 7)
    with JsonlWriter.create(path, session.info) as writer:
        writer.attach(session)
        session.append("turn/start", {"turn": 1})
    raw = path.read_bytes()
    assert reference_accepts(raw.decode("utf-8").split("\n", 1)[0]) == []
    loaded = load_session(path)
    assert dumps_session(loaded.info, loaded.events) == raw


# --------------------------------------------------------------------------------------------
# Our loop's message prefix


PREFIX = (
    user_message(
        "<skills>read</skills>", id="prefix-1", source={"kind": "plugin", "plugin": "skills"}
    ),
)


async def test_the_loop_sends_and_logs_its_message_prefix(tmp_path: Path) -> None:
    agent, provider, session = make_agent(
        text_response("one"), text_response("two"), message_prefix=PREFIX, system="be brief"
    )
    await agent.run("first")
    await agent.run("second")
    sent = provider.loop_requests
    assert all(r.message_prefix == PREFIX for r in sent)
    assert [m.text for m in sent[1].messages] == ["first", "one", "second"]
    headers = [e for e in session.events if e.type.startswith("request/header")]
    assert len(headers) == 1  # unchanged prefix: no further header event
    assert headers[0].data["header"]["messagePrefix"] == [PREFIX[0].to_json()]
    folded = fold_request_header(session.events)
    assert isinstance(folded, EpochHeader) and folded.message_prefix == PREFIX
    assert all(m.id != "prefix-1" for m in session.derive_messages())  # never derived history
    assert_reconstructs(session.events, sent, session.id)  # invariants were on, too
    body = request_wire_body(next(reconstruct_requests(session.events, session_id=session.id)))
    assert [m["content"] for m in body["messages"][:3]] == [
        "be brief",
        "<skills>read</skills>",
        "first",
    ]


async def test_a_new_prefix_on_resume_is_logged_as_a_header_change() -> None:
    agent, _, session = make_agent(text_response("one"), message_prefix=PREFIX)
    await agent.run("first")
    later = (user_message("<skills>read, write</skills>", id="prefix-2"),)
    resumed, provider, _ = make_agent(text_response("two"), session=session, message_prefix=later)
    await resumed.run("second")
    assert provider.loop_requests[0].message_prefix == later
    snapshots = [e for e in session.events if e.type == "request/header"]
    assert [e.data["reason"] for e in snapshots] == ["initial", "resume"]
    assert snapshots[1].data["header"]["messagePrefix"] == [later[0].to_json()]


def test_a_placeholder_is_not_a_loop_prefix() -> None:
    with pytest.raises(AgentError, match=r"message_prefix\[0\] must be a Message, got str"):
        AgentOptions(provider="p", model="m", message_prefix=("{{messagePrefix}}",))  # type: ignore[arg-type]
