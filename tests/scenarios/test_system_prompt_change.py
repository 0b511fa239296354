"""Scenario: the system prompt changes between turns — a logged header delta, diffed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import PromptContext, Provider, Session

from ._harness import Run, Scenario

BASE = "You are a coding assistant.\nAnswer briefly."


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    mode = {"now": "plan"}

    def mode_section(ctx: PromptContext) -> str:
        return f"Mode: {mode['now']}. Do not edit files in plan mode."

    session = run.session()
    agent = run.agent(session, provider, system=(BASE, mode_section))
    await agent.run("How should I structure a CLI?")
    mode["now"] = "build"
    await agent.run("Go ahead and build it.")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [
        Reply(text="Use subcommands, one module each."),
        Reply(text="Building the subcommands now."),
    ]


SCENARIO = Scenario(
    name="system_prompt_change",
    description="A system section renders another mode on turn 2: one request/header-delta.",
    drive=drive,
    script=script,
)


def test_system_prompt_change(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    (delta,) = [e for e in session.events if e.type == "request/header-delta"]
    assert set(delta.data) == {"system"}
