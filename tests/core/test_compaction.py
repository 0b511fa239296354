"""Compaction: the pre-step transaction, its one-shot summary call, and the replaced surface."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import (
    Agent,
    AgentError,
    CompactionError,
    Compactor,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    InvalidEventError,
    Message,
    Session,
    StreamChunk,
    SurfaceReplace,
    TextDelta,
    TokenUsage,
    TurnCancelledError,
    _compaction,
    assistant_message,
    derive_event_message,
    estimate_context_tokens,
    user_message,
)
from dsh_core._compaction import balanced_cut, estimate_message_tokens
from dsh_core.scripted import (
    error_response,
    hang_response,
    max_tokens_response,
    text_response,
    tool_call,
    tool_call_response,
)
from dsh_testkit.strategies import session_logs

from ._loop_helpers import (
    assert_balanced,
    assert_reconstructs,
    make_agent,
    new_session,
    of_type,
    options,
    read,
    tool_names,
    types,
)

LONG = "x" * 400


async def _two_turns(**overrides: Any) -> Any:
    """Turn 1 has a tool call; turn 2 is plain. Usage is large, so turn 3 compacts."""
    agent, provider, session = make_agent(
        tool_call_response(tool_call("c1", "read", {"path": "a"}), usage=(900, 10)),
        text_response(LONG, usage=(950, 100)),
        text_response(LONG, usage=(1200, 100)),
        tools=[read],
        system="Be brief.",
        max_tokens=512,
        **overrides,
    )
    await agent.run("first question " + LONG)
    await agent.run("second question " + LONG)
    return agent, provider, session


async def test_compaction_replaces_the_oldest_range_before_the_step() -> None:
    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=1000, keep_last=2))
    provider.push(
        text_response("They asked two questions; a says hi."), text_response("third answer")
    )
    await agent.run("third question")

    kinds = types(session)
    start = kinds.index("compact/start")
    assert kinds[start : start + 4] == [
        "compact/start",
        "compact/summary",
        "user/message",
        "compact/end",
    ]
    assert kinds[start + 4] == "step/start"
    summary_event = of_type(session, "compact/summary")[0]
    data = summary_event.data
    assert data["model"] == "m1" and data["maxTokens"] == 512
    assert data["summary"] == [{"type": "text", "text": "They asked two questions; a says hi."}]
    shadowed = data["shadowedSeqs"]
    assert data["shadowedRange"] == {"start": shadowed[0], "end": shadowed[-1]}
    assert data["shadowedTokenCount"] > 0
    checkpoint = session.events[summary_event.seq + 1]
    assert checkpoint.surface_op.start == shadowed[0] and checkpoint.surface_op.end == shadowed[-1]
    assert list(checkpoint.source_event_seqs) == [*shadowed, summary_event.seq]
    assert of_type(session, "compact/end")[0].data == {"turn": 3}

    one_shot = provider.requests[3]
    assert one_shot.purpose == "compaction" and one_shot.session_id == "s1"
    assert one_shot.system == "Be brief." and tool_names(one_shot) == ["read"]
    assert one_shot.max_tokens == 512
    assert one_shot.messages[-1].text.startswith("Summarize the conversation")
    last = provider.requests[4]
    assert last.messages[0].content[0].text.endswith("<compacted-summary>")
    assert last.messages[0].content[1].text == "They asked two questions; a says hi."
    assert last.messages[-1].text == "third question"
    assert len(last.messages) == 3  # the checkpoint, turn 2's answer (kept), the new prompt
    assert last.messages[1].text == LONG
    assert len([e for e in session.events if e.type.startswith("request/header")]) == 1
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_below_the_threshold_nothing_happens() -> None:
    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=10**6))
    provider.push(text_response("third"))
    await agent.run("third")
    assert not of_type(session, "compact/start")
    assert [r.purpose for r in provider.requests] == [None] * 4


async def test_a_configured_model_and_max_tokens_are_logged() -> None:
    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=0, model="summarizer", max_tokens=77))
    provider.push(text_response("short"), text_response("third"))
    await agent.run("third")
    data = of_type(session, "compact/summary")[0].data
    assert (data["model"], data["maxTokens"]) == ("summarizer", 77)
    assert provider.requests[3].model == "summarizer"


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (error_response("SERVER"), "finished with error: scripted SERVER failure"),
        (max_tokens_response("cut"), "finished with max-tokens"),
        (text_response("   "), "returned no text"),
        (text_response("y" * 5000), "is not smaller than"),
    ],
)
async def test_a_failed_summary_is_logged_and_the_turn_goes_on(response: Any, error: str) -> None:
    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=0))
    provider.push(response, text_response("third"))
    assert (await agent.run("third")).text == "third"
    (end,) = of_type(session, "compact/end")
    assert error in end.data["error"] and end.data["turn"] == 3
    assert not of_type(session, "compact/summary")
    assert session.surface_generation == 0
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_the_surface_changing_under_the_summary_aborts_the_commit() -> None:
    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=0, keep_last=1))

    def summarize(request: Any) -> Any:
        head = session.surface_nodes[0]
        replacement = user_message("rewritten", id="rw")
        session.append(
            "user/message",
            replacement.to_json(),
            surface_op={"op": "replace", "start": head, "end": head},
            source_event_seqs=[head],
        )
        return text_response("sum")

    provider.push(summarize, text_response("third"))
    await agent.run("third")
    assert "surface changed" in of_type(session, "compact/end")[0].data["error"]


async def test_cancelling_during_the_summary_closes_the_compaction_and_the_turn() -> None:
    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=0))
    provider.push(hang_response(after=()))
    task = asyncio.ensure_future(agent.run("third"))
    while len(provider.requests) < 4:
        await asyncio.sleep(0)
    agent.cancel()
    with pytest.raises(TurnCancelledError):
        await task
    assert of_type(session, "compact/end")[0].data == {"turn": 3, "error": "cancelled"}
    assert types(session)[-1] == "turn/end"
    assert "step/start" not in types(session)[of_type(session, "compact/start")[0].seq :]
    assert_balanced(session)


async def test_compaction_without_a_logged_header_uses_the_rendered_assembly() -> None:
    session = new_session()
    for i in range(3):
        session.append(
            "user/message",
            user_message(f"old note {i} " + LONG, id=f"n{i}").to_json(),
            surface_op="append",
        )
    agent, provider, _ = make_agent(
        text_response("notes summarized"),
        text_response("answer"),
        session=session,
        system="Sys",
        tools=[read],
    )
    agent.add_pre_step(Compactor(threshold_tokens=10))
    await agent.run("q")
    one_shot = provider.requests[0]
    assert one_shot.purpose == "compaction" and one_shot.system == "Sys"
    assert tool_names(one_shot) == ["read"]
    assert one_shot.model == "m1" and one_shot.max_tokens is None
    assert "maxTokens" not in of_type(session, "compact/summary")[0].data
    assert_reconstructs(session.events, provider.requests, "s1")


def test_compactor_validation() -> None:
    with pytest.raises(AgentError, match="non-negative"):
        Compactor(threshold_tokens=-1)
    assert issubclass(CompactionError, AgentError)


# -------------------------------------------------------------------------------- the cut


def _surface_with_pairs() -> Session:
    from dsh_core import assistant_message, tool_result_message
    from dsh_core._messages import ToolCallBlock

    session = new_session()

    def add(kind: str, payload: Any) -> None:
        session.append(kind, payload, surface_op="append")

    add("user/message", user_message("q", id="u1").to_json())
    call = ToolCallBlock(id="c1", name="read", arguments="{}")
    call2 = ToolCallBlock(id="c2", name="read", arguments="{}")
    add(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": assistant_message([call, call2], provider="p", model="m", id="a1").to_json(),
        },
    )
    add(
        "tool/result",
        {"turn": 1, "step": 1, "message": tool_result_message("c1", "r1", id="t1").to_json()},
    )
    add(
        "tool/result",
        {"turn": 1, "step": 1, "message": tool_result_message("c2", "r2", id="t2").to_json()},
    )
    add(
        "assistant/message",
        {
            "turn": 1,
            "step": 2,
            "message": assistant_message("done", provider="p", model="m", id="a2").to_json(),
        },
    )
    return session


def test_balanced_cut_never_separates_a_call_from_its_results() -> None:
    session = _surface_with_pairs()
    nodes = session.surface_nodes
    assert balanced_cut(session, nodes, keep_last=0) == 4
    assert balanced_cut(session, nodes, keep_last=1) == 3  # after both results
    assert balanced_cut(session, nodes, keep_last=2) is None  # would split c2 from its result
    assert balanced_cut(session, nodes, keep_last=4) is None  # a single node is not worth it


def test_estimate_uses_the_last_usage_plus_the_tail_and_falls_back_after_a_replace() -> None:
    session = new_session()
    assert estimate_context_tokens(session) == 0
    session.append("user/message", user_message("a" * 400, id="u1").to_json(), surface_op="append")
    whole = estimate_message_tokens(session.derive_messages())
    assert estimate_context_tokens(session) == whole > 100
    from dsh_core import assistant_message

    session.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": assistant_message("b", provider="p", model="m", id="a1").to_json(),
            "usage": {"inputTokens": 1000, "outputTokens": 20, "cacheReadTokens": 500},
        },
        surface_op="append",
    )
    assert estimate_context_tokens(session) == 1520
    tail = user_message("c" * 40, id="u2")
    session.append("user/message", tail.to_json(), surface_op="append")
    assert estimate_context_tokens(session) == 1520 + estimate_message_tokens([tail])
    session.append(
        "user/message",
        user_message("summary", id="s").to_json(),
        surface_op={"op": "replace", "start": 0, "end": 1},
        source_event_seqs=[0, 1],
    )
    assert estimate_context_tokens(session) == estimate_message_tokens(session.derive_messages())


async def test_cancelling_a_summary_call_that_ignores_the_token() -> None:
    agent, _provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=0))
    started = asyncio.Event()

    class Deaf:
        def stream(self, options: Any) -> Any:
            async def forever() -> Any:
                started.set()
                await asyncio.Event().wait()
                yield None  # pragma: no cover - never reached

            return forever()

    agent.provider = Deaf()
    task = asyncio.ensure_future(agent.run("third"))
    await started.wait()
    agent.cancel()
    with pytest.raises(TurnCancelledError):
        await task
    assert of_type(session, "compact/end")[0].data == {"turn": 3, "error": "cancelled"}
    assert_balanced(session)


async def test_compaction_without_any_route_fails_softly_then_the_turn_errors() -> None:
    session = new_session()
    for i in range(3):
        session.append(
            "user/message",
            user_message(f"note {i} " + LONG, id=f"n{i}").to_json(),
            surface_op="append",
        )
    agent, provider, _ = make_agent(session=session, provider=None, model=None)
    agent.add_pre_step(Compactor(threshold_tokens=0))
    with pytest.raises(AgentError, match="no provider/model"):
        await agent.run("q")
    assert "no provider/model to summarize with" in of_type(session, "compact/end")[0].data["error"]
    assert provider.requests == []


# -------------------------------------------------------------------------------- summary usage


async def test_the_summary_calls_usage_is_logged() -> None:
    from dsh_core import TokenUsage

    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=0))
    usage = TokenUsage(input_tokens=148, output_tokens=12, cache_read_tokens=1152)
    provider.push(text_response("short", usage=usage), text_response("third"))
    await agent.run("third")
    data = of_type(session, "compact/summary")[0].data
    assert data["usage"] == usage.to_json()
    assert list(data)[-1] == "usage"  # appended after the envelope scalars
    assert TokenUsage.from_json(data["usage"]) == usage
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_a_summary_call_without_usage_logs_none() -> None:
    from dsh_core import BlockEnd, BlockStart, Finish, FinishReason, TextBlock, TextDelta
    from dsh_core.scripted import Response

    agent, provider, session = await _two_turns()
    agent.add_pre_step(Compactor(threshold_tokens=0))
    bare = Response(
        chunks=(
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="short"),
            BlockEnd(index=0, block=TextBlock(text="short")),
            Finish(reason=FinishReason(kind="stop")),
        )
    )
    provider.push(bare, text_response("third"))
    await agent.run("third")
    data = of_type(session, "compact/summary")[0].data
    assert data["summary"] == [{"type": "text", "text": "short"}]
    assert "usage" not in data


# ------------------------------------------------------------------- the incremental estimate


def _reference_estimate(session: Session) -> int:
    """The estimate's definition, walked back over the whole log every time (no state)."""
    events = session.events
    tail: list[Message] = []
    for i in range(len(events) - 1, -1, -1):
        event = events[i]
        if isinstance(event.surface_op, SurfaceReplace):
            break
        if event.type == "assistant/message" and event.data.get("usage") is not None:
            usage = TokenUsage.from_json(event.data["usage"])
            return usage.prompt_tokens + usage.output_tokens + estimate_message_tokens(tail)
        if event.surface_op == "append":
            message = derive_event_message(event)
            if message is not None:
                tail.append(message)
    return estimate_message_tokens(session.derive_messages())


