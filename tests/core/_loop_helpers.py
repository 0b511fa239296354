"""Shared helpers for the agent-loop tests: deterministic agents and the reconstruction check."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from dsh_core import (
    Agent,
    AgentOptions,
    Event,
    GenerateOptions,
    Session,
    Tool,
    reconstruct_requests,
    tool,
)
from dsh_core.scripted import ScriptedProvider


class Clock:
    """A deterministic millisecond clock."""

    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


class Sleeps:
    """A fake ``sleep`` that records the delays and yields once (no real waiting)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def ids(prefix: str = "m") -> Any:
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter)}"


def new_session(session_id: str = "s1") -> Session:
    return Session.create(session_id, clock=Clock())


def options(**overrides: Any) -> AgentOptions:
    base: dict[str, Any] = {
        "provider": "scripted",
        "model": "m1",
        "invariants": True,
        "id_factory": ids(),
        "sleep": Sleeps(),
        "random": lambda: 0.5,
    }
    base.update(overrides)
    return AgentOptions(**base)


def make_agent(
    *script: Any,
    session: Session | None = None,
    tools: Iterable[Tool] = (),
    **overrides: Any,
) -> tuple[Agent, ScriptedProvider, Session]:
    session = session or new_session()
    provider = ScriptedProvider(*script)
    return Agent(session, provider, options(**overrides), tools=tools), provider, session


def types(session: Session) -> list[str]:
    return [e.type for e in session.events]


def of_type(session: Session | Sequence[Event], kind: str) -> list[Event]:
    events = session.events if isinstance(session, Session) else session
    return [e for e in events if e.type == kind]


def assert_reconstructs(
    events: Sequence[Event], sent: Sequence[GenerateOptions], session_id: str
) -> None:
    """Every loop request sent equals its reconstruction from the log, byte for byte."""
    loop_sent = [r for r in sent if r.purpose is None]
    rebuilt = [r.request for r in reconstruct_requests(events, session_id=session_id)]
    assert len(rebuilt) == len(loop_sent), (len(rebuilt), len(loop_sent))
    for i, (want, got) in enumerate(zip(rebuilt, loop_sent, strict=True)):
        assert want.canonical_json() == got.canonical_json(), f"request {i} differs"


def assert_balanced(session: Session) -> None:
    """Turns and steps nest and close; every tool call id has exactly one appended result."""
    open_turn = open_step = None
    calls: dict[str, int] = {}
    for event in session.events:
        data = event.data
        if event.type == "turn/start":
            assert open_turn is None
            open_turn = data["turn"]
        elif event.type == "turn/end":
            assert open_turn == data["turn"] and open_step is None
            open_turn = None
        elif event.type == "step/start":
            assert open_turn is not None and open_step is None
            open_step = data["step"]
        elif event.type == "step/end":
            assert open_step == data["step"]
            open_step = None
        elif event.type == "assistant/message":
            for block in data["message"]["content"]:
                if block["type"] == "tool-call":
                    calls.setdefault(block["id"], 0)
        elif event.type == "tool/result" and event.surface_op == "append":
            call_id = data["message"]["source"]["callId"]
            calls[call_id] = calls.get(call_id, 0) + 1
    assert open_turn is None and open_step is None
    assert all(n == 1 for n in calls.values()), calls


@tool(
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    concurrency_safe=True,
)
async def read(args: dict[str, Any], ctx: Any) -> str:
    """Read a file."""
    return f"contents of {args.get('path')}"


@tool(parameters={"type": "object", "properties": {"text": {"type": "string"}}})
async def write(args: dict[str, Any], ctx: Any) -> str:
    """Write a file (exclusive)."""
    return "written"


def tool_names(request: Any) -> list[str]:
    """The names of a request's tools, in order (the request carries real schemas, not a
    placeholder)."""
    tools = request.tools
    assert isinstance(tools, tuple), f"expected tool schemas, got {tools!r}"
    return [t.name for t in tools]
