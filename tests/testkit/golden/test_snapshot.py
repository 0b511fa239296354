"""The golden renderings and their syrupy extensions (the scenario suite shows them at work)."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from syrupy.data import Snapshot, SnapshotCollection

from dsh_core import (
    Agent,
    AgentOptions,
    EpochHeader,
    Event,
    LlmCallConfig,
    Session,
    SessionInfo,
    TokenUsage,
    ToolOutput,
    ToolSchema,
    fork,
    freeze_json,
    plan_header_event,
    reconstruct_requests,
    tool,
)
from dsh_core.providers.deepseek import serialize_request
from dsh_core.scripted import (
    ScriptedProvider,
    error_response,
    max_tokens_response,
    text_response,
    tool_call,
    tool_call_response,
)
from dsh_testkit._errors import TestkitError
from dsh_testkit.golden import (
    SnapshotInputError,
    TranscriptExtension,
    WireRequestsExtension,
    render_transcript,
    render_wire_requests,
)
from dsh_testkit.golden._inputs import logs_of
from dsh_testkit.golden._text import _value_lines
from dsh_testkit.golden._transcript import TRANSCRIPT_FORMAT_VERSION
from dsh_testkit.golden._wire import WIRE_FORMAT_VERSION
from tests._support import REFERENCE_LOGS

# ---------------------------------------------------------------------------------------------
# Helpers: real loop runs (random ids and real times, as in production) and hand-built logs

READ = ToolSchema(
    name="read",
    description="Read a file.",
    parameters=freeze_json({"type": "object", "properties": {"path": {"type": "string"}}}),
)


def _read_tool(cwd: Path) -> Any:
    @tool(
        name="read", description="Read a file.", parameters=READ.parameters, concurrency_safe=True
    )
    async def read(args: dict[str, Any], ctx: Any) -> ToolOutput:
        return ToolOutput(
            content=f"contents of {args['path']}", meta={"at": f"{cwd}/{args['path']}"}
        )

    return read


async def run_agent(cwd: Path, *script: Any, prompts: Sequence[str] = ("go",)) -> Session:
    """One conversation with fresh random session and message ids, in working directory ``cwd``."""
    session_id = str(uuid.uuid4())
    session = Session.create(
        session_id, info=SessionInfo(id=session_id, created_at=0, cwd=str(cwd))
    )
    options = AgentOptions(provider="deepseek", model="deepseek-v4-flash", system="Be brief.")
    agent = Agent(session, ScriptedProvider(*script), options, tools=[_read_tool(cwd)])
    for prompt in prompts:
        await agent.run(prompt)
    return session


def tool_script() -> list[Any]:
    usage = TokenUsage(input_tokens=30, output_tokens=5, cache_read_tokens=64, reasoning_tokens=2)
    return [
        tool_call_response(tool_call("call_00_abcdefghij", "read", {"path": "a.txt"})),
        text_response("It says hi.", usage=usage),
    ]


class LogBuilder:
    """A hand-built log (no loop): for shapes the loop does not produce on demand."""

    def __init__(self, session_id: str = "s-1", cwd: str | None = None) -> None:
        self.session = Session.create(
            session_id, info=SessionInfo(id=session_id, created_at=0, cwd=cwd)
        )
        self.header: EpochHeader | None = None

    def add(self, kind: str, data: Any, **extra: Any) -> Event:
        return self.session.append(kind, data, **extra)

    def header_event(self, header: EpochHeader, *, first: bool = False) -> None:
        plan = plan_header_event(self.header, header, first_of_instance=first)
        if plan is not None:
            self.add(*plan)
        self.header = header

    def call(self, turn: int, step: int, text: str = "ok") -> None:
        for chunk in text_response(text).chunks:
            self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk.to_json()})


def header(**changes: Any) -> EpochHeader:
    base: dict[str, Any] = {
        "config": LlmCallConfig(provider="deepseek", model="deepseek-v4-flash"),
        "system": "line one\nline two\nline three",
        "tools": (READ,),
    }
    base.update(changes)
    return EpochHeader(**base)


# ---------------------------------------------------------------------------------------------
# The transcript


async def test_a_transcript_names_its_format_and_version(tmp_path: Path) -> None:
    text = render_transcript(await run_agent(tmp_path, text_response("hello")))
    first = text.split("\n", 1)[0]
    assert first == f"# dsh-testkit transcript · format {TRANSCRIPT_FORMAT_VERSION}"
    assert text.endswith("\n") and not text.endswith("\n\n")


async def test_runs_differing_in_ids_times_and_cwd_render_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "first-dir", tmp_path / "second" / "dir"
    one = await run_agent(a, *tool_script())
    two = await run_agent(b, *tool_script())
    assert one.id != two.id
    assert render_transcript(one, cwd=a) == render_transcript(two, cwd=b)
    assert render_wire_requests(one, cwd=a) == render_wire_requests(two, cwd=b)
    assert str(tmp_path) not in render_transcript(one, cwd=a)


async def test_a_tool_turn_renders_request_response_usage_and_results(tmp_path: Path) -> None:
    text = render_transcript(await run_agent(tmp_path, *tool_script()), cwd=tmp_path)
    expected = [
        "session {{session-1}}",
        "  cwd: {{cwd}}",
        "turn 1",
        "  user {{msg-1}}",
        '    text: "go"',
        "  step 1",
        "    header h1 · initial",
        '      config: {"provider":"deepseek","model":"deepseek-v4-flash"}',
        '      system: "Be brief."',
        "      tools (1): read",
        "        read",
        '          description: "Read a file."',
        '          parameters: {"type":"object","properties":{"path":{"type":"string"}}}',
        "    request 1 · h1 · tools: read",
        "      messages: 1 · 1 new",
        '      + [0] user {{msg-1}}: "go"',
        "    response · 7 chunks · finish tool-calls",
        "      usage: prompt 10 = miss 10 (no cache figures) · output 5",
        "    assistant {{msg-2}}",
        '      tool-call {{call-1}} read {"path":"a.txt"}',
        '    tool/call {{call-1}} read {"path":"a.txt"}',
        "    tool/result {{call-1}} · {{msg-3}}",
        '      text: "contents of a.txt"',
        '      meta: {"at":"{{cwd}}/a.txt"}',
        "  step 2",
        "    request 2 · h1 · tools: read",
        "      messages: 3 · 2 new",
        "      + [1] assistant {{msg-2}}: call {{call-1}} read",
        '      + [2] user {{msg-3}}: result {{call-1}} "contents of a.txt"',
        "    response · 7 chunks · finish stop",
        "      usage: prompt 94 = cache hit 64 + miss 30 · output 5 (reasoning 2)",
        "    assistant {{msg-4}}",
        '      text: "It says hi."',
        "  end · completed",
    ]
    lines = [line for line in text.split("\n")[2:] if line]
    assert lines == expected


async def test_a_retry_renders_the_failure_and_the_resend(tmp_path: Path) -> None:
    session = Session.create("s-retry")
    options = AgentOptions(
        provider="deepseek", model="deepseek-v4-flash", sleep=_no_sleep, random=lambda: 0.5
    )
    provider = ScriptedProvider(
        error_response("RATE_LIMITED", status=429, retry_after_ms=1500, message="slow down"),
        text_response("ok"),
    )
    await Agent(session, provider, options).run("hi")
    text = render_transcript(session)
    assert (
        "    response · 1 chunk · finish error · RATE_LIMITED · HTTP 429 · retryable · "
        "retry after 1500 ms\n"
        '      message: "slow down"\n'
        "    llm/retry 1 of 5 · wait 1500 ms · after RATE_LIMITED\n"
        "    request 1 · attempt 2 · resent as is\n"
        "    response · 5 chunks · finish stop\n"
    ) in text
    wire = json.loads(render_wire_requests(session))
    (entry,) = wire["requests"]
    assert entry["attempts"] == 2 and list(entry) == ["session", "turn", "step", "attempts", "body"]


async def _no_sleep(seconds: float) -> None:
    return None


async def test_dropped_tool_calls_and_an_empty_assistant_message_are_named(tmp_path: Path) -> None:
    partial = tool_call("call_9", "read", '{"path":')
    session = await run_agent(
        tmp_path,
        max_tokens_response(partial_call=partial),
        prompts=("go",),
    )
    text = render_transcript(session)
    assert "    response · 6 chunks · finish max-tokens\n" in text
    assert (
        "    assistant {{msg-2}}\n"
        "      (no content: the message only carries usage)\n"
        "      dropped tool-call {{call-1}} read (never executed)\n"
    ) in text
    assert "  end · max-tokens\n" in text


def test_header_timeline_first_in_full_then_diffs() -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.header_event(header(), first=True)
    log.header_event(
        header(
            config=LlmCallConfig(provider="deepseek", model="deepseek-v4-flash", temperature=0.5),
            system="line one\nline 2\nline three",
            tools=(
                ToolSchema(
                    name="grep", description="Search.", parameters=freeze_json({"type": "object"})
                ),
                ToolSchema(
                    name="read", description="Read a file, fast.", parameters=READ.parameters
                ),
            ),
        )
    )
    log.header_event(header(tools=(READ,), system=None))
    log.header_event(header(system=None), first=True)  # a resume: nothing changed
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    text = render_transcript(log.session)
    assert (
        "  header h2 · delta · against h1\n"
        "    config.temperature: absent → 0.5\n"
        "    system:\n"
        "      @@ -1,3 +1,3 @@\n"
        "       line one\n"
        "      -line two\n"
        "      +line 2\n"
        "       line three\n"
        "    tools: + grep at [0]\n"
        "      grep\n"
        '        description: "Search."\n'
        '        parameters: {"type":"object"}\n'
        "    tools: ~ read\n"
        '      description was: "Read a file."\n'
        '      description now: "Read a file, fast."\n'
        "  header h3 · delta · against h2\n"
        "    config.temperature: 0.5 → absent\n"
        "    system: removed\n"
        "    tools: - grep\n"
        "    tools: ~ read\n"
    ) in text
    assert "  header h4 · resume · against h3\n    unchanged\n" in text


def test_a_tool_reordering_and_an_added_system_prompt_are_diffed() -> None:
    grep = ToolSchema(
        name="grep", description="Search.", parameters=freeze_json({"type": "object"})
    )
    log = LogBuilder()
    log.header_event(header(system=None, tools=(READ, grep)), first=True)
    log.header_event(header(system="Now with a prompt.", tools=(grep, READ)))
    text = render_transcript(log.session)
    assert 'system (added): "Now with a prompt."\n' in text
    assert "tools: order read, grep → grep, read\n" in text
    assert "header h1 · initial\n" in text and "system: none\n" in text


def test_unknown_events_render_as_normalized_json(tmp_path: Path) -> None:
    log = LogBuilder(cwd=str(tmp_path))
    log.add("custom/thing", {"time": 123, "path": f"{tmp_path}/x", "id": str(uuid.uuid4())})
    log.add("custom/flag", [1, 2], ignorable=True)
    text = render_transcript(log.session, cwd=tmp_path)
    assert 'custom/thing {"time":0,"path":"{{cwd}}/x","id":"{{uuid-1}}"}\n' in text
    assert "custom/flag · ignorable [1,2]\n" in text


async def test_a_fork_child_renders_only_what_it_added(tmp_path: Path) -> None:
    parent = await run_agent(tmp_path, text_response("one"))
    child = fork(parent, parent.seq - 1, child_id=str(uuid.uuid4()))
    await Agent(
        child,
        ScriptedProvider(text_response("two")),
        AgentOptions(provider="deepseek", model="deepseek-v4-flash", system="Be brief."),
    ).run("again")
    text = render_transcript([parent, child])
    child_part = text.split("session {{session-2}}", 1)[1]
    assert child_part.startswith(
        "\n  cwd: {{cwd}}\n  forked from {{session-1}}: inherits its first "
        f"{child.info.seed_length} events (rendered with the parent)\n"
    )
    assert "turn 1" not in child_part and "turn 2" in child_part
    assert "header h2 · resume · against h1\n      tools: - read\n" in child_part
    assert "request 2 · h2 · tools: none\n      messages: 3 · 2 new\n" in child_part
    wire = json.loads(render_wire_requests([parent, child]))
    assert [(r["session"], r["turn"]) for r in wire["requests"]] == [
        ("{{session-1}}", 1),
        ("{{session-2}}", 2),
    ]


# ---------------------------------------------------------------------------------------------
# Text values: JSON strings or literal blocks, never trailing whitespace


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("short", ['key: "short"']),
        ("", ['key: ""']),
        ("a\nb", ["key: |-", "  a", "  b"]),
        ("a\n\nb\n", ["key: |", "  a", "", "  b"]),
        ("a\nb\n\n", ['key: "a\\nb\\n\\n"']),
        ("\n", ['key: "\\n"']),
        ("trailing \nspace", ['key: "trailing \\nspace"']),
        ("tab\there\nx", ['key: "tab\\there\\nx"']),
        ("sep\u2028x\ny", ['key: "sep\\u2028x\\ny"']),
        ("x" * 73, ["key: |-", "  " + "x" * 73]),
    ],
)
def test_text_is_quoted_or_a_literal_block(text: str, lines: list[str]) -> None:
    assert _value_lines("key", text) == lines


def _read_back(lines: list[str]) -> str:
    head, body = lines[0], lines[1:]
    marker = head.split(": ", 1)[1]
    if marker not in ("|", "|-"):
        return str(json.loads(marker))
    text = "\n".join(line[2:] if line else "" for line in body)
    return text + ("\n" if marker == "|" else "")


@given(st.text())
def test_property_every_text_value_reads_back_exactly(text: str) -> None:
    lines = _value_lines("key", text)
    assert _read_back(lines) == text
    assert all(line == line.rstrip() for line in lines)


@given(user=st.text(min_size=1), result=st.text())
def test_property_no_rendered_line_ends_in_whitespace(user: str, result: str) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add(
        "user/message",
        {
            "id": "u1",
            "role": "user",
            "content": [{"type": "text", "text": user}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )
    log.add("step/start", {"turn": 1, "step": 1})
    log.header_event(header(system=user), first=True)
    log.call(1, 1, text=result or "x")
    text = render_transcript(log.session)
    assert text.endswith("\n")
    assert all(line == line.rstrip() for line in text.split("\n"))


# ---------------------------------------------------------------------------------------------
# Wire requests


async def test_wire_requests_are_the_serialized_bodies_with_ids_normalized(tmp_path: Path) -> None:
    session = await run_agent(tmp_path, *tool_script())
    document = json.loads(render_wire_requests(session))
    assert (document["format"], document["version"]) == (
        "dsh-testkit wire requests",
        WIRE_FORMAT_VERSION,
    )
    bodies = [serialize_request(r.request) for r in reconstruct_requests(session.events)]
    bodies[1]["messages"][2]["tool_calls"][0]["id"] = "{{call-1}}"
    bodies[1]["messages"][3]["tool_call_id"] = "{{call-1}}"
    assert [r["body"] for r in document["requests"]] == bodies
    # key order is the wire's, not sorted
    assert list(document["requests"][0]["body"]) == list(bodies[0])


def test_a_request_the_wire_cannot_carry_is_named() -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.add(
        "request/header",
        {
            "header": {"config": {"provider": "x", "model": "m"}, "tools": "{{tools}}"},
            "reason": "initial",
        },
    )
    log.call(1, 1)
    with pytest.raises(SnapshotInputError, match=r"turn 1 step 1 .*placeholder") as caught:
        render_wire_requests(log.session)
    assert isinstance(caught.value, TestkitError) and caught.value.value_type == "request"


# ---------------------------------------------------------------------------------------------
# Inputs


@pytest.mark.parametrize("value", [42, [], "text", [Session.create("a"), 3], None])
def test_what_cannot_be_rendered_is_refused_with_what_to_pass(value: Any) -> None:
    with pytest.raises(SnapshotInputError, match="pass a Session, a loaded log") as caught:
        logs_of(value)
    assert caught.value.value_type == type(value).__name__


async def test_events_and_loaded_logs_are_accepted_too(tmp_path: Path) -> None:
    from dsh_core.persistence import load_session, write_session

    session = await run_agent(tmp_path, text_response("hi"))
    write_session(tmp_path / "s.jsonl", session).close()
    loaded = load_session(tmp_path / "s.jsonl")
    assert render_transcript(loaded) == render_transcript(session)
    from_events = render_transcript(list(session.events))
    assert "session (log 1)" in from_events and "turn 1" in from_events


# ---------------------------------------------------------------------------------------------
# The syrupy extensions


async def test_extensions_render_sessions_and_accept_their_own_renderings(tmp_path: Path) -> None:
    session = await run_agent(tmp_path, text_response("hi"))
    transcript, wire = TranscriptExtension(), WireRequestsExtension()
    assert transcript.serialize(session) == render_transcript(session)
    assert wire.serialize(session) == render_wire_requests(session)
    rendered = render_transcript(session, cwd="/elsewhere")
    assert transcript.serialize(rendered) == rendered
    with pytest.raises(SnapshotInputError, match="not a dsh-testkit transcript rendering"):
        transcript.serialize("hello")
    with pytest.raises(SnapshotInputError, match="not a dsh-testkit wire requests rendering"):
        wire.serialize(rendered)
    with pytest.raises(SnapshotInputError, match="exclude/include"):
        transcript.serialize(session, exclude=lambda **_: False)
    assert (transcript.file_extension, wire.file_extension) == ("transcript.txt", "requests.jsonc")


def test_goldens_are_written_and_read_byte_for_byte(tmp_path: Path) -> None:
    location = tmp_path / "test_x.transcript.txt"
    text = "# dsh-testkit transcript · format 1\nline\r\nnext ✓\n"
    collection = SnapshotCollection(location=str(location))
    collection.add(Snapshot(name="test_x", data=text))
    TranscriptExtension.write_snapshot_collection(snapshot_collection=collection)
    assert location.read_bytes() == text.encode("utf-8")
    read = TranscriptExtension().read_snapshot_data_from_location(
        snapshot_location=str(location), snapshot_name="test_x", session_id="s"
    )
    assert read == text
    missing = TranscriptExtension().read_snapshot_data_from_location(
        snapshot_location=str(tmp_path / "none.transcript.txt"), snapshot_name="x", session_id="s"
    )
    assert missing is None
    bad = SnapshotCollection(location=str(location))
    bad.add(Snapshot(name="test_x", data=b"bytes"))
    with pytest.raises(SnapshotInputError, match="writes text"):
        TranscriptExtension.write_snapshot_collection(snapshot_collection=bad)


def test_a_golden_of_another_format_version_says_so_in_the_diff() -> None:
    old = "# dsh-testkit transcript · format 0\nsession x\n"
    new = f"# dsh-testkit transcript · format {TRANSCRIPT_FORMAT_VERSION}\nsession x\n"
    lines = list(TranscriptExtension().diff_lines(new, old))
    assert lines[0].startswith("the golden was written by dsh-testkit transcript format 0;")
    assert "pytest --snapshot-update" in lines[0]
    same = list(TranscriptExtension().diff_lines(new + "more\n", new))
    assert not any("was written by" in line for line in same)
    wire_old = '{\n  "format": "dsh-testkit wire requests",\n  "version": 0,\n  "requests": []\n}\n'
    wire_lines = list(WireRequestsExtension().diff_lines(wire_old.replace("0,", "1,"), wire_old))
    assert wire_lines[0].startswith("the golden was written by dsh-testkit wire requests format 0")


# ---------------------------------------------------------------------------------------------
# The reference harness's real logs


REFERENCE = sorted(REFERENCE_LOGS.glob("*/session*.jsonl")) if REFERENCE_LOGS.is_dir() else []


@pytest.mark.skipif(
    not REFERENCE, reason=f"reference logs are absent (expected under {REFERENCE_LOGS})"
)
@pytest.mark.parametrize("path", REFERENCE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_logs_render_deterministically(path: Path) -> None:
    from dsh_core.persistence import load_session

    log = load_session(path, audit=True)
    text = render_transcript(log)
    assert text == render_transcript(load_session(path, audit=True))
    assert all(line == line.rstrip() for line in text.split("\n"))
    assert re.search(r"^    request \d+ · h\d+ · tools: ", text, re.MULTILINE)


def rare_log(cwd: Path) -> Session:
    """A log with the shapes the loop seldom writes (hand-built: independent of the loop)."""
    log = LogBuilder(cwd=str(cwd))
    log.add("turn/start", {"turn": 1})
    user = {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "image", "attachment": "sha256:abc"},
            {
                "type": "tool-result",
                "toolCallId": "call_x",
                "content": [{"type": "text", "text": "r"}],
                "isError": True,
            },
        ],
        "source": {"kind": "user"},
    }
    log.add("user/message", user, surface_op="append")
    log.add("step/start", {"turn": 1, "step": 1})
    log.header_event(header(system="keep\ntrailing  \nend"), first=True)
    message = {
        "id": "a1",
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "model", "provider": "deepseek", "model": "m"},
    }
    usage = {"inputTokens": 3, "outputTokens": 1, "cacheReadTokens": 0, "cacheWriteTokens": 7}
    log.add(
        "assistant/message",
        {"turn": 1, "step": 1, "message": message, "usage": usage},
        surface_op="append",
    )
    log.add(
        "tool/call", {"turn": 1, "step": 1, "callId": "call_y", "name": "read", "arguments": "{\n}"}
    )
    log.add("step/end", {"turn": 1, "step": 1})
    log.add(
        "turn/end",
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "error": {"message": "boom", "code": "SERVER", "requestId": "req-123456789"},
            },
        },
    )
    log.add("turn/start", {"turn": 2})
    log.add("step/start", {"turn": 2, "step": 1})
    changed = ToolSchema(
        name="read",
        description="Read a file.",
        parameters=freeze_json({"type": "object", "properties": {}}),
    )
    log.header_event(header(system="keep\nother\nend", tools=(changed,)))
    log.add("compact/start", {"turn": 2})
    log.add(
        "compact/summary",
        {
            "summary": {"odd": True},
            "model": "m",
            "maxTokens": 9,
            "shadowedSeqs": [1],
            "shadowedTokenCount": 4,
        },
    )
    log.add("compact/end", {"turn": 2, "error": "CompactionError: too long"})
    log.add("step/end", {"turn": 2, "step": 1})
    log.add("turn/end", {"turn": 2, "reason": "weird"})
    log.add("turn/start", {"turn": 3})
    log.add(
        "turn/end",
        {"turn": 3, "reason": {"kind": "aborted", "reason": {"kind": "user"}, "extra": 1}},
    )
    return log.session


def test_rare_shapes_render_too(tmp_path: Path) -> None:
    """Shapes the loop seldom writes: message-only responses, opaque blocks, failures with
    request ids, odd turn ends, failed compactions, diffs of placeholders and parameters."""
    session = rare_log(tmp_path)
    text = render_transcript(session, cwd=[tmp_path, "/alias"])
    assert "  user {{msg-1}}\n    image: " in text
    assert '    tool-result {{call-1}} · error\n      text: "r"\n' in text
    assert '      + [0] user {{msg-1}}: <image> · result {{call-1}} error "r"\n' in text
    assert "      usage: prompt 10 = cache hit 0 + miss 3 + cache write 7 · output 1\n" in text
    assert '    tool/call {{call-2}} read "{\\n}"\n' in text
    assert '  end · error · SERVER · request {{req-1}}\n    message: "boom"\n' in text
    assert '        -"trailing  "\n        +other\n' in text
    assert "      tools: ~ read\n        parameters were: " in text
    assert "    compact/summary · model m · maxTokens 9 · 1 messages shadowed · ≈4 tokens\n" in text
    assert '      summary: {"odd":true}\n' in text
    assert '    compact/end · failed\n      error: "CompactionError: too long"\n' in text
    assert '  end · "weird"\n' in text
    assert '  end · aborted {"reason":{"kind":"user"},"extra":1}\n' in text


def _user(id: str, text: str) -> dict[str, Any]:
    return {
        "id": id,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def _broken_prefix_log(*prompts: str, replacement: dict[str, Any]) -> Session:
    """Step 1 sees ``prompts``; then one replace swaps them all for ``replacement``; step 2."""
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    seqs = [
        log.add("user/message", _user(f"u{i}", text), surface_op="append").seq
        for i, text in enumerate(prompts, 1)
    ]
    for step in (1, 2):
        if step == 2:
            log.add(
                "user/message",
                replacement,
                surface_op={"op": "replace", "start": seqs[0], "end": seqs[-1]},
                source_event_seqs=seqs,
            )
        log.add("step/start", {"turn": 1, "step": step})
        if step == 1:
            log.header_event(header(), first=True)
        log.call(1, step)
        log.add("step/end", {"turn": 1, "step": step})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log.session


def test_a_broken_prefix_names_its_first_difference_in_the_shared_wording() -> None:
    line = ("Answer briefly and cite the file you read. " * 5)[:200]
    stamp = " 2026-12-02T17:00:01Z"
    text = render_transcript(_broken_prefix_log(line, replacement=_user("u1", line + stamp)))
    assert (
        "messages: 1 · the previous request's 1 are not a prefix; first difference: "
        "messages[0].content[0].text differs at line 1, column 201: "
        f"previous: …{line[-32:]!r} (the text ends here), this: …{line[-32:] + stamp!r}\n"
    ) in text
    # Only an id differs: named after what the model sees compared equal.
    text = render_transcript(_broken_prefix_log("a", replacement=_user("u9", "a")))
    assert "first difference: messages[0].id differs: previous: '{{msg-1}}', this: '{{msg-2}}'" in (
        text
    )
    # The new request is the old one cut short: the first missing message is named.
    text = render_transcript(_broken_prefix_log("a", "b", replacement=_user("u1", "a")))
    assert (
        "messages: 1 · the previous request's 2 are not a prefix; first difference: "
        "messages: previous has 2, this has 1 (first missing: messages[1] {"
    ) in text


def test_a_placeholder_tool_list_change_is_named() -> None:
    log = LogBuilder()
    log.header_event(header(tools="{{tools}}"), first=True)
    log.header_event(header(tools=(READ,)))
    assert 'tools: "{{tools}}" → read\n' in render_transcript(log.session)


def wire_log() -> Session:
    """Two hand-built model calls over a header with tools (for the wire rendering)."""
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    user = {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": "hi ✓"}],
        "source": {"kind": "user"},
    }
    log.add("user/message", user, surface_op="append")
    log.add("step/start", {"turn": 1, "step": 1})
    log.header_event(header(), first=True)
    log.call(1, 1, "first")
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    log.call(1, 2, "second")
    log.add("step/end", {"turn": 1, "step": 2})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log.session


FORMAT_FINGERPRINTS = {
    (1, 1): "95438955845d388623717d30eac6233eb86cc7555a1c0fb6f0b2e59e3dc367db",
    (2, 1): "5be3ea13ae0cb63d42cf763aae085e04e21363a19ac79fb4e1e89ef27250fbb8",
}
"""(transcript version, wire version) → sha256 of the renderings of two fixed hand-built logs."""


def test_a_rendering_change_bumps_the_format_version(tmp_path: Path) -> None:
    rendered = render_transcript(rare_log(tmp_path), cwd=tmp_path) + render_wire_requests(
        wire_log()
    )
    digest = hashlib.sha256(rendered.encode("utf-8")).hexdigest()
    versions = (TRANSCRIPT_FORMAT_VERSION, WIRE_FORMAT_VERSION)
    assert FORMAT_FINGERPRINTS.get(versions) == digest, (
        "the golden rendering changed: bump TRANSCRIPT_FORMAT_VERSION or WIRE_FORMAT_VERSION, "
        f"record {versions} → {digest!r} in FORMAT_FINGERPRINTS, and regenerate the goldens "
        "with pytest --snapshot-update"
    )


def test_the_module_exports_exactly_its_public_names() -> None:
    import inspect

    from dsh_testkit import golden as snapshot

    exported = snapshot.__all__
    assert len(exported) == len(set(exported))  # the order is checked by ruff (RUF022)
    assert all(hasattr(snapshot, name) for name in exported)
    ours = {
        name
        for name, value in vars(snapshot).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__.startswith("dsh_testkit")
    }
    assert ours <= set(exported), sorted(ours - set(exported))


async def test_the_cwd_in_model_visible_text_is_normalized_in_both_goldens(tmp_path: Any) -> None:
    """The working directory in the system prompt and in a tool result becomes {{cwd}}."""
    from dsh_core import Agent, AgentOptions, Session, tool
    from dsh_core.scripted import ScriptedProvider, text_response, tool_call, tool_call_response
    from dsh_testkit.golden import render_transcript, render_wire_requests

    where = str(tmp_path / "project")

    @tool(parameters={"type": "object", "properties": {}})
    async def pwd(args: Any, ctx: Any) -> str:
        """Print the working directory."""
        return f"{where}/src"

    session = Session.create("cwd-demo", clock=lambda: 0)
    provider = ScriptedProvider(
        tool_call_response(tool_call("c1", "pwd", {})), text_response(f"You are in {where}.")
    )
    options = AgentOptions(provider="deepseek", model="deepseek-chat", system=f"Work in {where}.")
    await Agent(session, provider, options, tools=[pwd]).run("Where am I?")
    for golden in (
        render_wire_requests(session, cwd=where),
        render_transcript(session, cwd=where),
    ):
        assert where not in golden
        assert "Work in {{cwd}}." in golden
        assert "{{cwd}}/src" in golden
