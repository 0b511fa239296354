"""Scenario: reasoning — thinking streamed apart from the answer, passed back on the next turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, system="You are a careful tutor.", reasoning_effort="high")
    await agent.run("What is 17 × 23?")
    await agent.run("And 391 divided by 17?")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [
        Reply(
            reasoning="17 × 23 = 17 × 20 + 17 × 3 = 340 + 51 = 391.",
            text="17 × 23 = 391.",
        ),
        Reply(reasoning="We just saw 17 × 23 = 391, so 391 / 17 = 23.", text="391 ÷ 17 = 23."),
    ]


SCENARIO = Scenario(
    name="reasoning",
    description="Two turns with reasoning effort high: reasoning blocks and their passback.",
    drive=drive,
    script=script,
)


def test_reasoning(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    answers = [e.data["message"] for e in session.events if e.type == "assistant/message"]
    assert [[b["type"] for b in m["content"]] for m in answers] == [["reasoning", "text"]] * 2