@pytest.mark.slow
@settings(max_examples=60)  # each example is a whole log
@given(session_logs(max_size=30), st.data())
def test_the_incremental_estimate_equals_the_whole_log_walk(
    log: list[dict[str, Any]], data: st.DataObject
) -> None:
    session = Session.create("s")
    for raw in log:
        session.append(
            raw["type"],
            raw["data"],
            surface_op=raw.get("surfaceOp"),
            source_event_seqs=raw.get("sourceEventSeqs"),
        )
        if data.draw(st.booleans(), label="estimate now"):  # the state advances mid-way
            assert estimate_context_tokens(session) == _reference_estimate(session)
    assert estimate_context_tokens(session) == _reference_estimate(session)
    # A fresh session over the same log (new event objects) gets the same figure.
    assert estimate_context_tokens(Session.create("t", log)) == _reference_estimate(session)


class _CountingEvents(Sequence[Event]):
    """A session's event view that counts every event read."""

    def __init__(self, inner: Sequence[Event], reads: list[int]) -> None:
        self._inner, self._reads = inner, reads

    def __len__(self) -> int:
        return len(self._inner)

    def __getitem__(self, index: Any) -> Any:
        got = self._inner[index]
        self._reads[0] += len(got) if isinstance(index, slice) else 1
        return got


