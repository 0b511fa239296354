"""Edge cases of the context estimate, the summary stream and the tool scheduler's abort path."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_core import (
    Compactor,
    TextDelta,
    ToolContext,
    TurnCancelledError,
    assistant_message,
    estimate_context_tokens,
    tool,
    user_message,
)
from dsh_core._compaction import estimate_message_tokens
from dsh_core.scripted import Response, text_response, tool_call, tool_call_response

from ._loop_helpers import assert_balanced, assert_reconstructs, make_agent, new_session, of_type


def _assistant(session: Any, text: str, msg_id: str, usage: Any = None) -> None:
    content: Any = text if text else []
    data: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "message": assistant_message(content, provider="p", model="m", id=msg_id).to_json(),
    }
    if usage is not None:
        data["usage"] = usage
    session.append("assistant/message", data, surface_op="append")


def test_the_estimate_counts_usageless_and_empty_messages_after_the_last_usage() -> None:
    session = new_session()
    session.append("user/message", user_message("q", id="u1").to_json(), surface_op="append")
    _assistant(session, "a", "a1", usage={"inputTokens": 100, "outputTokens": 10})
    _assistant(session, "b" * 80, "a2")  # no usage: part of the tail
    _assistant(session, "", "a3")  # empty content projects to nothing: adds nothing
    tail = session.derive_messages()[-1:]
    assert tail[0].id == "a2"
    assert estimate_context_tokens(session) == 110 + estimate_message_tokens(tail)


def test_without_any_usage_the_whole_surface_is_estimated() -> None:
    session = new_session()
    session.append("user/message", user_message("q" * 40, id="u1").to_json(), surface_op="append")
    _assistant(session, "b" * 40, "a1")
    _assistant(session, "", "a2")
    assert estimate_context_tokens(session) == estimate_message_tokens(session.derive_messages())


async def test_a_summary_stream_without_a_finish_counts_as_stop() -> None:
    agent, provider, session = make_agent(text_response("one"), text_response("two"))
    await agent.run("first " + "x" * 200)
    await agent.run("second")
    agent.add_pre_step(Compactor(threshold_tokens=0, keep_last=1))
    provider.push(
        Response(chunks=(TextDelta(index=0, text="the summary"),)),  # no finish chunk
        text_response("three"),
    )
    await agent.run("third")
    (summary,) = of_type(session, "compact/summary")
    assert summary.data["summary"] == [{"type": "text", "text": "the summary"}]
    assert of_type(session, "compact/end")[-1].data == {"turn": 3}
    first, last = provider.requests[-1].messages
    assert "<compacted-summary>the summary</compacted-summary>" in first.text
    assert last.text == "third"
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_an_early_failure_keeps_its_own_result_when_the_turn_is_cancelled() -> None:
    """A started call that already failed (unknown tool) is not relabelled as aborted."""
    gate = asyncio.Event()

    @tool(concurrency_safe=True)
    async def stuck(args: Any, ctx: ToolContext) -> str:
        gate.set()
        await asyncio.Event().wait()
        return "never"

    agent, provider, session = make_agent(
        tool_call_response(tool_call("c1", "stuck"), tool_call("c2", "nope")),
        tools=[stuck],
    )
    task = asyncio.ensure_future(agent.run("go"))
    await gate.wait()
    agent.cancel()
    with pytest.raises(TurnCancelledError):
        await task
    results = {
        e.data["message"]["source"]["callId"]: e.data for e in of_type(session, "tool/result")
    }
    assert results["c1"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert results["c2"]["error"] == {"name": "UnknownToolError", "code": "UNKNOWN_TOOL"}
    assert list(results) == ["c1", "c2"]
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")
