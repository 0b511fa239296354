"""Scenario: cancellation mid-stream — the partial answer is kept and seen by the next turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dsh_core import Event, Provider, Session, TurnCancelledError

from ._harness import Run, Scenario


async def drive(provider: Provider, run: Run) -> Sequence[Session]:
    session = run.session()
    agent = run.agent(session, provider, system="You write poems.")

    def stop_at_second_text_delta(event: Event, _: Session) -> None:
        # the user presses "stop" as the second piece of text arrives: the same point in the
        # stream in every run, recorded or replayed
        if event.type == "assistant/chunk" and event.data["chunk"]["type"] == "text-delta":
            seen.append(event.seq)
            if len(seen) == 2:
                agent.cancel("user")

    seen: list[int] = []
    remove = session.add_listener(stop_at_second_text_delta)
    with pytest.raises(TurnCancelledError) as caught:
        await agent.run("Write a long poem about the sea.")
    remove()
    cancelled = caught.value
    assert (cancelled.turn, cancelled.reason) == (1, "user")
    assert str(cancelled) == "turn 1 was cancelled (user)"
    # the stop landed after two text deltas, so the kept prefix holds text
    assert cancelled.partial is not None and cancelled.partial.role == "assistant"
    assert cancelled.partial.text
    await agent.run("Never mind. Just say OK.")
    return [session]


def script() -> list[Any]:
    from dsh_testkit.mock import Reply

    return [
        Reply(
            text="The sea is wide, the sea is deep,\nits secrets it will always keep.",
            chunk_size=12,
        ),
        Reply(text="OK."),
    ]


SCENARIO = Scenario(
    name="cancel_mid_stream",
    description="Cancelled at the second text delta: an aborted turn, an interrupted message.",
    drive=drive,
    script=script,
)


def test_cancel_mid_stream(golden: Any) -> None:
    (session,) = golden(SCENARIO)
    ends = [e.data["reason"] for e in session.events if e.type == "turn/end"]
    assert ends == [{"kind": "aborted", "reason": {"kind": "user"}}, {"kind": "completed"}]
    (partial,) = [e for e in session.events if e.data.get("interrupted") is True]
    # in thinking mode the answer reasons first (the mock fills in reasoning the script left out)
    kept = [b["text"] for b in partial.data["message"]["content"] if b["type"] == "text"]
    assert kept == ["The sea is wide, the sea"]