@pytest.fixture
def event_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``reads[0]``: events read through ``Session.events`` (and iterated) since the reset."""
    reads = [0]
    original = Session.__dict__["events"]
    monkeypatch.setattr(
        Session, "events", property(lambda self: _CountingEvents(original.fget(self), reads))
    )
    return reads


@pytest.fixture
def projections(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``counts[0]``: messages whose JSON was measured (``Message.canonical_json`` calls)."""
    counts = [0]
    original = Message.canonical_json

    def counting(self: Message) -> str:
        counts[0] += 1
        return original(self)

    monkeypatch.setattr(Message, "canonical_json", counting)
    return counts


def _append_turn(session: Session, n: int, *, usage: bool) -> None:
    """One turn as the loop logs it: 9 events, 2 of them surface messages."""
    session.append("turn/start", {"turn": n})
    prompt = user_message(f"q{n} " * 20, id=f"u{n}").to_json()
    session.append("user/message", prompt, surface_op="append")
    session.append("step/start", {"turn": n, "step": 1})
    for text in ("an", "sw", "er"):
        chunk = {"type": "text-delta", "index": 0, "text": text}
        session.append("assistant/chunk", {"turn": n, "step": 1, "chunk": chunk})
    data: dict[str, Any] = {
        "turn": n,
        "step": 1,
        "message": assistant_message("answer", provider="p", model="m", id=f"a{n}").to_json(),
    }
    if usage:
        data["usage"] = {"inputTokens": 100 * n, "outputTokens": 5}
    session.append("assistant/message", data, surface_op="append")
    session.append("step/end", {"turn": n, "step": 1})
    session.append("turn/end", {"turn": n, "reason": {"kind": "completed"}})


