"""Scenario: one tool call — the model reads a file, then answers from the result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario
from ._tools import read


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, tools=[read], system="Use tools to answer.")
    await agent.run("What is on my notes.txt?")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(
            text="Let me read it.",
            tool_calls=(ToolCall(name="read", arguments='{"path":"notes.txt"}'),),
        ),
        Reply(text="Your notes say: buy milk, and call the vet."),
    ]


SCENARIO = Scenario(
    name="one_tool_call",
    description="A tool call, its result, and the answer built on it (two steps, one turn).",
    drive=drive,
    script=script,
)


def test_one_tool_call(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    (result,) = [e for e in session.events if e.type == "tool/result"]
    block = result.data["message"]["content"][0]
    assert block["content"] == [{"type": "text", "text": "buy milk\ncall the vet"}]
    assert block["isError"] is False
