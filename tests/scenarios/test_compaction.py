"""Scenario: compaction — above a token threshold the oldest turns are summarized and replaced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Compactor, Provider, Session

from ._harness import Run, Scenario

STORY = (
    "I am planning a garden. The plot is eight by four metres, it faces south, the soil is "
    "heavy clay, and I want vegetables for a family of four from spring to autumn."
)


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, system="You are a gardening advisor.")
    agent.add_pre_step(Compactor(threshold_tokens=THRESHOLD, keep_last=2))
    await agent.run(STORY)
    await agent.run("Which vegetables cope best with clay, and how should I improve the soil?")
    await agent.run("Summing up: what do I plant first?")
    return [session]


THRESHOLD = 160
"""Estimated context tokens at which the compactor summarizes (reached before turn 3)."""


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [
        Reply(
            text="A south-facing 8 × 4 m plot is a good start. Clay holds water and nutrients "
            "well but drains slowly and warms late in spring, so raised beds help."
        ),
        Reply(
            text="Brassicas, beans, potatoes and squash cope well with clay. Dig in plenty of "
            "compost every autumn, never work the soil when it is wet, and mulch the beds."
        ),
        Reply(
            text="Garden 8x4 m, south, heavy clay, family of four. Advice: raised beds, compost "
            "each autumn, mulch; brassicas, beans, potatoes, squash suit clay."
        ),
        Reply(text="Start with potatoes and broad beans in early spring."),
    ]


SCENARIO = Scenario(
    name="compaction",
    description="Before turn 3 the compactor replaces turns 1–2 with a summary checkpoint.",
    drive=drive,
    script=script,
)


def test_compaction(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    kinds = [e.type for e in session.events]
    assert kinds.count("compact/summary") == 1 and kinds.count("compact/end") == 1
    (end,) = [e for e in session.events if e.type == "compact/end"]
    assert "error" not in end.data
