"""Scenario: a tool registered between turns lands in the middle of the tool list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario
from ._tools import list_files, read, write


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, tools=[list_files, write], system="Use tools to answer.")
    await agent.run("Which files are there?")
    agent.register_tool(read)  # sorted by name: list_files, read, write
    await agent.run("Now read notes.txt.")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(tool_calls=(ToolCall(name="list_files", arguments="{}"),)),
        Reply(text="There are four files: a.txt, b.txt, c.txt and notes.txt."),
        Reply(tool_calls=(ToolCall(name="read", arguments='{"path":"notes.txt"}'),)),
        Reply(text="notes.txt says: buy milk, call the vet."),
    ]


SCENARIO = Scenario(
    name="tool_added_mid_list",
    description="read is registered after turn 1 and enters the tool list at index 1.",
    drive=drive,
    script=script,
)


def test_tool_added_mid_list(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    (delta,) = [e for e in session.events if e.type == "request/header-delta"]
    assert [(a["index"], a["tool"]["name"]) for a in delta.data["tools"]["added"]] == [(1, "read")]