def _cost_of_one_more_turn(
    history: int, usage: bool, reads: list[int], measured: list[int]
) -> tuple[int, int]:
    session = new_session()
    for n in range(1, history + 1):
        _append_turn(session, n, usage=usage)
    estimate_context_tokens(session)  # the first call folds the whole history once
    _append_turn(session, history + 1, usage=usage)
    reads[0] = measured[0] = 0
    figure = estimate_context_tokens(session)
    cost = (reads[0], measured[0])
    assert figure == _reference_estimate(session)
    return cost


@pytest.mark.parametrize("usage", [False, True], ids=["no usage", "usage"])
def test_a_step_s_estimate_reads_only_the_new_events(
    usage: bool, event_reads: list[int], projections: list[int]
) -> None:
    """Per-step cost is O(new events), whatever the history: with and without usage."""
    short = _cost_of_one_more_turn(5, usage, event_reads, projections)
    long = _cost_of_one_more_turn(200, usage, event_reads, projections)
    assert short == long
    reads, measured = long
    assert reads == 9  # the new turn's events (the state lives on the session: no identity check)
    assert measured == (1 if usage else 2)  # its surface messages (after the usage, none)


def test_after_a_replace_one_step_pays_for_the_surface_and_the_next_does_not(
    event_reads: list[int], projections: list[int]
) -> None:
    session = new_session()
    for n in range(1, 41):
        _append_turn(session, n, usage=True)
    estimate_context_tokens(session)
    nodes = session.surface_nodes
    session.append(
        "user/message",
        user_message("summary", id="s").to_json(),
        surface_op={"op": "replace", "start": nodes[0], "end": nodes[-3]},
        source_event_seqs=list(nodes[:-2]),
    )
    event_reads[0] = projections[0] = 0
    figure = estimate_context_tokens(session)
    # The replace itself; then the new surface: summary + 2 kept.
    assert (event_reads[0], projections[0]) == (1, 3)
    assert figure == _reference_estimate(session)
    _append_turn(session, 41, usage=False)
    event_reads[0] = projections[0] = 0
    figure = estimate_context_tokens(session)
    assert (event_reads[0], projections[0]) == (9, 2)  # only the new turn
    assert figure == _reference_estimate(session)


