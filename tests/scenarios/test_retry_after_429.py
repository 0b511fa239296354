"""Scenario: HTTP 429 with Retry-After, then the identical request succeeds (over the wire)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, system="You are terse.")
    await agent.run("Say hello.")
    assert run.delays == [2.0]  # the Retry-After, not the backoff
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import ErrorReply, Reply

    return [ErrorReply(status=429, retry_after="2"), Reply(text="Hello.")]


SCENARIO = Scenario(
    name="retry_after_429",
    description="DeepSeekProvider over a cassette: 429 + Retry-After 2, one retry, then 200.",
    drive=drive,
    script=script,
    wire=True,
)


def test_retry_after_429(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    (retry,) = [e for e in session.events if e.type == "llm/retry"]
    assert retry.data["delayMs"] == 2000
    assert retry.data["failure"]["status"] == 429
