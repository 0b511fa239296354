"""Scenario: the stream ends cleanly before ``data: [DONE]`` — truncation, retried (over the wire)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import Provider, Session

from ._harness import Run, Scenario


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, system="You tell short stories.")
    await agent.run("Tell me a two-sentence story.")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    story = "A lighthouse keeper found a message in a bottle. It was in her own handwriting."
    return [Reply(text=story, chunk_size=16, fault="eof", fault_after=3), Reply(text=story)]


SCENARIO = Scenario(
    name="eof_without_done",
    description="DeepSeekProvider over a cassette: EOF after 3 events without [DONE], retried.",
    drive=drive,
    script=script,
    wire=True,
)


def test_eof_without_done(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    (retry,) = [e for e in session.events if e.type == "llm/retry"]
    assert retry.data["failure"]["code"] == "STREAM_CLOSED"
