"""Synthetic session histories, written by the real loop against a zero-latency scripted model.

The logs are what the agent really writes (``dsh_core.Agent`` + ``ScriptedProvider``), so their
mix of events is realistic: per tool turn a prompt, two steps, streamed chunks, a tool call and
its result (about 33 events). The first turn is a one-line exchange (12 events), so that a log
cut after it stands in for "a history of 10 events".
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from dsh_core import Agent, AgentOptions, Event, Session, Tool, ToolContext, tool
from dsh_core.scripted import ScriptedProvider, text_response, tool_call, tool_call_response

__all__ = [
    "SYSTEM_PROMPT",
    "agent_options",
    "build_log",
    "cut_at_turn",
    "push_tool_turn",
    "tools",
]

SYSTEM_PROMPT = "\n".join(
    [
        "You are a careful coding agent working in a repository.",
        *(
            f"Rule {i}: keep changes small, explain what you changed and why, and run the tests."
            for i in range(1, 61)
        ),
    ]
)
"""A 61-line (~5 KB) system prompt: long enough that re-rendering it per step would show."""


async def _read(args: Any, ctx: ToolContext) -> str:
    path = args.get("path") if isinstance(args, dict) else None
    return f"contents of {path}: " + "lorem ipsum dolor sit amet " * 8


async def _grep(args: Any, ctx: ToolContext) -> str:
    return "src/a.py:1: match\nsrc/b.py:7: match"


async def _ls(args: Any, ctx: ToolContext) -> str:
    return "a.py\nb.py\nc.py"


def tools() -> list[Tool]:
    """Three tools with small JSON schemas (a typical coding agent's first three)."""
    path_schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return [
        tool(name="read", description="Read a file.", parameters=path_schema)(_read),
        tool(
            name="grep",
            description="Search files for a pattern.",
            parameters={"type": "object", "properties": {"pattern": {"type": "string"}}},
        )(_grep),
        tool(name="ls", description="List a directory.", parameters=path_schema)(_ls),
    ]


def _ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"m{next(counter)}"


def agent_options(*, invariants: bool = False) -> AgentOptions:
    """The options every benchmark agent uses (deterministic ids)."""
    return AgentOptions(
        provider="deepseek",
        model="deepseek-chat",
        system=SYSTEM_PROMPT,
        invariants=invariants,
        id_factory=_ids(),
    )


def push_tool_turn(provider: ScriptedProvider, n: int) -> None:
    """Script one two-step tool turn: a ``read`` call, then a short streamed answer."""
    provider.push(
        tool_call_response(tool_call(f"call-{n}", "read", {"path": f"src/file_{n}.py"})),
        text_response(
            f"File {n} defines two helpers; both are covered by the tests.", chunk_size=8
        ),
    )


async def _build(min_events: int) -> list[Event]:
    session = Session.create("bench-history", clock=lambda: 0)
    provider = ScriptedProvider(text_response("ok", chunk_size=16))
    agent = Agent(session, provider, agent_options(), tools=tools())
    await agent.run("hi")
    n = 0
    while session.seq < min_events:
        push_tool_turn(provider, n)
        await agent.run(f"Read src/file_{n}.py and summarize it.")
        n += 1
    return list(session.events)


def build_log(min_events: int) -> list[Event]:
    """A log of at least ``min_events`` events, ending at a turn boundary."""
    return asyncio.run(_build(min_events))


def cut_at_turn(events: Sequence[Event], target: int) -> list[Event]:
    """The longest prefix of ``events`` that ends with a ``turn/end`` and has at most ``target``
    events (at least the first turn)."""
    end = 0
    for i, event in enumerate(events):
        if event.type == "turn/end":
            if i + 1 > target and end:
                break
            end = i + 1
    return list(events[:end])
