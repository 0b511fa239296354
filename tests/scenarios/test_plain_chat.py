"""Scenario: one plain chat turn — no tools, one request, one streamed answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario

SYSTEM = "You are a concise, friendly assistant."


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, system=SYSTEM)
    await agent.run("Hello! Who are you?")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [Reply(text="Hello! I am a concise assistant. How can I help you today?")]


SCENARIO = Scenario(
    name="plain_chat",
    description="One user turn answered with streamed text; no tools.",
    drive=drive,
    script=script,
)


def test_plain_chat(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    assert [e.data["reason"] for e in session.events if e.type == "turn/end"] == [
        {"kind": "completed"}
    ]
