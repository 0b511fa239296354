"""Scenario: max tokens — the truncated tool call is dropped, never run, never sent back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario
from ._tools import read


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, tools=[read], system="Use tools to answer.", max_tokens=64)
    await agent.run("Summarize notes.txt.")
    await agent.run("Please go on.")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(
            text="I will read the notes first.",
            tool_calls=(ToolCall(name="read", arguments='{"path":"notes.txt"}'),),
            finish_reason="length",
        ),
        Reply(text="Without the file: I cannot summarize notes I have not read."),
    ]


SCENARIO = Scenario(
    name="max_tokens_dropped_tool_calls",
    description="finish_reason length with a tool call in flight: the call is dropped.",
    drive=drive,
    script=script,
)


def test_max_tokens_dropped_tool_calls(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    kinds = [e.type for e in session.events]
    assert "tool/call" not in kinds and "tool/result" not in kinds
    first_end = next(e for e in session.events if e.type == "turn/end")
    assert first_end.data["reason"] == {"kind": "max-tokens"}