async def test_the_compactor_s_per_turn_log_reads_do_not_grow_without_usage(
    event_reads: list[int],
) -> None:
    """The reviewer's case: a provider that reports no usage, many turns, a compactor that never
    fires. Each turn's estimate reads the same number of events."""

    class NoUsage:
        def __init__(self) -> None:
            self.requests: list[GenerateOptions] = []

        async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
            self.requests.append(options)
            yield TextDelta(index=0, text="fine")
            yield Finish(reason=FinishReason(kind="stop"))

    per_turn: list[int] = []

    def counted(session: Session) -> int:
        before = event_reads[0]
        figure = estimate_context_tokens(session)
        per_turn.append(event_reads[0] - before)
        assert figure == _reference_estimate(session) < 10**6
        return figure

    session = new_session()
    provider = NoUsage()
    agent = Agent(session, provider, options(invariants=False))
    agent.add_pre_step(Compactor(threshold_tokens=10**6, estimator=counted))
    for n in range(30):
        await agent.run(f"question {n}")
    assert not of_type(session, "compact/start")
    # Turn 2 also reads turn 1's initial header snapshot; from turn 3 on every turn is alike.
    assert len(per_turn) == 30 and set(per_turn[2:]) == {per_turn[2]}, per_turn
    # One turn's 8 new events (step/start, 2 chunks, the message, step/end, turn/end, turn/start,
    # the prompt): not the history's.
    assert per_turn[-1] == 8


def _live_estimate_states() -> int:
    import gc

    gc.collect()
    return sum(isinstance(o, _compaction._EstimateState) for o in gc.get_objects())


@pytest.mark.slow
def test_estimates_of_many_sessions_stay_separate_and_die_with_their_session() -> None:
    before = _live_estimate_states()
    sessions = [new_session(f"s{i}") for i in range(80)]
    for i, session in enumerate(sessions):
        for n in range(1, i % 3 + 2):
            _append_turn(session, n, usage=i % 2 == 0)
        assert estimate_context_tokens(session) == _reference_estimate(session)
    for session in sessions:  # interleaved: each session folds on from its own state
        _append_turn(session, 9, usage=False)
        assert estimate_context_tokens(session) == _reference_estimate(session)
    state = sessions[0].fold_state(_compaction._EstimateState, _compaction._EstimateState)
    assert state.seen == len(sessions[0].events)
    assert _live_estimate_states() == before + 80
    # The state is the session's own: no module-level cache keeps it once the session is gone.
    del sessions, session, state
    assert _live_estimate_states() == before


def test_an_event_that_does_not_parse_fails_every_call_and_leaves_the_state() -> None:
    good = new_session()
    _append_turn(good, 1, usage=True)
    raw = [e.to_json() for e in good.events]
    (at,) = [i for i, e in enumerate(raw) if e["type"] == "assistant/message"]
    raw[at] = {**raw[at], "data": {**raw[at]["data"], "usage": {}}}
    session = Session.create("audit", raw, check_shapes=False)
    for _ in range(2):
        with pytest.raises(InvalidEventError, match=r"usage\.inputTokens must be"):
            estimate_context_tokens(session)
