"""Scenario: fork — a child session inherits turn 1 and diverges; the parent goes on too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session, fork

from ._harness import Run, Scenario

SYSTEM = "You suggest names."


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    parent = run.session()
    agent = run.agent(parent, provider, system=SYSTEM)
    await agent.run("Suggest a name for a cat.")
    child = fork(parent, parent.seq - 1, child_id=run.new_id())
    await run.agent(child, provider, system=SYSTEM).run("Make it a dog's name instead.")
    await agent.run("Another cat name, please.")
    return [parent, child]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [Reply(text="Miso."), Reply(text="Biscuit."), Reply(text="Pepper.")]


SCENARIO = Scenario(
    name="fork",
    description="Fork after turn 1: the child answers its own turn 2, the parent its own.",
    drive=drive,
    script=script,
)


def test_fork(golden: Any) -> None:
    parent, child = golden(SCENARIO)
    assert child.info.parent_session == parent.id
    assert child.info.seed_length is not None and child.info.seed_length > 0
