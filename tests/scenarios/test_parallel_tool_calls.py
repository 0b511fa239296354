"""Scenario: parallel tool calls — two concurrency-safe reads run together in one step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario
from ._tools import read


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, tools=[read], system="Use tools to answer.")
    await agent.run("What do a.txt and b.txt say?")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(
            tool_calls=(
                ToolCall(name="read", arguments='{"path":"a.txt"}'),
                ToolCall(name="read", arguments='{"path":"b.txt"}'),
            )
        ),
        Reply(text="a.txt says alpha and b.txt says beta."),
    ]


SCENARIO = Scenario(
    name="parallel_tool_calls",
    description="One assistant message with two reads that run in parallel.",
    drive=drive,
    script=script,
)


def test_parallel_tool_calls(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    kinds = [e.type for e in session.events if e.type in ("tool/call", "tool/result")]
    # both calls start before either result is committed: they ran together
    assert kinds == ["tool/call", "tool/call", "tool/result", "tool/result"]
