"""Scenario: resume from disk — a second loop instance reopens the stored log and goes on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session
from dsh_core.persistence import open_session, write_session

from ._harness import Run, Scenario

SYSTEM = "You remember what the user told you."


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    path = run.tmp / "session.jsonl"
    first = run.session()
    with write_session(path, first):
        await run.agent(first, provider, system=SYSTEM).run("My favourite colour is teal.")
    # a new process, in effect: load the file, continue it with a fresh agent
    with open_session(path) as writer:
        resumed = writer.session
        await run.agent(resumed, provider, system=SYSTEM).run("What is my favourite colour?")
    return [resumed]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [Reply(text="Noted: teal."), Reply(text="Your favourite colour is teal.")]


SCENARIO = Scenario(
    name="resume_from_disk",
    description="Turn 1, the log written to disk; a new agent reopens it: a 'resume' header.",
    drive=drive,
    script=script,
)


def test_resume_from_disk(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    reasons = [e.data["reason"] for e in session.events if e.type == "request/header"]
    assert reasons == ["initial", "resume"]
    assert "session/end-seed" in [e.type for e in session.events]
