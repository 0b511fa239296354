"""Scenario: an exclusive tool is a barrier — reads before it drain, reads after it wait."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario
from ._tools import read, write


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, tools=[read, write], system="Use tools to answer.")
    await agent.run("Copy a.txt and b.txt into summary.txt, then read c.txt.")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(
            tool_calls=(
                ToolCall(name="read", arguments='{"path":"a.txt"}'),
                ToolCall(name="read", arguments='{"path":"b.txt"}'),
                ToolCall(name="write", arguments='{"path":"summary.txt","text":"alpha beta"}'),
                ToolCall(name="read", arguments='{"path":"c.txt"}'),
            )
        ),
        Reply(text="summary.txt now holds alpha beta; c.txt says gamma."),
    ]


SCENARIO = Scenario(
    name="exclusive_tool_barrier",
    description="read, read, write (exclusive), read in one message: the write runs alone.",
    drive=drive,
    script=script,
)


def test_exclusive_tool_barrier(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    order = [
        (e.type, e.data.get("name") or e.data["message"]["source"]["callId"])
        for e in session.events
        if e.type in ("tool/call", "tool/result")
    ]
    kinds = [kind for kind, _ in order]
    # the two reads start together; the write starts only after both results are in, and the
    # last read only after the write's result
    assert (
        kinds
        == ["tool/call", "tool/call", "tool/result", "tool/result"]
        + [
            "tool/call",
            "tool/result",
        ]
        * 2
    )
    assert [name for kind, name in order if kind == "tool/call"] == [
        "read",
        "read",
        "write",
        "read",
    ]
