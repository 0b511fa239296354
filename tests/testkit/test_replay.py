"""ReplayProvider: script derivation, per-session binding, loud failures, strict request checks."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentOptions,
    BlockEnd,
    BlockStart,
    CancelToken,
    Compactor,
    Finish,
    GenerateOptions,
    Provider,
    Session,
    SessionInfo,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolsPlaceholder,
    UsageChunk,
    reconstruct_requests,
    tool,
    user_message,
)
from dsh_core.persistence import load_session
from dsh_core.scripted import ScriptedProvider, text_response, tool_call, tool_call_response
from dsh_testkit._errors import TestkitError
from dsh_testkit.replay import (
    ReplayExhausted,
    ReplayMismatch,
    ReplayNotConsumed,
    ReplayProvider,
    ReplayScriptError,
    UnrecordedSession,
)
from dsh_testkit.replay._provider import derive_replay_script
from tests._support import REFERENCE_LOGS


def ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"id-{next(counter)}"


@tool(
    name="read",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
async def read_tool(args: Any, ctx: Any) -> str:
    return f"contents of {args['path']}"


def options(system: str = "You are terse.\nBe kind.", **changes: Any) -> AgentOptions:
    return AgentOptions(
        provider="deepseek", model="deepseek-v4-flash", system=system, id_factory=ids(), **changes
    )


async def record_session(session_id: str = "s-1", **agent_changes: Any) -> Session:
    """A log our loop writes: a tool call, its result, an answer; then a second turn."""
    session = Session.create(session_id, clock=lambda: 0)
    provider = ScriptedProvider(
        tool_call_response(tool_call("call_1", "read", {"path": "a.txt"})),
        text_response("The file says hello."),
        text_response("Bye."),
    )
    agent = Agent(session, provider, options(**agent_changes), tools=[read_tool])
    await agent.run("What is in a.txt?")
    await agent.run("Thanks!")
    return session


async def collect(stream: Any) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def reference(name: str, file: str = "session.jsonl") -> Path:
    path = REFERENCE_LOGS / name / file
    if not path.is_file():
        pytest.skip(f"reference logs not available at {REFERENCE_LOGS}")
    return path


# ------------------------------------------------------------------------------- our loop's logs


async def test_replaying_a_loop_log_reproduces_the_conversation() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded)
    assert isinstance(replay, Provider)
    session = Session.create("s-2", clock=lambda: 0)
    agent = Agent(session, replay, options(), tools=[read_tool])
    first = await agent.run("What is in a.txt?")
    second = await agent.run("Thanks!")
    assert (first.text, second.text) == ("The file says hello.", "Bye.")
    replay.assert_consumed()
    assert len(replay.requests) == 3
    # the replayed log derives the same conversation as the recorded one
    assert [m.canonical_json() for m in session.derive_messages()] == [
        m.canonical_json() for m in recorded.derive_messages()
    ]


async def test_strict_mode_catches_a_changed_system_prompt() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded)
    agent = Agent(
        Session.create("s-2", clock=lambda: 0),
        replay,
        options(system="You are terse.\nBe rude."),
        tools=[read_tool],
    )
    with pytest.raises(ReplayMismatch) as caught:
        await agent.run("What is in a.txt?")
    error = caught.value
    assert error.index == 0
    assert error.diff == ("system line 2 differs: recorded: 'Be kind.', live: 'Be rude.'",)
    assert (
        isinstance(error.expected, GenerateOptions)
        and error.actual.system == "You are terse.\nBe rude."
    )
    text = str(error)
    assert "strict replay: the live request for session 's-1' model call #1 differs" in text
    assert "(turn 1, step 1, attempt 0, first chunk at seq" in text
    assert text.endswith("\n  system line 2 differs: recorded: 'Be kind.', live: 'Be rude.'")


async def test_strict_mode_catches_a_changed_message_and_config() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded)
    agent = Agent(
        Session.create("s-2", clock=lambda: 0), replay, options(temperature=0.5), tools=[read_tool]
    )
    with pytest.raises(ReplayMismatch) as caught:
        await agent.run("What is in b.txt?")
    assert caught.value.diff[0] == "config.temperature: only in live (0.5)"
    assert caught.value.diff[1].startswith("messages[0].content[0].text differs")


async def test_strict_mode_catches_a_changed_tool_set_in_a_later_call() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded)

    @tool(name="grep")
    async def grep(args: Any, ctx: Any) -> str:
        return ""

    agent = Agent(Session.create("s-2", clock=lambda: 0), replay, options(), tools=[read_tool])
    await agent.run("What is in a.txt?")
    agent.register_tool(grep)
    with pytest.raises(ReplayMismatch) as caught:
        await agent.run("Thanks!")
    assert caught.value.index == 2
    assert caught.value.diff == ("tool 'grep' only in live",)


async def test_lenient_mode_serves_whatever_is_asked() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded, strict=False)
    agent = Agent(
        Session.create("s-2", clock=lambda: 0), replay, options(system="other"), tools=[read_tool]
    )
    assert (await agent.run("anything")).text == "The file says hello."


# ------------------------------------------------------------------------------- hand-built logs


def chunk(session: Session, turn: int, step: int, data: dict[str, Any]) -> None:
    session.append("assistant/chunk", {"turn": turn, "step": step, "chunk": data})


def text_call(
    session: Session, turn: int, step: int, text: str, finish: str | None = "stop"
) -> None:
    chunk(session, turn, step, {"type": "block-start", "index": 0, "blockType": "text"})
    chunk(session, turn, step, {"type": "text-delta", "index": 0, "text": text})
    if finish == "error":
        chunk(
            session,
            turn,
            step,
            {
                "type": "finish",
                "reason": {
                    "kind": "error",
                    "failure": {"message": "empty", "code": "EMPTY_RESPONSE"},
                },
            },
        )
    elif finish is not None:
        chunk(session, turn, step, {"type": "finish", "reason": {"kind": finish}})


def header(session: Session) -> None:
    session.append(
        "request/header",
        {
            "header": {"config": {"provider": "deepseek", "model": "m"}, "system": "sys"},
            "reason": "initial",
        },
    )


def hand_built(
    *, compaction: dict[str, Any] | None = None, retry: bool = True, session_id: str = "hand"
) -> Session:
    session = Session.create(session_id, clock=lambda: 0)
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("hi", id="u1").to_json(), surface_op="append")
    session.append("step/start", {"turn": 1, "step": 1})
    header(session)
    if retry:
        text_call(session, 1, 1, "", finish="error")  # an empty response, retried in the same step
        session.append("llm/retry", {"turn": 1, "step": 1, "attempt": 1})
    text_call(session, 1, 1, "hello")
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    if compaction is not None:
        session.append(compaction.pop("type"), compaction)
    session.append("turn/start", {"turn": 2})
    session.append("user/message", user_message("again", id="u2").to_json(), surface_op="append")
    session.append("step/start", {"turn": 2, "step": 1})
    text_call(session, 2, 1, "bye")
    session.append("step/end", {"turn": 2, "step": 1})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    return session


def test_derivation_splits_retries_at_each_finish_and_keeps_error_finishes() -> None:
    script = derive_replay_script(hand_built().events)
    assert [(e.turn, e.step, e.kind) for e in script] == [
        (1, 1, "conversation"),
        (1, 1, "conversation"),
        (2, 1, "conversation"),
    ]
    first = script[0].chunks[-1]
    assert isinstance(first, Finish) and first.reason.kind == "error"
    assert isinstance(script[1].chunks[1], TextDelta) and script[1].chunks[1].text == "hello"
    assert derive_replay_script(()) == ()


def test_derivation_synthesizes_compaction_summary_calls() -> None:
    ours = {
        "type": "compact/summary",
        "summary": [{"type": "text", "text": "S"}],
        "model": "m",
        "turn": 2,
    }
    script = derive_replay_script(hand_built(compaction=ours).events)
    assert [e.kind for e in script] == [
        "conversation",
        "conversation",
        "compaction",
        "conversation",
    ]
    summary = script[2].chunks
    assert [type(c) for c in summary] == [BlockStart, BlockEnd, Finish]
    assert isinstance(summary[1], BlockEnd) and summary[1].block == TextBlock(text="S")
    assert script[2].turn == 2

    theirs = {
        "type": "compaction/summary",
        "llmStreamCall": True,
        "rawOutput": [{"type": "text", "text": "R"}],
        "usage": {"inputTokens": 3, "outputTokens": 1},
    }
    script = derive_replay_script(hand_built(compaction=theirs).events)
    assert [type(c) for c in script[2].chunks] == [BlockStart, BlockEnd, UsageChunk, Finish]


def test_our_compaction_summary_with_usage_replays_the_usage_chunk() -> None:
    usage = TokenUsage(input_tokens=20, output_tokens=5, cache_read_tokens=640)
    ours = {
        "type": "compact/summary",
        "summary": [{"type": "text", "text": "S"}],
        "model": "m",
        "usage": usage.to_json(),
    }
    summary = derive_replay_script(hand_built(compaction=ours).events)[2].chunks
    assert [type(c) for c in summary] == [BlockStart, BlockEnd, UsageChunk, Finish]
    assert isinstance(summary[2], UsageChunk) and summary[2].usage == usage


async def record_compacted(session_id: str) -> Session:
    """Two turns, then a third that compacts first; the summary call reports its usage."""
    session = Session.create(session_id, clock=lambda: 0)
    provider = ScriptedProvider(
        text_response("A" * 400, usage=(900, 100)),
        text_response("B" * 400, usage=(1000, 100)),
        text_response(
            "short summary",
            usage=TokenUsage(input_tokens=64, output_tokens=4, cache_read_tokens=1024),
        ),
        text_response("third answer", usage=(300, 3)),
    )
    agent = compacting_agent(session, provider)
    for prompt in ("first " + "x" * 400, "second " + "y" * 400, "third"):
        await agent.run(prompt)
    return session


def compacting_agent(session: Session, provider: Provider) -> Agent:
    agent = Agent(session, provider, options())
    agent.add_pre_step(Compactor(threshold_tokens=1000, keep_last=2))
    return agent


async def test_a_replayed_compaction_reproduces_the_summary_usage() -> None:
    recorded = await record_compacted("rec")
    (logged,) = [e for e in recorded.events if e.type == "compact/summary"]
    assert logged.data["usage"] == {"inputTokens": 64, "outputTokens": 4, "cacheReadTokens": 1024}
    replay = ReplayProvider(recorded)
    session = Session.create("live", clock=lambda: 0)
    agent = compacting_agent(session, replay)
    for prompt in ("first " + "x" * 400, "second " + "y" * 400, "third"):
        await agent.run(prompt)
    replay.assert_consumed()
    assert [r.purpose for r in replay.requests] == [None, None, "compaction", None]
    (replayed,) = [e for e in session.events if e.type == "compact/summary"]
    assert replayed.data == logged.data
    assert [(e.type, e.data) for e in session.events] == [(e.type, e.data) for e in recorded.events]


@pytest.mark.parametrize(
    "summary",
    [
        {
            "type": "compaction/summary",
            "rawOutput": [{"type": "text", "text": "R"}],
        },  # template summarizer
        {"type": "compact/summary", "summary": [], "llmStreamCall": False},
    ],
)
def test_a_summary_made_without_the_model_is_no_call(summary: dict[str, Any]) -> None:
    assert len(derive_replay_script(hand_built(compaction=summary).events)) == 3


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        (
            {"type": "compaction/summary", "llmStreamCall": True},
            "is marked llmStreamCall but has no rawOutput",
        ),
        ({"type": "compact/summary", "model": "m"}, "has no summary blocks to replay"),
        ({"type": "compact/summary", "summary": [{"type": "text"}]}, "cannot be replayed"),
        (
            {
                "type": "compact/summary",
                "summary": [{"type": "text", "text": "S"}],
                "usage": {"inputTokens": -1, "outputTokens": 1},
            },
            "cannot be replayed: usage.inputTokens must be a non-negative integer",
        ),
    ],
)
def test_an_unreplayable_summary_fails_naming_its_seq(
    summary: dict[str, Any], message: str
) -> None:
    events = hand_built(compaction=summary).events
    with pytest.raises(ReplayScriptError, match=message) as caught:
        derive_replay_script(events)
    assert caught.value.seq == next(e.seq for e in events if e.type.endswith("summary"))


def test_a_call_without_finish_fails_naming_turn_and_step() -> None:
    session = Session.create("x", clock=lambda: 0)
    text_call(session, 1, 1, "cut", finish=None)
    text_call(session, 1, 2, "next")
    with pytest.raises(ReplayScriptError) as caught:
        derive_replay_script(session.events)
    error = caught.value
    assert (error.turn, error.step, error.seq) == (1, 1, 0)
    assert "model call 1/1 (first chunk at seq 0) ended without a finish chunk" in str(error)
    assert "replay.override.json" in str(error)


def test_a_call_unfinished_at_the_end_of_the_log_fails_too() -> None:
    session = Session.create("x", clock=lambda: 0)
    text_call(session, 3, 2, "cut", finish=None)
    with pytest.raises(ReplayScriptError, match="model call 3/2"):
        derive_replay_script(session.events)


def test_a_malformed_chunk_fails_naming_its_seq() -> None:
    session = Session.create("x", clock=lambda: 0)
    chunk(session, 1, 1, {"type": "mystery"})
    with pytest.raises(
        ReplayScriptError, match="assistant/chunk at seq 0 is not a valid chunk"
    ) as caught:
        derive_replay_script(session.events)
    assert caught.value.seq == 0


async def test_replay_serves_retries_positionally_and_checks_each_attempt() -> None:
    log = hand_built()
    replay = ReplayProvider(log)
    requests = [r.request for r in reconstruct_requests(log.events)]
    served = [await collect(replay.stream(replace(r, session_id="live"))) for r in requests]
    assert [c[-1].reason.kind for c in served] == ["error", "stop", "stop"]  # type: ignore[union-attr]
    replay.assert_consumed()


async def test_strict_mode_checks_the_purpose_of_compaction_calls() -> None:
    log = hand_built(
        compaction={"type": "compact/summary", "summary": [{"type": "text", "text": "S"}]}
    )
    replay = ReplayProvider(log)
    requests = [r.request for r in reconstruct_requests(log.events)]
    for request in requests[:2]:
        await collect(replay.stream(request))
    with pytest.raises(ReplayMismatch) as caught:
        await collect(
            replay.stream(requests[2])
        )  # a conversation call where a summary was recorded
    assert caught.value.diff == (
        "purpose: the log recorded a compaction summary, the request has purpose=None",
    )
    assert caught.value.index == 2 and caught.value.expected is None

    replay = ReplayProvider(log)
    summary_request = replace(requests[0], purpose="compaction")
    with pytest.raises(
        ReplayMismatch,
        match="the log recorded a conversation call, the request has purpose='compaction'",
    ):
        await collect(replay.stream(summary_request))

    replay = ReplayProvider(log)
    for request in requests[:2]:
        await collect(replay.stream(request))
    chunks = await collect(replay.stream(summary_request))
    assert isinstance(chunks[1], BlockEnd)


# ------------------------------------------------------------------------------- binding and failures


async def test_exhaustion_fails_on_first_pull_naming_the_session_and_counts() -> None:
    log = hand_built(retry=False)
    replay = ReplayProvider(log, strict=False)
    request = GenerateOptions(provider="p", model="m", messages=(), session_id="live")
    await collect(replay.stream(request))
    await collect(replay.stream(request))
    stream = replay.stream(request)  # the cursor moves now; the error comes on the first pull
    with pytest.raises(ReplayExhausted) as caught:
        await collect(stream)
    error = caught.value
    assert (error.session_id, error.index, error.recorded) == ("live", 2, 2)
    assert (
        "session 'live' (recorded as 'hand') requested model call #3, but its log recorded only 2"
        in str(error)
    )


async def test_an_unrecorded_session_fails() -> None:
    replay = ReplayProvider(hand_built(retry=False), strict=False)
    await collect(
        replay.stream(GenerateOptions(provider="p", model="m", messages=(), session_id="a"))
    )
    with pytest.raises(UnrecordedSession) as caught:
        await collect(
            replay.stream(GenerateOptions(provider="p", model="m", messages=(), session_id="b"))
        )
    assert caught.value.session_id == "b"
    assert "unrecorded session 'b'" in str(caught.value) and "'hand' ← 'a'" in str(caught.value)


async def test_requests_without_a_session_id_share_one_anonymous_session() -> None:
    replay = ReplayProvider(hand_built(retry=False), strict=False)
    anonymous = GenerateOptions(provider="p", model="m", messages=())
    await collect(replay.stream(anonymous))
    await collect(replay.stream(anonymous))
    replay.assert_consumed()
    with pytest.raises(ReplayExhausted, match="session <no sessionId>"):
        await collect(replay.stream(anonymous))


async def test_assert_consumed_reports_underrun_and_unused_sessions() -> None:
    child = hand_built(retry=False, session_id="child")
    replay = ReplayProvider(hand_built(), child, strict=False)
    await collect(
        replay.stream(GenerateOptions(provider="p", model="m", messages=(), session_id="a"))
    )
    with pytest.raises(ReplayNotConsumed) as caught:
        replay.assert_consumed()
    error = caught.value
    assert error.remaining == {"hand": 2, "child": 2}
    assert str(error) == (
        "replay fixture not fully consumed: the code drove fewer model calls than were "
        "recorded:\n"
        "  recorded session 'hand' served 1 of 3 call(s)\n"
        "  recorded session 'child' was never used (2 call(s))"
    )


def test_recordings_sharing_a_session_id_are_reported_apart() -> None:
    replay = ReplayProvider(hand_built(retry=False), hand_built(retry=False), strict=False)
    with pytest.raises(ReplayNotConsumed) as caught:
        replay.assert_consumed()
    assert caught.value.remaining == {"hand[0]": 2, "hand[1]": 2}


async def test_children_bind_after_the_primary_ordered_by_creation() -> None:
    def single(session_id: str, created_at: int, text: str) -> Session:
        info = SessionInfo(id=session_id, created_at=created_at)
        session = Session(info, clock=lambda: 0)
        text_call(session, 1, 1, text)
        return session

    primary = single("main", 5, "main")
    late, early = single("late", 20, "late"), single("early", 10, "early")
    replay = ReplayProvider(primary, late, early, strict=False)
    assert [r.session_id for r in replay.recordings] == ["main", "early", "late"]
    served = []
    for key in ("p", "c1", "c2"):
        chunks = await collect(
            replay.stream(GenerateOptions(provider="p", model="m", messages=(), session_id=key))
        )
        served.append(chunks[1].text)  # type: ignore[union-attr]
    assert served == ["main", "early", "late"]


async def test_a_fork_child_never_replays_its_inherited_prefix() -> None:
    parent = hand_built(retry=False)
    child = parent.fork(parent.seq - 1, child_id="child")
    text_call(child, 3, 1, "child answer")
    replay = ReplayProvider(parent, child, strict=False)
    assert len(replay.recordings[1].script) == 1
    await collect(
        replay.stream(GenerateOptions(provider="p", model="m", messages=(), session_id="parent"))
    )
    chunks = await collect(
        replay.stream(GenerateOptions(provider="p", model="m", messages=(), session_id="kid"))
    )
    assert chunks[1].text == "child answer"  # type: ignore[union-attr]


async def test_a_cancelled_request_finishes_aborted() -> None:
    replay = ReplayProvider(hand_built(retry=False), strict=False)
    token = CancelToken()
    token.cancel("user")
    chunks = await collect(
        replay.stream(GenerateOptions(provider="p", model="m", messages=(), cancel=token))
    )
    assert len(chunks) == 1 and isinstance(chunks[0], Finish)
    assert chunks[0].reason.kind == "aborted" and chunks[0].reason.failure is not None
    assert chunks[0].reason.failure.message == "request cancelled (user)"


def test_logs_come_as_sessions_event_sequences_or_paths(tmp_path: Path) -> None:
    from dsh_core.persistence import write_session

    session = hand_built()
    path = tmp_path / "session.jsonl"
    write_session(path, session).close()
    by_path = ReplayProvider(str(path))
    by_events = ReplayProvider(tuple(session.events))
    assert len(by_path.recordings[0].script) == len(by_events.recordings[0].script) == 3
    assert by_events.recordings[0].session_id == "log-0"
    with pytest.raises(TypeError, match="a replay log must be a Session"):
        ReplayProvider(42)


def test_replay_errors_belong_to_the_testkit_tree() -> None:
    for error in (ReplayMismatch, ReplayExhausted, ReplayNotConsumed, UnrecordedSession):
        assert issubclass(error, TestkitError) and issubclass(error, AssertionError)
    assert issubclass(ReplayScriptError, TestkitError) and issubclass(ReplayScriptError, ValueError)


# ------------------------------------------------------------------------------- reference logs


REPLAYABLE = [
    "code-mode-turn",
    "compaction-recovery",
    "empty-response-retry",
    "error-finish",
    "max-tokens-continue",
    "multi-turn",
    "packed-chunks",
    "parallel-tool-calls",
    "plan-review",
]


def live_requests(path: Path) -> list[GenerateOptions]:
    """What a faithful agent would send: the reconstructed requests, with real system and tools."""
    log = load_session(path, audit=True)
    out = []
    for rebuilt in reconstruct_requests(log.events):
        request = rebuilt.request
        system = "The real system prompt." if request.system == "{{system}}" else request.system
        tools = () if request.tools == ToolsPlaceholder(token="{{tools}}") else request.tools
        out.append(replace(request, session_id="live", system=system, tools=tools))
    return out


@pytest.mark.parametrize("name", REPLAYABLE)
async def test_reference_logs_replay_in_strict_mode_with_placeholders_opaque(name: str) -> None:
    path = reference(name)
    replay = ReplayProvider(path)
    requests = iter(live_requests(path))
    for entry in replay.recordings[0].script:
        request = (
            GenerateOptions(
                provider="p", model="m", messages=(), session_id="live", purpose="compaction"
            )
            if entry.kind == "compaction"
            else next(requests)
        )
        chunks = await collect(replay.stream(request))
        assert chunks == list(entry.chunks)
        assert isinstance(chunks[-1], Finish)
    replay.assert_consumed()


async def test_reference_log_strict_mode_catches_a_changed_message() -> None:
    path = reference("multi-turn")
    replay = ReplayProvider(path)
    first, second = live_requests(path)
    await collect(replay.stream(first))
    messages = list(second.messages)
    messages[0] = user_message("a different first prompt", id=messages[0].id)
    with pytest.raises(ReplayMismatch) as caught:
        await collect(replay.stream(replace(second, messages=tuple(messages))))
    assert caught.value.index == 1
    assert caught.value.diff[0].startswith("messages[0].content[0].text differs: recorded:")


async def test_reference_log_strict_mode_compares_a_real_header() -> None:
    path = reference("code-mode-turn")  # a pin: its header holds the real system prompt
    log = load_session(path, audit=True)
    rebuilt = next(iter(reconstruct_requests(log.events))).request
    replay = ReplayProvider(path)
    changed = replace(rebuilt, session_id="live", model="deepseek-v4-pro")
    with pytest.raises(
        ReplayMismatch,
        match=r"config.model differs: recorded: 'deepseek-v4-flash', live: 'deepseek-v4-pro'",
    ):
        await collect(replay.stream(changed))


async def test_reference_fork_child_log_binds_as_the_second_session() -> None:
    primary = reference("subagent-fork-in-process")
    child = reference("subagent-fork-in-process", "session.1.jsonl")
    replay = ReplayProvider(primary, child)  # strict
    child_script = replay.recordings[1].script
    assert replay.recordings[1].seed_length == 42  # the inherited prefix is not replayed
    assert len(child_script) == 1 and child_script[0].first_seq >= 42
    for request in live_requests(primary):
        await collect(replay.stream(request))
    child_request = live_requests(child)[-1]  # the child's own call, after its seed
    chunks = await collect(replay.stream(replace(child_request, session_id="child")))
    assert chunks == list(child_script[0].chunks)
    replay.assert_consumed()


def test_reference_cancel_log_needs_its_override_sidecar() -> None:
    with pytest.raises(ReplayScriptError, match=r"model call 1/1 .* ended without a finish chunk"):
        ReplayProvider(reference("cancel"))


async def test_strict_mode_names_tools_present_on_one_side_only() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded)
    agent = Agent(Session.create("s-2", clock=lambda: 0), replay, options(), tools=[])
    with pytest.raises(ReplayMismatch) as caught:
        await agent.run("What is in a.txt?")
    assert caught.value.diff == ("tool 'read' only in recorded",)

    replay = ReplayProvider(hand_built(retry=False))
    request = next(iter(reconstruct_requests(replay.recordings[0].events))).request
    with_tools = replace(request, tools=(read_tool.schema,), temperature=0.1)
    with pytest.raises(ReplayMismatch) as caught:
        await collect(replay.stream(with_tools))
    assert caught.value.diff == (
        "config.temperature: only in live (0.1)",
        "tool 'read' only in live",
    )


async def test_strict_mode_ignores_message_ids_which_never_reach_the_wire() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded)
    fresh_ids = (f"another-id-{n}" for n in itertools.count())
    agent = Agent(
        Session.create("s-2", clock=lambda: 0),
        replay,
        replace(options(), id_factory=lambda: next(fresh_ids)),
        tools=[read_tool],
    )
    assert (await agent.run("What is in a.txt?")).text == "The file says hello."
    assert (await agent.run("Thanks!")).text == "Bye."
    replay.assert_consumed()


async def test_strict_mode_still_catches_changed_content_with_other_ids() -> None:
    recorded = await record_session()
    replay = ReplayProvider(recorded)
    fresh_ids = (f"another-id-{n}" for n in itertools.count())
    agent = Agent(
        Session.create("s-2", clock=lambda: 0),
        replay,
        replace(options(), id_factory=lambda: next(fresh_ids)),
        tools=[read_tool],
    )
    with pytest.raises(ReplayMismatch) as caught:
        await agent.run("What is in b.txt?")
    assert caught.value.diff[0].startswith("messages[0].content[0].text differs")
