"""Scenario: a tool raises — the model sees an error result and the turn goes on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario
from ._tools import read


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, tools=[read], system="Use tools to answer.")
    await agent.run("What does missing.txt say?")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(tool_calls=(ToolCall(name="read", arguments='{"path":"missing.txt"}'),)),
        Reply(text="I could not read missing.txt: the file does not exist."),
    ]


SCENARIO = Scenario(
    name="tool_error",
    description="The read tool raises FileNotFoundError; the error result goes back to the model.",
    drive=drive,
    script=script,
)


def test_tool_error(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    (result,) = [e for e in session.events if e.type == "tool/result"]
    assert result.data["error"] == {"name": "FileNotFoundError", "code": "TOOL_ERROR"}
    assert result.data["message"]["content"][0]["isError"] is True
