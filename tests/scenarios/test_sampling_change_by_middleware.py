"""Scenario: a request middleware lowers the temperature from turn 2 on — a logged config change."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from dsh_core import LlmCallConfig, Provider, RequestContext, Session

from ._harness import Run, Scenario


def precise_follow_ups(config: LlmCallConfig, ctx: RequestContext) -> LlmCallConfig | None:
    """Follow-up turns answer precisely: temperature 0.2 from turn 2 on."""
    if ctx.turn < 2:
        return None
    return dataclasses.replace(config, temperature=0.2)


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(
        session, provider, system="You name things.", temperature=1.0, reasoning_effort="off"
    )
    agent.add_middleware(precise_follow_ups)
    await agent.run("Suggest a name for a sailing boat.")
    await agent.run("Spell it out letter by letter.")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [Reply(text="Sea Whisper."), Reply(text="S-E-A W-H-I-S-P-E-R.")]


SCENARIO = Scenario(
    name="sampling_change_by_middleware",
    description="Middleware changes the call config on turn 2: config.temperature 1.0 → 0.2.",
    drive=drive,
    script=script,
)


def test_sampling_change_by_middleware(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    (delta,) = [e for e in session.events if e.type == "request/header-delta"]
    assert delta.data["config"]["temperature"] == 0.2
